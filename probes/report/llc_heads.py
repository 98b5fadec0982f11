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
from typing import Any

from induction_probes.circuits.defaults import PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.runs.reader import Run, RunOrPath, as_run
from induction_probes.probes.figures.plots_llc import plot_per_head_llc
from induction_probes.probes.llc.block_calibration import calibrate_blocks, gate_cases
from induction_probes.probes.llc.chain_intervals import RANGE_FLAGS, change_between
from induction_probes.probes.llc.gate import FAILS, gate, marked, quarter_label
from induction_probes.probes.llc.per_head import per_head_llc
from induction_probes.probes.llc.resolution import SERIES
from induction_probes.probes.progress.progress_measures import progress_measures
from induction_probes.probes.report.llc_views import (
    CHECKPOINTS,
    N_SEQS,
    chosen_steps,
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
    data_draws: int = 1,
    device: str = "cpu",
    plot: str | os.PathLike[str] | None = None,
    as_json: bool = False,
    **overrides: float | None,
) -> str | dict[str, Any]:
    """The refined LLC of ``blocks`` (default every head, ``embed`` and ``unembed``) at ``steps`` (default
    ``checkpoints`` of them) on ``n_seqs`` fresh sequences of ``seed`` (and ``data_draws − 1`` further draws,
    as many chains on each); ``overrides`` replace the rule's settings, the same for every block
    (:data:`~induction_probes.probes.llc.overrides.OVERRIDES`). Over several steps each block has one γ for all
    of them, and ``changes`` compares each later step with the first at γ and at γ/4. The calibration at the
    same settings gates: where it misses, every row is marked. Bad input raises ValueError before any
    sampling."""
    run = as_run(run)
    settings = estimator_settings(overrides, seed, n_seqs)
    if run.task.name != "markov":
        raise BadInput(f"run {run.path.name} is not an ICL-MC run: the llc command samples a next-token loss")
    steps = chosen_steps(run, steps, checkpoints)
    result = per_head_llc(run, steps, n_seqs=n_seqs, data_draws=data_draws, blocks=blocks, device=device, **settings)
    crossings = progress_crossings(run)
    cases = calibrate_blocks(n=n_seqs, **settings)
    calibration = {"settings": settings, "n": n_seqs, "cases": cases, "gate": gate(gate_cases(cases))}
    calibration["gate_quarter"] = gate(gate_cases(cases, quarter=True))
    rows = labelled(marked(result.rows, calibration["gate"]), calibration["gate_quarter"])
    figures = [plot_blocks(run, rows, crossings, calibration["gate"], Path(plot))] if plot is not None else []
    if as_json:
        answer = result.to_json() | {"rows": rows, "changes": changes(rows, calibration)}
        return (
            provenance(run, steps, n_seqs, seed)
            | answer
            | {"progress_thresholds": crossings, "calibration": calibration}
        )
    return "\n".join([text(run, settings, rows, crossings, calibration), *figure_lines(figures)])


def labelled(rows: list[dict], verdict: dict) -> list[dict]:
    """``rows`` with their γ/4 values labelled by the calibration at γ/4 (:func:`.gate.quarter_label`)."""
    return [
        r | {"quarter": r["quarter"] | {"calibration": quarter_label(verdict)}} if r.get("quarter") else r for r in rows
    ]


def quarter_calibrated(calibration: dict) -> bool:
    """Whether the calibration holds at γ/4 (files written before it was gated there: it is not known to)."""
    return bool((calibration.get("gate_quarter") or {}).get("holds"))


def changes(rows: list[dict], calibration: dict) -> list[dict]:
    """Each block's change from the first step to every later one, at the series' γ and at γ/4
    (:func:`~induction_probes.probes.llc.chain_intervals.change_between`): real where the interval at γ excludes
    0 and, where γ/4 is calibrated, the one at γ/4 agrees."""
    calibrated = quarter_calibrated(calibration)
    first: dict[str, dict] = {}
    found = []
    for row in rows:
        if row["llc"] is None:
            continue
        if row["block"] not in first:
            first[row["block"]] = row
            continue
        before = first[row["block"]]
        change = change_between(before, row, calibrated)
        found.append({"block": row["block"], "from": before["step"], "to": row["step"]} | change)
    return found


