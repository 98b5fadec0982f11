"""Divergences between next-token distributions, written once for tasks, training and probes."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor


def kl_divergence(
    p: Float[Tensor, "... k"], log_q: Float[Tensor, "... k"]
) -> Float[Tensor, "..."]:
    """KL(p ‖ q) = Σ_b p(b) (log p(b) − log q(b)), in nats, with 0·log 0 = 0.

    ``q`` is passed as log-probabilities so that model logits go through ``log_softmax`` once, without
    a round trip through probabilities that would underflow.
    """
    cross = torch.where(p > 0, p * log_q, 0.0)  # a zero-probability token costs nothing, even where q = 0
    return (torch.xlogy(p, p) - cross).sum(-1)


def token_cross_entropy(
    log_q: Float[Tensor, "... k"], targets: Int[Tensor, "..."]
) -> Float[Tensor, "..."]:
    """−log q(target) at every position: the per-token loss of a predictor on sampled tokens."""
    return -log_q.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
