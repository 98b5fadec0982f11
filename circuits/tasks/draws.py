"""Random draws that take a ``torch.Generator`` (torch's Gamma and Dirichlet samplers take none), so
that every sampled sequence is reproducible from a seed without touching the global generator."""

from __future__ import annotations

import math

import torch
from jaxtyping import Float, Int
from torch import Tensor


def sample_log_gamma(shape: tuple[int, ...], alpha: float, generator: torch.Generator) -> Float[Tensor, ...]:
    """log of Gamma(alpha, 1) draws, by Marsaglia and Tsang's squeeze method.

    Written here because torch's Gamma and Dirichlet samplers take no ``torch.Generator``. For alpha < 1
    it uses Gamma(α) = Gamma(α + 1) · U^{1/α}, kept in log space so that tiny α cannot underflow.
    """
    boosted = alpha + 1.0 if alpha < 1.0 else alpha
    d = boosted - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    out = torch.empty(math.prod(shape), dtype=torch.float64)
    todo = torch.arange(out.numel())
    while todo.numel() > 0:  # each round accepts > 95% of what is left
        x = torch.randn(todo.numel(), generator=generator, dtype=torch.float64)
        u = torch.rand(todo.numel(), generator=generator, dtype=torch.float64)
        v = (1.0 + c * x) ** 3
        log_v = torch.log(v.clamp_min(1e-300))
        accept = (v > 0) & (torch.log(u) < 0.5 * x**2 + d - d * v + d * log_v)
        out[todo[accept]] = math.log(d) + log_v[accept]
        todo = todo[~accept]
    if alpha < 1.0:
        u = torch.rand(out.numel(), generator=generator, dtype=torch.float64)
        out = out + torch.log(u) / alpha
    return out.reshape(shape)


def sample_dirichlet(
    shape: tuple[int, ...], k: int, alpha: float, generator: torch.Generator
) -> Float[Tensor, "... k"]:
    """Independent Dirichlet(alpha · 1_k) vectors, as normalised Gamma draws."""
    return torch.softmax(sample_log_gamma((*shape, k), alpha, generator), dim=-1)


def sample_categorical(probs: Float[Tensor, "batch k"], uniforms: Float[Tensor, " batch"]) -> Int[Tensor, " batch"]:
    """Inverse-CDF draw: the first b with cumsum(probs)[b] > u (clamped against rounding at 1)."""
    below = probs.cumsum(-1) <= uniforms.unsqueeze(-1)
    return below.sum(-1).clamp_max(probs.shape[-1] - 1)
