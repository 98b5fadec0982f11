"""A task in one call: :func:`register_task` writes its kind (the task class and the recipes that train on it) into
:data:`~induction_probes.circuits.recipes.task_kinds.TASK_KINDS`, how its runs are probed into
:data:`~induction_probes.probes.run_level.all_probes.TASK_PROBES`, and what ``probe``, ``ablate`` and ``report``
show for them into :data:`~induction_probes.probes.report.run_views.TASK_VIEWS`. The registration layer
(``circuits/``) holds only the first, since it may not import the probes; a sweep's workers only train, so they
are sent the kind alone."""

from __future__ import annotations

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.recipes.task_kinds import TASK_KINDS, TaskKind, register_kind, unregister_kind
from induction_probes.circuits.validation import quoted
from induction_probes.probes.report.run_views import TASK_VIEWS
from induction_probes.probes.report.view_protocols import TaskView, function_of, resolved
from induction_probes.probes.run_level.all_probes import RUN_PROBE, TASK_PROBES, RunProbe


def register_task(
    kind: TaskKind, *, probe: RunProbe | str | None = None, view: TaskView | None = None, replace: bool = False
) -> TaskKind:
    """Register ``kind`` under its task's name, with how its runs are probed (``probe(run, eval_set, steps,
    device)`` returning a ``RunProbes``) and shown (a :class:`TaskView`); either None: the generic one. A function
    may be given as its ``"module:function"``: each is imported and checked here, once, before anything is
    written, so that a refusal leaves the tables as they were."""
    if not isinstance(kind, TaskKind):
        raise BadInput(f"register_task takes a TaskKind, got {quoted(kind)}")
    if view is not None and not isinstance(view, TaskView):
        raise BadInput(f"the view of the task {kind.name} is a TaskView, got {quoted(view)}")
    what = f"of the task {kind.name}"
    own_probe = None if probe is None else function_of(probe, f"the probe {what}", RUN_PROBE)
    own_view = None if view is None else resolved(view, what)
    register_kind(kind, replace=replace)
    TASK_PROBES.pop(kind.task, None)  # a replaced kind's own probe and view go with it
    TASK_VIEWS.pop(kind.task, None)
    if own_probe is not None:
        TASK_PROBES[kind.task] = own_probe
    if own_view is not None:
        TASK_VIEWS[kind.task] = own_view
    return kind


def unregister_task(kind: TaskKind | str) -> None:
    """Undo :func:`register_task`: the kind (or the kind registered under that task name), its recipes, and its
    probe and view."""
    task = TASK_KINDS.get(kind.name if isinstance(kind, TaskKind) else kind).task
    unregister_kind(task.name)
    TASK_PROBES.pop(task, None)
    TASK_VIEWS.pop(task, None)
