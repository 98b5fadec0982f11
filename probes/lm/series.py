"""The same probes over a language model's training checkpoints, loaded one at a time, on the same
repeated random tokens at every step (one seed; the vocabulary is the same across a run's checkpoints)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from induction_probes.circuits.interop.language_models import ModelSource, load_bridge
from induction_probes.probes.lm.measure import HeadScores, evaluate
from induction_probes.probes.lm.protocols import InductionLoss, repeated_random_tokens


@dataclass(frozen=True)
class StepProbes:
    """Every probe of one checkpoint on repeated random tokens."""

    step: int | None
    scores: HeadScores
    loss: InductionLoss

    def best(self, score: str) -> tuple[int, int, float]:
        return self.scores.ranked(score)[0]

    def to_json(self) -> dict:
        return {"step": self.step, **self.scores.to_json(), **self.loss.to_json()}


def probe_model(
    model, step: int | None = None, length: int = 50, batch: int = 16, seed: int = 0, bos: bool | None = None
) -> StepProbes:
    """Head scores and induction losses of one booted model on :func:`repeated_random_tokens`."""
    scores, loss = evaluate(model, repeated_random_tokens(model, length, batch, seed, bos))
    return StepProbes(step, scores, loss)


def probe_series(checkpoints: Iterable[ModelSource], device: str = "cpu", **protocol) -> Iterator[StepProbes]:
    """:func:`probe_model` of each checkpoint in turn, booting one at a time (``protocol``: its options)."""
    for source in checkpoints:
        yield probe_model(load_bridge(source, device), source.step, **protocol)
