"""The measurements of :mod:`.markov`: ICL-MC chains (Edelman et al. 2024) written in k of a language model's
tokens, its in-context predictions against the unigram and bigram strategies, and each head's bigram-matching
and previous-token scores, every number with a 95 % interval over sequences.

The protocol (:func:`markov_tokens`):

- **Tokens.** By default k distinct ordinary ids (:func:`~.protocols.vocabulary`: no special token, no padded
  embedding row) drawn uniformly without replacement by a generator seeded with ``seed``, in increasing order:
  state s is written as the s-th smallest. Or ``tokens=[...]``: state s is ``tokens[s]``.
- **Sequences.** ``n_seqs`` sequences of the ICL-MC task of our runs (``MarkovTask(k, seq_len)``: each sequence
  its own chain, rows Dir(1), the first state from its stationary distribution), the evaluation stream of
  ``seed``; opened by the model's BOS when it has one, as the repeated-token protocol does. ``seq_len``
  defaults to our runs' T = 100 cut to the context; a longer one is refused. The same seed gives the same ids
  and the same sequences.

What is measured (:func:`~.markov.probe_markov` reads it, and gives the verdict):

- **Predictions.** At input position t, the model's next-token distribution restricted to the k ids and
  renormalised (a log-softmax over their k logits), q_t; then KL(s ‖ q_t) for s = the sequence's own chain
  ("true") and the uniform, unigram and bigram strategies (Dirichlet(1) pseudo-counts), per sequence and
  position: the direction and definition of our runs' metrics.jsonl (``MarkovEvalSet.per_position``). ``mass``
  is what the full softmax puts on the k ids: how much the renormalisation hides.
- **Heads.** Per sequence, the bigram-matching mass (attention on the keys j whose previous token is the
  query's, :func:`~induction_probes.probes.attention.patterns.bigram_matching_score`; its 1 − TV form as
  ``bigram_matching_ideal``) and the previous-token score, on the whole sequence the model reads, BOS included;
  chance is attention spread evenly over the keys (:func:`~induction_probes.probes.attention.patterns.chance_scores`).

Intervals: percentile bootstrap over sequences (2,000 resamples, seed 0) for KLs, masses and attention scores,
which keeps each inside its bounds; Student t for the paired differences of the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.common.limits import require_seed
from induction_probes.circuits.common.validation import require_int
from induction_probes.circuits.models.attention_masks import matching_keys
from induction_probes.circuits.tasks.markov.strategies import MarkovEvalSet
from induction_probes.circuits.tasks.markov.task import MarkovTask
from induction_probes.probes.attention.patterns import (
    bigram_matching_score,
    previous_token_score,
    run_with_patterns,
)
from induction_probes.probes.intervals import (
    Estimate,
    bootstrap_mean_interval,
    bootstrap_ratio_intervals,
    mean_interval,
)
from induction_probes.probes.lm.measure import chunk_size
from induction_probes.probes.lm.protocols import bos_id, vocabulary

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

SEQ_LEN = next(f.default for f in fields(MarkovTask) if f.name == "seq_len")  # T = 100, our runs' default
N_SEQS = 200
MIN_SEQ_LEN = 4  # the early window (positions 1..⌈T/10⌉) must end before the late one (T/2..T − 1) begins
STRATEGIES = ("true", "uniform", "unigram", "bigram")
SHARE = (0.0, 1.0)  # the bounds of attention scores and of the softmax mass on the k tokens


@dataclass(frozen=True, eq=False)
class MarkovTokens:
    """The protocol's sequences (module docstring): chain states in ``eval_set`` (with the truth and every
    strategy), written as ``ids[state]`` after the BOS ``bos`` when there is one (:attr:`tokens`)."""

    ids: Int[Tensor, " k"]
    eval_set: MarkovEvalSet
    bos: int | None
    seed: int

    @property
    def k(self) -> int:
        return len(self.ids)

    @property
    def seq_len(self) -> int:
        return self.eval_set.inputs.shape[1]

    @property
    def n_seqs(self) -> int:
        return self.eval_set.inputs.shape[0]

    @property
    def prefix(self) -> int:
        return int(self.bos is not None)

    @property
    def tokens(self) -> Int[Tensor, "batch pos"]:
        """What the model reads: [BOS] + ids[x_0] ... ids[x_{T−1}]."""
        body = self.ids[self.eval_set.inputs]
        if self.bos is None:
            return body
        return torch.cat([torch.full((self.n_seqs, 1), self.bos, dtype=body.dtype), body], dim=1)

    def to_json(self) -> dict:
        return {
            "task": "ICL-MC, rows Dir(1), one chain per sequence",
            "k": self.k,
            "ids": self.ids.tolist(),
            "seq_len": self.seq_len,
            "n_seqs": self.n_seqs,
            "seed": self.seed,
            "bos": self.bos,
        }


def chain_ids(model: HookedModel, k: int, seed: int = 0, tokens: Iterable[int] | None = None) -> Int[Tensor, " k"]:
    """The k ids state 0..k−1 are written as: ``tokens`` as given, or k distinct ordinary ids drawn with
    ``seed``, in increasing order (module docstring)."""
    k, seed = require_int("k", k, 2), require_seed("seed", seed)
    ordinary = vocabulary(model)
    if tokens is None:
        if k > len(ordinary):
            raise ValueError(f"k = {k} exceeds the {len(ordinary)} ordinary tokens of the model's vocabulary")
        drawn = torch.randperm(len(ordinary), generator=torch.Generator().manual_seed(seed))[:k]
        return ordinary[drawn].sort().values
    given = list(tokens)
    if len(given) != k or any(isinstance(t, bool) or not isinstance(t, int) for t in given):
        raise ValueError(f"tokens must be {k} integer ids, one per state, got {given!r}")
    if len(set(given)) != k:
        raise ValueError(f"tokens must be {k} distinct ids, got {given!r}")
    outside = sorted(set(given) - set(ordinary.tolist()))
    if outside:
        raise ValueError(f"token {outside[0]} is a special token or outside the model's ordinary vocabulary")
    return torch.tensor(given, dtype=torch.long)


def markov_tokens(
    model: HookedModel,
    k: int,
    n_seqs: int = N_SEQS,
    seq_len: int | None = None,
    seed: int = 0,
    tokens: Iterable[int] | None = None,
) -> MarkovTokens:
    """``n_seqs`` ICL-MC sequences over k of the model's tokens (module docstring)."""
    ids = chain_ids(model, k, seed, tokens)
    bos = bos_id(model)
    room = model.cfg.n_ctx - int(bos is not None)
    seq_len = min(SEQ_LEN, room) if seq_len is None else require_int("seq_len", seq_len, MIN_SEQ_LEN)
    if seq_len > room:
        raise ValueError(f"seq_len {seq_len} does not fit the model's context of {model.cfg.n_ctx} tokens")
    if seq_len < MIN_SEQ_LEN:
        raise ValueError(f"the model's context of {model.cfg.n_ctx} tokens holds no chain of {MIN_SEQ_LEN} tokens")
    eval_set = MarkovTask(k=ids.numel(), seq_len=seq_len).eval_set(require_int("n_seqs", n_seqs, 2), seed)
    return MarkovTokens(ids, eval_set, bos, seed)


