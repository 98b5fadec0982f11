"""What ``induction-probes sweep`` and ``summarize`` show: a sweep's one-line outcome, and a summary of its runs
(mean and 95 % intervals over seeds, the comparisons between conditions) as text and figures, or as JSON-ready
dicts, for the three kinds of summary: ICL-MC strategy phases, the toy model's phases and a registered task's
metrics. Callable from Python with the commands' text and JSON:

>>> summary_report("experiments/runs/text", plot="out/")  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.sweeps.sweep_runner import SPEC_FILE, read_spec, run_sweep
from induction_probes.circuits.validation import IncompleteResult
from induction_probes.probes.figures.plots_sweep import plot_sweep_summary
from induction_probes.probes.figures.plots_task_sweep import plot_task_sweep
from induction_probes.probes.figures.plots_toy import plot_toy_sweep
from induction_probes.probes.report.tables import figure_lines, format_table
from induction_probes.probes.sweeps.summary import summarize_sweep
from induction_probes.probes.sweeps.summary_statistics import recompute_summary

STATUSES = ("trained", "resumed", "skipped", "busy", "failed")


class SomeCellsFailed(IncompleteResult):
    """The sweep finished, but some cells did not: after every other cell ran."""


def stderr_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def sweep_report(
    spec: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    device: str | None = None,
    gpus_per_cell: float = 0.0,
    report: Callable[[str], None] = stderr_line,
) -> str:
    """Train every cell of the spec file ``spec`` into ``out`` (:func:`~induction_probes.circuits.sweeps.sweep_runner.
    run_sweep`, each cell's progress to ``report``), and say in one line what was done; SomeCellsFailed when a
    cell failed or another process holds it. Interrupted, it says how to continue."""
    out = Path(out)
    options = {"workers": workers, "backend": backend, "address": address, "device": device}
    try:
        results = run_sweep(read_spec(Path(spec)), out, report=report, gpus_per_cell=gpus_per_cell, **options)
    except KeyboardInterrupt:
        if not (out / SPEC_FILE).is_file():  # stopped before the sweep claimed its folder: nothing to continue
            raise KeyboardInterrupt("interrupted before the sweep began: nothing was trained") from None
        raise KeyboardInterrupt(f"interrupted: run the same command again to continue the sweep in {out}") from None
    counts = {status: sum(r["status"] == status for r in results) for status in STATUSES}
    line = f"sweep {out}: {len(results)} cells, " + ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    if counts["failed"] or counts["busy"]:
        failed = ", ".join(r["cell"] for r in results if r["status"] == "failed") or "none"
        busy = ", ".join(r["cell"] for r in results if r["status"] == "busy")
        busy = f"; trained by another process now (run again once it is done): {busy}" if busy else ""
        raise SomeCellsFailed(f"{line}; failed: {failed}{busy} (their errors are above and in {out / 'sweep.jsonl'})")
    return line + f"\nsummarize it with: induction-probes summarize {out}"


def summary_report(
    sweep: str | os.PathLike[str],
    *,
    count: str | None = None,
    probe_seqs: int = 500,
    by_prior: str = "",
    plot: str | os.PathLike[str] | None = None,
    as_json: bool = False,
) -> str | dict[str, Any]:
    """The summary of the sweep directory ``sweep`` (``count``: the x-axis's prior, ``probe_seqs``: sequences of
    the final probes, ``by_prior``: priors to evaluate on), or of a ``summary.json`` recomputed from its per-seed
    records; its figures written into ``plot``."""
    sweep = Path(sweep)
    if sweep.suffix == ".json":
        if by_prior:
            raise BadInput("--by-prior evaluates the runs' checkpoints: give the sweep directory, not a summary.json")
        summary = recompute_summary(sweep)
    else:
        summary = summarize_sweep(sweep, count=count, probe_seqs=probe_seqs, by_prior=by_prior)
    figures = summary_figures(summary, plot)
    return summary if as_json else "\n".join([summary_table_of(summary), *figure_lines(figures)])


def summary_table_of(summary: dict) -> str:
    kind = summary.get("summary")
    if kind == "toy":  # the toy model's sweep: its phases, half-way steps and plateaus per seed
        return toy_summary_table(summary)
    if kind == "task":  # a registered task's sweep: its metrics and probes, no strategy phases
        return task_summary_table(summary)
    return summary_table(summary)


def summary_figures(summary: dict, plot) -> list[Path]:
    if plot is None:
        return []
    draw = {"toy": plot_toy_sweep, "task": plot_task_sweep}.get(summary.get("summary", ""), plot_sweep_summary)
    return draw(summary, Path(plot))


def task_summary_table(summary: dict) -> str:
    """Per condition and seed count: each final metric and best-head probe score, the baselines' losses, the
    half-way steps and the plateau (mean [95% interval]); then the tests of what comes first."""
    lines = [f"sweep {summary['sweep']} ({summary['recipe']}): mean [95% interval] over seeds"]
    for name, condition in summary["conditions"].items():
        rows = [[f"final {key}", format_interval(value)] for key, value in condition["final"].items()]
        rows += [[f"best {key}", format_interval(value)] for key, value in condition["probes"].items()]
        rows += [[f"{key} predictor's loss", format_interval(v)] for key, v in condition.get("baselines", {}).items()]
        rows += [[f"half-way step of {key}", format_interval(v, 1, 3)] for key, v in condition["reached"].items()]
        for key, value in condition.get("plateau", {}).items():
            rows.append([f"plateau {key} (step; {value['n']} seeds)", format_interval(value, 1, 3)])
        seeds = ", ".join(map(str, condition["seeds"]))
        lines += [f"{name}: {condition['task']}, seeds {seeds}", format_table(["measure", "value"], rows)]
        lines += [order_test_line(key, test) for key, test in condition["order_tests"].items()]
    lines += one_seed_lines(summary)
    if summary["unfinished"]:
        lines.append(f"not finished (left out): {', '.join(summary['unfinished'])}")
    return "\n".join(lines)


ORDER_TESTS = {
    "attention_minus_positions": "earliest W_Q / W_K half-way step − the positions'",
    "escape_minus_last_keys": "the loss's escape below the bigram level − the last layer's W_K's half-way step",
}


def order_test_line(key: str, test: dict) -> str:
    """One paired test of a task sweep's summary, over the seeds that have both of its steps."""
    p, rank = (test[name] for name in ("p_value", "rank_p_value"))
    tests = f"{test['test']} p = {'-' if p is None else f'{p:.3g}'}, {test['rank_test']} p = "
    tests += "-" if rank is None else f"{rank:.3g}"
    shown = f"{format_interval(test['difference'], 1, 3)} steps ({method_said(test['difference'])})"
    return f"{ORDER_TESTS[key]}: {shown}, {test['n']} seeds ({tests})"


def toy_summary_table(summary: dict) -> str:
    """Per condition: seeds with the four phases in order, the phase boundaries and the half-way steps (mean
    [95% interval]), the positions-first sign test and the plateau count; then the comparisons."""
    rows = []
    for name, c in summary["conditions"].items():
        first = c["positions_first"]
        rows.append(
            [
                name,
                f"{c['n_in_order']}/{c['n_seeds']}",
                format_interval(c["end_of_I"], 1, 3),
                format_interval(c["transition"], 1, 3),
                format_interval(c["end_of_III"], 1, 3),
                " ".join(format_interval(c["learned"][k], 1, 3) for k in ("p1", "p2", "w_KQ")),
                f"{first['n_first']}/{first['n']} (p = {first['sign_p_value']:.3f})",
                format_interval(c["n_plateaus"], 1, 2),
            ]
        )
    headers = [
        "condition",
        "4 phases",
        "end of I",
        "end of II",
        "end of III",
        "half-way p1 p2 w_KQ",
        "positions first",
        "plateaus",
    ]
    lines = [f"toy sweep {summary['sweep']}: steps, mean [95% interval] over seeds", format_table(headers, rows)]
    for comparison in summary["comparisons"]:
        tests = f"{comparison['test']} p = {comparison['p_value']}, "
        tests += f"{comparison['rank_test']} p = {comparison['rank_p_value']}"
        lines.append(
            f"{comparison['b']} − {comparison['a']}, {comparison['measure']}: "
            f"{format_interval(comparison['difference'], 1, 3)} ({method_said(comparison['difference'])}; {tests})"
        )
    lines += one_seed_lines(summary)
    if summary["unfinished"]:
        lines.append(f"not finished (left out): {', '.join(summary['unfinished'])}")
    return "\n".join(lines)


def one_seed_lines(summary: dict) -> list[str]:
    """The conditions of one seed, said in words: their values have no interval (one seed shows no spread)."""
    alone = [name for name, c in summary["conditions"].items() if c.get("n_seeds", len(c.get("seeds", []))) == 1]
    if not alone:
        return []
    return [f"one seed, so no interval (a single value shows no spread between seeds): {', '.join(alone)}"]


def method_said(difference: dict) -> str:
    """Which interval a difference has (its ``method``: t, Welch t or percentile bootstrap)."""
    return f"{difference['method']} interval" if difference.get("method") else "interval"


def format_interval(value: dict, scale: float = 1.0, digits: int = 4) -> str:
    if value["mean"] is None:
        return "-"
    if value["low"] is None:
        return f"{value['mean'] / scale:.{digits}g}"
    return f"{value['mean'] / scale:.{digits}g} [{value['low'] / scale:.{digits}g}, {value['high'] / scale:.{digits}g}]"


def summary_table(summary: dict) -> str:
    rows = []
    for name, condition in summary["conditions"].items():
        transition = condition["transition"]
        rows.append(
            [
                name,
                condition["n_seeds"],
                f"{format_interval(transition, 1e3, 3)} ({transition['n_reached']}/{condition['n_seeds']})",
                format_interval(condition["plateau"], 1e3, 3),
                format_interval(condition["final_kl"], 1.0, 3),
            ]
        )
    headers = [
        "condition",
        "seeds",
        "transition (k seq.) [95% CI] (reached)",
        "plateau (k seq.)",
        "final KL(true||model)",
    ]
    lines = [
        f"sweep {summary['sweep']}: mean [95% interval] over seeds; x-axis: {summary['x_axis']}",
        format_table(headers, rows),
    ]
    lines += by_prior_lines(summary)
    lines += one_seed_lines(summary)
    if summary["unfinished"]:
        lines.append(f"not finished (left out): {', '.join(summary['unfinished'])}")
    return "\n".join(lines + comparison_lines(summary))


def by_prior_lines(summary: dict) -> list[str]:
    """Per condition and prior, the final loss and KL(true||model) on that prior's chains (``--by-prior``)."""
    rows = [
        [name, prior, format_interval(values["loss"], 1.0, 4), format_interval(values["kl"], 1.0, 3)]
        for name, condition in summary["conditions"].items()
        for prior, values in condition.get("by_prior", {}).items()
    ]
    headers = ["condition", "evaluated on", "final loss [95% CI]", "final KL(true||model)"]
    return [format_table(headers, rows)] if rows else []


def format_p(value: float | None) -> str:
    """A test's p-value at three figures, "-" where the test is undefined."""
    return "-" if value is None else f"{value:.3g}"


def even_odd_lines(name: str, even_odd: dict | None) -> list[str]:
    """A condition's even/odd tests (how far layer 0's odd distances stand above their even neighbours)."""
    if even_odd is None:
        return []
    points = ", ".join(f"{point} {format_interval(stat, 1.0, 3)}" for point, stat in even_odd["excess"].items())
    lines = [f"{name}: layer 0's odd distances above their even neighbours: {points}"]
    for key in ("transition_minus_plateau", "excess_at_transition", "fading_at_transition"):
        test = even_odd[key]
        difference = format_interval(test["difference"], 1.0, 3)
        lines.append(f"{name}: {key.replace('_', ' ')} {difference}, t p = {format_p(test['p_value'])}")
    return lines


def comparison_lines(summary: dict) -> list[str]:
    """The comparisons (b − a, 95 % interval, t-test and rank-test p-values) and the kinds of solution."""
    rows = [
        [
            f"{c['b']} - {c['a']}",
            c["measure"],
            format_interval(c["difference"], 1.0, 3),
            c["difference"].get("method", ""),
            f"{format_p(c['p_value'])} ({c['test']})",
            f"{format_p(c['rank_p_value'])} ({c['rank_test']})",
            c["n"] if isinstance(c["n"], int) else "/".join(map(str, c["n"])),
        ]
        for c in summary.get("comparisons", [])
    ]
    lines = (
        [format_table(["comparison", "measure", "difference [95 % interval]", "interval", "p", "rank p", "n"], rows)]
        if rows
        else []
    )
    for name, condition in summary["conditions"].items():
        lines += even_odd_lines(name, condition.get("even_odd"))
        for measure, split in condition.get("kinds_of_solution", {}).items():
            lines.append(
                f"{name}: {measure} splits into two kinds of solution: {len(split['low_group'])} seeds at "
                f"{min(split['low_group']):.3g}-{max(split['low_group']):.3g}, {len(split['high_group'])} at "
                f"{min(split['high_group']):.3g}-{max(split['high_group']):.3g}"
            )
    return lines
