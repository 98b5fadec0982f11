"""What ``probe``, ``ablate`` and ``report`` show for a run, chosen by its task's registered name: ICL-MC and
Gaussian-task runs have views of their own; a run of any other registered task gets the task view
(:mod:`induction_probes.cli.task_view`: the registered attention probes and the task's own metrics), so that a
new task needs no edit here. A task from outside may register a view of its own.

A view names three functions by ``"module:function"`` (resolved once the command runs, so that building the
parser imports none of them): ``probe(run, args)``, ``ablate(run, model, head_sets, args)`` and
``report(run, args)``, each returning the command's text."""

from __future__ import annotations

from dataclasses import dataclass

from induction_probes.circuits.common.registry import Registry, resolve


@dataclass(frozen=True)
class TaskView:
    probe: str
    ablate: str
    report: str

    def show(self, command: str, *args):
        return resolve(getattr(self, command))(*args)


VIEWS = Registry("task view", __name__)
VIEWS.register(
    "markov",
    TaskView(
        "induction_probes.cli.probe:probe_markov_text",
        "induction_probes.cli.probe:ablate_markov_text",
        "induction_probes.cli.report_html:markov_report",
    ),
)
VIEWS.register(
    "gaussian",
    TaskView(
        "induction_probes.cli.probe:probe_gaussian_text",
        "induction_probes.cli.probe:gaussian_ablation_text",
        "induction_probes.cli.report:gaussian_report",
    ),
)
TASK_VIEW = TaskView(
    "induction_probes.cli.task_view:probe_task_text",
    "induction_probes.cli.task_view:ablate_task_text",
    "induction_probes.cli.task_view:report_task_text",
)


def view_of(run) -> TaskView:
    """The view of the run's task: its own, or the task view of any registered task."""
    name = run.task.name
    return VIEWS.get(name) if name in VIEWS else TASK_VIEW
