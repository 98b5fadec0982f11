"""Every probe across a run of any task: the checkpoints' probes (:mod:`.checkpoint_probes` for ICL-MC and
Gaussian-task runs, the registered probes for any other task), loaded lazily one checkpoint at a time, so that
probing a whole run costs one evaluation-set forward per checkpoint.
"""

from __future__ import annotations

from typing import Any, Protocol

from induction_probes.circuits.defaults import PROBE_SEED, PROBE_SEQS
from induction_probes.circuits.devices import Device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.registry import python_function
from induction_probes.circuits.runs.reader import Run, run_task
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.tasks.markov.strategies import MarkovEvalSet
from induction_probes.circuits.tasks.task_config import EvalSet
from induction_probes.probes.run_level.checkpoint_probes import (
    CheckpointProbes,
    GaussianProbes,
    probe_gaussian,
    probe_model,
)
from induction_probes.probes.run_level.run_probes import CheckpointResult, RunProbes
from induction_probes.probes.run_level.task_probes import TaskProbes, probe_task_model


class RunProbe(Protocol):
    """How a task's runs are probed: every one of ``steps`` on ``eval_set`` (None: the probe set's default)."""

    def __call__(self, run: Run, eval_set: Any, steps: list[int], device: Device, /) -> RunProbes[Any]: ...


RUN_PROBE = python_function("a run probe", "run", "eval_set", "steps", "device")  # what register_task checks


def probe_eval_set(run: Run, n_seqs: int, seed: int) -> MarkovEvalSet:
    """Fresh probe sequences from the run's ICL-MC task (a seed apart from its training and evaluation)."""
    return run_task(run, MarkovTask).eval_set(n_seqs, seed)


def probe_run(
    run: Run,
    eval_set: EvalSet | None = None,
    steps: list[int] | None = None,
    device: Device = None,
) -> RunProbes[CheckpointResult]:
    """Probes of every checkpoint (or of ``steps``), loading one checkpoint at a time onto ``device``, as one
    :class:`~induction_probes.probes.run_level.run_probes.RunProbes` (iterate it, or ``.to_frame()``). Without
    ``eval_set``, PROBE_SEQS fresh sequences of the run's task drawn with PROBE_SEED. How a run is probed is
    its task's entry in :data:`TASK_PROBES`, by task class: an ICL-MC run's
    checkpoints are :class:`~.checkpoint_probes.CheckpointProbes` (:func:`probe_markov_run`), a Gaussian-task
    run's :class:`~.checkpoint_probes.GaussianProbes` (:func:`probe_gaussian_run`), and a run of a registered task
    without an entry of its own gets :class:`~induction_probes.probes.run_level.task_probes.TaskProbes` (the
    registered attention probes and its task's metrics)."""
    chosen = run.steps if steps is None else run.saved_steps(steps)
    probe = TASK_PROBES.get(type(run.task), probe_task_run)
    probed = probe(run, eval_set, chosen, device)
    if not isinstance(probed, RunProbes):  # a task from outside may give its own function
        raise BadInput(f"the probe of the task {run.task.name} gave {type(probed).__name__}, not a RunProbes")
    return probed


def probe_markov_run(
    run: Run, eval_set: EvalSet | None, steps: list[int], device: Device = None
) -> RunProbes[CheckpointProbes]:
    """:func:`probe_model` of each of ``steps``: the probe of ICL-MC runs' task kind."""
    if eval_set is not None and not isinstance(eval_set, MarkovEvalSet):  # its strategies' KLs are read
        raise BadInput(f"an ICL-MC run is probed on ICL-MC sequences (task.eval_set), not a {type(eval_set).__name__}")
    probe_set = probe_eval_set(run, PROBE_SEQS, PROBE_SEED) if eval_set is None else eval_set
    checkpoints = [probe_model(run.load(step=step, device=device), probe_set, step) for step in steps]
    return RunProbes.collect(run, probe_set.inputs, checkpoints)


def probe_task_run(run: Run, eval_set, steps: list[int], device: Device = None) -> RunProbes[TaskProbes]:
    """:func:`~induction_probes.probes.run_level.task_probes.probe_task_model` of each of ``steps``: how a run of a task
    whose kind names no probe of its own is probed."""
    eval_set = run.task.eval_set(PROBE_SEQS, PROBE_SEED) if eval_set is None else eval_set
    checkpoints = [probe_task_model(run.load(step=step, device=device), eval_set, step) for step in steps]
    return RunProbes.collect(run, eval_set.inputs, checkpoints)


def probe_gaussian_run(run: Run, eval_set, steps: list[int], device: Device = None) -> RunProbes[GaussianProbes]:
    """:func:`probe_gaussian` of each of ``steps`` (on ``eval_set``, or PROBE_SEQS fresh sequences drawn with
    PROBE_SEED, its own defaults): the probe of Gaussian-task runs' kind. Its chance levels are the
    token probes' and do not apply, so the result carries none, nor their warnings."""
    checkpoints = [probe_gaussian(run, step, PROBE_SEQS, PROBE_SEED, device, probe_set=eval_set) for step in steps]
    return RunProbes(run, checkpoints, chance={}, warnings=[])


# how a task's runs are probed, by task class: the package's own here, one from outside by register_task; a task
# without an entry gets probe_task_run
TASK_PROBES: dict[type, RunProbe] = {MarkovTask: probe_markov_run, GaussianTask: probe_gaussian_run}
