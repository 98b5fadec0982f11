"""The LLC estimator: its defaults follow the stated rule, it lands within 20 % of the known learning
coefficient on every calibration model at those defaults, and it refuses what is not an estimate."""

import math
from fractions import Fraction

import pytest
import torch

from induction_probes.probes.llc.calibration import (
    CASES,
    linear_regression,
    rrr_learning_coefficient,
    squared_error,
)
from induction_probes.probes.llc.curvature import curvature, gradient_shift
from induction_probes.probes.llc.estimator import GAMMA_SHARE, STEP_SHARE, LLCError, default_settings, estimate_llc

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


@pytest.mark.parametrize("name", list(CASES))
def test_default_estimate_is_within_20_percent_of_the_known_coefficient(name):
    """The issue's acceptance: 20 %. The estimator's own spread at these defaults is about ±5 % for d = 2
    (the chains' standard error) and its step-size and minibatch biases about +5 %, so 20 % could fail."""
    builder, arguments = CASES[name]
    model, data, truth = builder(*arguments)
    result = estimate_llc(model, squared_error, data)
    assert result.problems == [] and result.flags == []
    assert abs(result.llc - truth) < 0.2 * truth, (result.llc, truth)
    assert result.llc == pytest.approx(sum(result.per_chain) / len(result.per_chain), rel=1e-12)


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
