"""What ``induction-probes llc --per-head`` shows: the weight-refined learning coefficient of every attention
head, the embedding and the unembedding of an ICL-MC run's checkpoints
(:func:`~induction_probes.probes.llc.per_head.per_head_llc`), beside the strategy phases and the progress
measures' first crossings, with the block calibration at the same settings. Callable from Python with the
command's text and JSON:

>>> per_head_report("markov-k3", steps=[606, 4000], n_seqs=512, chains=4, as_json=True)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

from induction_probes.circuits.common.defaults import PROBE_SEED
from induction_probes.circuits.runs.reader import Run, RunOrPath, as_run
from induction_probes.probes.figures.plots_llc import plot_per_head_llc
from induction_probes.probes.llc.chain_intervals import RANGE_FLAGS
from induction_probes.probes.llc.per_head import calibrate_blocks, per_head_llc
from induction_probes.probes.progress.progress_measures import progress_measures
from induction_probes.probes.report.llc import (
    CHECKPOINTS,
    N_SEQS,
    chosen_steps,
    diagnostics,
    estimator_settings,
    number,
)
from induction_probes.probes.report.markov_probes import progress_thresholds
from induction_probes.probes.report.tables import figure_lines, format_table, provenance


def per_head_report(
    run: RunOrPath,
    *,
    checkpoints: int = CHECKPOINTS,
    steps: list[int] | None = None,
    blocks: list[str] | None = None,
    n_seqs: int = N_SEQS,
    seed: int = PROBE_SEED,
    device: str = "cpu",
    plot: str | os.PathLike | None = None,
    as_json: bool = False,
    **overrides,
) -> str | dict:
    """The refined LLC of ``blocks`` (default every head, ``embed`` and ``unembed``) at ``steps`` (default
    ``checkpoints`` of them) on ``n_seqs`` fresh sequences of ``seed``; ``overrides`` replace the rule's
    settings, the same for every block (:data:`~induction_probes.probes.llc.overrides.OVERRIDES`). Bad input
    raises ValueError before any sampling."""
    run = as_run(run)
    settings = estimator_settings(overrides, seed, n_seqs)
    if run.task.name != "markov":
        raise ValueError(f"run {run.path.name} is not an ICL-MC run: the llc command samples a next-token loss")
    steps = chosen_steps(run, steps, checkpoints)
    result = per_head_llc(run, steps, n_seqs=n_seqs, blocks=blocks, device=device, **settings)
    crossings = progress_crossings(run)
    calibration = {"settings": settings, "cases": calibrate_blocks(**settings)}
    figures = [plot_blocks(run, result.rows, crossings, Path(plot))] if plot is not None else []
    if as_json:
        answer = result.to_json() | {"progress_thresholds": crossings, "calibration": calibration}
        return provenance(run, steps, n_seqs, seed) | answer
    return "\n".join([text(run, settings, result.rows, crossings, calibration), *figure_lines(figures)])


def progress_crossings(run: Run) -> dict:
    """Each progress measure's first crossing of its threshold over all of the run's checkpoints (read from the
    weights alone, so every checkpoint costs a load, not a forward pass)."""
    return progress_thresholds(run, [progress_measures(run.load(step=step), step) for step in run.steps])


def text(run: Run, settings: dict, rows: list[dict], crossings: dict, calibration: dict) -> str:
    names = list(dict.fromkeys(r["block"] for r in rows))
    by_step: dict[int, dict[str, dict]] = {}
    for row in rows:
        by_step.setdefault(row["step"], {})[row["block"]] = row
    table = [
        [step, next(iter(cells.values()))["sequences_seen"], *(cell(cells.get(name)) for name in names)]
        for step, cells in by_step.items()
    ]
    crossed = ", ".join(
        f"{name} at step {c['first_step']}" if c["first_step"] is not None else f"{name} never"
        for name, c in crossings.items()
    )
    cases = "; ".join(f"{case['case']}: {blocks_read(case['blocks'])}" for case in calibration["cases"])
    flagged = [f"step {r['step']} {r['block']}: {diagnostics(r)}" for r in rows if r["problems"] or r["flags"]]
    return "\n".join(
        [
            f"run {run.path.name}: refined local learning coefficient per block (LLC [95 % interval over chains, "
            "not clipped to [0, d/2]: flagged where it leaves it]; "
            f"settings given: {settings}; the rest by the rule)",
            format_table(["step", "sequences", *names], table),
            *(f"  {line}" for line in flagged),
            f"progress measures first reach their thresholds: {crossed}",
            f"calibration at the same settings: {cases}",
        ]
    )


def blocks_read(blocks: list[dict]) -> str:
    """Each calibration block's estimate, its interval where it has one (the whole model has none) and any flag
    of its leaving [0, d/2], beside its truth."""

    def read(b: dict) -> str:
        low, high = b.get("interval") or (None, None)
        shown = number(b["llc"]) if low is None else f"{number(b['llc'])} [{number(low)}, {number(high)}]"
        marks = [flag.split(":")[0] for flag in b.get("flags", []) if flag.startswith(RANGE_FLAGS)]
        return shown + "".join(f" ({mark})" for mark in marks)

    return ", ".join(f"{b['block']} {read(b)} (truth {b['truth']:g})" for b in blocks)


def cell(row: dict | None) -> str:
    if row is None:
        return "-"
    if row["llc"] is None:
        return "refused"
    mark = " *" if row["flags"] else ""
    low, high = row["interval"] or (None, None)
    return f"{row['llc']:.3g} [{number(low)}, {number(high)}]{mark}"


def plot_blocks(run: Run, rows: list[dict], crossings: dict, directory: Path) -> Path:
    name = run.path.name
    return plot_per_head_llc(rows, run.metrics(), crossings, name, directory / f"{name}_llc_per_head.png")
