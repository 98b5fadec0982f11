"""The LLC estimator: its defaults follow the stated rule, it lands within 20 % of the known learning
coefficient on every calibration model at those defaults, and it refuses what is not an estimate."""

import itertools
import math
from fractions import Fraction

import pytest
import torch

from induction_probes.probes.llc.calibration import (
    CASES,
    DeepLinear,
    calibrate,
    deep_linear_at_zero,
    dln_learning_coefficient,
    linear_regression,
    product_regression,
    regression_data,
    rrr_learning_coefficient,
    squared_error,
)
from induction_probes.probes.llc.curvature import curvature, gradient_shift, lanczos_extremes, saddle
from induction_probes.probes.llc.estimator import GAMMA_SHARE, STEP_SHARE, LLCError, default_settings, estimate_llc
from induction_probes.probes.llc.sampling import sgld_sampler, unhooked_step

# Drton & Plummer (2017), Table 1: the Aoyagi-Watanabe coefficient of reduced-rank regression with N = 5
# responses, M = 3 covariates, model rank H = i and true rank r = j
DRTON_PLUMMER = {
    (1, 0): Fraction(3, 2),
    (1, 1): Fraction(7, 2),
    (2, 0): Fraction(3),
    (2, 1): Fraction(9, 2),
    (2, 2): Fraction(6),
    (3, 0): Fraction(9, 2),
    (3, 1): Fraction(11, 2),
    (3, 2): Fraction(13, 2),
    (3, 3): Fraction(15, 2),
}


@pytest.mark.parametrize("H, r", DRTON_PLUMMER)
def test_rrr_coefficient_matches_the_tabulated_values(H, r):
    assert rrr_learning_coefficient(3, 5, H, r)[0] == DRTON_PLUMMER[H, r]


def test_rrr_coefficient_special_cases():
    assert rrr_learning_coefficient(1, 1, 1, 0) == (Fraction(1, 2), 2)  # y = abx at the origin: a²b², λ = 1/2, m = 2
    for M, N, H in [(3, 2, 1), (4, 4, 2), (2, 6, 2), (5, 3, 3)]:  # r = H: regular, dim of rank-H matrices / 2
        assert rrr_learning_coefficient(M, N, H, H)[0] == Fraction(H * (M + N - H), 2)
    assert rrr_learning_coefficient(2, 2, 5, 1)[0] == Fraction(2 * 2, 2)  # H large: the full matrix, MN/2
    for M, N, H, r in [(3, 2, 4, 0), (4, 3, 3, 1)]:  # never above the parameter count's half
        assert rrr_learning_coefficient(M, N, H, r)[0] <= Fraction(H * (M + N), 2)
    with pytest.raises(ValueError, match="0 <= r"):
        rrr_learning_coefficient(2, 2, 1, 2)


def test_defaults_follow_the_documented_rule():
    settings = default_settings(1000, 2.0)
    n_beta = 1000 / math.log(1000)
    assert settings.n_beta == pytest.approx(n_beta, rel=1e-12)
    assert settings.localization == pytest.approx(GAMMA_SHARE * n_beta * 2.0, rel=1e-12)
    assert settings.lr == pytest.approx(STEP_SHARE / (n_beta * 2.0 + settings.localization), rel=1e-12)
    assert settings.burn_in == settings.draws == math.ceil(1 / (settings.lr * settings.localization))
    assert default_settings(1000, 2.0, localization=1.0).localization == 1.0
    with pytest.raises(LLCError, match="unknown settings"):
        default_settings(1000, 2.0, temperature=1.0)


