"""A run's research questions, one call each.

- :func:`phases` — which strategy is the model closest to, and from when to when?
- :func:`transition` — when does the model make its (last) change of strategy?
- :func:`first_crossings` — at which step does each head's progress measure and probe score first reach
  its threshold, i.e. which piece of the circuit forms first?
- :func:`align_runs` — how do two runs compare, counted from their transitions or within their phases?

Phases and the transition are read from the run's ``metrics.jsonl`` (its own evaluation set, written
during training), at no cost; crossings need the probes of the run's checkpoints
(:func:`induction_probes.probes.run_level.all_probes.probe_run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.runs.reader import Run
from induction_probes.probes.behaviour.icl_behaviour import Phase, strategy_phases
from induction_probes.probes.progress.progress_measures import SCALAR_MEASURES, config_calibration
from induction_probes.probes.run_level.all_probes import probe_run
from induction_probes.probes.tidy import crossing_step, first_reached, frame, row

if TYPE_CHECKING:
    import pandas as pd

    from induction_probes.probes.run_level.run_probes import CheckpointResult, RunProbes

CROSSING_COLUMNS = [
    "measure", "layer", "head", "chance", "ideal", "threshold", "step", "sequences_seen", "first_reached", "caveat",
]  # fmt: skip


def phases(run: Run) -> list[Phase]:
    """Which strategy is the model closest to, and from when to when? Consecutive checkpoints grouped by
    the strategy with the smallest last-token KL to the model
    (:func:`~induction_probes.probes.behaviour.icl_behaviour.strategy_phases`)."""
    return strategy_phases(run.metrics())


@dataclass(frozen=True)
class Transition:
    """The run's phase transition: the first checkpoint of its last phase."""

    step: int
    sequences_seen: int
    before: str  # the strategy of the phase it leaves
    after: str  # the strategy it keeps to the end of training


def transition(run: Run) -> Transition | None:
    """When does the model make its last change of strategy?

    Definition: the first checkpoint from which the model's closest strategy (smallest last-token KL, on
    the run's evaluation set) stays the one it has at the end of training, that is the first step of the
    last phase; ``before`` is the strategy of the phase just before. None for a run that never leaves its
    first phase. (A run that flickers between strategies has its transition at the last flicker.)
    """
    found = phases(run)
    if len(found) < 2:
        return None
    last, before = found[-1], found[-2]
    return Transition(last.first_step, last.first_sequences, before.strategy, last.strategy)


def first_crossings(probes: RunProbes[CheckpointResult] | Run) -> pd.DataFrame:
    """At which step does each head's progress measure and attention-probe score cross its threshold to stay?

    ``probes`` is what :func:`~induction_probes.probes.run_level.all_probes.probe_run` returns (probe the run's steps
    you care about; every checkpoint gives the exact step), or a run, all of whose checkpoints are then
    probed on the default probe set (minutes for a run of 150 checkpoints). One row per (measure, layer, head) as a
    DataFrame with CROSSING_COLUMNS: progress measures (thresholds halfway from chance to Proposition 2.1,
    :func:`~induction_probes.probes.progress.progress_measures.calibration`; the composition of each pair as
    ``to_frame()`` names it,
    ``composition_K_from_L0H0`` on the layer-1 head's row)
    and attention probes (halfway from uniform attention on the probe set to 1,
    :func:`~induction_probes.probes.run_level.run_probes.probe_calibration`). ``step``: the first probed step from
    which the value stays at or above the threshold (empty where the last is below it); ``first_reached``: the first
    at or above it at all, earlier where a transient excursion came first; ``caveat`` carries the run's warning
    about that measure, if any.
    """
    if isinstance(probes, Run):
        probes = probe_run(probes)
    steps, rows = probes.steps, []
    seen = {step: probes.run.entry(step)["sequences_seen"] for step in steps}

    def add(measure, layer, head, values, calibrated):
        step = crossing_step(steps, values, calibrated.threshold)  # from where it stays at or above
        caveat = next((line for line in probes.warnings if line.startswith(f"{measure} ")), None)
        rows.append(
            {
                "measure": measure,
                "layer": layer,
                "head": head,
                "chance": calibrated.chance,
                "ideal": calibrated.construction,
                "threshold": calibrated.threshold,
                "step": step,
                "sequences_seen": None if step is None else seen[step],
                "first_reached": first_reached(steps, values, calibrated.threshold),
                "caveat": caveat,
            }
        )

    for name, measure in probes.calibration().items():
        for layer, heads in enumerate(getattr(probes[0], name)):
            for head in range(len(heads)):
                add(name, layer, head, [getattr(c, name)[layer][head].item() for c in probes], measure)
    progress = [p for c in probes if (p := getattr(c, "progress", None)) is not None]  # ICL-MC's, not other tasks'
    if progress and len(progress) == len(probes):
        for name, measure in config_calibration(probes.run.model_config).items():
            if name.startswith("composition_"):  # per pair, named as to_frame() names it: composition_K_from_L0H0
                mode = name.removeprefix("composition_")
                for source, targets in enumerate(progress[0].composition[mode]):
                    for target in range(len(targets)):
                        values = [p.composition[mode][source][target] for p in progress]
                        add(f"{name}_from_L0H{source}", 1, target, values, measure)
                continue
            if name not in SCALAR_MEASURES:
                add(name, None, None, [p.value(name) for p in progress], measure)
                continue
            layer = 0 if name == "previous_token_match" else 1
            for head in range(len(getattr(progress[0], name))):
                add(name, layer, head, [getattr(p, name)[head] for p in progress], measure)
    return frame(rows, CROSSING_COLUMNS)


