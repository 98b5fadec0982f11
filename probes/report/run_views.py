"""What ``probe``, ``ablate`` and ``report`` show for a run, chosen by its task's view
(:mod:`~induction_probes.probes.report.view_protocols`) in :data:`TASK_VIEWS`: ICL-MC and Gaussian-task runs have
views of their own, a task from outside may register its own (the face's ``register_task``), and a run of any other
registered task gets the task view (:mod:`induction_probes.probes.report.task_views`: the registered attention
probes and the task's own metrics, as text, figures and a page), so that a new task needs no edit here. The
functions below dispatch to the run's view."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import induction_probes.circuits.runs.reader as reader
import induction_probes.probes.ablation.head_ablation as head_ablation
import induction_probes.probes.report.ablation_views as ablation_views
import induction_probes.probes.report.gaussian_views as gaussian_views
import induction_probes.probes.report.markov_html as markov_html
import induction_probes.probes.report.markov_probe_views as markov_probes
import induction_probes.probes.report.markov_views as markov_views
import induction_probes.probes.report.task_views as task_views
from induction_probes.circuits.defaults import PROBE_SEED, PROBE_SEQS
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.paths import path_argument, plot_folder
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.validation import quoted
from induction_probes.probes.report.run_ablation_series import run_series_view
from induction_probes.probes.report.view_protocols import Output, ProbeSet, ResolvedView

if TYPE_CHECKING:
    from induction_probes.circuits.devices import Device
    from induction_probes.circuits.runs.reader import Run, RunOrPath

# what a task's runs show, by task class: the package's own here, one from outside by register_task
TASK_VIEWS: dict[type, ResolvedView] = {
    MarkovTask: ResolvedView(
        markov_probes.probe_markov_report,
        ablation_views.ablate_markov,
        markov_views.markov_report,
        markov_html.markov_report_html,
    ),
    GaussianTask: ResolvedView(
        gaussian_views.probe_gaussian_report,
        ablation_views.ablate_gaussian,
        gaussian_views.gaussian_report,
        gaussian_views.refuse_gaussian_html,
    ),
}
# any other task's, without a view of its own
TASK_VIEW = ResolvedView(
    task_views.probe_task, task_views.ablate_task, task_views.task_report, task_views.task_report_html
)


def probed_run(run: RunOrPath):
    """``run`` (a Run, or a run's folder or shipped name, opened), unless it holds no attention heads to probe
    (the toy model's six parameters)."""
    run = reader.as_run(run)
    if run.kind == "toy":
        raise BadInput(f"run {run.path.name} is a toy-model run: six parameters, no attention heads to probe")
    return run


def view_of(run: Run) -> ResolvedView:
    """The view of the run's task: the package's own tasks', one registered from outside, or the task view."""
    return TASK_VIEWS.get(type(run.task), TASK_VIEW)


def probe_report(
    run: RunOrPath,
    steps: list[int] | str | None = None,
    n_seqs: int = PROBE_SEQS,
    seed: int = PROBE_SEED,
    *,
    device: Device = None,
    plot: Path | None = None,
    as_json: bool = False,
) -> str | dict[str, Any]:
    """The probes of ``steps`` (default: the last checkpoint; ``"all"``: every checkpoint) as the run's view
    shows them; ``plot`` a str or a Path."""
    run = probed_run(run)
    if steps is None:
        steps = [run.entry()["step"]]
    elif isinstance(steps, str):
        if steps != "all":  # a string would otherwise be read as its characters
            raise BadInput(f"steps is a list of saved steps or 'all', got {quoted(steps)}")
        steps = run.steps
    steps = run.saved_steps(steps)
    plot = plot_folder(plot)
    return view_of(run).probe(run, steps, ProbeSet(n_seqs, seed), Output(device, plot, as_json))


def ablation_report(
    run: RunOrPath,
    head_sets: list[list[tuple[int, int]]] | str | None = None,
    step: int | None = None,
    n_seqs: int = PROBE_SEQS,
    seed: int = PROBE_SEED,
    mode: str = "zero",
    *,
    device: Device = None,
    plot: Path | None = None,
    as_json: bool = False,
    all_steps: bool = False,
) -> str | dict[str, Any]:
    """The checkpoint at ``step`` (default the last) with each head set ablated (default: each head alone; a
    string "L.H,L.H" is one set) in ``mode`` (zero, mean or resample), on ``n_seqs`` fresh sequences drawn with
    ``seed``; with ``all_steps``, every head alone at every checkpoint of an ICL-MC run
    (:mod:`.run_ablation_series`)."""
    run, plot = probed_run(run), plot_folder(plot)
    if all_steps:
        if head_sets is not None or step is not None:
            raise BadInput("--all-steps ablates every head alone at every checkpoint: --heads and --step do not apply")
        return run_series_view(run, n_seqs, seed, mode, device=device, plot=plot, as_json=as_json)
    if isinstance(head_sets, str):  # one set as the command line writes it, "0.0,1.0", checked against the run
        cfg = run.model_config
        head_sets = [
            head_ablation.parse_heads(head_sets, cfg.n_layers, lambda layer: head_ablation.heads_in_layer(cfg, layer))
        ]
    saved_step: int = run.entry(step)["step"]
    model = run.load(step=saved_step, device=device)
    head_sets = head_ablation.single_heads(model) if head_sets is None else head_sets
    output = Output(device, plot, as_json)
    return view_of(run).ablate(run, model, head_sets, saved_step, mode, ProbeSet(n_seqs, seed), output)


def run_report(
    run: RunOrPath,
    *,
    device: Device = None,
    plot: Path | None = None,
    as_json: bool = False,
    html: Path | None = None,
) -> str | dict[str, Any]:
    """The run over training, as its view shows it; with ``html`` a folder, also its one-page report written
    there (refused first where the view has none), its path a last line of the text or ``report`` in the JSON."""
    run = reader.as_run(run)
    page = html_report(run, html, device) if html is not None else None
    report = view_of(run).report(run, Output(device, plot_folder(plot), as_json))
    if page is None:
        return report
    return report | {"report": str(page)} if isinstance(report, dict) else f"{report}\nreport: {page}"


def html_report(run: RunOrPath, directory: Path, device: Device = None) -> Path:
    """The run's one-page HTML report, written into ``directory`` (every figure embedded); its path."""
    run = reader.as_run(run)
    return view_of(run).html(run, path_argument("directory", directory), device)