@pytest.mark.parametrize("steps", [3, 60])
def test_lanczos_bounds_the_extreme_eigenvalues_and_converges_to_them(steps):
    """Against eigvalsh of a symmetric 60 x 60 matrix: cut short at 3 products, the Ritz values lie within the
    spectrum and each Ritz vector is the unit vector whose Rayleigh quotient it is (it failed on a shape mismatch
    there before); given 60, the whole space, they are the extreme eigenvalues to float64 rounding."""
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(60, 60, generator=generator, dtype=torch.float64)
    a = a + a.T
    eigenvalues = torch.linalg.eigvalsh(a)
    found = lanczos_extremes(lambda v: a @ v, 60, seed=1, steps=steps, tol=1e-14)
    low, high = float(eigenvalues[0]) - 1e-9, float(eigenvalues[-1]) + 1e-9  # converged, equal to rounding
    assert low <= found["bottom"] <= found["top"] <= high
    for end in ("top", "bottom"):
        vector = found[f"{end}_vector"]
        assert float(vector.norm()) == pytest.approx(1, abs=1e-12)
        assert float(vector @ a @ vector) == pytest.approx(found[end], abs=1e-9)
    if steps == 60:
        assert (found["top"], found["bottom"]) == pytest.approx((high - 1e-9, low + 1e-9), abs=1e-9)


def test_curvature_and_gradient_shift_against_the_exact_quadratic():
    """Linear regression: H = XᵀX / n exactly. Moved off the minimum by δ, g = Hδ and the shift is
    (nβ g)ᵀ (nβ H + γ I)⁻¹ (nβ g); conjugate gradients in d = 4 < 10 iterations solve it exactly."""
    model, (x, y), _ = linear_regression(4, n=200)
    hessian = x.T @ x / len(x)
    assert curvature(model, squared_error, (x, y))["lambda_max"] == pytest.approx(
        float(torch.linalg.eigvalsh(hessian).max()), rel=1e-3
    )  # Lanczos to a relative tolerance of 1e-3
    with torch.no_grad():
        model.w += 0.1
    point = curvature(model, squared_error, (x, y))
    g = hessian @ torch.full((4, 1), 0.1, dtype=torch.float64)
    n_beta, gamma = 30.0, 2.0
    system = n_beta * hessian + gamma * torch.eye(4, dtype=torch.float64)
    exact = float((n_beta * g).T @ torch.linalg.solve(system, n_beta * g))
    assert gradient_shift(model, squared_error, point, n_beta, gamma) == pytest.approx(exact, rel=1e-8)


CALIBRATED = ["linear-d2", "linear-d8", "linear-d32", "rrr-M3-N2-H2-r1", "rrr-M3-N5-H2-r1"]  # the rule's own set
# Beyond it (the acceptance, "within 20 % or flagged"): a third rank of reduced-rank regression and
# y = w1·w2·x at a balanced, an unbalanced and an on-axis minimum; the ill-conditioned regular model has a test
# of its own below. The zero-Hessian cases (a minimum with K ∝ w⁴) take 80 s each: experiments/llc_calibration.py
# measures them with the rest (experiments/results/llc-calibration/cases.json).
BEYOND = ["rrr-M3-N5-H2-r2", "product-balanced", "product-unbalanced", "product-on-axis"]


@pytest.mark.parametrize("name", CALIBRATED)
def test_default_estimate_is_within_20_percent_of_the_known_coefficient(name):
    """The calibration's claim: 20 %, with no flag but *degenerate*, which a singular model (reduced-rank
    regression) carries and a regular one never does. The estimator's own spread at these defaults is about ±5 %
    for d = 2 (the chains' standard error) and its step-size and minibatch biases about +5 %, so 20 % could
    fail."""
    builder, arguments = CASES[name]
    model, data, truth = builder(*arguments)
    result = estimate_llc(model, squared_error, data)
    degenerate = [flag for flag in result.flags if flag.startswith("degenerate")]
    assert result.problems == [] and result.flags == degenerate
    assert bool(degenerate) == name.startswith("rrr")  # singular: its flattest direction is the localization's
    assert abs(result.llc - truth) < 0.2 * truth, (result.llc, truth)
    assert result.llc == pytest.approx(sum(result.per_chain) / len(result.per_chain), rel=1e-12)


@pytest.mark.parametrize("name", BEYOND)
def test_beyond_the_calibration_an_estimate_is_within_20_percent_or_flagged(name):
    """Models the rule was not set on: an exact minimum is never refused, and a value off by more than 20 %
    carries a flag saying why (the localization check, or the chains' spread)."""
    builder, arguments = CASES[name]
    model, data, truth = builder(*arguments)
    result = estimate_llc(model, squared_error, data)
    assert result.problems == [], result.problems
    assert abs(result.llc - truth) < 0.2 * truth or result.flags, (result.llc, truth)


