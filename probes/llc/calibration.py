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

import copy
import functools
import math
from collections.abc import Callable
from fractions import Fraction

import torch
from jaxtyping import Float
from torch import Tensor, nn

from induction_probes.circuits.errors import BadInput
from induction_probes.probes.llc.chain_intervals import chain_stderr
from induction_probes.probes.llc.estimator import estimate_llc
from induction_probes.probes.llc.gate import gate


def rrr_learning_coefficient(M: int, N: int, H: int, r: int) -> tuple[Fraction, int]:
    """(λ, m) of reduced-rank regression, Aoyagi & Watanabe (2005) (module docstring)."""
    if not all(isinstance(v, int) and v >= 0 for v in (M, N, H, r)) or min(M, N, H) < 1 or r > min(M, N, H):
        raise BadInput(f"need integers M, N, H >= 1 and 0 <= r <= min(M, N, H), got {(M, N, H, r)}")
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


def dln_learning_coefficient(widths: tuple[int, ...], r: int) -> Fraction:
    """λ of a deep linear network (module docstring: Aoyagi 2024, Theorem 1); ``widths`` = (H_0 = input, H_1,
    ..., H_L = output), ``r`` the truth's rank. Two layers give reduced-rank regression's λ (tested)."""
    if len(widths) < 2 or min(widths) < 1 or not 0 <= r <= min(widths):
        raise BadInput(f"need at least two widths >= 1 and 0 <= r <= min(widths), got {widths}, {r}")
    excess = [h - r for h in widths]
    chosen = aoyagi_subset(excess)
    ell, total = len(chosen) - 1, sum(chosen)
    a = total - (-(-total // ell) - 1) * ell  # Σ − (⌈Σ / ℓ⌉ − 1) ℓ
    pairs = sum(chosen[i] * chosen[j] for i in range(len(chosen)) for j in range(i + 1, len(chosen)))
    return (
        Fraction(r * (widths[0] + widths[-1]) - r * r, 2)
        + Fraction(a * (ell - a), 4 * ell)
        - Fraction(ell * (ell - 1), 4) * Fraction(total, ell) ** 2
        + Fraction(pairs, 2)
    )


def aoyagi_subset(excess: list[int]) -> list[int]:
    """The values M_j of the subset S of Aoyagi's Theorem 1 (module docstring): the smallest M's, every tie
    taken together, with ℓ · max_S M ≤ Σ_S M < ℓ · min_(not S) M, ℓ = |S| − 1."""
    ordered = sorted(excess)
    for size in range(2, len(ordered) + 1):
        subset, rest = ordered[:size], ordered[size:]
        ell = size - 1
        if rest and subset[-1] == rest[0]:
            continue  # a tie across the cut: S is not its smallest values, strictly
        if sum(subset) >= ell * subset[-1] and (not rest or sum(subset) < ell * rest[0]):
            return subset
    raise AssertionError(f"no subset satisfies Aoyagi's conditions for {excess}")  # the theorem says one does


class DeepLinear(nn.Module):
    """y = W_L ⋯ W_1 x; with two factors it is :class:`ReducedRank`'s model, with 1 × 1 factors y = w₁ ⋯ w_L x."""

    def __init__(self, weights: list[Tensor]):
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(w.clone()) for w in weights])

    def forward(self, x: Tensor) -> Float[Tensor, "n d_out"]:
        for w in self.weights:
            x = x @ w.T
        return x


class Square(nn.Module):
    """y = w² x, one parameter: at w = 0 with a zero truth, K(w) ∝ w⁴."""

    def __init__(self, w: float):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(w, dtype=torch.float64))

    def forward(self, x: Tensor) -> Float[Tensor, "n d_out"]:
        return self.w**2 * x


