"""The high-dimensional toy (d > 1) against a brute-force reading of its formulas, and its gradient against
finite differences; at d = 1 it is the six-parameter toy."""

import math

import torch

from induction_probes.circuits.models.toy_model import ToyConfig, ToyModel
from induction_probes.circuits.recipes.gaussian_recipes import ToyRecipe
from induction_probes.circuits.tasks.gaussian.sequences import sample_sequences
from induction_probes.circuits.training.toy_training import train_toy


def brute_force(model: ToyModel, x: torch.Tensor) -> torch.Tensor:
    """f(X) for each sequence, with one Python loop per sum of the docstring (1-indexed positions s, j)."""
    p1, p2, W_V1, W_K, W_Q, W_V2 = (w.detach() for w in model.weights())
    n, L, d = x.shape
    out = torch.zeros(n, d, dtype=torch.float64)
    for b in range(n):
        X = {s: x[b, s - 1] for s in range(1, L + 1)}  # X[s] = x_s

        def previous(slope, s, tokens):  # Σ_{j=1}^{s−1} softmax_j(−slope (j − 1)) tokens[s − j]; 0 at s = 1
            weights = [math.exp(-slope * (j - 1)) for j in range(1, s)]
            if not weights:
                return torch.zeros(d, dtype=torch.float64)
            return sum(w * tokens[s - j] for j, w in zip(range(1, s), weights)) / sum(weights)

        h = {s: previous(p1.item(), s, X) for s in range(1, L + 1)}
        g = W_V1 @ previous(p2.item(), L, h)
        scores = [float((W_Q @ X[L]) @ (W_K @ h[s])) for s in range(2, L)]
        top = max(scores)
        weights = [math.exp(v - top) for v in scores]
        i = W_V2 @ (sum(w * X[s] for s, w in zip(range(2, L), weights)) / sum(weights))
        out[b] = g + i
    return out


def test_the_high_dimensional_toy_matches_its_formulas_by_brute_force():
    x = sample_sequences(6, 7, 3, generator=torch.Generator().manual_seed(1))
    model = ToyModel(ToyConfig(sigma=0.7, slope_init=0.4, d=3, seed=2))  # large weights: every term matters
    with torch.no_grad():
        model.params[:2] = torch.tensor([0.3, 1.7], dtype=torch.float64)  # p1 ≠ p2, so a swap would show
    # float64 sums in another order: agreement to ~1e-15 relative; 1e-12 leaves room, a wrong index does not
    assert torch.allclose(model(x), brute_force(model, x), rtol=1e-12, atol=1e-12)


def test_the_loss_gradient_matches_finite_differences():
    x = sample_sequences(16, 6, 2, generator=torch.Generator().manual_seed(3))
    y = torch.randn(16, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    model = ToyModel(ToyConfig(sigma=0.5, d=2, seed=5))

    def loss(params):
        with torch.no_grad():
            model.params.copy_(params)
        return 0.5 * ((model(x) - y) ** 2).sum(-1).mean().item()

    start = model.params.detach().clone()
    model.zero_grad()
    (0.5 * ((model(x) - y) ** 2).sum(-1).mean()).backward()
    analytic = model.params.grad.clone()
    eps = 1e-6  # central differences: error O(eps²) ~ 1e-12 against gradients of order 0.1–1
    numeric = torch.tensor([(loss(start + eps * e) - loss(start - eps * e)) / (2 * eps) for e in torch.eye(len(start))])
    assert torch.allclose(analytic, numeric.double(), rtol=1e-6, atol=1e-8)


def test_at_d_1_the_model_is_the_six_parameter_toy():
    x = sample_sequences(50, 9, 1, generator=torch.Generator().manual_seed(0))
    model = ToyModel(ToyConfig(d=1))
    with torch.no_grad():
        model.params.copy_(torch.tensor([0.8, 1.3, 0.6, 0.9, 1.1, 0.7], dtype=torch.float64))
    p1, p2, w_V1, w_K, w_Q, w_V2 = model.params.tolist()
    assert torch.allclose(model(x), brute_force(model, x), rtol=1e-12, atol=1e-12)
    summary = model.summary()
    assert summary["w_KQ"] == w_K * w_Q and [summary[k] for k in ("p1", "p2", "w_V1", "w_V2")] == [p1, p2, w_V1, w_V2]


def test_the_initial_matrices_come_from_the_model_seed():
    a, b, c = (ToyModel(ToyConfig(d=4, seed=s)).params for s in (0, 0, 1))
    assert torch.equal(a, b) and not torch.equal(a, c) and a.shape == (2 + 4 * 16,)
    assert abs(a[2:].std().item() - 1e-2) < 0.3e-2  # 64 draws of N(0, σ²): the sample sd is within ~10% of σ


def test_a_high_dimensional_run_records_identity_components_and_falls():
    history = train_toy(ToyRecipe(d=3, seq_len=8, n_seqs=128, steps=40, log_every=20, optimizer="adam", lr=0.01))
    assert [h["step"] for h in history] == [0, 20, 40]
    assert history[-1]["loss"] < history[0]["loss"]
    # at step 0 the 4-gram part is ½E‖g − 2 x_{L−2}‖² ≈ ½·α*²·d = 6 (g is tiny): 128 draws, within 25%
    assert abs(history[0]["loss_4gram"] - 6.0) < 1.5


def test_a_toy_too_wide_to_hold_is_refused_in_one_line(capsys):
    from induction_probes.cli import main

    # 2 + 4·(10⁴)² = 4·10⁸ parameters, above the 2²⁶ limit: refused before anything is allocated
    assert main(["toy", "--d", "10000", "--n-seqs", "1", "--seq-len", "4", "--steps", "1"]) == 2
    assert "parameters (2 + 4d²)" in capsys.readouterr().err