def test_an_ill_conditioned_model_is_flagged_by_the_localization_check():
    """Beyond the calibration (never refused; here flagged, and for the reason): curvatures spanning 1000×
    (λ = 10), so at γ the flattest directions are held by the localization. The
    paired check at γ/4 moves the estimate towards 10 by far more than its standard error (the Gaussian
    prediction at γ is 6.5 and at γ/4 is 8.1; the sampler reads 7.0 and 9.1 here, some 8 % high as on the
    calibration set)."""
    model, data, truth = CASES["linear-d20-spread1000"][0](20, 1000.0)
    result = estimate_llc(model, squared_error, data)
    check = result.diagnostics["localization_check"]
    assert result.problems == [] and any(flag.startswith("depends on the localization") for flag in result.flags)
    assert check["change"] > 0.1 * result.llc + 2 * check["change_stderr"]
    assert check["change_stderr"] < 0.25 * check["change"]  # common random numbers: the pair moves together


def test_a_point_off_the_minimum_is_refused():
    model, data, _ = linear_regression(2, n=500)
    with torch.no_grad():
        model.w += 0.5  # nβ δᵀHδ ≈ 80 · 0.5: the gradient's shift is far above 10 % of an LLC of 1
    result = estimate_llc(model, squared_error, data, draws=30, burn_in=30)
    assert result.llc is None and any("not a minimum" in p for p in result.problems)
    assert result.diagnostics["gradient_shift"] > 5


def test_a_diverging_chain_is_never_a_number():
    model, data, _ = linear_regression(2, n=500)
    result = estimate_llc(model, squared_error, data, lr=50.0, draws=30, burn_in=30)  # εκ ≫ 2: unstable
    assert result.llc is None and result.llc_std is None and result.problems


def test_a_loss_that_is_nan_is_refused_and_bad_input_raises():
    model, data, _ = linear_regression(2, n=100)
    result = estimate_llc(model, lambda m, b: squared_error(m, b) * math.nan, data)
    assert result.llc is None and result.problems
    with pytest.raises(LLCError, match="tuple of tensors"):
        estimate_llc(model, squared_error, [data[0]])
    with pytest.raises(LLCError, match="disagree"):
        estimate_llc(model, squared_error, (data[0], data[1][:50]))
    with pytest.raises(LLCError, match="draws"):
        estimate_llc(model, squared_error, data, draws=2)


def factored_minimum(widths: tuple[int, ...], seed: int):
    """A deep linear net at an exact global minimum away from the origin: random factors, the truth their
    product, the noise orthogonal to the inputs (its flat directions are the factors' rescalings)."""
    generator = torch.Generator().manual_seed(seed)
    weights = [torch.randn(b, a, generator=generator, dtype=torch.float64) for a, b in zip(widths, widths[1:])]
    model = DeepLinear(weights)
    x = torch.randn(2000, widths[0], generator=generator, dtype=torch.float64)
    with torch.no_grad():
        truth = model(torch.eye(widths[0], dtype=torch.float64)).T
    return model, regression_data(x, truth, generator)


MINIMA = {
    "product-balanced": lambda seed: product_regression(1.0, 1.0, seed=seed)[:2],
    "product-unbalanced": lambda seed: product_regression(4.0, 0.25, seed=seed)[:2],
    "product-on-axis": lambda seed: product_regression(1.0, 0.0, seed=seed)[:2],
    "dln-2-2-2-2-origin": lambda seed: deep_linear_at_zero((2, 2, 2, 2), seed=seed)[:2],
    "dln-3-2-3-factored": lambda seed: factored_minimum((3, 2, 3), seed),
    "dln-2-2-2-2-factored": lambda seed: factored_minimum((2, 2, 2, 2), seed),
}


