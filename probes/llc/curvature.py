"""The point an LLC is estimated at, measured before any sampling, on all of the data: the loss and gradient,
both ends of the Hessian's spectrum (the largest eigenvalue sets the estimator's step and localization; the
most negative decides, against its spread over disjoint subsets of the data, whether the point is a saddle),
the loss's own scale where the Hessian gives none, and how far the gradient shifts the sampled loss. Split
from :mod:`.estimator`, which samples around the point these describe.

**Negative curvature beyond noise.** Every Hessian here is that of the mean loss over all of ``data`` (the
loss the sampler draws from), split into :data:`SUBSETS` disjoint subsets whose Hessian-vector products are
averaged (weighted by size). Lanczos with full reorthogonalisation (:func:`lanczos_extremes`) gives the top
and bottom Ritz pairs of one Krylov space; a Ritz value is the Rayleigh quotient of its Ritz vector, so the
bottom one, θ, is an upper bound on the most negative eigenvalue, whatever the convergence. Its spread is
that of the same quotient on each subset: their mean is θ, their standard error over subsets is θ's noise
along that fixed direction.

That full-data θ is chosen as the most negative of all directions, so with many near-flat directions it is
more negative than one direction's noise (the edge of a random matrix's spectrum grows as the root of their
number): alone, it would call noise a saddle. So a second test is held out: the bottom Ritz vector of the
Hessian on half of the subsets is scored on the other half, whose quotients it was not chosen on. A point is
a saddle where both are below zero by more than :data:`SADDLE_Z` of their standard errors and by more than
:data:`LANCZOS_TOL` times λ_max or the largest subset quotient (the Lanczos resolution): the full-data test
makes an exact minimum of the data (a positive semi-definite Hessian, θ ≥ 0 up to rounding) never refused,
the held-out one makes the negative direction one that other data confirm.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from induction_probes.circuits.errors import BadInput

if TYPE_CHECKING:
    from torch import nn

CHUNK = 1024  # samples per forward pass when a loss or gradient is taken over the whole data
SUBSETS = 16  # disjoint subsets of the data whose spread measures the curvature's noise
LANCZOS_STEPS = 60  # Hessian-vector products per Lanczos run, at most (exact in fewer where d is smaller)
LANCZOS_TOL = 1e-3  # Ritz residuals relative to λ_max at which Lanczos stops; also its resolution near 0
SADDLE_Z = 4.0  # held-out negative curvature, in standard errors over subsets, that refuses a point
STIFFER = 2.0  # nβ · rise at the quadratic's scale along the top eigenvector above which the loss sets the scale
PROBE_DIRECTIONS = 4  # random directions (the top eigenvector among them) the loss's scale is probed along


def sampled_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def full_loss(model: nn.Module, loss_fn, data, create_graph: bool = False) -> Float[Tensor, ""]:
    """The mean loss over all of ``data``, in chunks of :data:`CHUNK` samples, weighted by their sizes."""
    n = len(data[0])
    total: Tensor | float = 0.0
    for start in range(0, n, CHUNK):
        batch = tuple(t[start : start + CHUNK] for t in data)
        total = total + loss_fn(model, batch) * (len(batch[0]) / n)
    return torch.as_tensor(total)  # the last sum itself, its graph kept


def split(data: tuple[Tensor, ...], count: int = SUBSETS) -> list[tuple[Tensor, ...]]:
    """``data`` cut into min(count, n) contiguous disjoint subsets whose sizes differ by at most one."""
    n = len(data[0])
    count = min(count, n)
    edges = [round(i * n / count) for i in range(count + 1)]
    return [tuple(t[a:b] for t in data) for a, b in zip(edges, edges[1:])]


def hessian_vector(model: nn.Module, loss_fn, data, params, vector: list[Tensor]) -> list[Tensor]:
    """H v by double backward. Fused attention kernels have no second derivative, so attention runs on
    torch's math kernel here (the same values, any module that calls scaled_dot_product_attention)."""
    with sdpa_kernel(SDPBackend.MATH):
        loss = full_loss(model, loss_fn, data)
        grads = torch.autograd.grad(loss, params, create_graph=True)
        products = [(g * v).sum() for g, v in zip(grads, vector)]
        dot = sum(products[1:], products[0])  # started at a tensor, so that the sum is one autograd can take
        return list(torch.autograd.grad(dot, params))


