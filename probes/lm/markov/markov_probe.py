"""Does a language model learn Markov chains in context, and which heads do it? The project's ICL-MC probes
(Edelman et al. 2024) on any model booted through TransformerLens's ``TransformerBridge``, or on our own: chains
written in k of its tokens, over several draws of those k ids (the protocol: :mod:`.markov_protocol`; the
measurements: :mod:`.markov_measure`), then :func:`probe_markov` for one model and :func:`probe_markov_series`
for a training run's checkpoints on the same sequences.

The rule of the verdict, with T input positions, late = positions ⌊T/2⌋..T − 1 and early = positions 1..⌈T/10⌉
(position 0 left out: there the bigram strategy has seen no transition and is uniform), q the model's prediction
over the k tokens, every KL a mean over the window per (id draw, sequence) and every interval 95 % over id draws
× sequences (Student t over the per-draw means for the differences below; over sequences with one draw):

- **learns the chains in context** when all three paired differences have intervals entirely below 0:
  late KL(true ‖ q) − late KL(true ‖ uniform) (it beats guessing uniformly over the k tokens: the other two are
  relative, and a model far worse than uniform can still pass them); late KL(bigram ‖ q) − late KL(unigram ‖ q)
  (closer to the bigram strategy than to the unigram one: it reads the successors of the current token, not only
  the tokens' frequencies); and late KL(true ‖ q) − early KL(true ‖ q) (its predictions approach the sequence's
  own chain as it reads more of it). The last reads the truth, not the bigram strategy: a Bayes-optimal model sits
  at the bigram strategy from the start and would not move closer. Otherwise the verdict names each condition
  that failed, with its numbers. Late KL(true ‖ q) is reported beside late KL(true ‖ uniform) and
  KL(true ‖ bigram), the strategies' own distances to the truth on the same sequences.
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

from induction_probes.circuits.threads import thread_policy
from induction_probes.probes.attention.patterns import chance_scores
from induction_probes.probes.intervals import Estimate
from induction_probes.probes.lm.markov.markov_measure import (
    INTERVAL_METHODS,
    REFERENCES,
    STRATEGIES,
    HeadScore,
    MarkovBehaviour,
    behaviour,
    draws_pass,
    head_scores,
    reference_key,
)
from induction_probes.probes.lm.markov.markov_protocol import MarkovDraws, MarkovTokens, as_draws, markov_draws
from induction_probes.probes.lm.progress_bars import progress_bar
from induction_probes.probes.lm.protocols import estimate_json
from induction_probes.probes.tidy import Tidy, row

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


@dataclass(frozen=True)
class Condition:
    """One condition of "learns the chains in context": a paired difference whose interval must lie below 0."""

    name: str  # the JSON key
    difference: str  # what is subtracted, as the text writes it
    failure: str  # what failing it says of the model
    estimate: Estimate

    @property
    def holds(self) -> bool:
        return self.estimate.high is not None and self.estimate.high < 0

    def evidence(self) -> str:
        return f"{self.difference} = {interval(self.estimate)}"


@dataclass(frozen=True, eq=False)
class MarkovProbe(Tidy):
    """Every ICL-MC probe of one model (or checkpoint ``step``) and the verdict (module docstring). ``to_frame()``:
    one row per KL (``kl_true_late``: KL(true ‖ model) over the late window), reference, verdict difference and
    (head, score), with its interval (:mod:`induction_probes.probes.tidy`)."""

    step: int | None
    protocol: MarkovDraws
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

    def reference(self, strategy: str, window: str = "late") -> Estimate:
        """Mean KL(true ‖ strategy) over the ``window`` positions: what KL(true ‖ q) would be at that strategy."""
        return self.behaviour.window(reference_key(strategy), getattr(self, window))

    @property
    def intervals(self) -> str:
        """What every interval covers, and how it is computed (:mod:`.markov_measure` says why)."""
        return f"{self.protocol.coverage}: {INTERVAL_METHODS}"

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
    def truth_minus_uniform(self) -> Estimate:
        return self.behaviour.paired(("true", self.late), (reference_key("uniform"), self.late))

    def conditions(self) -> list[Condition]:
        """The verdict's three conditions (module docstring), in the order the text gives them."""
        return [
            Condition(
                "true_minus_uniform_late",
                "late KL(true || model) - KL(true || uniform)",
                "it does not beat uniform guessing",
                self.truth_minus_uniform,
            ),
            Condition(
                "bigram_minus_unigram_late",
                "late KL(bigram || model) - KL(unigram || model)",
                "it is not closer to the bigram strategy than to the unigram one",
                self.bigram_minus_unigram,
            ),
            Condition(
                "true_late_minus_early",
                "KL(true || model) late - early",
                "its KL to the true chain does not fall from the early positions to the late",
                self.truth_late_minus_early,
            ),
        ]

    @property
    def learns_in_context(self) -> bool:
        return all(c.holds for c in self.conditions())

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

    def truth_references(self) -> str:
        """Late KL(true ‖ model) beside the uniform and bigram strategies' own."""
        model = interval(self.kl("true"))
        uniform, bigram = (interval(self.reference(s)) for s in REFERENCES)
        return f"late KL(true || model) = {model}, KL(true || uniform) = {uniform}, KL(true || bigram) = {bigram}"

    def verdict(self) -> str:
        """The verdict in one sentence: each failed condition with its numbers, then the conditions that held,
        KL(true ‖ model) beside its references, and what the intervals cover."""
        conditions = self.conditions()
        failed = [f"{c.failure} ({c.evidence()}, not below 0)" for c in conditions if not c.holds]
        said = "learns the chains in context" if not failed else "does not learn the chains in context: "
        held = [c.evidence() for c in conditions if c.holds]
        numbers = [f"{'held' if failed else 'conditions'}: {', '.join(held)}"] if held else []
        numbers = "; ".join([*numbers, self.truth_references(), f"intervals {self.protocol.coverage}"])
        heads = (
            f"statistical induction heads: {labels(self.induction_heads) or 'none'}; "
            f"previous-token heads: {labels(self.previous_token_heads) or 'none'}"
        )
        return f"{said}{'; '.join(failed)} ({numbers}); {heads}"

    def to_records(self, sequences_seen: int | None = None) -> list[dict]:
        def model_row(measure: str, e: Estimate) -> dict:
            return row(self.step, sequences_seen, None, None, measure, e.value, e.low, e.high)

        windows = ("early", "late")
        rows = [model_row(f"kl_{name}_{w}", self.kl(name, w)) for name in STRATEGIES for w in windows]
        rows += [model_row(f"kl_true_{s}_{w}", self.reference(s, w)) for s in REFERENCES for w in windows]
        rows += [model_row("mass", self.mass)] + [model_row(c.name, c.estimate) for c in self.conditions()]
        for h in self.heads:
            rows += [row(self.step, sequences_seen, h.layer, h.head, s, *estimate_parts(getattr(h, s))) for s in SCORES]
        return rows

    def to_json(self) -> dict:
        curves = {name: curve_json(self.behaviour, name) for name in ("mass", *STRATEGIES)}
        references = {
            s: {w: estimate_json(self.reference(s, w)) for w in ("early", "late")}
            | {"per_position": curve_json(self.behaviour, reference_key(s))}
            for s in REFERENCES
        }
        return {
            "step": self.step,
            "protocol": self.protocol.to_json(),
            "windows": {"early": span(self.early), "late": span(self.late)},
            "mass": {"mean": estimate_json(self.mass), "per_position": curves["mass"]},
            "kl": {
                name: {w: estimate_json(self.kl(name, w)) for w in ("early", "late")} | {"per_position": curves[name]}
                for name in STRATEGIES
            },
            "references": references,
            "intervals": self.intervals,
            "chance": dict(self.chance),
            "thresholds": {score: self.threshold(score) for score in ("bigram_matching", "previous_token")},
            "heads": [head_json(h) for h in self.heads],
            "induction_heads": labels(self.induction_heads).split(", ") if self.induction_heads else [],
            "previous_token_heads": labels(self.previous_token_heads).split(", ") if self.previous_token_heads else [],
            "learns_in_context": self.learns_in_context,
            "verdict": {
                "learns_in_context": self.learns_in_context,
                **{c.name: estimate_json(c.estimate) for c in self.conditions()},
                "failed": [c.name for c in self.conditions() if not c.holds],
                "late_kl_to_truth": {"model": estimate_json(self.kl("true"))}
                | {s: estimate_json(self.reference(s)) for s in REFERENCES},
                "text": self.verdict(),
            },
        }


