"""The logit space a model reads out into, in the terms the comparisons and progress measures share: a
residual-stream direction through the final LayerNorm, and a logit-space matrix without the all-ones
direction that no prediction depends on."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from jaxtyping import Float
from torch import Tensor

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import WeightedModel


def through_final_norm(model: WeightedModel, out: Tensor) -> Float[Tensor, "... d_model"]:
    """``out`` (rows in the residual stream) through the final LayerNorm's centring and gain, if the model
    has one; its positive per-row scale is left out: it changes no sign and no argmax of the logits."""
    gain = getattr(model.ln_final, "w", None)  # a LayerNorm's gain; an identity has none
    if not isinstance(gain, Tensor):
        return out
    return (out - out.mean(-1, keepdim=True)) * gain.to(out.dtype)


def shift_free(matrix: Tensor) -> Float[Tensor, "k_1 k_1"]:
    """``matrix`` on the k − 1 directions orthogonal to all-ones, in both its input and its output.

    Adding a constant to every logit changes no prediction, and a final LayerNorm removes exactly that
    direction, so eigenvalues are only meaningful on the rest: Qᵀ M Q with Q an orthonormal basis of it.
    """
    k = matrix.shape[0]
    centre = torch.eye(k, dtype=matrix.dtype) - 1.0 / k
    basis = torch.linalg.svd(centre).U[:, : k - 1]
    return basis.T @ matrix @ basis