@pytest.mark.parametrize("name", MINIMA)
def test_an_exact_minimum_is_never_called_a_saddle(name):
    """The issue's finding: on the first 256 samples, the sign of a flat direction's curvature was noise, and
    exact minima of deep linear nets and w1·w2 models were refused in 11 of 24 data seeds. On all the data, 6
    seeds each, none is: the full-data Hessian of an exact minimum is positive semi-definite up to rounding."""
    for seed in range(6):
        model, data = MINIMA[name](seed)
        point = curvature(model, squared_error, data, seed=seed)
        assert saddle(point) is None, (seed, point["lambda_min"], point["lambda_min_stderr"])
        assert point["lambda_min"] >= -1e-9 * point["lambda_max"]


def test_a_true_saddle_is_refused_with_its_curvature_against_its_spread():
    """y = w1·w2·x with truth 1, at the origin: the Hessian is E[x²]·[[0, −1], [−1, 0]], eigenvalues ±E[x²]."""
    model, data, _ = product_regression(1.0, 1.0)
    with torch.no_grad():
        for w in model.weights:
            w.zero_()
    point = curvature(model, squared_error, data)
    second_moment = float((data[0] ** 2).mean())
    assert point["lambda_min"] == pytest.approx(-second_moment, rel=1e-6)
    assert point["lambda_max"] == pytest.approx(second_moment, rel=1e-6)
    assert "saddle" in saddle(point) and point["lambda_min_stderr"] < 0.1 * second_moment
    result = estimate_llc(model, squared_error, data, burn_in=50, draws=50, localization_check=None)
    assert result.llc is None and any("saddle" in p for p in result.problems)


def test_deep_linear_coefficient_reduces_to_reduced_rank_regression_and_to_a_product():
    """Aoyagi's deep-linear formula against the two cases known otherwise: two layers (M, H, N) are
    reduced-rank regression (Aoyagi & Watanabe's theorem, every M, N, H ≤ 6 and r ≤ min), and 1 × 1 layers
    are y = w1 ⋯ wL x at the origin, K ∝ (w1 ⋯ wL)², whose λ is ½ for any L (multiplicity L)."""
    for M, N, H in itertools.product(range(1, 7), repeat=3):
        for r in range(min(M, N, H) + 1):
            assert dln_learning_coefficient((M, H, N), r) == rrr_learning_coefficient(M, N, H, r)[0]
    assert [dln_learning_coefficient((1,) * layers, 0) for layers in range(2, 7)] == [Fraction(1, 2)] * 5


def test_a_calibration_is_sampled_once_per_settings_and_each_caller_gets_its_own_copy():
    fast = {"draws": 4, "burn_in": 2, "chains": 1, "localization_check": None}
    before = calibrate.computed
    first = calibrate(["linear-d2"], n=64, **fast)
    first[0]["estimate"] = "changed by its caller"
    again = calibrate(["linear-d2"], n=64, **fast)
    assert calibrate.computed == before + 1  # the second call sampled nothing
    assert isinstance(again[0]["estimate"], float)  # and the first caller's change did not reach it
    calibrate(["linear-d2"], n=64, **(fast | {"seed": 1}))  # another seed is another calibration
    assert calibrate.computed == before + 2


def test_the_unhooked_step_moves_the_weights_as_the_samplers_own_step_does():
    """The chains call devinterp's step without torch's wrapper (a profiler label, step hooks): the same
    function, so the same weights to the bit, from the same gradient and noise."""
    weights = [torch.nn.Parameter(torch.randn(3, 2, generator=torch.Generator().manual_seed(1))) for _ in range(2)]
    moved = []
    for step in ("hooked", "unhooked"):
        params = [torch.nn.Parameter(w.detach().clone()) for w in weights]
        sampler = sgld_sampler().sgld(params, lr=0.01, localization=2.0, nbeta=50.0)
        noise = torch.Generator().manual_seed(7)
        for _ in range(3):
            for p in params:
                p.grad = p.detach() ** 3  # a gradient that changes as the weights do
            if step == "hooked":
                sampler.step(noise_generator=noise)
            else:
                unhooked_step(sampler)(noise_generator=noise)
        moved.append([p.detach().clone() for p in params])
    assert not torch.equal(moved[0][0], weights[0])  # the steps moved the weights
    assert all(torch.equal(a, b) for a, b in zip(*moved))
