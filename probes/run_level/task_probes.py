"""Probes of a run of any registered task that has no probes of its own (a task from outside the package): every
registered attention probe (:mod:`~induction_probes.probes.attention.probe_registry`) on fresh sequences of the run's
task, and the task's own evaluation metrics (its ``EvalSet.metrics``) of the model's outputs on them, clean or with
heads ablated. ICL-MC runs get :func:`~induction_probes.probes.run_level.checkpoint_probes.probe_model` (which adds
the behaviour and progress probes), Gaussian-task runs
:func:`~induction_probes.probes.run_level.checkpoint_probes.probe_gaussian`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from induction_probes.circuits.devices import model_device
from induction_probes.probes.ablation.head_ablation import run_ablated
from induction_probes.probes.attention.probe_registry import attention_probes
from induction_probes.probes.tidy import Tidy, per_head, row

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel


def scalar_metrics(metrics: dict) -> dict[str, float]:
    """The finite numbers among a task's metrics (what a table or a summary can show)."""
    return {
        name: float(value)
        for name, value in metrics.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    }


@dataclass(frozen=True)
class TaskProbes(Tidy):
    """A checkpoint on fresh sequences of its task: each registered probe's per-layer [head] values and the
    task's metrics of the model's outputs."""

    step: int
    scores: dict[str, list[Tensor]]
    metrics: dict

    def to_json(self) -> dict:
        layers = {name: [layer.tolist() for layer in values] for name, values in self.scores.items()}
        return {"step": self.step, **layers, "metrics": self.metrics}

    def to_records(self, sequences_seen: int | None = None) -> list[dict]:
        rows = [r for name, values in self.scores.items() for r in per_head(self.step, sequences_seen, name, values)]
        return rows + [
            row(self.step, sequences_seen, None, None, name, value)
            for name, value in scalar_metrics(self.metrics).items()
        ]


def probe_task_model(model: HookedModel, eval_set, step: int = -1, chunk: int = 100) -> TaskProbes:
    """Every registered attention probe of ``model`` on ``eval_set.inputs`` and the task's metrics of its outputs."""
    outputs, scores, _ = attention_probes(model, eval_set.inputs, chunk)
    return TaskProbes(step, {name: score.values for name, score in scores.items()}, eval_set.metrics(outputs))


def task_ablation_study(
    model: HookedModel,
    eval_set,
    head_sets: list[list[tuple[int, int]]],
    mode: str,
    reference_inputs: Tensor,
    seed: int = 0,
) -> tuple[dict, list[tuple[list[tuple[int, int]], dict]]]:
    """The task's metrics of the clean model and with each set of heads ablated (mean and resample take
    ``reference_inputs``: other sequences of the task)."""
    with torch.no_grad():
        baseline = eval_set.metrics(model(eval_set.inputs.to(model_device(model))).cpu())
    ablated = [
        (heads, eval_set.metrics(run_ablated(model, eval_set.inputs, heads, mode, reference_inputs, seed)))
        for heads in head_sets
    ]
    return baseline, ablated
