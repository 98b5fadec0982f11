"""The report of an ICL-MC run over training: its loss against the strategies, its strategy baselines and its
phases, as text, JSON or figures (the one-page HTML report, :mod:`~induction_probes.probes.report.markov_html`,
opens with them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.runs.reader import run_task
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.tasks.markov.strategies import closest_strategy
from induction_probes.probes.behaviour.icl_behaviour import plateau_step, strategy_phases
from induction_probes.probes.figures.plots import plot_distance_to_strategies, plot_loss_against_baselines, step_caption
from induction_probes.probes.figures.plots_circuit import plot_minimal_parameters
from induction_probes.probes.report.tables import format_table, provenance, spread_steps, with_figures

if TYPE_CHECKING:
    from induction_probes.circuits.runs.reader import Run
    from induction_probes.probes.report.view_protocols import Output, Shown


def report_data(run: Run):
    """The run's task, recipe, metrics, strategy baselines (last-token KL(true || s) on its evaluation
    set) and phases; refuses a run that is not an ICL-MC training run or has no metrics yet."""
    task, recipe, metrics = run_task(run, MarkovTask), run.recipe, run.metrics()
    if not metrics:
        raise BadInput(f"run {run.path} has no metrics yet")
    eval_set = task.eval_set(recipe.eval_seqs, recipe.eval_seed)
    baselines = {name: kl.mean().item() for name, kl in eval_set.strategy_kl().items()}
    return task, recipe, metrics, baselines, strategy_phases(metrics)


def markov_report(run: Run, output: Output) -> Shown:
    """An ICL-MC run's report: text and the figures written into ``plot``, or a JSON-ready dict."""
    if output.as_json:
        return report_json(run, output.plot)
    text, figures = report_text(run, output.plot)
    return with_figures(text, figures)


def report_json(run: Run, directory: Path | None) -> dict:
    _, recipe, metrics, baselines, phases = report_data(run)
    figures = plot_report(run, metrics, baselines, phases, directory) if directory else []
    result = provenance(run, [m["step"] for m in metrics], recipe.eval_seqs, recipe.eval_seed)
    result |= {"baselines": baselines, "phases": [vars(p) for p in phases]}
    return result | {"metrics": metrics, "figures": [str(f) for f in figures]}


def report_text(run: Run, directory: Path | None) -> tuple[str, list[Path]]:
    """The report's text, and its figures written into ``directory`` (none without one)."""
    task, recipe, metrics, baselines, phases = report_data(run)
    figures = plot_report(run, metrics, baselines, phases, directory) if directory else []
    title = f"run {run.path.name}: {task.describe()}, {recipe.steps} steps of {recipe.batch_size} sequences"
    baseline_text = ", ".join(f"{name} {value:.4f}" for name, value in baselines.items())
    lines = [
        title,
        f"strategy baselines on its {recipe.eval_seqs} evaluation sequences, last-token KL(true||s): {baseline_text}",
        "",
        metrics_table(metrics, list(baselines), phases),
        "",
        "phases (closest strategy): " + " -> ".join(map(phase_text, phases)),
    ]
    return "\n".join(lines), figures


def metrics_table(metrics: list[dict], strategies: list[str], phases: list) -> str:
    """Checkpoints evenly spread in step, plus the first checkpoint of every phase."""
    wanted = spread_steps([m["step"] for m in metrics]) | {p.first_step for p in phases}
    headers = ["step", "seqs (k)", "train loss", "KL(true||model)", *(f"KL({s}||model)" for s in strategies), "closest"]
    rows = [
        [
            m["step"],
            f"{m['sequences_seen'] / 1000:.1f}",
            m["train_loss"],
            m["last_token_kl"]["true"],
            *(m["last_token_kl"][s] for s in strategies),
            closest_strategy(m["last_token_kl"]),
        ]
        for m in metrics
        if m["step"] in wanted
    ]
    return format_table(headers, rows)


def phase_text(phase) -> str:
    seen = f"{phase.first_sequences / 1000:.1f}k-{phase.last_sequences / 1000:.1f}k seqs"
    return f"{phase.strategy} (steps {phase.first_step}-{phase.last_step}, {seen})"


def plot_report(
    run: Run, metrics: list[dict], baselines: dict[str, float], phases: list, directory: Path
) -> list[Path]:
    name = run.path.name
    figures = [
        plot_distance_to_strategies(metrics, list(baselines), name, directory / f"{name}_strategies.png"),
        plot_loss_against_baselines(metrics, baselines, name, directory / f"{name}_loss.png"),
    ]
    if run.config.get("model_class") == "MinimalModel":  # v and W on the plateau, at the drop, at the end
        drop = min(run.steps, key=lambda step: abs(step - phases[-1].first_step))  # the nearest saved step
        steps = sorted({plateau_step(phases, run.steps), drop, run.steps[-1]})
        by_step = {m["step"]: m for m in metrics}
        captions = {s: step_caption(by_step[s]) for s in steps}
        figures += plot_minimal_parameters({s: run.load(step=s) for s in steps}, captions, name, directory, name)
    return figures