def check_fits(model: HookedModel, protocol: MarkovTokens) -> None:
    """Refuse a model that cannot read ``protocol``'s tokens as drawn (another checkpoint's vocabulary)."""
    if int(protocol.ids.max()) >= model.cfg.d_vocab or protocol.prefix + protocol.seq_len > model.cfg.n_ctx:
        raise ValueError("the sequences do not fit this model's vocabulary or context: draw them for it")
    if bos_id(model) != protocol.bos:
        raise ValueError(f"the sequences open with BOS {protocol.bos}, the model's BOS is {bos_id(model)}")


# --- one pass per chunk: the prediction over the k ids and each head's per-sequence sums ------------------


@dataclass(frozen=True, eq=False)
class ChainPass:
    """What the model's passes over the protocol's tokens leave, per sequence: its logits over the k ids at the
    T prediction positions, the mass of its full softmax there, and per layer each head's previous-token score,
    its attention on matching keys summed over the queries that have one (plain and 1 − TV), and their count."""

    logits: Float[Tensor, "batch pos k"]
    mass: Float[Tensor, "batch pos"]
    previous: list[Float[Tensor, "batch head"]]
    matched: list[Float[Tensor, "batch head"]]
    ideal: list[Float[Tensor, "batch head"]]
    n_matched: Float[Tensor, " batch"]


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


