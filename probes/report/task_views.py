"""The task view (:mod:`~induction_probes.probes.report.run_views`): what a run of a registered task without a view
of its own shows, from the generic probes (``probe_task_run``, whatever probe the task registered: this view reads
what they hold). Every registered attention probe per head, and the task's own evaluation metrics
(``EvalSet.metrics``: ``eval_loss`` and whatever else it reports), clean, with heads ablated, or over training,
as text, JSON, figures (:mod:`~induction_probes.probes.figures.plots_task`) and a one-page report."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from induction_probes.circuits.defaults import PAGE_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.names import head_label
from induction_probes.probes.ablation.head_ablation import single_heads
from induction_probes.probes.figures.plots import figure_name, heads_label
from induction_probes.probes.figures.plots_task import plot_task_ablation, plot_task_metrics, plot_task_probes
from induction_probes.probes.report.html import section, write_page
from induction_probes.probes.report.tables import (
    ablations_json,
    format_table,
    heads_name,
    provenance,
    spread_steps,
    with_figures,
)
from induction_probes.probes.run_level.all_probes import probe_task_run
from induction_probes.probes.run_level.task_probes import scalar_metrics, task_ablation_study

if TYPE_CHECKING:
    from induction_probes.circuits.devices import Device
    from induction_probes.circuits.models.hooked_model import HookedModel
    from induction_probes.circuits.runs.reader import Run
    from induction_probes.probes.report.view_protocols import Output, ProbeSet, Shown


def probe_task(run: Run, steps: list[int], probes: ProbeSet, output: Output) -> Shown:
    """Every registered probe per head at ``steps`` and the task's metrics, on the fresh sequences of the run's
    task that ``probes`` names; with a ``plot`` folder, the probes per head (over training when several)."""
    n_seqs, seed = probes.n_seqs, probes.seed
    results = probe_task_run(run, run.task.eval_set(n_seqs, seed), steps, output.device)
    figures = [plot_probes(run, results, output.plot)] if output.plot else []
    if output.as_json:
        tidy = {"records": results.to_records(), "warnings": results.warnings}
        return provenance(run, steps, n_seqs, seed) | {"checkpoints": [r.to_json() for r in results]} | tidy
    last = results[-1]
    lines = [
        f"run {run.path.name}, step {last.step}: {run.task.describe()}, {n_seqs} fresh sequences",
        heads_table(last.scores),
        "task metrics: " + ", ".join(f"{name} {value:.4f}" for name, value in scalar_metrics(last.metrics).items()),
    ]
    if len(steps) > 1:
        lines.append(trajectory_table(results))
    return with_figures("\n".join(lines + [f"warning: {line}" for line in results.warnings]), figures)


def heads_table(scores: dict) -> str:
    """Every registered probe's value per head (``scores``: per probe, one ``[head]`` tensor per layer)."""
    names = list(scores)
    layers = scores[names[0]]
    rows = [
        [head_label(layer, head), *(scores[name][layer][head].item() for name in names)]
        for layer in range(len(layers))
        for head in range(len(layers[layer]))
    ]
    return format_table(["head", *names], rows)


def trajectory_table(results) -> str:
    """Each probe's best head and the evaluation loss at steps spread over training."""
    names = list(results[-1].scores)
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
    return format_table(["step", *(f"best {name}" for name in names), "eval_loss"], table)


def plot_probes(run: Run, results, directory: Path) -> Path:
    sequences = {step: run.entry(step)["sequences_seen"] for step in results.steps}
    path = directory / figure_name(run.path.name, "probes", results.steps)
    return plot_task_probes({r.step: r.scores for r in results}, sequences, run.path.name, path)


def ablate_task(
    run: Run,
    model: HookedModel,
    head_sets: list[list[tuple[int, int]]],
    step: int,
    mode: str,
    probes: ProbeSet,
    output: Output,
) -> Shown:
    """The task's metrics of ``model`` (the run's checkpoint at ``step``), clean and with each head set
    ablated, on the fresh sequences of ``probes``; with a ``plot`` folder, their bars."""
    n_seqs, seed = probes.n_seqs, probes.seed
    probe_set = run.task.eval_set(n_seqs, seed)
    reference = run.task.eval_set(n_seqs, seed + 1).inputs  # other sequences
    baseline, ablated = task_ablation_study(model, probe_set, head_sets, mode, reference, seed)
    if output.as_json:
        return ablations_json(run, step, mode, n_seqs, seed, baseline, [(h, {"metrics": m}) for h, m in ablated])
    rows = ablation_rows(baseline, ablated)
    figures = [plot_ablation(run, step, mode, rows, output.plot)] if output.plot else []
    return with_figures(ablation_text(run, mode, n_seqs, rows), figures)


def ablation_rows(baseline: dict, ablated: list) -> list[tuple[list | None, dict]]:
    """Each ablated head set (None: the clean model) and its metrics, finite numbers only."""
    rows: list[tuple[list | None, dict]] = [(None, scalar_metrics(baseline))]
    return rows + [(heads, scalar_metrics(metrics)) for heads, metrics in ablated]


