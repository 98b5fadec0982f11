"""The per-head (weight-refined) LLC: a block's view is the model at w* with exactly the block's entries free
(its forward pass and gradient are the model's, and SGLD moves nothing else), the blocks are the heads, the
embedding and the unembedding, and the estimator lands on the known coefficient of each block of the
calibration models at the settings shipped for markov-k3."""

import pytest
import torch

from induction_probes import HookedTransformer, HookedTransformerConfig
from induction_probes.probes.llc.block_calibration import (
    MARKOV_K3_SEQS,
    MARKOV_K3_SETTINGS,
    block_linear_regression,
    calibrate_blocks,
    half_squared_error,
)
from induction_probes.probes.llc.chain_intervals import chain_estimate, chain_interval, range_flags
from induction_probes.probes.llc.checkpoint_llc import next_token_loss
from induction_probes.probes.llc.curvature import SubsetHessian, sampled_parameters, split
from induction_probes.probes.llc.estimator import LLCError
from induction_probes.probes.llc.gate import TOLERANCE_SHARE, within_tolerance
from induction_probes.probes.llc.per_head import Block, BlockView, block_size, model_blocks, per_head_llc


def two_head_model() -> HookedTransformer:
    """Two layers of two heads with biases and relative positions: every kind of head parameter is a slice."""
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=8, n_ctx=12, d_vocab=3, n_heads=2, d_head=4, use_bias=True, dtype="float64", seed=3
    )
    model = HookedTransformer(cfg)
    with torch.no_grad():  # biases and slopes start at zero: give every entry its own value
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(7)))
    return model


def tokens(n: int = 16, length: int = 12) -> torch.Tensor:
    return torch.randint(3, (n, length), generator=torch.Generator().manual_seed(1))


def test_the_hessian_of_a_union_of_subsets_is_their_size_weighted_sum():
    """SubsetHessian gives the union's H v in one pass over its samples: it must equal the size-weighted sum
    of the subsets' own products. 17 sequences in 16 subsets (sizes 1 and 2, so the weights differ), even
    ones only as the held-out test picks them; float64, so 1e-10 is rounding, and a missing weight (½ on a
    subset of 2 among 17) would be off by far more."""
    model, data = two_head_model(), (tokens(17),)
    params = sampled_parameters(model)
    subsets = split(data)
    vector = torch.randn(
        sum(p.numel() for p in params), generator=torch.Generator().manual_seed(5), dtype=torch.float64
    )
    for chosen in (subsets, subsets[0::2]):
        hessian = SubsetHessian(model, next_token_loss, chosen, params)
        summed = sum(w * p for w, p in zip(hessian.weights, hessian.products(vector)))
        assert torch.allclose(hessian(vector), summed, rtol=1e-10, atol=1e-12)


def test_blocks_are_the_heads_embedding_and_unembedding_disjoint():
    model = two_head_model()
    blocks = model_blocks(model)
    assert [b.name for b in blocks] == ["L0H0", "L0H1", "L1H0", "L1H1", "embed", "unembed"]
    head = dict(blocks[1].entries)
    assert head["blocks.0.attn.W_Q"] == 1 and head["blocks.0.attn.W_rel"] == 1 and "blocks.0.attn.b_O" not in head
    # per head: W_Q, W_K, W_V (8·4 each), W_O (4·8), b_Q, b_K, b_V (4 each), W_rel (12·4)
    assert block_size(model, blocks[1]) == 4 * 32 + 3 * 4 + 48
    assert block_size(model, blocks[4]) == 3 * 8 and block_size(model, blocks[5]) == 8 * 3 + 3
    entries = [entry for b in blocks for entry in b.entries]
    assert len(entries) == len(set(entries))


@pytest.mark.parametrize("index", range(6))
def test_the_view_is_the_model_and_its_gradient_is_the_blocks_slice(index):
    model = two_head_model()
    block = model_blocks(model)[index]
    view = BlockView(model, block)
    batch = (tokens(),)
    assert torch.equal(view(batch[0]), model(batch[0]))  # the same maths at w*, to the bit
    sampled = [p for p in view.parameters() if p.requires_grad]
    assert sum(p.numel() for p in sampled) == block_size(model, block)
    next_token_loss(model, batch).backward()
    view_grads = torch.autograd.grad(next_token_loss(view, batch), sampled)
    names = dict(model.named_parameters())
    for (name, row), grad in zip(block.entries, view_grads):
        full = names[name].grad if row is None else names[name].grad[row]
        torch.testing.assert_close(grad, full, rtol=1e-12, atol=1e-14)  # float64: only summation order differs


def test_sgld_on_the_view_moves_only_the_heads_entries():
    from devinterp.optim import SGMCMC

    model = two_head_model()
    block = next(b for b in model_blocks(model) if b.name == "L1H0")
    view = BlockView(model, block)
    sampled = [p for p in view.parameters() if p.requires_grad]
    sampler = SGMCMC.sgld(sampled, lr=1e-3, localization=1.0, nbeta=10.0)
    for _ in range(5):
        sampler.zero_grad()
        next_token_loss(view, (tokens(),)).backward()
        sampler.step()
    moved = view.weights()
    rows = dict(block.entries)
    for name, original in model.named_parameters():
        changed = (
            (moved[name].detach() != original.detach()).reshape(len(original), -1).any(-1) if original.dim() else None
        )
        if name in rows:  # row 0 of layer 1's head tensors moved; row 1 (the other head) did not
            assert changed.tolist() == [True, False], name
        else:
            assert torch.equal(moved[name].detach(), original.detach()), name


