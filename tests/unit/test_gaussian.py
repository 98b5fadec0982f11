"""Gaussian induction targets against their formulas written out with 1-indexed loops."""

import itertools
import math

import pytest
import torch

from induction_probes.circuits.tasks.gaussian.sequences import (
    four_gram,
    generalized_induction_head,
    induction_head,
    mixed_target,
    sample_sequences,
)


def brute_force_ih(x: torch.Tensor, n: int, W: torch.Tensor) -> torch.Tensor:
    """IH_n(X) = Σ_{s=n}^{L−1} softmax_s(X_{L−n+2:L}ᵀ W* X_{s−n+1:s−1}) x_s, 1-indexed as in the paper."""
    batch, L, d = x.shape
    tok = lambda b, s: x[b, s - 1]  # noqa: E731  (1-indexed token)
    window = lambda b, a, c: torch.cat([tok(b, t) for t in range(a, c + 1)])  # noqa: E731
    out = torch.zeros(batch, d, dtype=x.dtype)
    for b in range(batch):
        query = window(b, L - n + 2, L)
        scores = {s: query @ W @ window(b, s - n + 1, s - 1) for s in range(n, L)}
        norm = sum(math.exp(v) for v in scores.values())
        out[b] = sum(math.exp(scores[s]) / norm * tok(b, s) for s in scores)
    return out


@pytest.mark.parametrize("d,n", list(itertools.product([1, 3], [2, 3, 4])))
def test_ih_n_equals_the_formula(d, n):
    g = torch.Generator().manual_seed(10 * d + n)
    x = sample_sequences(5, 9, d, generator=g)
    W = torch.randn((n - 1) * d, (n - 1) * d, generator=g, dtype=torch.float64)
    assert torch.allclose(induction_head(x, n, W), brute_force_ih(x, n, W), atol=1e-12)


def test_general_similarity_and_special_cases():
    g = torch.Generator().manual_seed(0)
    x = sample_sequences(4, 8, 2, generator=g)
    W = torch.eye(2, dtype=torch.float64)
    dot = lambda q, k: torch.einsum("bu,bsu->bs", q, k)  # noqa: E731
    assert torch.allclose(generalized_induction_head(x, 2, dot), induction_head(x, 2, W))
    # An antonymic similarity g(u, v) = −uᵀv weights the opposite tokens: a different average.
    assert not torch.allclose(generalized_induction_head(x, 2, lambda q, k: -dot(q, k)), induction_head(x, 2, W))
    assert torch.equal(four_gram(x), x[:, -3])
    assert torch.allclose(mixed_target(x, 2.0, W), 2.0 * x[:, -3] + induction_head(x, 2, W))


def test_large_w_star_approaches_a_hard_max():
    x = torch.tensor([[[1.0], [2.0], [-1.0], [0.5], [3.0], [1.0]]], dtype=torch.float64)
    # x_L = 1 and s runs over 2..L−1 = 2..5, so the keys x_{s−1} are x_1..x_4 = 1, 2, −1, 0.5 (x_5 = 3 is
    # not one). The largest, x_2 = 2, wins the hard max and its successor x_3 = −1 is the output.
    assert induction_head(x, 2, torch.tensor([[50.0]], dtype=torch.float64)).item() == pytest.approx(-1.0)


def test_boolean_sequences():
    x = sample_sequences(3, 6, 4, generator=torch.Generator().manual_seed(1), boolean=True)
    assert set(x.unique().tolist()) == {-1.0, 1.0}


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda x: four_gram(x[:, :3]), "needs L >= 4"),
        (lambda x: induction_head(x, 8, torch.eye(7)), "n must be <= L - 1"),
        (lambda x: induction_head(x, 2, torch.eye(3)), "W\\* must be 1 x 1"),
        (lambda x: mixed_target(x, 0.0, torch.eye(1)), "alpha_star must be a finite number > 0"),
        (lambda x: sample_sequences(2, 5, 0, generator=torch.Generator()), "d must be an integer >= 1"),
    ],
)
def test_bad_input(call, message):
    x = sample_sequences(2, 6, 1, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=message):
        call(x)