def regression_data(x: Tensor, truth: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """(x, y = x truthᵀ + noise orthogonal to x)."""
    return x, x @ truth.T + orthogonal_noise(x, truth.shape[0], generator)


def ill_conditioned_regression(
    d: int = 20, spread: float = 1000.0, n: int = 2000, seed: int = 0
) -> tuple[nn.Module, tuple[Tensor, Tensor], float]:
    """Linear regression whose input covariance is exactly diag(h), h log-spaced from 1 down to 1 / ``spread``
    (orthonormalised inputs, so the Hessian is exactly that): regular, λ = d / 2 whatever the spread. At
    localization γ and inverse temperature nβ the sampled posterior is Gaussian and the estimate's expectation
    is Σ ½ nβh / (nβh + γ) (:func:`gaussian_prediction`)."""
    generator = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(n, d, generator=generator, dtype=torch.float64))
    x = q * math.sqrt(n) * curvatures(d, spread).sqrt()
    w = torch.randn(d, 1, generator=generator, dtype=torch.float64)
    return Linear(w).double(), regression_data(x, w.T, generator), d / 2


def curvatures(d: int, spread: float) -> Float[Tensor, " d"]:
    return torch.logspace(0, -math.log10(spread), d, dtype=torch.float64)


def gaussian_prediction(h: Tensor, n_beta: float, gamma: float) -> float:
    """E[nβ (L(w) − L(w*))] under exp(−nβ L − γ/2 ‖w − w*‖²) for L = ½ Σ h_i w_i²: each direction's posterior
    variance is 1 / (nβ h + γ), so it adds ½ nβ h / (nβ h + γ)."""
    return float((0.5 * n_beta * h / (n_beta * h + gamma)).sum())


def product_regression(
    w1: float, w2: float, n: int = 2000, seed: int = 0
) -> tuple[nn.Module, tuple[Tensor, Tensor], float]:
    """y = w₁ w₂ x at the point (w1, w2), the truth c₀ = w1 · w2 (module docstring for each point's λ = ½)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, generator=generator, dtype=torch.float64)
    weights = [torch.tensor([[w1]], dtype=torch.float64), torch.tensor([[w2]], dtype=torch.float64)]
    return DeepLinear(weights), regression_data(x, weights[1] @ weights[0], generator), 0.5


def square_regression(n: int = 2000, seed: int = 0) -> tuple[nn.Module, tuple[Tensor, Tensor], float]:
    """y = w² x at w = 0 with truth 0: K(w) = ½ E[x²] w⁴, λ = ¼ (module docstring)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, generator=generator, dtype=torch.float64)
    return Square(0.0), regression_data(x, torch.zeros(1, 1, dtype=torch.float64), generator), 0.25


