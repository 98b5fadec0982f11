"""The measurements of :mod:`.markov_probe`: ICL-MC chains (Edelman et al. 2024) written in k of a language model's
tokens, its in-context predictions against the unigram and bigram strategies, and each head's bigram-matching
and previous-token scores, every number with a 95 % interval over id draws and sequences.

The protocol is :mod:`.markov_protocol`'s.

What is measured (:func:`~.markov_probe.probe_markov` reads it, and gives the verdict):

- **Predictions.** At input position t, the model's next-token distribution restricted to the k ids and
  renormalised (a log-softmax over their k logits), q_t; then KL(s ‖ q_t) for s = the sequence's own chain
  ("true") and the uniform, unigram and bigram strategies (Dirichlet(1) pseudo-counts), per sequence and
  position: the direction and definition of our runs' metrics.jsonl (``MarkovEvalSet.per_position``). ``mass``
  is what the full softmax puts on the k ids: how much the renormalisation hides. The references
  KL(true ‖ uniform) and KL(true ‖ bigram), per sequence and position, are what KL(true ‖ q_t) would be were the
  model to predict as the uniform or the bigram strategy does.
- **Heads.** Per sequence, the bigram-matching mass (attention on the keys j whose previous token is the
  query's, :func:`~induction_probes.probes.attention.patterns.bigram_matching_score`; its 1 − TV form as
  ``bigram_matching_ideal``) and the previous-token score, on the whole sequence the model reads, BOS included;
  chance is attention spread evenly over the keys (:func:`~induction_probes.probes.attention.patterns.chance_scores`),
  pooled over every draw's sequences as the scores are.

Intervals, 95 % over id draws × sequences. A (draw, sequence) pair is not an independent unit: the sequences
of one draw share its ids, and the ids can move a model's KLs far more than the sequences do (0.40 against
0.93 nats for two draws in one report), so draws are clusters and every interval resamples or averages them as
such (with one draw, everything below is the interval over sequences it was before draws existed):

- KLs, masses and attention scores: a two-stage percentile bootstrap (2,000 resamples, seed 0): draws with
  replacement, then the sequences of each drawn draw with replacement
  (:func:`~induction_probes.probes.intervals.cluster_weights`). A resampled mean stays within the values' range, so
  each interval stays inside its bounds. Resampling at both stages counts the within-draw spread twice, so the
  interval is somewhat wide where draws agree; where they differ, resampling few draws understates their spread (a
  bootstrap over D values has (D − 1)/D of their variance, and no t quantile: Davison & Hinkley 1997, §3.8). So these
  intervals describe the numbers, and the verdict rests on the next.
- The verdict's paired differences (unbounded): Student t over the per-draw means, D − 1 degrees of freedom
  (:func:`~induction_probes.probes.intervals.draw_t_interval`). Every draw has ``n_seqs`` sequences, so each per-draw
  mean has variance σ²_draw + σ²_sequence / n_seqs, and their spread estimates exactly the variance of the overall
  mean: within-draw variation included, and exact under normality of the per-draw means (a mean of n_seqs
  sequences). Few draws give wide intervals (t₀.₉₇₅ = 12.7 with 2 draws, 3.18 with 4): a "yes" must survive another
  draw of ids. With one draw, Student t over sequences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from induction_probes.circuits.metrics import kl_divergence
from induction_probes.circuits.models.attention_masks import matching_keys
from induction_probes.probes.attention.patterns import (
    bigram_matching_score,
    previous_token_score,
    run_with_patterns,
)
from induction_probes.probes.intervals import (
    Estimate,
    cluster_mean_interval,
    cluster_ratio_intervals,
    draw_t_interval,
)
from induction_probes.probes.lm.markov.markov_protocol import MarkovDraws, MarkovTokens, as_draws, check_fits
from induction_probes.probes.lm.measure import chunk_size

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

STRATEGIES = ("true", "uniform", "unigram", "bigram")
INTERVAL_METHODS = (
    "two-stage percentile bootstrap (id draws, then sequences within each) for KLs, masses and attention scores; "
    "Student t over the per-draw means for the verdict's differences (over sequences with one draw)"
)
REFERENCES = ("uniform", "bigram")  # KL(true ‖ s): what KL(true ‖ model) would be, were the model to predict as s
SHARE = (0.0, 1.0)  # the bounds of attention scores and of the softmax mass on the k tokens


# --- one pass per chunk: the prediction over the k ids and each head's per-sequence sums ------------------


@dataclass(frozen=True, eq=False)
class ChainPass:
    """What the model's passes over the protocol's tokens leave, per sequence: its logits over the k ids at the
    T prediction positions, the mass of its full softmax there, and per layer each head's previous-token score,
    its attention on matching keys summed over the queries that have one (plain and 1 − TV), and their count.
    Over ``n_draws`` id draws, the rows are (draw, sequence) pairs, draw-major (:class:`MarkovDraws`)."""

    logits: Float[Tensor, "batch pos k"]
    mass: Float[Tensor, "batch pos"]
    previous: list[Float[Tensor, "batch head"]]
    matched: list[Float[Tensor, "batch head"]]
    ideal: list[Float[Tensor, "batch head"]]
    n_matched: Float[Tensor, " batch"]
    n_draws: int = 1


def restricted(logits: Float[Tensor, "batch pos d_vocab"], protocol: MarkovTokens) -> tuple[Tensor, Tensor]:
    """The logits of the k ids at the positions that predict a chain state (from x_0 on; the BOS's
    prediction of x_0 is left out, as the strategies have none), and the softmax mass on those ids."""
    rows = logits[:, protocol.prefix : protocol.prefix + protocol.seq_len].double()
    chosen = rows[..., protocol.ids.to(rows.device)]
    mass = (torch.logsumexp(chosen, -1) - torch.logsumexp(rows, -1)).exp()
    return chosen, mass.clamp_max(1.0)  # a share of the softmax: above 1 by rounding only


def sequence_sums(pattern: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per sequence of one layer: previous-token score, matched and ideal sums [batch, head], the count of
    queries with a matching key [batch]. One sequence at a time through the project's scores, so that their
    pooled mean is what those functions give the whole batch."""
    pattern, match = pattern.double(), matching_keys(tokens)
    counts = match.any(-1).sum(-1).double()
    previous, matched, ideal = (torch.zeros(pattern.shape[:2], dtype=torch.float64) for _ in range(3))
    for s in range(pattern.shape[0]):
        previous[s] = previous_token_score(pattern[s : s + 1])
        if counts[s] > 0:  # a sequence with no repeated state has no matching key: it adds 0 of 0
            mass, best, _ = bigram_matching_score(pattern[s : s + 1], tokens[s : s + 1], match=match[s : s + 1])
            matched[s], ideal[s] = mass * counts[s], best * counts[s]
    return previous, matched, ideal, counts


