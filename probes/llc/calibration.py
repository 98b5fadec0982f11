"""Models whose learning coefficient is known in closed form, to calibrate :func:`estimate_llc` on.

- **Linear regression** y = w·x + noise with d parameters: regular, λ = d / 2.
- **Reduced-rank regression** y = B A x + noise, x ∈ R^M, y ∈ R^N, A: H × M, B: N × H (model rank H), the truth
  C₀ = B₀A₀ of rank r ≤ H. Its learning coefficient (Aoyagi & Watanabe 2005, "Stochastic complexities of
  reduced rank regression in Bayesian estimation", Neural Networks 18, Main Theorem) is, with multiplicity m:

  - if N + r ≤ M + H, M + r ≤ N + H and H + r ≤ M + N:
    λ = [2(H + r)(M + N) − (M − N)² − (H + r)²] / 8, m = 1, where M + N + H + r is even;
    λ = [2(H + r)(M + N) − (M − N)² − (H + r)² + 1] / 8, m = 2, where it is odd;
  - if M + H < N + r: λ = (HM − Hr + Nr) / 2, m = 1;
  - if N + H < M + r: λ = (HN − Hr + Mr) / 2, m = 1;
  - if M + N < H + r: λ = MN / 2, m = 1.

In both, the noise is made orthogonal to the inputs (least-squares residuals of Gaussian noise), so that the
true parameter is the exact minimum of the empirical loss: the empirical loss is then ½ (C − C₀) Σ̂ (C − C₀)ᵀ
plus a constant, the estimator sees no O(1/√n) gradient at the point, and λ is the learning coefficient of the
point the sampler starts from. The RRR point is the most singular true parameter (A's and B's extra rank
zero), where the local coefficient is the global one.
"""

from __future__ import annotations

from fractions import Fraction

import torch
from jaxtyping import Float
from torch import Tensor, nn

from induction_probes.probes.llc.estimator import estimate_llc


def rrr_learning_coefficient(M: int, N: int, H: int, r: int) -> tuple[Fraction, int]:
    """(λ, m) of reduced-rank regression, Aoyagi & Watanabe (2005) (module docstring)."""
    if not all(isinstance(v, int) and v >= 0 for v in (M, N, H, r)) or min(M, N, H) < 1 or r > min(M, N, H):
        raise ValueError(f"need integers M, N, H >= 1 and 0 <= r <= min(M, N, H), got {(M, N, H, r)}")
    if N + r <= M + H and M + r <= N + H and H + r <= M + N:
        base = 2 * (H + r) * (M + N) - (M - N) ** 2 - (H + r) ** 2
        odd = (M + N + H + r) % 2
        return Fraction(base + odd, 8), 1 + odd
    if M + H < N + r:
        return Fraction(H * M - H * r + N * r, 2), 1
    if N + H < M + r:
        return Fraction(H * N - H * r + M * r, 2), 1
    return Fraction(M * N, 2), 1  # M + N < H + r: the only case left


def orthogonal_noise(x: Tensor, out: int, generator: torch.Generator) -> Float[Tensor, "n d_out"]:
    """Gaussian noise [n, out] with its least-squares fit on ``x`` removed, so that xᵀ noise = 0."""
    noise = torch.randn(len(x), out, generator=generator, dtype=x.dtype)
    return noise - x @ torch.linalg.lstsq(x, noise).solution


class ReducedRank(nn.Module):
    """y = B A x; with H = 1 and N = 1, or with A fixed to the identity, it is linear regression."""

    def __init__(self, A: Tensor, B: Tensor):
        super().__init__()
        self.A = nn.Parameter(A.clone())
        self.B = nn.Parameter(B.clone())

    def forward(self, x: Tensor) -> Float[Tensor, "n d_out"]:
        return x @ self.A.T @ self.B.T


class Linear(nn.Module):
    def __init__(self, w: Tensor):
        super().__init__()
        self.w = nn.Parameter(w.clone())

    def forward(self, x: Tensor) -> Float[Tensor, "n d_out"]:
        return x @ self.w


def squared_error(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Float[Tensor, ""]:
    """½ ‖y − f(x)‖² averaged over the batch: the Gaussian negative log-likelihood (unit noise) up to a constant."""
    x, y = batch
    return 0.5 * ((y - model(x)) ** 2).sum(-1).mean()


def linear_regression(d: int, n: int = 2000, seed: int = 0) -> tuple[nn.Module, tuple[Tensor, Tensor], float]:
    """(model at the true w, data, λ = d / 2)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=generator, dtype=torch.float64)
    w = torch.randn(d, 1, generator=generator, dtype=torch.float64)
    y = x @ w + orthogonal_noise(x, 1, generator)
    return Linear(w).double(), (x, y), d / 2


def reduced_rank_regression(
    M: int, N: int, H: int, r: int, n: int = 2000, seed: int = 0
) -> tuple[nn.Module, tuple[Tensor, Tensor], float]:
    """(model at the most singular true parameter, data, Aoyagi-Watanabe λ); the truth's r singular values are
    1, 2, ..., r (well away from 0, so that the rank is r at the sampler's scale)."""
    generator = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(N, N, generator=generator, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(M, M, generator=generator, dtype=torch.float64))
    A = torch.zeros(H, M, dtype=torch.float64)
    B = torch.zeros(N, H, dtype=torch.float64)
    for i in range(r):  # C₀ = Σ (i + 1) uᵢ vᵢᵀ, split evenly between the two factors
        A[i] = (i + 1) ** 0.5 * v[:, i]
        B[:, i] = (i + 1) ** 0.5 * u[:, i]
    x = torch.randn(n, M, generator=generator, dtype=torch.float64)
    y = x @ (B @ A).T + orthogonal_noise(x, N, generator)
    return ReducedRank(A, B).double(), (x, y), float(rrr_learning_coefficient(M, N, H, r)[0])


CASES = {  # name: (builder, arguments); the calibration every shipped estimate carries
    "linear-d2": (linear_regression, (2,)),
    "linear-d8": (linear_regression, (8,)),
    "linear-d32": (linear_regression, (32,)),
    "rrr-M3-N2-H2-r1": (reduced_rank_regression, (3, 2, 2, 1)),
    "rrr-M3-N5-H2-r1": (reduced_rank_regression, (3, 5, 2, 1)),
}


def calibrate(names=None, **settings) -> list[dict]:
    """Each calibration case estimated with ``settings`` (the estimator's defaults where empty):
    [{name, truth, estimate, ...}]."""
    cases = []
    for name in names or CASES:
        builder, arguments = CASES[name]
        model, data, truth = builder(*arguments)
        result = estimate_llc(model, squared_error, data, **settings)
        cases.append(
            {
                "name": name,
                "truth": truth,
                "estimate": result.llc,
                "llc_std": result.llc_std,
                "problems": result.problems,
                "flags": result.flags,
            }
        )
    return cases
