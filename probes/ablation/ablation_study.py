"""Head-ablation studies: a model's behaviour (ICL-MC) or error (the Gaussian task) clean and with each set of
heads ablated (the hooks: :mod:`.head_ablation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from induction_probes.circuits.defaults import PROBE_SEED, PROBE_SEQS
from induction_probes.circuits.devices import Device, model_device
from induction_probes.circuits.metrics import mse_over_variance
from induction_probes.circuits.names import head_label
from induction_probes.circuits.runs.reader import Run, run_task
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.tasks.markov.strategies import MarkovEvalSet
from induction_probes.probes.ablation.head_ablation import reference_inputs_for, run_ablated
from induction_probes.probes.behaviour.icl_behaviour import Behaviour, behaviour
from induction_probes.probes.intervals import bootstrap_mean_interval
from induction_probes.probes.tidy import Tidy, ablation_records

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel
    from induction_probes.circuits.tasks.task_config import Task


@dataclass(frozen=True)
class AblationResult(Tidy):
    heads: list[tuple[int, int]]
    mode: str
    behaviour: Behaviour

    def to_json(self) -> dict:
        b = self.behaviour
        return {
            "heads": [head_label(layer, head) for layer, head in self.heads],
            "mode": self.mode,
            "last_token_kl": b.last_token_kl,
            "loss": b.loss,
            "icl_score": b.icl_score,
            "icl_score_single_position": b.icl_score_single_position,
            "intervals": {name: e.to_json() for name, e in b.intervals.items()},
            "closest_strategy": b.closest_strategy,
        }

    def to_records(self, sequences_seen: int | None = None, step: int | None = None) -> list[dict]:
        return ablation_records(self, step, sequences_seen)


def ablation_study(
    model: HookedModel,
    eval_set: MarkovEvalSet,
    head_sets: list[list[tuple[int, int]]],
    mode: str,
    reference_inputs: Tensor | None = None,
    seed: int = 0,
    task: Task | None = None,
) -> tuple[Behaviour, list[AblationResult]]:
    """The clean model's behaviour and the behaviour with each set of heads ablated; mean and resample
    take ``reference_inputs``, or the default set of ``task``
    (:func:`~induction_probes.probes.ablation.head_ablation.reference_inputs_for`)."""
    if mode != "zero" and reference_inputs is None and task is not None:
        reference_inputs = reference_inputs_for(task)  # drawn once for every head set
    with torch.no_grad():
        baseline = behaviour(model(eval_set.sample.inputs.to(model_device(model))).cpu(), eval_set)
    results = [
        AblationResult(
            heads,
            mode,
            behaviour(run_ablated(model, eval_set.sample.inputs, heads, mode, reference_inputs, seed), eval_set),
        )
        for heads in head_sets
    ]
    return baseline, results


class RelativeMse(float):
    """A relative MSE, a float as every reader of an ablation study takes it (text, JSON, comparisons), that also
    carries its 95 % interval over the sequences for the figures: ``low`` and ``high`` (None with one sequence)."""

    low: float | None = None
    high: float | None = None


def relative_mse(prediction: Tensor, target: Tensor) -> RelativeMse:
    """:func:`mse_over_variance` with a percentile bootstrap over sequences of the per-sequence squared error's
    mean, over the target's variance held fixed (over the probe's 1,000 sequences it moves far less than the mean
    error does); a resampled mean stays between the smallest and largest errors, so the interval stays ≥ 0."""
    value = RelativeMse(mse_over_variance(prediction, target))
    per_sequence = ((prediction.double() - target.double()) ** 2).reshape(len(target), -1).mean(-1)
    _, low, high = bootstrap_mean_interval(per_sequence)
    if not low.isnan():
        variance = target.double().var().item()
        value.low, value.high = low.item() / variance, high.item() / variance
    return value


def gaussian_ablation_study(
    run: Run,
    head_sets: list[list[tuple[int, int]]],
    mode: str,
    step: int | None = None,
    n_seqs: int = PROBE_SEQS,
    seed: int = PROBE_SEED,
    device: Device = None,
) -> tuple[RelativeMse, list[tuple[list[tuple[int, int]], RelativeMse]]]:
    """Relative MSE of a Gaussian-task model at the last position, clean and with each head set ablated
    (the Gaussian counterpart of :func:`ablation_study`, MSE in place of KL), each a :class:`RelativeMse` with its
    interval over the sequences."""
    task = run_task(run, GaussianTask)
    model = run.load(step=step, device=device)
    probe_set = task.eval_set(n_seqs, seed)
    reference = task.eval_set(n_seqs, seed + 1).inputs  # other sequences
    with torch.no_grad():
        baseline = relative_mse(model(probe_set.inputs.to(model_device(model))).cpu()[:, -1], probe_set.targets)
    ablated = [
        (
            heads,
            relative_mse(run_ablated(model, probe_set.inputs, heads, mode, reference, seed)[:, -1], probe_set.targets),
        )
        for heads in head_sets
    ]
    return baseline, ablated
