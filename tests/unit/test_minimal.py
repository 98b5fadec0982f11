"""Edelman et al.'s minimal model: eq. 6 entry by entry, causal in both layers, hooked."""

import itertools

import pytest
import torch

from induction_probes.circuits.models.minimal import MinimalConfig, MinimalModel, odd_even_gap
from induction_probes.probes.attention.patterns import previous_token_score, run_with_captures


def model(first_layer: str) -> MinimalModel:
    m = MinimalModel(MinimalConfig(d_vocab=3, n_ctx=10, first_layer=first_layer, dtype="float64"))
    with torch.no_grad():
        m.v.copy_(torch.randn(10, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
        m.W.copy_(torch.randn(3, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    return m


def brute_force(m: MinimalModel, tokens: torch.Tensor) -> torch.Tensor:
    """f(E)_i = Σ_{j≤i} (e_{x_i}ᵀ W (A E)_j) e_{x_j}, with A from v as the docstring defines it."""
    batch, n_pos = tokens.shape
    out = torch.zeros(batch, n_pos, 3, dtype=torch.float64)
    for b, i in itertools.product(range(batch), range(n_pos)):
        for j in range(i + 1):
            if m.cfg.first_layer == "linear":
                written = sum(m.v[j - l] * torch.eye(3, dtype=torch.float64)[tokens[b, l]] for l in range(j + 1))
            else:
                weights = torch.softmax(torch.stack([m.v[j - l] for l in range(j + 1)]), 0)
                written = sum(
                    w * torch.eye(3, dtype=torch.float64)[tokens[b, l]] for w, l in zip(weights, range(j + 1))
                )
            score = m.W[tokens[b, i]] @ written
            out[b, i, tokens[b, j]] += score
    return out


@pytest.mark.parametrize("first_layer", ["linear", "softmax"])
def test_forward_is_eq_6(first_layer):
    m = model(first_layer)
    tokens = torch.randint(0, 3, (2, 7), generator=torch.Generator().manual_seed(2))
    assert torch.allclose(m(tokens), brute_force(m, tokens), atol=1e-10)


@pytest.mark.parametrize("first_layer", ["linear", "softmax"])
def test_no_future_leaks_into_either_layer(first_layer):
    m = model(first_layer)
    tokens = torch.randint(0, 3, (4, 10), generator=torch.Generator().manual_seed(3))
    base = m(tokens)
    for t in range(9):
        changed = tokens.clone()
        changed[:, t + 1 :] = (changed[:, t + 1 :] + 1) % 3
        assert torch.equal(m(changed)[:, : t + 1], base[:, : t + 1]), t


def test_probes_read_its_first_layer():
    m = MinimalModel(MinimalConfig(d_vocab=3, n_ctx=10))
    with torch.no_grad():
        m.v[1] = 20.0  # softmax over distance: all mass on the previous token
    _, captured = run_with_captures(m, torch.randint(0, 3, (2, 10)), ["blocks.0.attn.hook_pattern"])
    assert previous_token_score(captured["blocks.0.attn.hook_pattern"]).item() == pytest.approx(1.0, abs=1e-6)


def test_its_cache_knows_whether_the_batch_dimension_was_removed_as_the_transformers_does():
    """Its cache said it had a batch dimension even with ``remove_batch_dim=True`` (found in issue 66), so that
    ActivationCache's per-position tools would read the first position as a batch."""
    m = MinimalModel(MinimalConfig(d_vocab=3, n_ctx=10))
    tokens = torch.randint(0, 3, (1, 10))
    _, batched = m.run_with_cache(tokens)
    _, single = m.run_with_cache(tokens, remove_batch_dim=True)
    assert batched.has_batch_dim and not single.has_batch_dim
    assert torch.equal(single["blocks.0.attn.hook_pattern"], batched["blocks.0.attn.hook_pattern"][0])


def test_odd_even_gap():
    assert odd_even_gap(torch.tensor([0.0, 5.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0])) == pytest.approx(2.0)


def test_bad_config():
    with pytest.raises(ValueError, match="first_layer must be linear or softmax"):
        MinimalConfig(d_vocab=3, n_ctx=10, first_layer="relu")
