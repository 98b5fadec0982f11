"""How sure a score is: a confidence interval over evaluation sequences.

Every behavioural score here is a mean over independent evaluation sequences of one number per sequence
(its loss, its last-token KL, its ICL score), so its uncertainty is that of a sample mean: with n
sequences, mean x̄ and sample standard deviation s, the two-sided interval at ``level`` is

    x̄ ± t_{(1 + level)/2, n − 1} · s / √n        (Student's t; n ≥ 2)

It measures the noise of the evaluation set only (another draw of n sequences from the same task), not
that of training (another seed); one sequence has no interval (``low`` and ``high`` are None).

Scores bounded in [0, 1] (attention on a key, shares of attention) and ratios of means (the share of a gap an
ablation removes) take a percentile bootstrap instead (:func:`bootstrap_mean_interval`,
:func:`bootstrap_ratio_interval`): whole sequences are resampled with replacement, the statistic is recomputed
on each resample, and the interval is the resamples' central ``level`` quantiles. A resampled mean never leaves
the values' range, so a score's interval stays inside its bounds.

Rows that come in clusters (the sequences of one draw of a language model's k token ids share those ids) are not
independent: :func:`cluster_mean_interval` and :func:`cluster_ratio_intervals` resample clusters, then rows within
each (a two-stage bootstrap), and :func:`draw_t_interval` takes Student's t over the cluster means. With one
cluster each is the plain interval over rows.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from jaxtyping import Float
from scipy.special import stdtrit  # Student's t quantile: scipy.stats would cost a language model's probe 0.6 s
from torch import Tensor

from induction_probes.circuits.errors import BadInput

LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A mean over ``n`` sequences and its interval at ``level`` (None bounds when n = 1)."""

    value: float
    low: float | None
    high: float | None
    n: int
    level: float = LEVEL

    @property
    def half_width(self) -> float | None:
        return None if self.low is None or self.high is None else (self.high - self.low) / 2

    def to_json(self) -> dict[str, float | int | None]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n, "level": self.level}


def mean_interval(per_sequence: Float[Tensor, " batch"], level: float = LEVEL) -> Estimate:
    """The mean of ``per_sequence`` with its Student-t interval (module docstring)."""
    if not 0 < level < 1:
        raise BadInput(f"level must be in (0, 1), got {level!r}")
    values = per_sequence.double().flatten()
    n = values.numel()
    if n == 0:
        raise BadInput("no sequences to average")
    mean = values.mean().item()
    if n == 1:
        return Estimate(mean, None, None, 1, level)
    half = float(stdtrit(n - 1, (1 + level) / 2)) * values.std().item() / math.sqrt(n)
    return Estimate(mean, mean - half, mean + half, n, level)


def paired_effect(changed, clean, measure: str) -> Estimate | None:
    """``changed`` − ``clean`` on ``measure``, paired on the same evaluation sequences: the Student-t interval of
    the per-sequence differences, read from both results' ``per_sequence`` values (a ``Behaviour``'s); None
    where either lacks them."""
    mine, theirs = getattr(changed, "per_sequence", {}), getattr(clean, "per_sequence", {})
    if measure not in mine or measure not in theirs:
        return None
    return mean_interval(mine[measure] - theirs[measure])


# --- bounded scores and ratios: a percentile bootstrap over sequences ---------------------------------------

BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED = 2000, 0


