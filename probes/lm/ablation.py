"""Head ablation in a language model, measured on repeated random tokens: how much of what induction buys
(the gap between the first copy's loss and the repeated copy's) goes when a head's output is removed.

The ablation itself is :func:`~induction_probes.probes.ablation.head_ablation.ablation_hooks` (``hook_z``; zero, mean or
resample). Mean and resample read the reference sequences chunk by chunk beside the probed ones: the
mean is over a chunk's sequences and positions, and a resampled sequence comes from the same chunk.

Every effect is paired: the ablated and the clean model read the same sequences, and the effect is the
per-sequence difference (ablated − clean) with its Student-t interval; the share of the gap removed is a ratio
of means with a percentile-bootstrap interval that resamples the sequences for both at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from induction_probes.circuits.common.devices import model_device
from induction_probes.circuits.common.limits import require_seed
from induction_probes.circuits.common.names import head_label
from induction_probes.probes.ablation.head_ablation import MODES, ablation_hooks, check_heads, heads_in_layer
from induction_probes.probes.intervals import Estimate, bootstrap_ratio_interval, mean_interval
from induction_probes.probes.lm.measure import chunk_size, chunked, per_token_loss
from induction_probes.probes.lm.protocols import InductionLoss, RepeatedTokens, estimate_json, induction_loss

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel


@dataclass(frozen=True)
class HeadAblation:
    """The induction loss with ``heads`` ablated, against the clean model's ``baseline`` on the same sequences."""

    heads: list[tuple[int, int]]
    mode: str
    loss: InductionLoss
    baseline: InductionLoss

    @property
    def increase(self) -> Estimate:
        """How much the repeated copy's loss rose, paired per sequence, with its interval."""
        return mean_interval(self.loss.repeated_half_per_sequence - self.baseline.repeated_half_per_sequence)

    @property
    def loss_increase(self) -> float:
        return self.increase.value

    @property
    def share(self) -> Estimate:
        """The rise as a share of the clean model's gap (1: the repeat becomes as hard as the first copy),
        with its bootstrap interval; None bounds where the clean model has no gap to remove."""
        rise = self.loss.repeated_half_per_sequence - self.baseline.repeated_half_per_sequence
        return bootstrap_ratio_interval(rise, self.baseline.gap_per_sequence)

    @property
    def gap_removed(self) -> float:
        return self.share.value if self.baseline.gap > 0 else float("nan")

    def to_json(self) -> dict:
        return {
            "heads": [head_label(layer, head) for layer, head in self.heads],
            "mode": self.mode,
            **self.loss.to_json(),
            "loss_increase": estimate_json(self.increase),
            "gap_removed": estimate_json(self.share) if self.baseline.gap > 0 else None,
        }


def ablated_loss(
    model: HookedModel, repeated: RepeatedTokens, heads, mode: str, reference: RepeatedTokens | None, seed: int
) -> InductionLoss:
    """:class:`InductionLoss` with ``heads`` ablated together (none: the clean model)."""
    tokens = repeated.tokens.to(model_device(model))
    ref = None if reference is None else reference.tokens
    if ref is not None and ref.shape != tokens.shape:
        raise ValueError("the reference sequences must have the probed sequences' shape")

    def losses(rows: slice) -> torch.Tensor:
        part = tokens[rows]
        hooks = (
            ablation_hooks(model, heads, mode, None if ref is None else ref[rows], seed + rows.start) if heads else []
        )
        with torch.no_grad():
            return per_token_loss(model.run_with_hooks(part, fwd_hooks=hooks), part).cpu()

    per_token = chunked(losses, tokens.shape[0], chunk_size(model, tokens.shape[1]))
    return induction_loss(per_token, repeated)


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown ablation mode {str(mode)[:200]!r}: use zero, mean or resample")


def ablate(
    model: HookedModel,
    repeated: RepeatedTokens,
    head_sets: list[list[tuple[int, int]]],
    mode: str = "zero",
    reference: RepeatedTokens | None = None,
    seed: int = 0,
    progress=None,
) -> tuple[InductionLoss, list[HeadAblation]]:
    """The clean model's :class:`InductionLoss` and each head set's ablation, in the order of ``head_sets``.
    ``reference`` (mean, resample): other repeated random sequences of the same shape, e.g. the same protocol
    with another seed. ``progress``: wraps the head sets (a tqdm bar)."""
    check_mode(mode)
    require_seed("the seed", seed)
    if not isinstance(repeated, RepeatedTokens):
        raise TypeError("ablate reads a RepeatedTokens (lm.repeated_random_tokens), not plain tokens")
    if isinstance(head_sets, (str, bytes)) or not head_sets:
        raise ValueError("give at least one head set, a list of (layer, head) pairs")
    for heads in head_sets:
        check_heads(heads, model.cfg.n_layers, lambda layer: heads_in_layer(model.cfg, layer))
    if mode != "zero" and reference is None:
        raise ValueError(f"{mode} ablation needs reference sequences")
    baseline = ablated_loss(model, repeated, [], mode, reference, seed)
    measure = lambda heads: ablated_loss(model, repeated, heads, mode, reference, seed)  # noqa: E731
    return baseline, [
        HeadAblation(list(heads), mode, measure(heads), baseline) for heads in (progress or list)(head_sets)
    ]
