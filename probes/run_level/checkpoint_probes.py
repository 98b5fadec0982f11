"""Every probe on one checkpoint: an ICL-MC model's attention scores, behaviour and progress measures
(:func:`probe_model`, one forward pass giving both the attention patterns and the logits), and a Gaussian-task
model's (:func:`probe_gaussian`). :mod:`.all_probes` probes a run's checkpoints with them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.defaults import PROBE_SEED, PROBE_SEQS
from induction_probes.circuits.devices import Device, on_cpu
from induction_probes.circuits.metrics import mse_over_variance
from induction_probes.circuits.runs.reader import Run, run_task
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.tasks.markov.strategies import MarkovEvalSet
from induction_probes.probes.attention.patterns import (
    induction_score,
    positional_profile_per_sequence,
    previous_token_score,
    run_with_patterns,
)
from induction_probes.probes.attention.probe_registry import attention_probes
from induction_probes.probes.attention.scores import score_intervals
from induction_probes.probes.behaviour.icl_behaviour import Behaviour, behaviour
from induction_probes.probes.behaviour.window_readout import window_readout
from induction_probes.probes.intervals import bootstrap_mean_interval, resampling_weights
from induction_probes.probes.progress.progress_measures import ProgressMeasures, progress_measures, unmeasurable_reason
from induction_probes.probes.tidy import Tidy, gaussian_records, probe_records

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import WeightedModel
    from induction_probes.circuits.tasks.gaussian.sequences import GaussianEvalSet

QUERY_0 = "blocks.0.attn.hook_q"  # one forward pass also feeds layer 0's positional profile


@dataclass(frozen=True)
class CheckpointProbes(Tidy):
    step: int
    scores: dict[
        str, list[Tensor]
    ]  # per registered probe (probes/attention/probe_registry.py), per layer: [heads of that layer]
    fraction_with_match: float
    positional_profile: Tensor | None  # [n_heads, distance] of layer 0, if it has relative positions
    behaviour: Behaviour
    progress: ProgressMeasures | None  # the circuit's pieces read from the weights, where they apply
    # (low, high) over the probe sequences: per registered probe, per layer, [heads] each (NaN bounds for a probe
    # that gives no per-sequence parts); and of "fraction_with_match" and the positional profile's measures
    intervals: dict[str, list[tuple[Tensor, Tensor]]] = field(default_factory=dict)

    @property
    def previous_token(self) -> list[Tensor]:
        return self.scores["previous_token"]

    @property
    def bigram_matching(self) -> list[Tensor]:  # attention mass on matching keys
        return self.scores["bigram_matching"]

    @property
    def bigram_matching_ideal(self) -> list[Tensor]:  # 1 − TV to uniform over matching keys
        return self.scores["bigram_matching_ideal"]

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            **{name: [layer.tolist() for layer in layers] for name, layers in self.scores.items()},
            "fraction_with_match": self.fraction_with_match,
            "last_token_kl": self.behaviour.last_token_kl,
            "loss": self.behaviour.loss,
            "icl_score": self.behaviour.icl_score,
            "icl_score_single_position": self.behaviour.icl_score_single_position,
            "intervals": {name: e.to_json() for name, e in self.behaviour.intervals.items()},
            "closest_strategy": self.behaviour.closest_strategy,
            "progress": None if self.progress is None else self.progress.to_json(),
        }

    def to_records(self, sequences_seen: int | None = None) -> list[dict[str, Any]]:
        return probe_records(self, sequences_seen)


def probe_model(model: WeightedModel, eval_set: MarkovEvalSet, step: int = -1, chunk: int = 100) -> CheckpointProbes:
    """The registered attention probes (:mod:`~induction_probes.probes.attention.probe_registry`) and the behaviour
    probes of
    ``model`` on the evaluation set.

    Runs ``chunk`` sequences at a time: [chunk, head, T, T] patterns stay small enough for the
    allocator to reuse (1000-sequence patterns made the kernel page memory in and out, doubling the
    time), and every score is an exact weighted mean of the chunks' scores.
    """
    inputs = eval_set.sample.inputs
    W_rel = getattr(model.blocks[0].attn, "W_rel", None)
    outputs, scores, captured = attention_probes(model, inputs, chunk, [QUERY_0])
    intervals = {name: score_intervals(score) for name, score in scores.items()}
    matching = scores["bigram_matching"].per_sequence
    assert matching is not None  # bigram matching always gives its per-sequence parts (scores.bigram_matching)
    matches = matching[1] / inputs.shape[1]  # each sequence's share of queries
    _, low, high = bootstrap_mean_interval(matches)
    intervals["fraction_with_match"] = [(low.reshape(1), high.reshape(1))]
    profile = None
    if W_rel is not None:
        per_sequence = torch.cat([positional_profile_per_sequence(q, W_rel) for q in captured[QUERY_0]])
        profile = per_sequence.mean(0)
        intervals |= positional_intervals(per_sequence)
    return CheckpointProbes(
        step=step,
        scores={name: score.values for name, score in scores.items()},
        fraction_with_match=scores["bigram_matching"].weight / inputs.shape[0],
        positional_profile=profile,
        behaviour=behaviour(outputs, eval_set),
        progress=None if unmeasurable_reason(model) else progress_measures(on_cpu(model), step),  # weights only
        intervals=intervals,
    )


def positional_intervals(per_sequence: Float[Tensor, "batch head distance"]) -> dict[str, list[tuple]]:
    """Intervals over sequences of layer 0's profile at distance 1 (a bootstrap of its mean) and of its peak (the
    distance where each resample's mean profile peaks: the central 95 % of those distances)."""
    at_1 = bootstrap_mean_interval(per_sequence[:, :, 1])[1:]
    n = per_sequence.shape[0]
    if n == 1:
        nan = torch.full((per_sequence.shape[1],), math.nan, dtype=torch.float64)
        return {"positional_profile_at_1": [at_1], "positional_profile_peak": [(nan, nan)]}
    means = (resampling_weights(n) @ per_sequence.double().reshape(n, -1)).reshape(-1, *per_sequence.shape[1:])
    peaks = means.argmax(-1).double()  # [resample, head]
    bounds = torch.quantile(peaks, torch.tensor([0.025, 0.975], dtype=torch.float64), dim=0, interpolation="nearest")
    return {"positional_profile_at_1": [at_1], "positional_profile_peak": [(bounds[0], bounds[1])]}