def progress_crossings(run: Run) -> dict:
    """Each progress measure's first crossing of its threshold over all of the run's checkpoints (read from the
    weights alone, so every checkpoint costs a load, not a forward pass)."""
    return progress_thresholds(run, [progress_measures(run.load(step=step), step) for step in run.steps])


def text(run: Run, settings: dict, rows: list[dict], crossings: dict, calibration: dict) -> str:
    crossed = ", ".join(
        f"{name} at step {c['first_step']}" if c["first_step"] is not None else f"{name} never"
        for name, c in crossings.items()
    )
    cases = "; ".join(f"{case['case']}: {blocks_read(case['blocks'])}" for case in calibration["cases"])
    mark = calibration["gate"]["mark"]
    flagged = [
        f"step {r['step']} {r['block']}: {'; '.join(r['problems'] + [f for f in r['flags'] if f != mark])}"
        for r in rows
        if r["problems"] or any(f != mark for f in r["flags"])
    ]
    return "\n".join(
        [
            f"run {run.path.name}: refined local learning coefficient per block (LLC [95 % interval over chains, "
            "not clipped to [0, d/2]: flagged where it leaves it]; "
            f"settings given: {settings}; the rest by the rule)",
            *([FAILS.upper() + mark[len(FAILS) :]] if mark else []),
            resolution_line(rows),
            table(rows, lambda row: row),
            "the same at γ/4 (the localization check, chains paired with the estimate's):",
            table(rows, lambda row: row.get("quarter")),
            *(f"  {line}" for line in flagged),
            *change_lines(changes(rows, calibration)),
            f"progress measures first reach their thresholds: {crossed}",
            f"calibration at the same settings ({calibration['gate']['tolerance']}): {cases}",
        ]
    )


def table(rows: list[dict], estimate) -> str:
    """Steps down, blocks across: ``estimate(row)`` (a record with llc, interval and flags) in each cell."""
    names = list(dict.fromkeys(r["block"] for r in rows))
    by_step: dict[int, dict[str, dict]] = {}
    for row in rows:
        by_step.setdefault(row["step"], {})[row["block"]] = row
    body = [
        [
            step,
            next(iter(cells.values()))["sequences_seen"],
            *(cell(cells.get(n) and estimate(cells[n])) for n in names),
        ]
        for step, cells in by_step.items()
    ]
    return format_table(["step", "sequences", *names], body)


def resolution_line(rows: list[dict]) -> str:
    """Which γ each block was sampled at: one for all steps (the series rule) or each step's own."""
    seen: dict[str, dict] = {}
    for row in rows:
        seen.setdefault(row["block"], row)
    if all(r["resolution"]["rule"] != SERIES for r in seen.values()):
        return "γ: the rule at each step's own curvature (per step; not for comparing steps)"
    return "γ: one per block for every step, the rule at the largest curvature over them: " + ", ".join(
        f"{name} {r['resolution']['localization']:.3g} (set by step {r['resolution']['set_by']})"
        for name, r in seen.items()
        if r["resolution"]["rule"] == SERIES
    )


def change_lines(found: list[dict]) -> list[str]:
    def shown(difference: dict | None) -> str:
        if difference is None:
            return "-"
        low, high = difference["interval"]
        return f"{difference['change']:+.3g} [{low:+.3g}, {high:+.3g}]"

    return [
        f"  {c['block']} step {c['from']} -> {c['to']}: {shown(c['at_gamma'])} at γ, "
        f"{shown(c['at_quarter_gamma'])} at γ/4: {'a change at both' if c['real'] else 'not a change at both'}"
        + "".join(f" ({flag})" for flag in c["flags"])
        for c in found
    ]


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


def plot_blocks(run: Run, rows: list[dict], crossings: dict, verdict: dict, directory: Path) -> Path:
    name = run.path.name
    path = directory / f"{name}_llc_per_head.png"
    return plot_per_head_llc(rows, run.metrics(), crossings, name, path, failing=verdict["mark"])