@functools.lru_cache(maxsize=4)  # one probe set is resampled for every score of every checkpoint: draw it once
def resampling_weights(
    n: int, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> Float[Tensor, "resample batch"]:
    """[resamples, n]: row r holds how often resample r draws each of the n sequences, divided by n, so that
    ``weights @ values`` is every resample's mean at once (one matrix product, whatever the trailing shape)."""
    generator = torch.Generator().manual_seed(seed)
    index = torch.randint(0, n, (resamples, n), generator=generator)
    counts = torch.zeros(resamples, n, dtype=torch.float64).scatter_add_(
        1, index, torch.ones_like(index, dtype=torch.float64)
    )
    return counts / n


def bootstrap_mean_interval(
    per_sequence: Float[Tensor, "batch ..."], level: float = LEVEL, seed: int = BOOTSTRAP_SEED
) -> tuple[Tensor, Tensor, Tensor]:
    """The mean over the first dimension of ``per_sequence`` and its percentile-bootstrap interval at ``level``
    (resampling whole sequences), for every trailing entry at once. A resampled mean lies between the smallest
    and the largest value, so a score in [0, 1] keeps its interval in [0, 1] (a t interval need not). With one
    sequence the bounds are NaN: no interval."""
    values = per_sequence.double().cpu()
    n = values.shape[0]
    if n == 0:
        raise BadInput("no sequences to average")
    mean = values.mean(0)
    if n == 1:
        nan = torch.full_like(mean, math.nan)
        return mean, nan, nan.clone()
    means = (resampling_weights(n, seed=seed) @ values.reshape(n, -1)).reshape(-1, *values.shape[1:])
    low, high = torch.quantile(means, torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64), dim=0)
    return mean, low, high


def bootstrap_ratio_intervals(
    numerator: Float[Tensor, "batch ..."],
    denominator: Float[Tensor, " batch"],
    level: float = LEVEL,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[Tensor, Tensor, Tensor]:
    """mean(numerator) / mean(denominator) over sequences, with its percentile-bootstrap interval (the same
    sequences resampled for both), for every trailing entry of ``numerator`` at once over one shared
    ``denominator``: a mean over queries pooled from sequences of different sizes (numerator: a sequence's sum,
    denominator: its count), or a share of a gap. The same resamples serve every entry. NaN bounds with one
    sequence, or everywhere when a resample's denominator is not positive."""
    num, den = numerator.double().cpu(), denominator.double().cpu().flatten()
    n = num.shape[0]
    if n == 0 or den.numel() != n:
        raise BadInput("a ratio interval needs one denominator per sequence of the numerator, at least one")
    value = num.mean(0) / den.mean()
    weights = resampling_weights(n, seed=seed) if n > 1 else None
    means_den = None if weights is None else weights @ den
    if weights is None or means_den is None or (means_den <= 0).any():
        nan = torch.full_like(value, math.nan)
        return value, nan, nan.clone()
    ratios = ((weights @ num.reshape(n, -1)) / means_den[:, None]).reshape(-1, *num.shape[1:])
    low, high = torch.quantile(ratios, torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64), dim=0)
    return value, low, high


def bootstrap_ratio_interval(
    numerator: Float[Tensor, " batch"],
    denominator: Float[Tensor, " batch"],
    level: float = LEVEL,
    seed: int = BOOTSTRAP_SEED,
) -> Estimate:
    """:func:`bootstrap_ratio_intervals` of one column, as an :class:`Estimate`; None bounds where there is no
    interval (a share of nothing has none)."""
    num, den = numerator.double().cpu().flatten(), denominator.double().cpu().flatten()
    if num.shape != den.shape:
        raise BadInput("a ratio interval needs as many numerators as denominators, at least one")
    return ratio_estimates(num[:, None], den, level, seed)[0]


def ratio_estimates(
    numerator: Float[Tensor, "batch k"],
    denominator: Float[Tensor, " batch"],
    level: float = LEVEL,
    seed: int = BOOTSTRAP_SEED,
) -> list[Estimate]:
    """:func:`bootstrap_ratio_intervals` of every column of ``numerator`` over one ``denominator``, as
    :class:`Estimate` s (the same resamples for all; None bounds where there is no interval)."""
    values, lows, highs = bootstrap_ratio_intervals(numerator, denominator, level, seed)
    n = numerator.shape[0]
    return [
        Estimate(v.item(), *((None, None) if lo.isnan() else (lo.item(), hi.item())), n, level)
        for v, lo, hi in zip(values, lows, highs)
    ]


