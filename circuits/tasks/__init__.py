"""The tasks: what a model is trained and probed on, one folder per task (``markov/``: ICL-MC, Edelman et al. 2024;
``gaussian/``: Wang et al.'s Gaussian induction task), each a torch-free config beside the maths it calls.

A task draws training batches from a ``torch.Generator`` (a :class:`~induction_probes.circuits.tasks.base.Stream`),
computes the training loss, and draws a fixed evaluation set (with a seed of its own) that scores a model's outputs;
probes draw their inputs the same way, with another seed. ``to_json`` describes the task in a run's ``config.json``,
and :func:`task_from_json` reads it back through the task registry (:mod:`~induction_probes.circuits.tasks.registry`),
where a task from outside the package registers too.
"""

from __future__ import annotations

from typing import Any

from induction_probes.circuits.common.validation import quoted
from induction_probes.circuits.tasks.base import TaskConfig
from induction_probes.circuits.tasks.registry import TASKS


def task_from_json(values: Any) -> TaskConfig:
    """The task a run's ``config.json`` describes (``{"name": ..., parameters}``)."""
    if not isinstance(values, dict) or not isinstance(values.get("name"), str) or values["name"] not in TASKS:
        raise ValueError(f"not a known task description (tasks: {', '.join(TASKS)}): {quoted(values)}")
    parameters = {key: value for key, value in values.items() if key != "name"}
    return TASKS.get(values["name"]).from_dict(parameters)
