"""Does a language model learn Markov chains in context, and which heads do it? The project's ICL-MC probes
(Edelman et al. 2024) on any model booted through TransformerLens's ``TransformerBridge``, or on our own: chains
written in k of its tokens (:func:`~.markov_measure.markov_tokens`; the protocol and the measurements are
described in :mod:`.markov_measure`), then :func:`probe_markov` for one model and :func:`probe_markov_series` for
a training run's checkpoints on the same sequences.

The rule of the verdict, with T input positions, late = positions ⌊T/2⌋..T − 1 and early = positions 1..⌈T/10⌉
(position 0 left out: there the bigram strategy has seen no transition and is uniform), q the model's prediction
over the k tokens, every KL a mean over the window per sequence and every interval 95 % over sequences:

- **learns the chains in context** when both paired differences have intervals below 0:
  late KL(bigram ‖ q) − late KL(unigram ‖ q) (closer to the bigram strategy than to the unigram one: it reads the
  successors of the current token, not only the tokens' frequencies) and late KL(true ‖ q) − early KL(true ‖ q)
  (its predictions approach the sequence's own chain as it reads more of it). The second reads the truth, not the
  bigram strategy: a Bayes-optimal model sits at the bigram strategy from the start and would not move closer.
- **statistical induction head**: a head whose bigram-matching score reaches halfway from its chance level to 1
  and whose interval's low end is above chance (the progress measures' halfway convention, docs/probes.md).
- **previous-token head**: the same rule on the previous-token score.

Heads are named as TransformerLens does, ``L1H0``. The verdict says nothing of the k tokens' mass: a model that
gives them little probability can still rank them like the bigram strategy; ``mass`` says how much it ignores.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from induction_probes.probes.attention.patterns import chance_scores
from induction_probes.probes.intervals import Estimate
from induction_probes.probes.lm.markov_measure import (
    STRATEGIES,
    HeadScore,
    MarkovBehaviour,
    MarkovTokens,
    behaviour,
    chain_pass,
    head_scores,
    markov_tokens,
)
from induction_probes.probes.lm.protocols import estimate_json

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

HALFWAY = 0.5  # a head is marked from halfway between its chance level and 1
SCORES = ("bigram_matching", "bigram_matching_ideal", "previous_token")


def late_positions(seq_len: int) -> range:
    return range(seq_len // 2, seq_len)


def early_positions(seq_len: int) -> range:
    return range(1, 1 + math.ceil(seq_len / 10))


def span(positions: range) -> list[int]:
    """A window as [first, last] position."""
    return [positions.start, positions.stop - 1]


@dataclass(frozen=True, eq=False)
class MarkovProbe:
    """Every ICL-MC probe of one model (or checkpoint ``step``) and the verdict (module docstring)."""

    step: int | None
    protocol: MarkovTokens
    behaviour: MarkovBehaviour
    heads: list[HeadScore]
    chance: dict[str, float]

    @property
    def early(self) -> range:
        return early_positions(self.protocol.seq_len)

    @property
    def late(self) -> range:
        return late_positions(self.protocol.seq_len)

    def kl(self, name: str, window: str = "late") -> Estimate:
        """Mean KL(name ‖ q) over the ``window`` ("early" or "late") positions, with its interval."""
        return self.behaviour.window(name, getattr(self, window))

    @property
    def mass(self) -> Estimate:
        """The softmax mass on the k tokens, averaged over every prediction position."""
        return self.behaviour.window("mass", range(self.protocol.seq_len))

    @property
    def bigram_minus_unigram(self) -> Estimate:
        return self.behaviour.paired(("bigram", self.late), ("unigram", self.late))

    @property
    def truth_late_minus_early(self) -> Estimate:
        return self.behaviour.paired(("true", self.late), ("true", self.early))

    @property
    def learns_in_context(self) -> bool:
        return all(e.high is not None and e.high < 0 for e in (self.bigram_minus_unigram, self.truth_late_minus_early))

    def threshold(self, score: str) -> float:
        chance = self.chance[score]
        return chance + HALFWAY * (1 - chance)

    def marked(self, score: str) -> list[HeadScore]:
        """The heads that pass the rule on ``score``, highest first."""
        chance, threshold = self.chance[score], self.threshold(score)
        passing = [
            h
            for h in self.heads
            if getattr(h, score).value >= threshold and (low := getattr(h, score).low) is not None and low > chance
        ]
        return sorted(passing, key=lambda h: -getattr(h, score).value)

    @property
    def induction_heads(self) -> list[tuple[int, int]]:
        return [(h.layer, h.head) for h in self.marked("bigram_matching")]

    @property
    def previous_token_heads(self) -> list[tuple[int, int]]:
        return [(h.layer, h.head) for h in self.marked("previous_token")]

    def best(self, score: str) -> HeadScore:
        return max(self.heads, key=lambda h: getattr(h, score).value)

    def verdict(self) -> str:
        """The verdict in one sentence, with the numbers it rests on."""
        closer, falls = self.bigram_minus_unigram, self.truth_late_minus_early
        evidence = (
            f"late KL(bigram || model) - KL(unigram || model) = {interval(closer)}, "
            f"KL(true || model) late - early = {interval(falls)}"
        )
        heads = (
            f"statistical induction heads: {labels(self.induction_heads) or 'none'}; "
            f"previous-token heads: {labels(self.previous_token_heads) or 'none'}"
        )
        said = "learns the chains in context" if self.learns_in_context else "does not learn the chains in context"
        return f"{said} ({evidence}); {heads}"

    def to_json(self) -> dict:
        curves = {name: curve_json(self.behaviour, name) for name in ("mass", *STRATEGIES)}
        return {
            "step": self.step,
            "protocol": self.protocol.to_json(),
            "windows": {"early": span(self.early), "late": span(self.late)},
            "mass": {"mean": estimate_json(self.mass), "per_position": curves["mass"]},
            "kl": {
                name: {w: estimate_json(self.kl(name, w)) for w in ("early", "late")} | {"per_position": curves[name]}
                for name in STRATEGIES
            },
            "chance": dict(self.chance),
            "thresholds": {score: self.threshold(score) for score in ("bigram_matching", "previous_token")},
            "heads": [head_json(h) for h in self.heads],
            "induction_heads": labels(self.induction_heads).split(", ") if self.induction_heads else [],
            "previous_token_heads": labels(self.previous_token_heads).split(", ") if self.previous_token_heads else [],
            "learns_in_context": self.learns_in_context,
            "verdict": {
                "learns_in_context": self.learns_in_context,
                "bigram_minus_unigram_late": estimate_json(self.bigram_minus_unigram),
                "true_late_minus_early": estimate_json(self.truth_late_minus_early),
                "text": self.verdict(),
            },
        }


def labels(heads: list[tuple[int, int]]) -> str:
    return ", ".join(f"L{layer}H{head}" for layer, head in heads)


def interval(estimate: Estimate, digits: int = 3) -> str:
    if estimate.low is None:
        return f"{estimate.value:.{digits}f}"
    return f"{estimate.value:.{digits}f} [{estimate.low:.{digits}f}, {estimate.high:.{digits}f}]"


def curve_json(behaviour: MarkovBehaviour, name: str) -> dict:
    value, low, high = behaviour.curve(name)
    return {"value": value.tolist(), "low": low.tolist(), "high": high.tolist()}


def head_json(head: HeadScore) -> dict:
    scores = {score: estimate_json(getattr(head, score)) for score in SCORES}
    return {"head": head.label, "layer": head.layer, "index": head.head} | scores


def probe_markov(model: HookedModel, protocol: MarkovTokens, step: int | None = None) -> MarkovProbe:
    """Every ICL-MC probe of a booted ``model`` on ``protocol``'s sequences (:func:`markov_tokens`), and the
    verdict. ``model``: a TransformerBridge, our HookedTransformer, or any hooked model with
    ``blocks.{l}.attn.hook_pattern`` whose call gives logits."""
    chain = chain_pass(model, protocol)
    chance = chance_scores(protocol.tokens)
    return MarkovProbe(step, protocol, behaviour(chain, protocol), head_scores(chain), chance)


def probe_markov_series(
    models: Iterable[tuple[int | None, object]], protocol: MarkovTokens | dict
) -> Iterator[MarkovProbe]:
    """:func:`probe_markov` of each (step, model) in turn on the same sequences: ``protocol`` itself, or the
    options of :func:`markov_tokens` (``k``, ``n_seqs``, ``seq_len``, ``seed``, ``tokens``), drawn for the first
    model. ``models`` may boot each model lazily (a generator), so that one is in memory at a time."""
    for step, model in models:
        if not isinstance(protocol, MarkovTokens):
            protocol = markov_tokens(model, **protocol)
        yield probe_markov(model, protocol, step)
