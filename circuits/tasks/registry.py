"""The task registry: every task a run may be trained on, by the name its ``config.json`` writes
(``task.name``). A registration is the task's config class (:class:`~induction_probes.circuits.tasks.base.TaskConfig`),
whose ``name`` is the registered name.

Imports nothing heavy: the entries are resolved on first use."""

from __future__ import annotations

from induction_probes.circuits.common.registry import Expects, Registry


def is_task_class(entry: object) -> bool:
    from induction_probes.circuits.tasks.base import TaskConfig  # torch-free; needed once an entry resolves

    return isinstance(entry, type) and issubclass(entry, TaskConfig)


TASKS = Registry("task", __name__, Expects("a task config class (a TaskConfig)", is_task_class))
TASKS.register("markov", "induction_probes.circuits.tasks.markov.task:MarkovTask")
TASKS.register("gaussian", "induction_probes.circuits.tasks.gaussian.task:GaussianTask")
TASKS.register("text", "induction_probes.circuits.tasks.text:TextTask")