def test_bad_blocks_and_models_are_refused_by_name():
    model = two_head_model()
    with pytest.raises(LLCError, match="unknown blocks"):
        per_head_llc(model, tokens=tokens(), blocks=["L5H0"])
    with pytest.raises(LLCError, match="needs tokens"):
        per_head_llc(model)
    with pytest.raises(LLCError, match="no parameters"):
        BlockView(model, Block("x", (("blocks.9.attn.W_Q", 0),)))
    with pytest.raises(LLCError, match="no attention heads"):
        model_blocks(torch.nn.Linear(2, 2))


def test_a_block_named_twice_is_refused_before_any_sampling():
    # issue 52 (B10): the same block was sampled twice, its row reported twice
    with pytest.raises(LLCError, match="^blocks names L0H0, embed more than once: name each block once$"):
        per_head_llc(two_head_model(), tokens=tokens(), blocks=["embed", "L0H0", "L1H0", "L0H0", "embed"])


def test_chain_interval_is_a_t_interval_unclipped_and_flagged_outside_the_coefficients_range():
    low, high = chain_interval([1.0, 2.0, 3.0, 4.0])
    half = 3.182446305284263 * (1.2909944487358056 / 2)  # t_{0.975, 3} · s / √4
    assert (low, high) == pytest.approx((2.5 - half, 2.5 + half), rel=1e-9)
    # clipped to [0, d/2] alone (the old rule) this read (0.0, 1.0) and left out its own estimate 0.85's spread;
    # now both are as sampled, the estimate inside, and flagged on each side it leaves [0, d/2]
    chains = chain_estimate([0.1, 0.2, 3.0, 0.1], bound=1.0)
    low, high = chains["interval"]
    assert chains["llc"] == pytest.approx(0.85) and low < 0 <= chains["llc"] <= 1.0 < high
    assert [flag.split(":")[0] for flag in chains["range_flags"]] == ["beyond d/2", "below 0"]
    assert "the interval of 0.85 [" in chains["range_flags"][0]
    assert chain_estimate([0.4, 0.5, 0.6], bound=1.0)["range_flags"] == []
    assert range_flags(1.2, (1.1, 1.3), 1.0) == [
        "beyond d/2: the estimate 1.2 [1.1, 1.3] is above d/2 = 1, the largest value a learning coefficient can "
        "take (shown as sampled, not clipped)"
    ]
    assert chain_interval([1.0]) is None and chain_estimate([1.0], bound=1.0)["interval"] is None


def test_the_calibration_models_know_their_blocks_coefficients():
    model, (x, y), blocks, truth = block_linear_regression()
    assert truth == {"w0": 2.0, "w1": 2.0, "w2": 2.0, "v": 3.0, "whole": 9.0}
    assert sum(truth[b.name] for b in blocks) == truth["whole"]  # regular: the blocks add up to the whole
    # the point is the empirical minimum: the gradient vanishes to rounding
    loss = half_squared_error(model, (x, y))
    grads = torch.autograd.grad(loss, list(model.parameters()))
    assert max(float(g.abs().max()) for g in grads) < 1e-12
    assert within_tolerance(2.1, 2.0, 0.0) and not within_tolerance(2.3, 2.0, 0.0)


def test_every_block_is_within_tolerance_at_the_settings_for_markov_k3():
    # markov-k3's settings (overrides of the rule), so the calibration is the estimator that was used.
    # The tolerance, 10 % of the truth plus three standard errors over chains: γ = 0.01 nβ λ_max takes
    # ½ / (1 + 0.01 κ) from a direction whose curvature is λ_max / κ (κ ≤ 9 here: correlated inputs), the step
    # adds 2.5 %, and the chains' own noise is what the standard error measures.
    report = calibrate_blocks(n=MARKOV_K3_SEQS, **MARKOV_K3_SETTINGS)
    for case in report:
        for row in case["blocks"]:
            assert row["llc"] is not None and not row["problems"], (case["case"], row["block"], row["problems"])
            assert abs(row["llc"] - row["truth"]) <= TOLERANCE_SHARE * row["truth"] + 3 * row["llc_stderr"], (
                case["case"],
                row["block"],
                row["llc"],
                row["truth"],
            )
    linear, singular = report
    assert linear["sum_of_truths"] == linear["whole_truth"] == 9.0
    # the blocks' errors add up: the same tolerance on the sum, with the blocks' standard errors combined
    assert abs(linear["sum_of_blocks"] - 9.0) <= TOLERANCE_SHARE * 9.0 + 3 * linear["sum_stderr"]
    assert singular["sum_of_truths"] == 3.0 and singular["whole_truth"] == 3.5  # singular: the sum is not the whole
