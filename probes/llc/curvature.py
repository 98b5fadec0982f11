"""The point an LLC is estimated at, measured before any sampling: the loss and gradient over all the data,
the Hessian's largest eigenvalue (which sets the estimator's default step and localization) and how far the
gradient shifts the sampled loss (which decides whether the point is a minimum at all). Split from
:mod:`.estimator`, which samples around the point these describe.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from jaxtyping import Float
from scipy.sparse.linalg import ArpackError, LinearOperator, eigsh
from torch import Tensor

CHUNK = 1024  # samples per forward pass when a loss or gradient is taken over the whole data
CURVATURE_SAMPLES = 256  # samples the Hessian's curvature is measured on (the loss and gradient use all)


def sampled_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def full_loss(model, loss_fn, data, create_graph: bool = False) -> Float[Tensor, ""]:
    """The mean loss over all of ``data``, in chunks of :data:`CHUNK` samples, weighted by their sizes."""
    n = len(data[0])
    total = 0.0
    for start in range(0, n, CHUNK):
        batch = tuple(t[start : start + CHUNK] for t in data)
        total = total + loss_fn(model, batch) * (len(batch[0]) / n)
    return total


def hessian_vector(model, loss_fn, data, params, vector: list[Tensor]) -> list[Tensor]:
    """H v by double backward. Fused attention kernels have no second derivative, so attention runs on
    torch's math kernel here (the same values, any module that calls scaled_dot_product_attention)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel  # only the Hessian needs the math kernel

    with sdpa_kernel(SDPBackend.MATH):
        loss = full_loss(model, loss_fn, data)
        grads = torch.autograd.grad(loss, params, create_graph=True)
        dot = sum((g * v).sum() for g, v in zip(grads, vector))
        return list(torch.autograd.grad(dot, params))


def largest_eigenvalue(model, loss_fn, data, params, seed: int) -> float:
    """λ_max of the Hessian of the loss on ``data``: Lanczos (scipy's ``eigsh``) on Hessian-vector products."""

    shapes = [p.shape for p in params]
    sizes = [p.numel() for p in params]

    def matvec(flat):
        pieces = torch.as_tensor(np.asarray(flat).ravel(), dtype=params[0].dtype, device=params[0].device)
        vector = [v.reshape(s) for v, s in zip(pieces.split(sizes), shapes)]
        product = hessian_vector(model, loss_fn, data, params, vector)
        return torch.cat([h.reshape(-1) for h in product]).detach().double().cpu().numpy()

    dimension = sum(sizes)
    if dimension == 1:
        return float(matvec(np.ones(1))[0])
    start = np.random.default_rng(seed).standard_normal(dimension)
    operator = LinearOperator((dimension, dimension), matvec=matvec, dtype=np.float64)
    try:
        return float(
            eigsh(
                operator,
                k=1,
                which="LA",
                tol=1e-3,
                v0=start,
                maxiter=300,
                ncv=min(dimension, 20),
                return_eigenvectors=False,
            )[0]
        )
    except ArpackError:  # no convergence (a Hessian with non-finite entries, say): no curvature to set a step by
        return math.nan


def curvature(model, loss_fn, data, seed: int = 0) -> dict:
    """At the current weights: the loss and the gradient over all of ``data``, and λ_max of the Hessian on its
    first :data:`CURVATURE_SAMPLES` samples."""
    params = sampled_parameters(model)
    loss = full_loss(model, loss_fn, data)
    grads = [g.detach() for g in torch.autograd.grad(loss, params)]
    subset = tuple(t[:CURVATURE_SAMPLES] for t in data)
    finite = math.isfinite(float(loss.detach())) and all(bool(torch.isfinite(g).all()) for g in grads)
    return {
        "loss": float(loss.detach()),
        "lambda_max": largest_eigenvalue(model, loss_fn, subset, params, seed) if finite else math.nan,
        "grads": grads,
        "subset": subset,
        "grad_norm": math.sqrt(sum(float((g * g).sum()) for g in grads)),
        "n_params": sum(p.numel() for p in params),
    }


def gradient_shift(model, loss_fn, point: dict, n_beta: float, gamma: float, iterations: int = 10) -> float | None:
    """(nβ g)ᵀ (nβ H + γ I)⁻¹ (nβ g): how far a gradient g at the point lowers the sampled nβ·rise, exactly for
    a quadratic loss. Conjugate gradients from 0, whose value only grows towards the solution's, so a value
    stopped early is a lower bound; None where H has a direction of negative curvature (not a minimum)."""
    params = sampled_parameters(model)
    b = [n_beta * g for g in point["grads"]]
    residual, direction = [r.clone() for r in b], [r.clone() for r in b]
    solution = [torch.zeros_like(r) for r in b]
    rr = sum(float((r * r).sum()) for r in residual)
    for _ in range(iterations):
        if rr == 0:
            break
        hd = hessian_vector(model, loss_fn, point["subset"], params, direction)
        ad = [n_beta * h + gamma * d for h, d in zip(hd, direction)]
        curvature_along = sum(float((d * a).sum()) for d, a in zip(direction, ad))
        if sum(float((d * h).sum()) for d, h in zip(direction, hd)) < 0:
            return None
        step = rr / curvature_along
        solution = [x + step * d for x, d in zip(solution, direction)]
        residual = [r - step * a for r, a in zip(residual, ad)]
        rr, previous = sum(float((r * r).sum()) for r in residual), rr
        direction = [r + (rr / previous) * d for r, d in zip(residual, direction)]
        if rr < 1e-12 * sum(float((v * v).sum()) for v in b):
            break
    return sum(float((x * v).sum()) for x, v in zip(solution, b))