@dataclass(frozen=True)
class GaussianProbes(Tidy):
    """A Gaussian-task checkpoint on fresh sequences: error and the two heads of the circuit."""

    step: int
    relative_mse: float  # last-position MSE over the target's variance
    previous_token: list[list[float]]  # [layer][head]
    induction: list[float]  # layer 1's heads: 1 − TV to the target's attention
    window_r2: list[float]  # held-out R² of x_{s−i} after layer 0, i = 0 … n (probes/behaviour/window_readout.py)
    target_r2_after_layer0: float  # and of the target at the last position

    def to_json(self) -> dict[str, Any]:
        return vars(self)

    def to_records(self, sequences_seen: int | None = None) -> list[dict[str, Any]]:
        return gaussian_records(self, sequences_seen)


def probe_gaussian(
    run: Run,
    step: int | None = None,
    n_seqs: int = PROBE_SEQS,
    seed: int = PROBE_SEED,
    device: Device = None,
    probe_set: GaussianEvalSet | None = None,
) -> GaussianProbes:
    """A Gaussian-task checkpoint (default the last) on ``probe_set``, or on ``n_seqs`` fresh sequences
    drawn with ``seed``."""
    task = run_task(run, GaussianTask)
    model = run.load(step=step, device=device)
    probe_set = task.eval_set(n_seqs, seed) if probe_set is None else probe_set
    output, patterns = run_with_patterns(model, probe_set.inputs)
    return GaussianProbes(
        step=run.entry(step)["step"],
        relative_mse=mse_over_variance(output[:, -1], probe_set.targets),
        previous_token=[previous_token_score(p).tolist() for p in patterns],
        induction=induction_score(patterns[1], probe_set.x, task.W_star(), task.order).tolist(),
        **window_readout(model, probe_set.x, probe_set.targets, task.order),
    )