def chain_pass(model: HookedModel, protocol: MarkovTokens) -> ChainPass:
    """One forward pass per chunk of sequences (within the language-model probes' memory bound)."""
    check_fits(model, protocol)
    tokens = protocol.tokens
    size = chunk_size(model, tokens.shape[1])
    parts = []
    for start in range(0, tokens.shape[0], size):
        chunk = tokens[start : start + size]
        logits, patterns = run_with_patterns(model, chunk)
        sums = [sequence_sums(pattern, chunk) for pattern in patterns]
        parts.append((*restricted(logits, protocol), sums))
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
    """One head's scores, each a mean over sequences with its interval."""

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
    their values equal the pooled scores of the whole batch."""
    n, found = chain.n_matched.numel(), []
    for layer, previous in enumerate(chain.previous):
        estimates = [
            within(*bootstrap_ratio_intervals(chain.matched[layer], chain.n_matched), SHARE),
            within(*bootstrap_ratio_intervals(chain.ideal[layer], chain.n_matched), SHARE),
            within(*bootstrap_mean_interval(previous), SHARE),
        ]
        for head in range(previous.shape[1]):
            found.append(HeadScore(layer, head, *(as_estimate(*(t[head] for t in e), n) for e in estimates)))
    return found


@dataclass(frozen=True, eq=False)
class MarkovBehaviour:
    """KL(s ‖ q) per sequence and position for each s of :data:`STRATEGIES`, and the mass on the k ids."""

    kl: dict[str, Float[Tensor, "batch pos"]]
    mass: Float[Tensor, "batch pos"]

    @staticmethod
    def bounds(name: str) -> tuple[float, float]:
        return SHARE if name == "mass" else (0.0, math.inf)

    def values(self, name: str) -> Float[Tensor, "batch pos"]:
        return self.mass if name == "mass" else self.kl[name]

    def curve(self, name: str) -> tuple[Tensor, Tensor, Tensor]:
        """Per position: the mean over sequences and its bootstrap interval."""
        return within(*bootstrap_mean_interval(self.values(name)), self.bounds(name))

    def window(self, name: str, positions: range) -> Estimate:
        """The mean over ``positions`` (per sequence), with its bootstrap interval over sequences."""
        per_sequence = self.values(name)[:, positions.start : positions.stop].mean(-1)
        return as_estimate(*within(*bootstrap_mean_interval(per_sequence), self.bounds(name)), per_sequence.numel())

    def paired(self, first: tuple[str, range], second: tuple[str, range]) -> Estimate:
        """Window mean of ``first`` minus that of ``second`` on the same sequences, with its t interval."""
        (a, wa), (b, wb) = first, second
        per_a, per_b = (self.values(n)[:, w.start : w.stop].mean(-1) for n, w in ((a, wa), (b, wb)))
        return mean_interval(per_a - per_b)


def behaviour(chain: ChainPass, protocol: MarkovTokens) -> MarkovBehaviour:
    _, kl = protocol.eval_set.per_position(chain.logits, per_sequence=True)
    return MarkovBehaviour({name: kl[name] for name in STRATEGIES}, chain.mass)