ALIGNMENTS = ("transition", "phase")


def metrics_records(run: Run) -> list[dict]:
    """The run's own evaluations (``metrics.jsonl``) in long form: eval_loss and last_token_kl.<strategy>."""
    rows = []
    for entry in run.metrics():
        step, seen = entry["step"], entry["sequences_seen"]
        rows.append(row(step, seen, None, None, "eval_loss", entry["eval_loss"]))
        rows += [
            row(step, seen, None, None, f"last_token_kl.{name}", value)
            for name, value in entry["last_token_kl"].items()
        ]
    return rows


def align_runs(runs: Mapping[str, Run | RunProbes[CheckpointResult]], by: str = "transition") -> pd.DataFrame:
    """How do runs compare, counted from their transitions or within their phases?

    ``runs`` maps a name to a :class:`~induction_probes.circuits.runs.reader.Run` (its metrics.jsonl is
    aligned) or to what ``probe_run`` returned (its probe rows are). One long DataFrame of every run's
    rows with a ``run`` column, the checkpoint's ``phase`` (strategy) and ``phase_index``, and the
    aligned coordinate: with ``by="transition"``, ``steps_from_transition`` and
    ``sequences_from_transition`` (negative before it; a run without a transition is an error); with
    ``by="phase"``, ``phase_fraction``, 0 at a phase's first checkpoint and 1 at its last.
    """
    if by not in ALIGNMENTS:
        raise BadInput(f"align by transition or phase, not {by!r}")
    rows = []
    for name, item in runs.items():
        run = item if isinstance(item, Run) else item.run
        records = metrics_records(run) if isinstance(item, Run) else item.to_records()
        place = aligner(run, by)
        rows += [r | {"run": name} | place(r["step"], r["sequences_seen"]) for r in records]
    return frame(rows)


def aligner(run: Run, by: str):
    """A function giving one checkpoint's aligned coordinates (see :func:`align_runs`), from the run's
    phases and transition read once."""
    found, moment = phases(run), transition(run)
    if by == "transition" and moment is None:
        raise BadInput(
            f"run {run.path.name} never leaves its first phase ({found[0].strategy}): no transition to align by"
        )

    def coordinates(step: int, seen: int) -> dict:
        index = next(i for i, p in enumerate(found) if p.first_step <= step <= p.last_step)
        phase = found[index]
        place = {"phase": phase.strategy, "phase_index": index}
        if by == "phase" or moment is None:  # no moment: by phase, as refused above otherwise
            span = phase.last_step - phase.first_step
            return place | {"phase_fraction": 0.0 if span == 0 else (step - phase.first_step) / span}
        return place | {
            "steps_from_transition": step - moment.step,
            "sequences_from_transition": seen - moment.sequences_seen,
        }

    return coordinates