def flat(tensors: list[Tensor]) -> Float[Tensor, " d"]:
    return torch.cat([t.detach().reshape(-1).to("cpu", torch.float64) for t in tensors])


def unflat(vector: Tensor, params) -> list[Tensor]:
    pieces = vector.split([p.numel() for p in params])
    return [v.reshape(p.shape).to(p.device, p.dtype) for v, p in zip(pieces, params)]


class SubsetHessian:
    """The Hessian of the mean loss over a union of subsets, as flat float64 products on the CPU: ``products(v)``
    gives each subset's H_k v, ``weights`` their shares of the union, ``__call__`` the union's H v.

    The union's product is one double backward over the union's samples (the mean loss over the union is the
    size-weighted mean of the subsets' mean losses), not the weighted sum of the subsets' products: Lanczos and
    conjugate gradients call it at every step, and one pass over all samples costs what one subset's does
    when the subsets are small (16 passes of 4 sequences each were 70 % of the llc command on markov-k3)."""

    def __init__(self, model, loss_fn, subsets: list[tuple], params):
        self.model, self.loss_fn, self.subsets, self.params = model, loss_fn, subsets, params
        sizes = [len(s[0]) for s in subsets]
        self.weights = [size / sum(sizes) for size in sizes]

    @functools.cached_property
    def union(self) -> tuple[Tensor, ...]:
        """All the subsets' samples, joined on the first product of the union (a scorer reads only quotients)."""
        return tuple(torch.cat(pieces) for pieces in zip(*self.subsets))

    def products(self, vector: Tensor) -> list[Tensor]:
        pieces = unflat(vector, self.params)
        return [flat(hessian_vector(self.model, self.loss_fn, s, self.params, pieces)) for s in self.subsets]

    def __call__(self, vector: Tensor) -> Tensor:
        return flat(hessian_vector(self.model, self.loss_fn, self.union, self.params, unflat(vector, self.params)))

    def quotients(self, unit: Tensor) -> list[float]:
        """Each subset's Rayleigh quotient uᵀ H_k u of a unit vector."""
        return [float(unit @ p) for p in self.products(unit)]


def lanczos_extremes(matvec, dimension: int, seed: int, steps: int = LANCZOS_STEPS, tol: float = LANCZOS_TOL) -> dict:
    """Top and bottom Ritz pairs of a symmetric operator (Lanczos, full reorthogonalisation, float64), stopped
    where both Ritz residuals are below ``tol`` · |θ_top| or after ``steps`` products. Each Ritz value is the
    Rayleigh quotient of its unit Ritz vector, so θ_bottom ≥ λ_min and θ_top ≤ λ_max whatever the convergence."""
    if dimension < 1 or steps < 1:
        raise BadInput(f"Lanczos needs a space and a step: got dimension {dimension}, steps {steps}")
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(dimension, generator=generator, dtype=torch.float64)
    basis = [q / q.norm()]
    alphas, betas = [], []
    while True:
        w = matvec(basis[-1])
        alphas.append(float(basis[-1] @ w))
        stacked = torch.stack(basis)
        for _ in range(2):  # twice, as classical Gram-Schmidt needs in floating point
            w = w - stacked.T @ (stacked @ w)
        beta = float(w.norm())
        theta, ritz = ritz_pairs(alphas, betas)
        scale = max(abs(theta[0]), abs(theta[-1]), 1e-300)
        residuals = (beta * abs(float(ritz[-1, 0])), beta * abs(float(ritz[-1, -1])))
        if beta <= 1e-12 * scale or max(residuals) <= tol * scale or len(basis) >= min(steps, dimension):
            break  # an invariant subspace (exact), converged, or the whole space or the steps spent
        betas.append(beta)
        basis.append(w / beta)
    stacked = torch.stack(basis)
    return {
        "top": float(theta[-1]),
        "bottom": float(theta[0]),
        "top_vector": stacked.T @ ritz[:, -1],
        "bottom_vector": stacked.T @ ritz[:, 0],
        "residual_top": residuals[1],
        "residual_bottom": residuals[0],
        "steps": len(alphas),
    }