def chain_pass(model: HookedModel, protocol: MarkovTokens, bar: tqdm | None = None) -> ChainPass:
    """One forward pass per chunk of sequences (within the language-model probes' memory bound); ``bar`` (a
    progress bar) advances by each chunk's sequences."""
    check_fits(model, protocol)
    tokens = protocol.tokens
    size = chunk_size(model, tokens.shape[1])
    parts = []
    for start in range(0, tokens.shape[0], size):
        chunk = tokens[start : start + size]
        logits, patterns = run_with_patterns(model, chunk)
        sums = [sequence_sums(pattern, chunk) for pattern in patterns]
        parts.append((*restricted(logits, protocol), sums))
        if bar is not None:
            bar.update(chunk.shape[0])
    n_layers = len(parts[0][2])
    per_layer = [[torch.cat([p[2][layer][i] for p in parts]) for layer in range(n_layers)] for i in range(4)]
    return ChainPass(
        logits=torch.cat([p[0] for p in parts]),
        mass=torch.cat([p[1] for p in parts]),
        previous=per_layer[0],
        matched=per_layer[1],
        ideal=per_layer[2],
        n_matched=per_layer[3][0],
    )


def draws_pass(model: HookedModel, protocol: MarkovDraws, bar: tqdm | None = None) -> ChainPass:
    """:func:`chain_pass` of every draw (each reads its own ids), the rows stacked draw-major."""
    passes = [chain_pass(model, draw, bar) for draw in protocol.draws]
    layers = range(len(passes[0].previous))
    stack = lambda name: torch.cat([getattr(p, name) for p in passes])  # noqa: E731
    per_layer = lambda name: [torch.cat([getattr(p, name)[layer] for p in passes]) for layer in layers]  # noqa: E731
    return ChainPass(
        logits=stack("logits"),
        mass=stack("mass"),
        previous=per_layer("previous"),
        matched=per_layer("matched"),
        ideal=per_layer("ideal"),
        n_matched=stack("n_matched"),
        n_draws=protocol.n_draws,
    )


# --- estimates -------------------------------------------------------------------------------------------


def within(
    value: Tensor, low: Tensor, high: Tensor, bounds: tuple[float, float] = (0.0, math.inf)
) -> tuple[Tensor, Tensor, Tensor]:
    """A bootstrap interval kept around its value and inside the quantity's bounds (every quantity here is a KL,
    at least 0, or a share, in [0, 1]). Resampling weights sum to 1 only within rounding, so a resampled mean of
    values all equal to 1 can read 1 + 2e-16; this removes that and nothing else. NaN bounds stay NaN."""
    value = value.clamp(*bounds)
    return value, torch.minimum(low.clamp(*bounds), value), torch.maximum(high.clamp(*bounds), value)


