"""The task view (:mod:`induction_probes.cli.views`): what ``probe``, ``ablate`` and ``report`` show for a run of
a registered task without a view of its own. Every registered attention probe per head, and the task's own
evaluation metrics (``EvalSet.metrics``: ``eval_loss`` and whatever else it reports), clean, with heads ablated,
or over training. Imported only once a command runs, so it loads torch at the top."""

from __future__ import annotations

import argparse

from induction_probes.cli.common import device_of, format_table, json_text, provenance, spread_steps
from induction_probes.probes.summary import PROBE_SEED, probe_run
from induction_probes.probes.task_probes import probe_task_model, scalar_metrics, task_ablation_study

REPORT_SEQS = 200  # the report's probe set, as the HTML report's


def refuse_figures(run, args: argparse.Namespace) -> None:
    if getattr(args, "plot", None) or getattr(args, "html", None):
        raise ValueError(
            f"run {run.path.name} is a {run.task.name} run: figures and the HTML report follow the "
            "ICL-MC and Gaussian tasks; drop --plot and --html"
        )


def probe_task_text(run, args: argparse.Namespace) -> str:
    refuse_figures(run, args)
    steps = run.steps if args.all_steps else [run.entry(args.step)["step"]]
    probe_set = run.task.eval_set(args.n_seqs, args.seed)
    results = probe_run(run, probe_set, steps, device=device_of(args))
    if args.json:
        tidy = {"records": results.to_records(), "warnings": results.warnings}
        return json_text(
            provenance(run, steps, args.n_seqs, args.seed) | {"checkpoints": [r.to_json() for r in results]} | tidy
        )
    last = results[-1]
    names = list(last.scores)
    n_layers = len(last.scores[names[0]])
    rows = [
        [f"{layer}.{head}", *(last.scores[name][layer][head].item() for name in names)]
        for layer in range(n_layers)
        for head in range(len(last.scores[names[0]][layer]))
    ]
    metrics = scalar_metrics(last.metrics)
    lines = [
        f"run {run.path.name}, step {last.step}: {run.task.describe()}, {args.n_seqs} fresh sequences",
        format_table(["head", *names], rows),
        "task metrics: " + ", ".join(f"{name} {value:.4f}" for name, value in metrics.items()),
    ]
    if args.all_steps:
        wanted = spread_steps([r.step for r in results])
        table = [
            [
                r.step,
                *(max(layer.max().item() for layer in r.scores[name]) for name in names),
                scalar_metrics(r.metrics).get("eval_loss", float("nan")),
            ]
            for r in results
            if r.step in wanted
        ]
        lines.append(format_table(["step", *(f"best {name}" for name in names), "eval_loss"], table))
    return "\n".join(lines + [f"warning: {line}" for line in results.warnings])


def ablate_task_text(run, model, head_sets, args: argparse.Namespace) -> str:
    refuse_figures(run, args)
    probe_set = run.task.eval_set(args.n_seqs, args.seed)
    reference = run.task.eval_set(args.n_seqs, args.seed + 1).inputs  # other sequences
    baseline, ablated = task_ablation_study(model, probe_set, head_sets, args.mode, reference, args.seed)
    names = [",".join(f"{layer}.{head}" for layer, head in heads) for heads, _ in ablated]
    if args.json:
        header = provenance(run, [run.entry(args.step)["step"]], args.n_seqs, args.seed)
        return json_text(
            header
            | {
                "mode": args.mode,
                "baseline": baseline,
                "ablations": [
                    {"heads": name.split(","), "mode": args.mode, "metrics": metrics}
                    for name, (_, metrics) in zip(names, ablated)
                ],
            }
        )
    columns = list(scalar_metrics(baseline))
    rows = [["none", *scalar_metrics(baseline).values()]]
    rows += [
        [name, *(scalar_metrics(metrics).get(c, float("nan")) for c in columns)]
        for name, (_, metrics) in zip(names, ablated)
    ]
    title = f"run {run.path.name}: {args.mode} ablation on {args.n_seqs} sequences of {run.task.describe()}"
    return "\n".join([title, format_table(["ablated heads", *columns], rows)])


def report_task_text(run, args: argparse.Namespace) -> str:
    refuse_figures(run, args)
    metrics, recipe = run.metrics(), run.recipe
    if not metrics:
        raise ValueError(f"run {run.path} has no metrics yet")
    if args.json:
        header = provenance(run, [m["step"] for m in metrics], recipe.eval_seqs, recipe.eval_seed)
        return json_text(header | {"metrics": metrics})
    columns = [name for name in scalar_metrics(metrics[-1]) if name not in ("step", "sequences_seen")]
    wanted = spread_steps([m["step"] for m in metrics])
    rows = [
        [m["step"], f"{m['sequences_seen'] / 1000:.1f}", *(scalar_metrics(m).get(c, float("nan")) for c in columns)]
        for m in metrics
        if m["step"] in wanted
    ]
    title = f"run {run.path.name}: {run.task.describe()}, {recipe.steps} steps of {recipe.batch_size} sequences"
    return "\n".join([title, format_table(["step", "seqs (k)", *columns], rows), final_probes_text(run, args)])


def final_probes_text(run, args: argparse.Namespace) -> str:
    """Each registered probe's best head per layer at the last checkpoint, on REPORT_SEQS fresh sequences."""
    step = run.steps[-1]
    model = run.load(step=step, device=device_of(args))
    result = probe_task_model(model, run.task.eval_set(REPORT_SEQS, PROBE_SEED), step)
    rows = [
        [name, layer, int(values.argmax()), values.max().item()]
        for name, layers in result.scores.items()
        for layer, values in enumerate(layers)
    ]
    title = f"attention probes at step {step} on {REPORT_SEQS} fresh sequences (seed {PROBE_SEED}), best head per layer"
    return "\n".join([title, format_table(["probe", "layer", "head", "value"], rows)])
