"""Divergences, errors and fits, written once for tasks, training, constructions and probes.

The two relative errors are named by their denominator: :func:`mse_over_variance` (1 = as good as
predicting the target's mean) and :func:`mse_over_mean_square` (1 = as bad as predicting 0)."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor


def kl_divergence(p: Float[Tensor, "... k"], log_q: Float[Tensor, "... k"]) -> Float[Tensor, ...]:
    """KL(p ‖ q) = Σ_b p(b) (log p(b) − log q(b)), in nats, with 0·log 0 = 0.

    ``q`` is passed as log-probabilities so that model logits go through ``log_softmax`` once, without
    a round trip through probabilities that would underflow.
    """
    cross = torch.where(p > 0, p * log_q, 0.0)  # a zero-probability token costs nothing, even where q = 0
    return (torch.xlogy(p, p) - cross).sum(-1)


def token_cross_entropy(log_q: Float[Tensor, "... k"], targets: Int[Tensor, ...]) -> Float[Tensor, ...]:
    """−log q(target) at every position: the per-token loss of a predictor on sampled tokens."""
    return -log_q.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def last_column_mean(values: Float[Tensor, " batch"], n_pos: int) -> float:
    """The mean of ``values`` as ``mean(0)`` of a [batch, n_pos] tensor computes its last column: the same
    reduction over the same layout gives the same bits, whatever the other columns hold, while the mean of
    a [batch] vector sums in another order (it can differ in the last bit). Evaluation metrics averaged
    this way equal those of a per-position average, for the cost of one position."""
    grid = values.new_zeros(values.shape[0], n_pos)
    grid[:, -1] = values
    return grid.mean(0)[-1].item()


def mse_over_variance(prediction: Float[Tensor, "batch d"], target: Float[Tensor, "batch d"]) -> float:
    """Mean squared error over the target's variance: 0 is exact, 1 is as good as predicting its mean.
    Use it for trained models, whose bias can learn the mean."""
    target = target.double()
    return ((prediction.double() - target) ** 2).mean().item() / target.var().item()


def mse_over_mean_square(prediction: Float[Tensor, "batch d"], target: Float[Tensor, "batch d"]) -> float:
    """E‖prediction − target‖² / E‖target‖²: 0 is exact, 1 is as bad as predicting 0. Use it for
    constructions, whose error the papers bound relative to the target itself."""
    return (((prediction - target) ** 2).sum(-1).mean() / (target**2).sum(-1).mean()).item()


def linear_fit(x: Float[Tensor, " n"], y: Float[Tensor, " n"]) -> tuple[float, float, float]:
    """Least-squares line y ≈ slope·x + intercept: (slope, intercept, R²)."""
    x, y = x.double(), y.double()
    slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
    intercept = y.mean() - slope * x.mean()
    r2 = 1 - ((y - slope * x - intercept) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    return slope.item(), intercept.item(), r2.item()
