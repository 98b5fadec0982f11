"""AtP*'s GradDrop (Kramár et al. 2024), the screen's guard against paths that cancel to first order
(:mod:`.attribution`): the gradient of a pass with one layer's writes to the residual stream cut from the backward
pass, for each layer in turn from one forward pass, and each head's size, the larger of |AtP*| and GradDrop's
score (1 / (L − 1)) Σ_ℓ |ĉ_ℓ|.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.probes.intervals import percentiles, resampling_weights
from induction_probes.probes.lm.measure import HeadEstimate

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel


class GradientGates:
    """GradDrop's cut of the backward pass: hooks on every layer's writes to the residual stream (its attention's
    output and its MLP's, where the model names them) that pass the forward pass unchanged and, in
    :meth:`gradients`, the gradient back unchanged except through the layer ``dropped``, whose gradient is 0."""

    def __init__(self) -> None:
        self.dropped: int | None = None

    def hooks(self, model: HookedModel) -> list[tuple[str, object]]:
        names = getattr(model, "hook_dict", None) or {}
        writes = [
            (layer, f"blocks.{layer}.{part}")
            for layer in range(model.cfg.n_layers)
            for part in ("hook_attn_out", "hook_mlp_out")
        ]
        missing = [name for _, name in writes if name.endswith("attn_out") and name not in names]
        if missing:
            raise BadInput(f"{type(model).__name__} has no hook point {missing[0]}: GradDrop cannot run on it")
        return [(name, self.gate(layer)) for layer, name in writes if name in names]

    def gate(self, layer: int):
        def hook(activation: Tensor, hook) -> Tensor:
            return DroppableGradient.apply(activation, self, layer)

        return hook

    def gradients(self, loss: Tensor, inputs: list[Tensor], dropped: int | None) -> tuple[Tensor | None, ...]:
        """∂loss/∂inputs with layer ``dropped``'s gradient set to 0 (None: none dropped); the graph is kept for
        the next call. An input that nothing downstream reads has None."""
        self.dropped = dropped
        try:
            return torch.autograd.grad(loss, inputs, retain_graph=True, allow_unused=True)
        finally:
            self.dropped = None


class DroppableGradient(torch.autograd.Function):
    """The identity, whose backward pass gives 0 while its :class:`GradientGates` drops its layer."""

    @staticmethod
    def forward(ctx, activation: Float[Tensor, ...], gates: GradientGates, layer: int) -> Float[Tensor, ...]:
        ctx.gates, ctx.layer = gates, layer
        return activation.view_as(activation)

    @staticmethod
    def backward(ctx, *grad_outputs: Tensor) -> tuple[Tensor, None, None]:
        (gradient,) = grad_outputs  # forward has one output: autograd passes its gradient alone
        return (torch.zeros_like(gradient) if ctx.gates.dropped == ctx.layer else gradient), None, None


def head_sizes(per_sequence: Float[Tensor, "batch variant layer head"]) -> HeadEstimate:
    """Each head's size, max(|mean ĉ|, (1 / (L − 1)) Σ_ℓ |mean ĉ_ℓ|), from each sequence's AtP* estimate ĉ
    (variant 0) and its estimates ĉ_ℓ with layer ℓ's gradient dropped (variant 1 + ℓ, none in a one-layer model),
    with its percentile-bootstrap interval over sequences. Sizes: the interval lies at or above 0."""
    values = per_sequence.double()
    n, n_dropped = values.shape[0], values.shape[1] - 1

    def size(means: Tensor) -> Tensor:  # [..., variant, layer, head] -> [..., layer, head]
        whole = means[..., 0, :, :].abs()
        return whole if n_dropped < 2 else torch.maximum(whole, means[..., 1:, :, :].abs().sum(-3) / (n_dropped - 1))

    point = size(values.mean(0))
    if n == 1:
        nan = torch.full_like(point, math.nan)
        return HeadEstimate(point, nan, nan.clone())
    means = (resampling_weights(n) @ values.reshape(n, -1)).reshape(-1, *values.shape[1:])
    return HeadEstimate(point, *percentiles(size(means)))