@functools.lru_cache(maxsize=2)  # every curve, window and head of one probe resamples the same rows: draw them once
def cluster_weights(n_draws: int, n_seqs: int) -> Float[Tensor, "resample batch"]:
    """[resamples, n_draws · n_seqs]: row r holds how often the two-stage bootstrap's resample r takes each
    (draw, sequence) pair, divided by their number, so that ``weights @ values`` is every resample's mean. Stage
    one draws ``n_draws`` draws with replacement; stage two, for each one drawn (a draw drawn twice twice,
    independently), ``n_seqs`` of its sequences with replacement. With one draw: the sequence bootstrap of
    :func:`~induction_probes.probes.intervals.resampling_weights`, the same resamples."""
    if n_draws == 1:
        return resampling_weights(n_seqs)
    generator = torch.Generator().manual_seed(BOOTSTRAP_SEED)
    draws = torch.randint(0, n_draws, (BOOTSTRAP_RESAMPLES, n_draws), generator=generator)
    sequences = torch.randint(0, n_seqs, (BOOTSTRAP_RESAMPLES, n_draws, n_seqs), generator=generator)
    rows = (draws[..., None] * n_seqs + sequences).reshape(BOOTSTRAP_RESAMPLES, -1)
    counts = torch.zeros(BOOTSTRAP_RESAMPLES, n_draws * n_seqs, dtype=torch.float64)
    return counts.scatter_add_(1, rows, torch.ones_like(rows, dtype=torch.float64)) / (n_draws * n_seqs)


def percentiles(resampled: Tensor) -> tuple[Tensor, Tensor]:
    """The central :data:`LEVEL` interval of the resamples (first dimension)."""
    levels = torch.tensor([(1 - LEVEL) / 2, (1 + LEVEL) / 2], dtype=torch.float64)
    low, high = torch.quantile(resampled, levels, dim=0)
    return low, high


def cluster_mean_interval(values: Float[Tensor, "batch ..."], n_draws: int) -> tuple[Tensor, Tensor, Tensor]:
    """The mean over (draw, sequence) rows, draw-major, with its two-stage percentile-bootstrap interval, for
    every trailing entry at once."""
    values = values.double().cpu()
    n = values.shape[0]
    resampled = cluster_weights(n_draws, n // n_draws) @ values.reshape(n, -1)
    low, high = (bound.reshape(values.shape[1:]) for bound in percentiles(resampled))
    return values.mean(0), low, high


def cluster_ratio_intervals(
    numerator: Float[Tensor, "batch ..."], denominator: Float[Tensor, " batch"], n_draws: int
) -> tuple[Tensor, Tensor, Tensor]:
    """mean(numerator) / mean(denominator) over (draw, sequence) rows, with its two-stage percentile-bootstrap
    interval (the same resamples for both); NaN bounds where a resample's denominator is not positive."""
    num, den = numerator.double().cpu(), denominator.double().cpu()
    n = num.shape[0]
    value, weights = num.mean(0) / den.mean(), cluster_weights(n_draws, n // n_draws)
    resampled_den = weights @ den
    if (resampled_den <= 0).any():  # a resample with no query that has a matching key has no score
        nan = torch.full_like(value, math.nan)
        return value, nan, nan.clone()
    ratios = (weights @ num.reshape(n, -1)) / resampled_den[:, None]
    low, high = (bound.reshape(num.shape[1:]) for bound in percentiles(ratios))
    return value, low, high


def draw_t_interval(per_row: Float[Tensor, " batch"], n_draws: int) -> Estimate:
    """The mean over (draw, sequence) rows with its Student t interval over the per-draw means (D − 1 degrees
    of freedom), or over the sequences when there is one draw. ``n``: every row."""
    if n_draws == 1:
        return mean_interval(per_row)
    over_draws = mean_interval(per_row.double().reshape(n_draws, -1).mean(1))
    return Estimate(over_draws.value, over_draws.low, over_draws.high, per_row.numel())