def ritz_pairs(alphas: list[float], betas: list[float]) -> tuple[Tensor, Tensor]:
    """Eigenvalues (ascending) and eigenvectors of the Lanczos tridiagonal matrix."""
    tridiagonal = torch.diag(torch.tensor(alphas, dtype=torch.float64))
    if betas:
        off = torch.tensor(betas, dtype=torch.float64)
        tridiagonal += torch.diag(off, 1) + torch.diag(off, -1)
    return torch.linalg.eigh(tridiagonal)


def spread(quotients: list[float]) -> float | None:
    """Standard error of the mean of the subsets' quotients (None with fewer than two)."""
    if len(quotients) < 2:
        return None
    return float(torch.tensor(quotients, dtype=torch.float64).std() / math.sqrt(len(quotients)))


def held_out_curvature(model: nn.Module, loss_fn, subsets: list[tuple], params, seed: int) -> dict:
    """The bottom Ritz vector of the Hessian on the even subsets, scored on the odd ones: the held-out
    curvature (mean of their quotients, weighted by size), its standard error and the quotients."""
    chosen, scored = subsets[0::2], subsets[1::2]
    if len(scored) < 2:
        return {"curvature": None, "stderr": None, "quotients": []}
    picked = SubsetHessian(model, loss_fn, chosen, params)
    direction = lanczos_extremes(picked, sum(p.numel() for p in params), seed + 1)["bottom_vector"]
    scorer = SubsetHessian(model, loss_fn, scored, params)
    quotients = scorer.quotients(direction / direction.norm())
    mean = sum(w * q for w, q in zip(scorer.weights, quotients))
    return {"curvature": mean, "stderr": spread(quotients), "quotients": quotients}


def curvature(model: nn.Module, loss_fn, data, seed: int = 0) -> dict:
    """At the current weights, on all of ``data``: the loss and gradient, the Hessian's λ_max and most negative
    Ritz value with its spread over :data:`SUBSETS` subsets, and the held-out curvature (module docstring)."""
    params = sampled_parameters(model)
    loss = full_loss(model, loss_fn, data)
    grads = [g.detach() for g in torch.autograd.grad(loss, params)]
    subsets = split(data)
    point = {
        "loss": float(loss.detach()),
        "grads": grads,
        "data": data,
        "subsets": subsets,
        "grad_norm": math.sqrt(sum(float((g * g).sum()) for g in grads)),
        "n_params": sum(p.numel() for p in params),
    }
    finite = math.isfinite(point["loss"]) and all(bool(torch.isfinite(g).all()) for g in grads)
    if not finite:
        return point | {"lambda_max": math.nan, "lambda_min": math.nan}
    return point | spectrum(model, loss_fn, subsets, params, seed)