def labels(heads: list[tuple[int, int]]) -> str:
    return ", ".join(f"L{layer}H{head}" for layer, head in heads)


def interval(estimate: Estimate, digits: int = 3) -> str:
    if estimate.low is None:
        return f"{estimate.value:.{digits}f}"
    return f"{estimate.value:.{digits}f} [{estimate.low:.{digits}f}, {estimate.high:.{digits}f}]"


def estimate_parts(estimate: Estimate) -> tuple[float, float | None, float | None]:
    return estimate.value, estimate.low, estimate.high


def curve_json(behaviour: MarkovBehaviour, name: str) -> dict:
    value, low, high = behaviour.curve(name)
    return {"value": value.tolist(), "low": low.tolist(), "high": high.tolist()}


def head_json(head: HeadScore) -> dict:
    scores = {score: estimate_json(getattr(head, score)) for score in SCORES}
    return {"head": head.label, "layer": head.layer, "index": head.head} | scores


def probe_markov(
    model: HookedModel,
    protocol: MarkovDraws | MarkovTokens,
    step: int | None = None,
    progress: bool = False,
    threads: int | None = None,
) -> MarkovProbe:
    """Every ICL-MC probe of a booted ``model`` on ``protocol``'s sequences (:func:`markov_draws`, or one draw of
    :func:`~.markov_protocol.markov_tokens`), and the verdict. ``model``: a TransformerBridge, our
    HookedTransformer, or any hooked model with ``blocks.{l}.attn.hook_pattern`` whose call gives logits.
    ``progress``: a bar on stderr over the sequences, where stderr is a terminal or a notebook's. ``threads``: torch
    threads, by default :mod:`~induction_probes.circuits.threads`' policy."""
    protocol = as_draws(protocol)
    where = "chains" if step is None else f"chains, step {step}"
    with thread_policy(model, threads), progress_bar(protocol.tokens.shape[0], where, progress) as bar:
        chain = draws_pass(model, protocol, bar)
    chance = chance_scores(protocol.tokens)  # pooled over every draw's sequences, as the head scores are
    return MarkovProbe(step, protocol, behaviour(chain, protocol), head_scores(chain), chance)


def probe_markov_series(
    models: Iterable[tuple[int | None, HookedModel]],
    protocol: MarkovDraws | MarkovTokens | dict,
    progress: bool = False,
    count: int | None = None,
    threads: int | None = None,
) -> Iterator[MarkovProbe]:
    """:func:`probe_markov` of each (step, model) in turn on the same sequences: ``protocol`` itself, or the
    options of :func:`markov_draws` (``k``, ``n_seqs``, ``seq_len``, ``seed``, ``tokens``, ``id_draws``), drawn
    for the first model. ``models`` may boot each model lazily (a generator), so that one is in memory at a
    time. ``progress``: bars on stderr, over the ``count`` checkpoints (when several) and each one's sequences."""
    with progress_bar(count, "checkpoints", progress and count != 1, unit="checkpoint", leave=True) as bar:
        for step, model in models:
            bar.set_postfix_str(f"step {step}")
            if isinstance(protocol, dict):
                protocol = markov_draws(model, **protocol)
            yield probe_markov(model, protocol, step, progress, threads)
            bar.update()
