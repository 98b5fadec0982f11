"""The loss taken from the unembedding's input: blocks of logits with a running maximum give the float64 log-softmax
to float32 rounding, on random rows and on bridges of three families; an unembedding that is not the linear map its
weights say is computed whole."""

import math

import pytest
import torch
from lm_models import save_model

from induction_probes import lm
from induction_probes.probes.lm import losses
from induction_probes.probes.lm.losses import Overflow, linear_unembedding, pass_loss, per_token_loss, streamed_loss


def float64_loss(rows, targets, weight, bias):
    logits = rows.double() @ weight.double() + (0 if bias is None else bias.double())
    return -torch.log_softmax(logits, -1).gather(-1, targets[:, None]).squeeze(-1)


@pytest.mark.parametrize("with_bias", [False, True])
def test_blocks_of_logits_give_the_float64_loss(monkeypatch, with_bias):
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(23, 16, generator=generator) * 4  # logits of about ±30: a spread softmax and a peaked one
    weight = torch.randn(16, 1000, generator=generator)
    bias = torch.randn(1000, generator=generator) if with_bias else None
    targets = torch.randint(0, 1000, (23,), generator=generator)
    monkeypatch.setattr(losses, "LOSS_ROWS", 7)  # 4 row blocks, the last short
    monkeypatch.setattr(losses, "VOCAB_BLOCK", 96)  # 11 column blocks, the last short
    ours = streamed_loss(rows, targets, weight, bias)
    # float32 logits of up to ~60 carry ~4e-6 of rounding each; 1e-4 leaves room for that and for the sum, while a
    # block merged without rescaling its running sum is off by whole nats
    assert torch.allclose(ours, float64_loss(rows, targets, weight, bias), atol=1e-4, rtol=0)
    assert ours.dtype == torch.float64


def test_a_logit_beyond_float32_is_an_overflow_never_a_nan():
    rows = torch.ones(3, 4)
    weight = torch.ones(4, 10)
    weight[0, 5] = math.inf
    with pytest.raises(Overflow):
        streamed_loss(rows, torch.tensor([0, 1, 2]), weight, None)


@pytest.fixture(scope="module")
def bridges(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    return {name: lm.as_hooked(str(save_model(name, root / name))) for name in ("gpt2", "neox", "llama")}


@pytest.mark.parametrize("architecture", ["gpt2", "neox", "llama"])
def test_a_bridges_pass_loss_equals_the_loss_of_its_logits(bridges, architecture, monkeypatch):
    bridge = bridges[architecture]
    repeated = lm.repeated_random_tokens(bridge, length=(5, 12), batch=6, seed=2)
    tokens = repeated.tokens
    with torch.no_grad():
        whole = per_token_loss(bridge(tokens), tokens)
    monkeypatch.setattr(losses, "LOSS_ROWS", 10)
    monkeypatch.setattr(losses, "VOCAB_BLOCK", 24)  # the tiny models' 64 logits in three blocks
    assert linear_unembedding(bridge, torch.randn(1, bridge.cfg.d_model)) is not None
    streamed = pass_loss(bridge, tokens, lambda hooks: bridge.run_with_hooks(tokens, fwd_hooks=hooks))
    assert torch.allclose(streamed, whole, atol=1e-5)  # ~4-nat losses in float32: 1e-5 is rounding


class CappedUnembedding(torch.nn.Module):
    """An unembedding with weights whose map is not theirs alone: logits soft-capped after it, as Gemma 2 caps."""

    def __init__(self, d_model: int, d_vocab: int):
        super().__init__()
        self.W_U = torch.nn.Parameter(torch.randn(d_model, d_vocab, generator=torch.Generator().manual_seed(1)))
        self.b_U = None

    def forward(self, x):
        return 3.0 * torch.tanh(x @ self.W_U / 3.0)


def test_an_unembedding_that_is_not_its_weights_map_is_computed_whole(monkeypatch):
    d_model, d_vocab = 8, 50
    model = torch.nn.Module()
    model.unembed = CappedUnembedding(d_model, d_vocab)
    model.cfg = type("Config", (), {"d_vocab": d_vocab})()
    final = torch.randn(3, 9, d_model, generator=torch.Generator().manual_seed(2))
    tokens = torch.randint(0, d_vocab, (3, 9), generator=torch.Generator().manual_seed(3))
    assert linear_unembedding(model, final[0, :1]) is None
    monkeypatch.setattr(losses, "LOSS_NUMBERS", 5 * d_vocab)  # five positions' logits at a time
    with torch.no_grad():
        ours = losses.unembedded_loss(model, final, tokens)
        expected = per_token_loss(model.unembed(final), tokens)
    assert torch.allclose(ours, expected, atol=1e-6)
    scored = torch.rand(3, 8, generator=torch.Generator().manual_seed(4)) < 0.5
    with torch.no_grad():
        partial = losses.unembedded_loss(model, final, tokens, scored)
    assert torch.equal(partial.isnan(), ~scored) and torch.allclose(partial[scored], expected[scored], atol=1e-6)