def ablation_text(run: Run, mode: str, n_seqs: int, rows: list[tuple[list | None, dict]]) -> str:
    columns = list(rows[0][1])
    table = [
        [heads_name(heads) if heads else "none", *(metrics.get(c, float("nan")) for c in columns)]
        for heads, metrics in rows
    ]
    title = f"run {run.path.name}: {mode} ablation on {n_seqs} sequences of {run.task.describe()}"
    return "\n".join([title, format_table(["ablated heads", *columns], table)])


def plot_ablation(run: Run, step: int, mode: str, rows: list[tuple[list | None, dict]], directory: Path) -> Path:
    bars = [(heads_label(heads) if heads else "none", metrics) for heads, metrics in rows]
    path = directory / figure_name(run.path.name, "ablation", [step], mode)
    return plot_task_ablation(bars, f"{run.path.name}, step {step}: {mode} ablation", path)


def task_report(run: Run, output: Output) -> Shown:
    """The task's metrics over training and each registered probe's best head per layer at the last
    checkpoint (on PAGE_SEQS fresh sequences); with ``plot``, the metrics and the probes over training."""
    metrics, recipe = run.metrics(), run.recipe
    if not metrics:
        raise BadInput(f"run {run.path} has no metrics yet")
    device = output.device
    figures = report_figures(run, output.plot, device) if output.plot else []
    if output.as_json:
        header = provenance(run, [m["step"] for m in metrics], recipe.eval_seqs, recipe.eval_seed)
        return header | {"metrics": metrics, "figures": [str(f) for f in figures]}
    return with_figures(report_text(run, device), figures)


def report_text(run: Run, device: Device = None) -> str:
    metrics, recipe = run.metrics(), run.recipe
    columns = [name for name in scalar_metrics(metrics[-1]) if name not in ("step", "sequences_seen")]
    wanted = spread_steps([m["step"] for m in metrics])
    rows = [
        [m["step"], f"{m['sequences_seen'] / 1000:.1f}", *(scalar_metrics(m).get(c, float("nan")) for c in columns)]
        for m in metrics
        if m["step"] in wanted
    ]
    title = f"run {run.path.name}: {run.task.describe()}, {recipe.steps} steps of {recipe.batch_size} sequences"
    return "\n".join([title, format_table(["step", "seqs (k)", *columns], rows), final_probes_text(run, device)])


def final_probes_text(run: Run, device: Device = None) -> str:
    """Each registered probe's best head per layer at the last checkpoint, on PAGE_SEQS fresh sequences."""
    step = run.steps[-1]
    (result,) = probe_task_run(run, run.task.eval_set(PAGE_SEQS, PROBE_SEED), [step], device)
    rows = [
        [name, layer, int(values.argmax()), values.max().item()]
        for name, layers in result.scores.items()
        for layer, values in enumerate(layers)
    ]
    title = f"attention probes at step {step} on {PAGE_SEQS} fresh sequences (seed {PROBE_SEED}), best head per layer"
    return "\n".join([title, format_table(["probe", "layer", "head", "value"], rows)])


def report_figures(run: Run, directory: Path, device: Device = None) -> list[Path]:
    """The task's metrics over training, and the registered probes per head at steps spread over training
    (on PAGE_SEQS fresh sequences)."""
    steps = sorted(spread_steps(run.steps))
    results = probe_task_run(run, run.task.eval_set(PAGE_SEQS, PROBE_SEED), steps, device)
    metrics = plot_task_metrics(run.metrics(), run.path.name, directory / f"{run.path.name}_metrics.png")
    return [metrics, plot_probes(run, results, directory)]


def task_report_html(run: Run, directory: Path, device: Device = None) -> Path:
    """``directory/RUN_report.html``: the task's metrics and the registered probes over training, the
    probes at the last checkpoint, and what ablating each head there costs, every figure embedded."""
    name = run.path.name
    with tempfile.TemporaryDirectory() as scratch:
        figures = Path(scratch)
        step = run.steps[-1]
        model = run.load(step=step, device=device)
        probe_set, reference = (
            run.task.eval_set(PAGE_SEQS, PROBE_SEED),
            run.task.eval_set(PAGE_SEQS, PROBE_SEED + 1),
        )
        baseline, ablated = task_ablation_study(model, probe_set, single_heads(model), "zero", reference.inputs)
        rows = ablation_rows(baseline, ablated)
        sections = [
            section(
                "1. Over training: the task's metrics and the attention probes",
                f"The metrics the task reports on its evaluation set, and each registered probe per head on "
                f"{PAGE_SEQS} fresh sequences (seed {PROBE_SEED}).",
                report_text(run, device),
                report_figures(run, figures, device),
            ),
            section(
                "2. Ablations: what each head is for",
                "The task's metrics of the final model with each head zero-ablated.",
                ablation_text(run, "zero", PAGE_SEQS, rows),
                [plot_ablation(run, step, "zero", rows, figures)],
            ),
        ]
        return write_page(name, f"{name}: {run.task.describe()}", sections, Path(directory))
