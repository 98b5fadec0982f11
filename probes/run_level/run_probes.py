"""A whole run's probes as one result: the checkpoints in step order, their tidy table, the chance level
of each attention probe on the probe set, and the caveats of the run's measures.

What :func:`induction_probes.probes.run_level.all_probes.probe_run` returns. It is a sequence of
:class:`~induction_probes.probes.run_level.checkpoint_probes.CheckpointProbes` (``list(probe_run(...))`` and
``for c in ...`` work as before), with ``to_frame()`` / ``to_records()`` in the long form of
:mod:`induction_probes.probes.tidy`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, overload

from induction_probes.circuits.defaults import PROBE_SEED
from induction_probes.circuits.runs.reader import Run
from induction_probes.probes.attention.patterns import chance_scores
from induction_probes.probes.attention.probe_registry import PROBES
from induction_probes.probes.progress.crossing_caveats import initial_model_of, progress_warnings
from induction_probes.probes.progress.progress_measures import Measure
from induction_probes.probes.run_level.attention_example import run_attention
from induction_probes.probes.tidy import COLUMNS, Tidy, checked_seen
from induction_probes.probes.views.explorer import AttentionExample

if TYPE_CHECKING:
    from torch import Tensor

PROBE_MEASURES = PROBES.where(calibrated=True)  # the probes whose chance level chance_scores gives


def probe_calibration(chance: dict[str, float]) -> dict[str, Measure]:
    """Each attention probe's chance value (attention spread evenly over the keys j ≤ i, on the probe set),
    its ideal value 1 (all attention where the score looks), and the threshold halfway between (none where
    ``chance`` has none: a Gaussian-task run's probes are not the token probes)."""
    return {name: Measure(name, chance[name], 1.0) for name in PROBE_MEASURES if name in chance}


class CheckpointResult(Protocol):
    """What a run's probes hold per checkpoint: a task's own result class (``CheckpointProbes`` for ICL-MC,
    ``GaussianProbes``, ``TaskProbes`` for a task without probes of its own), with its step and tidy rows."""

    @property
    def step(self) -> int: ...

    def to_records(self, sequences_seen: int | None = None) -> list[dict[str, Any]]: ...

    def to_json(self) -> dict[str, Any]: ...


Result = TypeVar("Result", bound=CheckpointResult, covariant=True)  # the result class of one task's checkpoints


@dataclass(frozen=True)
class RunProbes(Tidy, Sequence[Result], Generic[Result]):
    """Probes of a run's checkpoints, ordered by step; each a ``Result``, the class its task's probe gives."""

    run: Run
    checkpoints: Sequence[Result] = field(repr=False)  # one per probed step
    chance: dict[str, float]  # PROBE_MEASURES of uniform attention on the probe set
    warnings: list[str]  # caveats of the measures: at threshold at initialisation, or few values

    @classmethod
    def collect(cls, run: Run, tokens: Tensor, checkpoints: Sequence[Result]) -> RunProbes[Result]:
        chance = chance_scores(tokens)
        return cls(run, checkpoints, chance, run_warnings(run, checkpoints, chance))

    @overload
    def __getitem__(self, index: int) -> Result: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Result]: ...

    def __getitem__(self, index: int | slice) -> Result | Sequence[Result]:
        return self.checkpoints[index]

    def __len__(self) -> int:
        return len(self.checkpoints)

    @property
    def steps(self) -> list[int]:
        return [c.step for c in self.checkpoints]

    def attention(self, step: int | None = None) -> AttentionExample:
        """Every head's pattern at ``step`` (default the last probed) on one of 100 sequences of the run's task drawn
        with the probe seed: CircuitsVis's explorer, offline, in a notebook (``_repr_html_``) or as ``.html()``."""
        inputs = self.run.task.eval_set(100, PROBE_SEED).inputs
        return run_attention(self.run, self.steps[-1] if step is None else step, inputs)

    def _repr_html_(self) -> str:
        return self.attention()._repr_html_() if self.checkpoints else "<p>no checkpoint probed</p>"

    def calibration(self) -> dict[str, Measure]:
        """:func:`probe_calibration` on this run's probe set."""
        return probe_calibration(self.chance)

    def to_records(self, sequences_seen: int | None = None) -> list[dict[str, Any]]:
        """Every checkpoint's rows, each with the sequences the run had seen at that step (its manifest's count,
        whatever ``sequences_seen`` says; checked all the same, as every result's is)."""
        checked_seen(sequences_seen)
        return [r for c in self.checkpoints for r in c.to_records(self.run.entry(c.step)["sequences_seen"])]

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run.path.name,
            "columns": COLUMNS,
            "records": self.to_records(),
            "chance": self.chance,
            "warnings": self.warnings,
        }


def run_warnings(run: Run, checkpoints: Sequence, chance: dict[str, float]) -> list[str]:
    """Caveats of the progress measures (:mod:`induction_probes.probes.progress.crossing_caveats`: the run's step 0 is
    its
    initialisation), and the attention probes already at or past their threshold at the run's first step."""
    if not checkpoints:
        return []
    first = run.steps[0]
    initial = run.load(step=first) if first == 0 else None
    last = run.load(step=checkpoints[-1].step)
    lines = progress_warnings(last, initial if initial is not None else initial_model_of(last))
    start = next((c for c in checkpoints if c.step == first), None)
    if start is None:
        return lines
    for name, measure in probe_calibration(chance).items():
        for layer, values in enumerate(start.scores[name]):
            if values.max().item() >= measure.threshold:
                lines.append(
                    f"{name} of layer {layer} is {values.max().item():.3f} at step {first}, at or past its "
                    f"threshold {measure.threshold:.3f}: its first crossing says nothing about training"
                )
    return lines