def as_estimate(value: Tensor, low: Tensor, high: Tensor, n: int) -> Estimate:
    """One bootstrap entry as an Estimate (NaN bounds, where there is no interval, as None)."""
    bound = lambda x: None if math.isnan(x.item()) else x.item()  # noqa: E731
    return Estimate(value.item(), bound(low), bound(high), n)


@dataclass(frozen=True)
class HeadScore:
    """One head's scores, each pooled over every draw's sequences with its interval over draws and sequences."""

    layer: int
    head: int
    bigram_matching: Estimate
    bigram_matching_ideal: Estimate
    previous_token: Estimate

    @property
    def label(self) -> str:
        return f"L{self.layer}H{self.head}"


def head_scores(chain: ChainPass) -> list[HeadScore]:
    """Every head's three scores; the bigram-matching ones are ratios of per-sequence sums over the counts, so
    their values equal the pooled scores of the whole batch, every draw's sequences together."""
    n, draws, found = chain.n_matched.numel(), chain.n_draws, []
    for layer, previous in enumerate(chain.previous):
        estimates = [
            within(*cluster_ratio_intervals(chain.matched[layer], chain.n_matched, draws), SHARE),
            within(*cluster_ratio_intervals(chain.ideal[layer], chain.n_matched, draws), SHARE),
            within(*cluster_mean_interval(previous, draws), SHARE),
        ]
        for head in range(previous.shape[1]):
            scores = (as_estimate(value[head], low[head], high[head], n) for value, low, high in estimates)
            found.append(HeadScore(layer, head, *scores))
    return found


@dataclass(frozen=True, eq=False)
class MarkovBehaviour:
    """Per (draw, sequence) row, draw-major, and position: KL(s ‖ q) for each s of :data:`STRATEGIES`, the mass
    on the k ids, and the references KL(true ‖ s) for each s of :data:`REFERENCES`, keyed ``"true||s"``."""

    kl: dict[str, Float[Tensor, "batch pos"]]
    mass: Float[Tensor, "batch pos"]
    references: dict[str, Float[Tensor, "batch pos"]] = field(default_factory=dict)
    n_draws: int = 1

    @staticmethod
    def bounds(name: str) -> tuple[float, float]:
        return SHARE if name == "mass" else (0.0, math.inf)

    def values(self, name: str) -> Float[Tensor, "batch pos"]:
        """``name``: "mass", a strategy (KL(name ‖ q)) or a reference key ("true||uniform")."""
        return self.mass if name == "mass" else self.references[name] if "||" in name else self.kl[name]

    def curve(self, name: str) -> tuple[Tensor, Tensor, Tensor]:
        """Per position: the mean over draws and sequences and its two-stage bootstrap interval."""
        return within(*cluster_mean_interval(self.values(name), self.n_draws), self.bounds(name))

    def window(self, name: str, positions: range) -> Estimate:
        """The mean over ``positions`` (per row), with its two-stage bootstrap interval over draws and sequences."""
        per_row = self.values(name)[:, positions.start : positions.stop].mean(-1)
        return as_estimate(*within(*cluster_mean_interval(per_row, self.n_draws), self.bounds(name)), per_row.numel())

    def paired(self, first: tuple[str, range], second: tuple[str, range]) -> Estimate:
        """Window mean of ``first`` minus that of ``second`` on the same rows, with its t interval over the
        per-draw means (over sequences with one draw)."""
        (a, wa), (b, wb) = first, second
        per_a, per_b = (self.values(n)[:, w.start : w.stop].mean(-1) for n, w in ((a, wa), (b, wb)))
        return draw_t_interval(per_a - per_b, self.n_draws)


def reference_key(strategy: str) -> str:
    """The name of KL(true ‖ strategy) among a :class:`MarkovBehaviour`'s values."""
    return f"true||{strategy}"


def draw_kls(draw: MarkovTokens, logits: Float[Tensor, "batch pos k"]) -> dict[str, Tensor]:
    """One draw's KL(s ‖ q) for each strategy s and its references KL(true ‖ s), per sequence and position."""
    _, kl = draw.eval_set.per_position(logits, per_sequence=True)
    truth, strategies = draw.eval_set.truth, draw.eval_set.strategies
    references = {reference_key(s): kl_divergence(truth, strategies[s].log()) for s in REFERENCES}
    return {name: kl[name] for name in STRATEGIES} | references


def behaviour(chain: ChainPass, protocol: MarkovTokens | MarkovDraws) -> MarkovBehaviour:
    """Every KL of every draw, each draw's rows against its own chains, stacked draw-major as ``chain``'s are."""
    protocol = as_draws(protocol)
    per_draw = [draw_kls(d, logits) for d, logits in zip(protocol.draws, chain.logits.split(protocol.n_seqs))]
    stacked = {name: torch.cat([kls[name] for kls in per_draw]) for name in per_draw[0]}
    references = {reference_key(s): stacked.pop(reference_key(s)) for s in REFERENCES}
    return MarkovBehaviour(stacked, chain.mass, references, protocol.n_draws)