def deep_linear_at_zero(
    widths: tuple[int, ...], n: int = 2000, seed: int = 0
) -> tuple[nn.Module, tuple[Tensor, Tensor], float]:
    """A deep linear network at the origin, the truth zero (r = 0): K is homogeneous in w, so the local
    coefficient at 0 is the global one, Aoyagi's (module docstring)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, widths[0], generator=generator, dtype=torch.float64)
    weights = [torch.zeros(b, a, dtype=torch.float64) for a, b in zip(widths, widths[1:])]
    truth = torch.zeros(widths[-1], widths[0], dtype=torch.float64)
    return DeepLinear(weights), regression_data(x, truth, generator), float(dln_learning_coefficient(widths, 0))


CASES = {  # name: (builder, arguments); the calibration every shipped estimate carries
    "linear-d2": (linear_regression, (2,)),
    "linear-d8": (linear_regression, (8,)),
    "linear-d32": (linear_regression, (32,)),
    "linear-d20-spread1000": (ill_conditioned_regression, (20, 1000.0)),
    "rrr-M3-N2-H2-r1": (reduced_rank_regression, (3, 2, 2, 1)),
    "rrr-M3-N5-H2-r0": (reduced_rank_regression, (3, 5, 2, 0)),
    "rrr-M3-N5-H2-r1": (reduced_rank_regression, (3, 5, 2, 1)),
    "rrr-M3-N5-H2-r2": (reduced_rank_regression, (3, 5, 2, 2)),
    "product-balanced": (product_regression, (1.0, 1.0)),
    "product-unbalanced": (product_regression, (4.0, 0.25)),
    "product-on-axis": (product_regression, (1.0, 0.0)),
    "product-origin": (product_regression, (0.0, 0.0)),
    "square-origin": (square_regression, ()),
    "dln-2-2-2-2-origin": (deep_linear_at_zero, ((2, 2, 2, 2),)),
}


MIN_SAMPLES = 64  # the calibration's largest model has 32 parameters: fewer samples would not determine it


def at_least(n: int, settings: dict) -> tuple[int, dict]:
    """(samples, settings) for a calibration as a result on ``n`` samples sees it: the result's nβ = n / ln n
    (unless given), on at least :data:`MIN_SAMPLES` samples."""
    if n >= MIN_SAMPLES or "n_beta" in settings:
        return max(n, MIN_SAMPLES), settings
    return MIN_SAMPLES, settings | {"n_beta": n / math.log(n)}


class OncePerSettings:
    """A calibration sampled once per arguments within a process (:func:`once_per_settings`); ``computed`` counts
    its samplings."""

    def __init__(self, calibration: Callable[..., list[dict]]) -> None:
        functools.update_wrapper(self, calibration)  # its name, docstring and signature (``__wrapped__``)
        self.calibration = calibration
        self.answers: dict[str, list[dict]] = {}
        self.computed = 0

    def __call__(self, *args, **settings) -> list[dict]:
        key = repr((args, sorted(settings.items())))  # repr: floats exactly, lists of names too
        if key not in self.answers:
            self.answers[key] = self.calibration(*args, **settings)
            self.computed += 1
        return copy.deepcopy(self.answers[key])


def once_per_settings(calibration: Callable[..., list[dict]]) -> OncePerSettings:
    """``calibration`` sampled once per arguments within a process, a copy of its answer given each time: its
    cases are seeded, so sampling them again at the same settings (a report's command and its API, a series of
    checkpoints) would only repeat the same numbers. ``calibration.computed`` counts the samplings (an object,
    not a function, so that the count is an attribute its type declares)."""
    return OncePerSettings(calibration)


@once_per_settings
def calibrate(names=None, n: int = 2000, **settings) -> list[dict]:
    """Each calibration case as a result on ``n`` samples sees it (nβ = n / ln n, :func:`at_least`), estimated
    with ``settings`` (the estimator's defaults where empty): [{name, truth, estimate, llc_std, llc_stderr, ...}]."""
    n, settings = at_least(n, settings)
    cases = []
    for name in names or CASES:
        builder, arguments = CASES[name]
        model, data, truth = builder(*arguments, n=n)
        result = estimate_llc(model, squared_error, data, **settings)
        cases.append(
            {
                "name": name,
                "truth": truth,
                "estimate": result.llc,
                "llc_std": result.llc_std,
                "llc_stderr": result.llc_stderr,
                "problems": result.problems,
                "flags": result.flags,
                "quarter": quarter_of(result),
            }
        )
    return cases


def quarter_of(result) -> dict | None:
    """A result's estimate at γ/4 (its localization check) and the standard error over its chains there, so that
    the calibration gates γ/4 as it gates γ; None where the check did not run or failed."""
    check = result.diagnostics.get("localization_check") or {}
    chains = check.get("per_chain") or []
    if result.llc is None or check.get("estimate") is None or len(chains) < 2:
        return None
    return {"estimate": sum(chains) / len(chains), "llc_stderr": chain_stderr(chains), "per_chain": chains}


def whole_cases(cases: list[dict], quarter: bool = False) -> list[dict]:
    """:func:`~induction_probes.probes.llc.calibration.calibrate`'s cases as :func:`.gate.gate` reads them: at γ,
    or with ``quarter`` at γ/4 (a case without a γ/4 estimate is a miss)."""
    return [
        {"name": c["name"], "truth": c["truth"]}
        | (
            {"estimate": (c.get("quarter") or {}).get("estimate"), "stderr": (c.get("quarter") or {}).get("llc_stderr")}
            if quarter
            else {"estimate": c["estimate"], "stderr": c["llc_stderr"]}
        )
        for c in cases
    ]


def calibration_verdict(n: int = 2000, **settings) -> dict:
    """The gate's verdict (:func:`.gate.gate`) on every calibration case estimated at ``settings`` as a result on
    ``n`` samples sees them: what an estimate at settings other than the rule's defaults needs to be trusted
    (:mod:`.calibrated`). Samples every case: minutes."""
    return gate(whole_cases(calibrate(n=n, **settings)))
