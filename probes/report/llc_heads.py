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
from induction_probes.probes.llc.gate import gate, marked, quarter_label
from induction_probes.probes.llc.per_head import per_head_llc
from induction_probes.probes.llc.resolution import SERIES
from induction_probes.probes.progress.progress_measures import progress_measures
from induction_probes.probes.report.llc_text import (
    diagnostic_lines,
    failing_line,
    number,
    quarter_line,
    refusal_lines,
    wrapped,
)
from induction_probes.probes.report.llc_views import CHECKPOINTS, N_SEQS, chosen_steps, estimator_settings
from induction_probes.probes.report.markov_probe_views import progress_thresholds
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
    verbose: bool = False,
    **overrides: float | None,
) -> str | dict[str, Any]:
    """The refined LLC of ``blocks`` (default every head, ``embed`` and ``unembed``) at ``steps`` (default
    ``checkpoints`` of them) on ``n_seqs`` fresh sequences of ``seed`` (and ``data_draws − 1`` further draws,
    as many chains on each); ``overrides`` replace the rule's settings, the same for every block
    (:data:`~induction_probes.probes.llc.overrides.OVERRIDES`). Over several steps each block has one γ for all
    of them, and ``changes`` compares each later step with the first at γ and at γ/4. The calibration at the
    same settings gates: where it misses, every row is marked. ``verbose``: the text adds every diagnostic and
    calibration block. Bad input raises ValueError before any sampling."""
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
    return "\n".join([text(run, settings, rows, crossings, calibration, verbose), *figure_lines(figures)])


def labelled(rows: list[dict], verdict: dict) -> list[dict]:
    """``rows`` with their γ/4 values labelled by the calibration at γ/4
    (:func:`~induction_probes.probes.llc.gate.quarter_label`)."""
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


def text(run: Run, settings: dict, rows: list[dict], crossings: dict, calibration: dict, verbose: bool = False) -> str:
    """Every line within 100 columns: blocks down the page, one row per block and step; ``verbose`` adds every
    estimate's diagnostics and every calibration block."""
    crossed = ", ".join(
        f"{name} at step {c['first_step']}" if c["first_step"] is not None else f"{name} never"
        for name, c in crossings.items()
    )
    mark = calibration["gate"]["mark"]
    given = ", ".join(f"{k} {v}" for k, v in settings.items()) or "none"
    return "\n".join(
        [
            wrapped(
                f"run {run.path.name}: refined local learning coefficient per block, [95 % interval over "
                f"independent chains] (settings given: {given}; the rest by the rule)"
            ),
            *([wrapped(failing_line(calibration["gate"], verbose))] if mark else []),
            wrapped(resolution_line(rows)),
            wrapped(quarter_line(calibration)),
            table(rows, mark),
            wrapped(
                f"*: flagged ({'below' if verbose else '--verbose and the JSON say why'}); -: refused, at both "
                "resolutions (no value); intervals are not clipped to [0, d/2]"
            ),
            *refusal_lines([(f"step {r['step']} {r['block']}", r) for r in rows]),
            *change_lines(changes(rows, calibration)),
            wrapped(f"progress measures first reach their thresholds: {crossed}"),
            *block_calibration_lines(calibration, verbose),
            *(diagnostic_lines([(f"step {r['step']} {r['block']}", r) for r in rows], mark) if verbose else []),
        ]
    )


def table(rows: list[dict], mark: str) -> str:
    """Blocks down, each block's steps below it: the estimate at γ and at γ/4, each with its interval."""
    order = list(dict.fromkeys(r["block"] for r in rows))
    ranked = sorted(rows, key=lambda r: order.index(r["block"]))  # stable: each block's steps in their order
    body = [[r["block"], r["step"], r["sequences_seen"], cell(r, mark), cell(quarter_of(r), mark)] for r in ranked]
    return format_table(["block", "step", "sequences", "LLC [95 %]", "at γ/4 [95 %]"], body)


def quarter_of(row: dict) -> dict | None:
    """A row's estimate at γ/4, none where the estimate at γ is refused (blank at both resolutions)."""
    return row.get("quarter") if row["llc"] is not None else None


def block_calibration_lines(calibration: dict, verbose: bool) -> list[str]:
    verdict = calibration["gate"]
    held = verdict["cases"] - len(verdict["misses"])
    line = f"calibration at the same settings ({verdict['tolerance']}): {held} of {verdict['cases']} blocks hold"
    cases = [wrapped(f"  {case['case']}: {blocks_read(case['blocks'])}") for case in calibration["cases"]]
    return [wrapped(line), *(cases if verbose else [])]


def resolution_line(rows: list[dict]) -> str:
    """Which γ each block was sampled at: one for all steps (the series rule, and the step that set it) or each
    step's own."""
    seen: dict[str, dict] = {}
    for row in rows:
        seen.setdefault(row["block"], row)
    if all(r["resolution"]["rule"] != SERIES for r in seen.values()):
        return "γ: the rule at each step's own curvature (per step; not for comparing steps)"
    return "γ: one per block for every step, the rule at the stiffest checkpoint that is a minimum: " + ", ".join(
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
        wrapped(
            f"  {c['block']} step {c['from']} -> {c['to']}: {shown(c['at_gamma'])} at γ, "
            f"{shown(c['at_quarter_gamma'])} at γ/4: "
            + (f"a change, resting on {c.get('rests_on', 'γ and γ/4')}" if c["real"] else "not shown to change")
            + "".join(f" ({flag})" for flag in c["flags"])
        )
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


def cell(row: dict | None, mark: str) -> str:
    """An estimate and its interval, * where flagged (other than the failing calibration's ``mark``); - where there
    is none (refused)."""
    if row is None or row.get("llc") is None:
        return "-"
    flagged = any(flag != mark for flag in row.get("flags", []))
    low, high = row.get("interval") or (None, None)
    shown = number(row["llc"]) if low is None else f"{number(row['llc'])} [{number(low)}, {number(high)}]"
    return shown + (" *" if flagged else "")


def plot_blocks(run: Run, rows: list[dict], crossings: dict, verdict: dict, directory: Path) -> Path:
    name = run.path.name
    path = directory / f"{name}_llc_per_head.png"
    return plot_per_head_llc(rows, run.metrics(), crossings, name, path, failing=verdict["mark"])