def spectrum(model: nn.Module, loss_fn, subsets: list[tuple], params, seed: int) -> dict:
    """The spectrum's two ends on the full data, the bottom one's subset spread, and the held-out test."""
    hessian = SubsetHessian(model, loss_fn, subsets, params)
    ends = lanczos_extremes(hessian, sum(p.numel() for p in params), seed)
    if not all(math.isfinite(ends[k]) for k in ("top", "bottom")):
        return {"lambda_max": math.nan, "lambda_min": math.nan}
    bottom = ends["bottom_vector"] / ends["bottom_vector"].norm()
    quotients = hessian.quotients(bottom)
    held_out = held_out_curvature(model, loss_fn, subsets, params, seed)
    return {
        "lambda_max": ends["top"],
        "lambda_min": sum(w * q for w, q in zip(hessian.weights, quotients)),  # bottom's full-data quotient
        "lambda_min_stderr": spread(quotients),
        "lambda_min_subsets": quotients,
        "lanczos": {
            "steps": ends["steps"],
            "residual_top": ends["residual_top"],
            "residual_bottom": ends["residual_bottom"],
        },
        "held_out": held_out,
        "top_direction": unflat(ends["top_vector"] / ends["top_vector"].norm(), params),
    }


def saddle(point: dict) -> str | None:
    """The refusal of a point whose full-data and held-out curvatures are both negative beyond their noise
    and the resolution (module docstring), with its numbers; None where the data do not show a saddle."""
    held_out, lambda_max = point.get("held_out") or {}, point["lambda_max"]
    quotients = point.get("lambda_min_subsets", []) + held_out.get("quotients", [])
    resolution = LANCZOS_TOL * max([abs(lambda_max), *map(abs, quotients)])  # λ_max = 0: the subsets' scale
    tests = [
        (point.get("lambda_min"), point.get("lambda_min_stderr")),
        (held_out.get("curvature"), held_out.get("stderr")),
    ]
    (full, full_se), (value, stderr) = tests
    if full is None or full_se is None or value is None or stderr is None:
        return None
    if not all(curvature < -max(SADDLE_Z * se, resolution) for curvature, se in ((full, full_se), (value, stderr))):
        return None
    return (
        f"not a minimum: a saddle, most negative curvature {full:.3g} ± {full_se:.3g} against λ_max "
        f"{lambda_max:.3g} ({-full / full_se:.3g} standard errors over {len(point['subsets'])} subsets), "
        f"held out on half of them {value:.3g} ± {stderr:.3g} ({-value / stderr:.3g} standard errors)"
    )


def shifted(model: nn.Module, params, moves: list[Tensor], radius: float):
    """The model's weights moved by ``radius`` · ``moves`` (a context: restored exactly on exit)."""

    @contextlib.contextmanager
    def moved():
        saved = [p.detach().clone() for p in params]
        try:
            with torch.no_grad():
                for p, m in zip(params, moves):
                    p.add_(m, alpha=radius)
            yield
        finally:
            with torch.no_grad():
                for p, s in zip(params, saved):
                    p.copy_(s)

    return moved()


def rise(model: nn.Module, loss_fn, data, params, direction, radius: float, base: float) -> float:
    """L(w* + radius · direction) − L(w*) on all of ``data``."""
    with shifted(model, params, direction, radius), torch.no_grad():
        return float(full_loss(model, loss_fn, data)) - base


def stiffer_than_its_hessian(model: nn.Module, loss_fn, point: dict, n_beta: float) -> bool:
    """Whether the loss along the top eigenvector, at the quadratic's own scale r = √(2 / (nβ λ_max)) where the
    Hessian predicts nβ · rise = 1, rises by more than :data:`STIFFER`: a Hessian that does not set the
    posterior's scale (zero, or dwarfed by higher orders)."""
    if not point["lambda_max"] > 0:
        return True
    radius = math.sqrt(2.0 / (n_beta * point["lambda_max"]))
    params = sampled_parameters(model)
    up = rise(model, loss_fn, point["data"], params, point["top_direction"], radius, point["loss"])
    return not n_beta * up <= STIFFER  # NaN or inf is stiffer too


