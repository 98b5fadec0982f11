"""``induction-probes sweep`` (many runs from an experiment spec) and ``summarize`` (their aggregate)."""

from __future__ import annotations

import argparse
import sys

from induction_probes.cli.common import (
    CommandFailed,
    add_device_option,
    add_output_options,
    count,
    figure_lines,
    format_table,
    json_text,
    path,
)

# Loaded to build the parser, before a command is chosen: the handlers below import the library they call
# (torch, matplotlib) inside themselves, so that --help and usage errors load neither (tests/unit/test_structure.py).


class SomeCellsFailed(CommandFailed):
    """The sweep finished, but some cells did not: status 1, after every other cell ran."""


def register(commands) -> None:
    sweep = commands.add_parser(
        "sweep",
        help="train every cell of an experiment spec (TOML): conditions x grid x seeds",
        description="Train every cell of a spec into DIR/<condition>/seed-<S>; rerun the same command to "
        "continue an interrupted sweep (finished cells are skipped, interrupted ones resumed).",
    )
    sweep.add_argument("spec", type=path, help="experiment spec (TOML; see the README)")
    sweep.add_argument("--out", type=path, required=True, help="sweep directory (new, empty, or this spec's)")
    sweep.add_argument("--workers", type=int, default=1, help="cells trained at once (default 1)")
    sweep.add_argument(
        "--backend", choices=("local", "ray"), default="local", help="local process pool (default) or Ray"
    )
    sweep.add_argument(
        "--address",
        help="with --backend ray: the address of a running Ray cluster (default: start a local Ray instance)",
    )
    add_device_option(sweep)
    sweep.add_argument(
        "--gpus-per-cell",
        type=float,
        default=0.0,
        metavar="F",
        help="GPUs per cell, fractions allowed (0.25: four cells share a GPU): Ray's num_gpus, or "
        "the local pool's visible GPUs in turn (default 0: --device, cpu)",
    )
    # the sweep checks --device itself: against this machine, or by name only for a remote Ray cluster, whose
    # nodes have the GPUs (docs/devices.md)
    sweep.set_defaults(handler=run_sweep_command, checks_its_device=True)

    summarize = commands.add_parser("summarize", help="mean and 95%% intervals over seeds of a sweep's runs")
    summarize.add_argument(
        "sweep_dir",
        type=path,
        metavar="DIR",
        help="a sweep directory, or a summary.json whose "
        "statistics (comparisons, bounded intervals, kinds of solution) are recomputed from its "
        "per-seed runs records",
    )
    summarize.add_argument(
        "--count",
        metavar="PRIOR",
        help="x-axis: training sequences of this prior only "
        "(e.g. doubly-stochastic, as Edelman et al.'s mixture figure counts them; default: the spec's count)",
    )
    summarize.add_argument(
        "--probe-seqs",
        type=count,
        default=500,
        help="fresh sequences for the final checkpoints' probe scores and --by-prior losses (default 500)",
    )
    summarize.add_argument(
        "--by-prior",
        metavar="PRIORS",
        default="",
        help="also evaluate each run's final checkpoint on fresh chains of these priors (e.g. "
        "doubly-stochastic,unigram): its loss and KL(true||model) per prior, compared between conditions",
    )
    add_output_options(summarize)
    summarize.set_defaults(handler=run_summarize)


def run_sweep_command(args: argparse.Namespace) -> str:
    from induction_probes.circuits.sweeps.sweep import read_spec, run_sweep

    spec = read_spec(args.spec)
    try:
        results = run_sweep(
            spec,
            args.out,
            workers=args.workers,
            backend=args.backend,
            address=args.address,
            report=lambda line: print(line, file=sys.stderr, flush=True),
            device=getattr(args, "device", None),
            gpus_per_cell=args.gpus_per_cell,
        )
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"interrupted: run the same command again to continue the sweep in {args.out}"
        ) from None
    counts = {
        status: sum(r["status"] == status for r in results)
        for status in ("trained", "resumed", "skipped", "busy", "failed")
    }
    line = f"sweep {args.out}: {len(results)} cells, " + ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    if counts["failed"] or counts["busy"]:
        failed = ", ".join(r["cell"] for r in results if r["status"] == "failed") or "none"
        busy = ", ".join(r["cell"] for r in results if r["status"] == "busy")
        busy = f"; trained by another process now (run again once it is done): {busy}" if busy else ""
        journal = args.out / "sweep.jsonl"
        raise SomeCellsFailed(f"{line}; failed: {failed}{busy} (their errors are above and in {journal})")
    return line + f"\nsummarize it with: induction-probes summarize {args.out}"


def run_summarize(args: argparse.Namespace) -> str:
    from induction_probes.probes.figures.plots_sweep import plot_sweep_summary
    from induction_probes.probes.sweeps.summary import summarize_sweep
    from induction_probes.probes.sweeps.sweep_statistics import recompute_summary

    if args.sweep_dir.suffix == ".json":
        if args.by_prior:
            raise ValueError("--by-prior evaluates the runs' checkpoints: give the sweep directory, not a summary.json")
        summary = recompute_summary(args.sweep_dir)
    else:
        summary = summarize_sweep(args.sweep_dir, count=args.count, probe_seqs=args.probe_seqs, by_prior=args.by_prior)
    if summary.get("summary") == "toy":  # the toy model's sweep: its phases, half-way steps and plateaus per seed
        from induction_probes.probes.figures.plots_toy import plot_toy_sweep

        figures = plot_toy_sweep(summary, args.plot) if args.plot else []
        return json_text(summary) if args.json else "\n".join([toy_summary_table(summary), *figure_lines(figures)])
    if summary.get("summary") == "task":  # a registered task's sweep: its metrics and probes, no strategy phases
        from induction_probes.probes.figures.plots_task_sweep import plot_task_sweep

        figures = plot_task_sweep(summary, args.plot) if args.plot else []
        return json_text(summary) if args.json else "\n".join([task_summary_table(summary), *figure_lines(figures)])
    figures = plot_sweep_summary(summary, args.plot) if args.plot else []
    if args.json:
        return json_text(summary)
    return "\n".join([summary_table(summary), *(f"figure: {path}" for path in figures)])


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
    return f"{ORDER_TESTS[key]}: {format_interval(test['difference'], 1, 3)} steps, {test['n']} seeds ({tests})"


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
            f"{format_interval(comparison['difference'], 1, 3)} ({tests})"
        )
    if summary["unfinished"]:
        lines.append(f"not finished (left out): {', '.join(summary['unfinished'])}")
    return "\n".join(lines)


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
            f"{format_p(c['p_value'])} ({c['test']})",
            f"{format_p(c['rank_p_value'])} ({c['rank_test']})",
            c["n"] if isinstance(c["n"], int) else "/".join(map(str, c["n"])),
        ]
        for c in summary.get("comparisons", [])
    ]
    lines = [format_table(["comparison", "measure", "difference [95%]", "p", "rank p", "n"], rows)] if rows else []
    for name, condition in summary["conditions"].items():
        lines += even_odd_lines(name, condition.get("even_odd"))
        for measure, split in condition.get("kinds_of_solution", {}).items():
            lines.append(
                f"{name}: {measure} splits into two kinds of solution: {len(split['low_group'])} seeds at "
                f"{min(split['low_group']):.3g}-{max(split['low_group']):.3g}, {len(split['high_group'])} at "
                f"{min(split['high_group']):.3g}-{max(split['high_group']):.3g}"
            )
    return lines
