"""Head ablation in a language model, measured on repeated random tokens: how much of what induction buys
(the gap between the first copy's loss and the repeated copy's) goes when a head's output is removed.

The ablation itself is :func:`~induction_probes.probes.ablation.head_ablation.ablation_hooks` (``hook_z``; zero, mean or
resample). Mean and resample read the reference sequences chunk by chunk beside the probed ones: the
mean is over a chunk's sequences and positions, and a resampled sequence comes from the same chunk.

Every effect is paired: the ablated and the clean model read the same sequences, and the effect is the
per-sequence difference (ablated − clean) with its Student-t interval; the share of the gap removed is a ratio
of means with a percentile-bootstrap interval that resamples the sequences for both at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from tqdm.auto import tqdm

from induction_probes.circuits.defaults import PROBE_SEED
from induction_probes.circuits.devices import model_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.language_models import as_hooked
from induction_probes.circuits.interop.resume import resid_pre_hook, run_from_layer
from induction_probes.circuits.limits import require_seed
from induction_probes.circuits.names import head_label, heads_label
from induction_probes.probes.ablation.head_ablation import MODES, ablation_hooks, check_heads, heads_in_layer
from induction_probes.probes.attention.patterns import run_with_captures
from induction_probes.probes.intervals import Estimate, bootstrap_ratio_interval, mean_interval
from induction_probes.probes.lm.measure import chunk_size, per_token_loss
from induction_probes.probes.lm.progress import progress_bar
from induction_probes.probes.lm.protocols import (
    LOSSES,
    InductionLoss,
    RepeatedTokens,
    estimate_json,
    induction_loss,
)
from induction_probes.probes.tidy import Tidy, row

if TYPE_CHECKING:
    from induction_probes.circuits.interop.language_models import ModelLike
    from induction_probes.circuits.models.hooked_model import HookedModel


@dataclass(frozen=True)
class HeadAblation(Tidy):
    """The induction loss with ``heads`` ablated, against the clean model's ``baseline`` on the same sequences.
    ``to_frame()``: one row per loss and effect with its interval, ``ablated`` and ``mode`` beside it (a single
    ablated head is also the row's layer and head)."""

    heads: list[tuple[int, int]]
    mode: str
    loss: InductionLoss
    baseline: InductionLoss

    @property
    def increase(self) -> Estimate:
        """How much the repeated copy's loss rose, paired per sequence, with its interval."""
        return mean_interval(self.loss.repeated_half_per_sequence - self.baseline.repeated_half_per_sequence)

    @property
    def loss_increase(self) -> float:
        return self.increase.value

    @property
    def share(self) -> Estimate:
        """The rise as a share of the clean model's gap (1: the repeat becomes as hard as the first copy),
        with its bootstrap interval; None bounds where the clean model has no gap to remove."""
        rise = self.loss.repeated_half_per_sequence - self.baseline.repeated_half_per_sequence
        return bootstrap_ratio_interval(rise, self.baseline.gap_per_sequence)

    @property
    def gap_removed(self) -> float:
        return self.share.value if self.baseline.gap > 0 else float("nan")

    def to_records(self, sequences_seen: int | None = None) -> list[dict]:
        layer, head = self.heads[0] if len(self.heads) == 1 else (None, None)
        estimates = {measure: self.loss.interval(name) for measure, name in LOSSES.items()}
        estimates |= {"loss_increase": self.increase} | ({"gap_removed": self.share} if self.baseline.gap > 0 else {})
        extra = {"ablated": heads_label(self.heads, ","), "mode": self.mode}
        return [row(None, sequences_seen, layer, head, m, e.value, e.low, e.high) | extra for m, e in estimates.items()]

    def to_json(self) -> dict:
        return {
            "heads": [head_label(layer, head) for layer, head in self.heads],
            "mode": self.mode,
            **self.loss.to_json(),
            "loss_increase": estimate_json(self.increase),
            "gap_removed": estimate_json(self.share) if self.baseline.gap > 0 else None,
        }


def ablated_losses(
    model: HookedModel,
    repeated: RepeatedTokens,
    head_sets: list[list[tuple[int, int]]],
    mode: str,
    reference: RepeatedTokens | None,
    seed: int,
    bar: tqdm,
) -> list[InductionLoss]:
    """:class:`InductionLoss` of the clean model, then of each head set ablated together, a chunk of sequences at
    a time. Each chunk's clean pass keeps the residual stream entering every layer an ablation starts at, and each
    ablated pass resumes there (:func:`~induction_probes.circuits.interop.resume.run_from_layer`): the layers below
    the lowest ablated head are not run again, and memory holds one chunk's residuals."""
    tokens = repeated.tokens.to(model_device(model))
    ref = None if reference is None else reference.tokens
    if ref is not None and ref.shape != tokens.shape:
        raise BadInput("the reference sequences must have the probed sequences' shape")
    starts = [min(layer for layer, _ in heads) for heads in head_sets]
    kept = sorted({resid_pre_hook(layer) for layer in starts if layer > 0})
    n, size = tokens.shape[0], chunk_size(model, tokens.shape[1])
    per_token: list[list[torch.Tensor]] = [[] for _ in range(len(head_sets) + 1)]
    for first in range(0, n, size):
        rows = slice(first, first + size)
        part = tokens[rows]
        logits, residuals = run_with_captures(model, part, kept)
        per_token[0].append(per_token_loss(logits, part))
        for i, (heads, layer) in enumerate(zip(head_sets, starts), 1):
            bar.set_postfix_str(
                heads_label(heads, ",")
                + (f" (sequences {first + 1}-{min(n, first + size)} of {n})" if size < n else "")
            )
            hooks = ablation_hooks(model, heads, mode, None if ref is None else ref[rows], seed + first)
            residual = residuals.get(resid_pre_hook(layer))
            logits = run_from_layer(model, part, None if residual is None else residual.to(part.device), layer, hooks)
            per_token[i].append(per_token_loss(logits, part).cpu())
            bar.update()
    return [induction_loss(torch.cat(parts), repeated) for parts in per_token]


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise BadInput(f"unknown ablation mode {str(mode)[:200]!r}: use zero, mean or resample")


def ablate(
    model: ModelLike,
    repeated: RepeatedTokens,
    head_sets: list[list[tuple[int, int]]],
    mode: str = "zero",
    reference: RepeatedTokens | None = None,
    seed: int = PROBE_SEED,
    progress: bool = False,
) -> tuple[InductionLoss, list[HeadAblation]]:
    """The clean model's :class:`InductionLoss` and each head set's ablation, in the order of ``head_sets``.
    ``reference`` (mean, resample): other repeated random sequences of the same shape, e.g. the same protocol
    with another seed. ``progress``: a bar on stderr (a terminal's) naming the heads being ablated."""
    check_mode(mode)
    require_seed("the seed", seed)
    model = as_hooked(model)
    if not isinstance(repeated, RepeatedTokens):
        raise TypeError("ablate reads a RepeatedTokens (lm.repeated_random_tokens), not plain tokens")
    if isinstance(head_sets, (str, bytes)) or not head_sets:
        raise BadInput("give at least one head set, a list of (layer, head) pairs")
    for heads in head_sets:
        check_heads(heads, model.cfg.n_layers, lambda layer: heads_in_layer(model.cfg, layer))
    if mode != "zero" and reference is None:
        raise BadInput(f"{mode} ablation needs reference sequences")
    passes = len(head_sets) * math.ceil(repeated.tokens.shape[0] / chunk_size(model, repeated.tokens.shape[1]))
    with progress_bar(passes, f"{mode} ablation", progress, unit="pass", leave=True) as bar:
        baseline, *losses = ablated_losses(model, repeated, head_sets, mode, reference, seed, bar)
    return baseline, [HeadAblation(list(heads), mode, loss, baseline) for heads, loss in zip(head_sets, losses)]