def loss_scale(model: nn.Module, loss_fn, point: dict, n_beta: float, seed: int = 0) -> dict:
    """Where the Hessian sets no scale: along the top eigenvector and random unit directions u, the radius r
    at which nβ · (L(w* + r u) − L(w*)) = 1 (bisection in log r), and two curvatures there. The secant
    2 · rise / r² = 2 / (nβ r²) is the quadratic that rises as much at the posterior's scale (it plays λ_max's
    part in γ, so that the localization's energy there, γ r² / 2, is 1 % of the data's, as for a quadratic);
    the second difference (L(2r) − 2 L(r) + L(0)) / r² is the stiffness the posterior meets (it sets the step;
    14 a r² for a quartic a w⁴, against its second derivative 12 a r² at r). For a quadratic both are uᵀHu.
    The largest of each over the directions is returned; directions along which the loss never rises by 1/nβ
    within 10⁶ of the weights' norm count as flat."""
    params = sampled_parameters(model)
    generator = torch.Generator().manual_seed(seed + 2)
    directions = [point["top_direction"]] if point["lambda_max"] > 0 else []
    while len(directions) < PROBE_DIRECTIONS:
        u = torch.randn(point["n_params"], generator=generator, dtype=torch.float64)
        directions.append(unflat(u / u.norm(), params))
    norm = math.sqrt(sum(float((p.detach().double() ** 2).sum()) for p in params)) or 1.0
    probes = [probe(model, loss_fn, point, params, u, n_beta, norm) for u in directions]
    found = [p for p in probes if p is not None]
    return {
        "secant": max((p["secant"] for p in found), default=0.0),
        "stiffness": max((p["stiffness"] for p in found), default=0.0),
        "radii": [p["radius"] if p else None for p in probes],
    }


def probe(model: nn.Module, loss_fn, point, params, direction, n_beta: float, norm: float) -> dict | None:
    """One direction of :func:`loss_scale`: bracket the radius by factors of 4, then 12 halvings in log r
    (a factor 4^(1/4096), a 0.03 % radius)."""

    def level(radius: float) -> float:
        return n_beta * rise(model, loss_fn, point["data"], params, direction, radius, point["loss"])

    radius = norm
    if level(radius) >= 1:
        while level(radius / 4) >= 1 and radius > 1e-300:
            radius /= 4
    else:
        while not level(radius) >= 1:
            if radius > 1e6 * norm:
                return None
            radius *= 4
    low, high = radius / 4, radius
    for _ in range(12):
        middle = math.sqrt(low * high)
        low, high = (low, middle) if level(middle) >= 1 else (middle, high)
    radius = high
    up = level(radius) / n_beta
    twice = level(2 * radius) / n_beta
    return {"radius": radius, "secant": 2 * up / radius**2, "stiffness": (twice - 2 * up) / radius**2}


def gradient_shift(model: nn.Module, loss_fn, point: dict, n_beta: float, gamma: float, iterations: int = 10) -> float:
    """(nβ g)ᵀ (nβ H + γ I)⁻¹ (nβ g) on all of the data: how far a gradient g at the point lowers the sampled
    nβ·rise, exactly for a quadratic loss. Conjugate gradients from 0, whose value only grows towards the
    solution's, so a value stopped early is a lower bound. A CG direction along which nβ H + γ I does not
    curve upward (negative curvature stronger than the localization) ends the iterations there, with the
    bound so far: whether the point is a saddle is :func:`saddle`'s to decide, on its spread, not this."""
    params = sampled_parameters(model)
    hessian = SubsetHessian(model, loss_fn, point["subsets"], params)
    b = n_beta * flat(point["grads"])
    residual, direction, solution = b.clone(), b.clone(), torch.zeros_like(b)
    rr = float(residual @ residual)
    for _ in range(iterations):
        if rr == 0:
            break
        ad = n_beta * hessian(direction) + gamma * direction
        curvature_along = float(direction @ ad)
        if not curvature_along > 0:
            break
        step = rr / curvature_along
        solution = solution + step * direction
        residual = residual - step * ad
        rr, previous = float(residual @ residual), rr
        direction = residual + (rr / previous) * direction
        if rr < 1e-12 * float(b @ b):
            break
    return float(solution @ b)
