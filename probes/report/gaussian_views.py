"""What a Gaussian-task run shows (Wang et al.'s task): its error over training, and its probes (the error, the
previous-token heads and the induction head) at a few checkpoints or over training, as text, JSON or figures.
Its one-page report is refused: the page follows the ICL-MC argument."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from induction_probes.circuits.errors import BadInput
from induction_probes.probes.figures.plots import figure_name
from induction_probes.probes.figures.plots_circuit import plot_gaussian_scores, plot_gaussian_training
from induction_probes.probes.report.tables import format_table, provenance, spread_steps, with_figures
from induction_probes.probes.run_level.checkpoint_probes import probe_gaussian

if TYPE_CHECKING:
    from induction_probes.circuits.devices import Device
    from induction_probes.circuits.runs.reader import Run
    from induction_probes.probes.report.view_protocols import Output, ProbeSet, Shown


def gaussian_report(run: Run, output: Output) -> Shown:
    """A Gaussian-task run over training: its error on its evaluation set (no strategy phases here; the
    probes are :func:`probe_gaussian_report` over every step)."""
    metrics, recipe, plot = run.metrics(), run.recipe, output.plot
    if output.as_json:
        return provenance(run, [m["step"] for m in metrics], recipe.eval_seqs, recipe.eval_seed) | {"metrics": metrics}
    figures = [plot_gaussian_training(metrics, run.path.name, plot / f"{run.path.name}_error.png")] if plot else []
    wanted = spread_steps([m["step"] for m in metrics])
    rows = [
        [m["step"], f"{m['sequences_seen'] / 1000:.1f}", m["train_loss"], m["eval_loss"], m["relative_mse"]]
        for m in metrics
        if m["step"] in wanted
    ]
    title = f"run {run.path.name}: {run.task.describe()}, {recipe.steps} steps of {recipe.batch_size} sequences"
    table = format_table(["step", "seqs (k)", "train loss", "eval loss", "MSE / target variance"], rows)
    hint = f"probes over training: induction-probes probe {run.path.name} --all-steps"
    return with_figures("\n".join([title, table, hint]), figures)


def refuse_gaussian_html(run: Run, directory: Path, device: Device = None) -> Path:
    raise BadInput(f"run {run.path.name} is a Gaussian-task run: the HTML report follows the ICL-MC argument")


def probe_gaussian_report(run: Run, steps: list[int], probes: ProbeSet, output: Output) -> Shown:
    """The error, previous-token and induction scores of a Gaussian-task run at ``steps``, on the fresh
    sequences of ``probes``; with a ``plot`` folder, their figure over the probed steps."""
    n_seqs, plot = probes.n_seqs, output.plot
    results = [probe_gaussian(run, step, n_seqs, probes.seed, device=output.device) for step in steps]
    figures = []
    if plot:
        sequences = [run.entry(step)["sequences_seen"] for step in steps]
        path = plot / figure_name(run.path.name, "scores", steps)
        figures = [plot_gaussian_scores(results, sequences, run.path.name, path)]
    if output.as_json:
        return provenance(run, steps, n_seqs, probes.seed) | {"checkpoints": [r.to_json() for r in results]}
    rows = [
        [
            r.step,
            r.relative_mse,
            max(r.previous_token[0]),
            max(r.induction),
            " ".join(f"{value:.3f}" for value in r.window_r2),
            r.target_r2_after_layer0,
        ]
        for r in results
        if r.step in spread_steps([x.step for x in results])
    ]
    headers = ["step", "MSE / target variance", "layer 0 previous-token", "layer 1 induction (1-TV)"]
    headers += ["R² of x_{s-i} after layer 0, i = 0..n", "R² of the target after layer 0"]
    title = f"run {run.path.name}: Gaussian induction task, {n_seqs} fresh sequences"
    return with_figures("\n".join([title, format_table(headers, rows)]), figures)
