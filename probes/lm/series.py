"""Every induction probe of one language model (:func:`probe`), and the same over a training run's checkpoints,
loaded one at a time, on the same repeated random tokens at every step (one seed; the vocabulary is the same
across a run's checkpoints)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from induction_probes.circuits.common.defaults import LM_PROBE_SEQS, PROBE_SEED
from induction_probes.circuits.common.names import head_label
from induction_probes.circuits.interop.language_models import load_bridge
from induction_probes.circuits.interop.model_sources import ModelSource
from induction_probes.probes.lm.measure import HeadScores, evaluate
from induction_probes.probes.lm.progress import progress_bar
from induction_probes.probes.lm.protocols import InductionLoss, RepeatedTokens, repeated_random_tokens
from induction_probes.probes.lm.roles import (
    THRESHOLD,
    Composition,
    HeadRole,
    compositions,
    head_roles,
    heads_labelled,
)

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel


@dataclass(frozen=True, eq=False)
class StepProbes:
    """Every probe of one checkpoint on repeated random tokens: scores, losses, each head's role and the
    composition check of the induction heads found."""

    step: int | None
    repeated: RepeatedTokens
    scores: HeadScores
    loss: InductionLoss
    threshold: float
    roles: list[HeadRole]
    compositions: list[Composition]

    @property
    def induction_heads(self) -> list[tuple[int, int]]:
        return heads_labelled(self.roles, "induction", self.scores, "content")

    @property
    def previous_token_heads(self) -> list[tuple[int, int]]:
        return heads_labelled(self.roles, "previous-token", self.scores, "previous_token")

    def best(self, score: str) -> tuple[int, int, float]:
        return self.scores.ranked(score)[0]

    def to_json(self) -> dict:
        heads = [
            {"head": head_label(r.layer, r.head), "layer": r.layer, "index": r.head}
            | self.scores.to_json(r.layer, r.head)
            | r.to_json()
            for r in self.roles
        ]
        return {
            "step": self.step,
            "lengths": list(self.repeated.length_range),
            "induction_heads": [head_label(*h) for h in self.induction_heads],
            "previous_token_heads": [head_label(*h) for h in self.previous_token_heads],
            "heads": heads,
            "compositions": [c.to_json() for c in self.compositions],
            **self.loss.to_json(),
        }


def probe_tokens(
    model: HookedModel,
    repeated: RepeatedTokens,
    step: int | None = None,
    threshold: float = THRESHOLD,
    progress: bool = False,
) -> StepProbes:
    """Every probe of ``model`` on the sequences ``repeated``; ``progress``: a bar on stderr (a terminal's)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"the threshold is a share of attention in (0, 1], got {threshold!r}")
    where = "probing" if step is None else f"probing step {step}"
    with progress_bar(2 * repeated.tokens.shape[0], where, progress) as bar:
        scores, loss = evaluate(model, repeated, bar)
        roles = head_roles(scores, threshold)
        induction = heads_labelled(roles, "induction", scores, "content")
        previous = heads_labelled(roles, "previous-token", scores, "previous_token")
        found = compositions(model, repeated, scores, induction, previous, bar)
    return StepProbes(step, repeated, scores, loss, threshold, roles, found)


def probe(
    model: HookedModel,
    step: int | None = None,
    length: int | tuple[int, int] | None = None,
    batch: int = LM_PROBE_SEQS,
    seed: int = PROBE_SEED,
    bos: bool | None = None,
    threshold: float = THRESHOLD,
    progress: bool = False,
) -> StepProbes:
    """Every probe of one booted model on :func:`repeated_random_tokens` (``length``: |R|, one value or a range;
    by default 10..50 within the context); ``progress``: a bar on stderr (a terminal's)."""
    repeated = repeated_random_tokens(model, length, batch, seed, bos)
    return probe_tokens(model, repeated, step, threshold, progress)


def probe_series(
    checkpoints: Iterable[ModelSource], device: str = "cpu", progress: bool = False, **protocol
) -> Iterator[StepProbes]:
    """:func:`probe` of each checkpoint in turn, booting one at a time (``protocol``: its options); ``progress``:
    a bar over the checkpoints, and one over each checkpoint's passes."""
    checkpoints = list(checkpoints)
    with progress_bar(len(checkpoints), "checkpoints", progress, unit="checkpoint", leave=True) as bar:
        for source in checkpoints:
            bar.set_postfix_str(f"step {source.step}")
            yield probe(load_bridge(source, device), source.step, progress=progress, **protocol)
            bar.update()
