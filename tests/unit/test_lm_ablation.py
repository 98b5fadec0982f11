"""Ablation of language-model heads resumes each ablated pass at the lowest ablated layer, from the clean pass's
residual stream there: the same losses as whole passes, on three families and every mode, with the blocks below
not run at all."""

import pytest
import torch
from lm_models import save_model

from induction_probes import lm
from induction_probes.circuits.interop import resume
from induction_probes.probes.lm import ablate_heads
from induction_probes.probes.lm.protocols import induction_loss


@pytest.fixture(scope="module")
def bridges(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    return {name: lm.as_hooked(str(save_model(name, root / name))) for name in ("gpt2", "neox", "llama")}


@pytest.mark.parametrize("architecture", ["gpt2", "neox", "llama"])
@pytest.mark.parametrize("mode", ["zero", "mean", "resample"])
def test_resumed_passes_give_the_losses_of_whole_passes(bridges, architecture, mode, monkeypatch):
    bridge = bridges[architecture]
    repeated = lm.repeated_random_tokens(bridge, length=(5, 12), batch=6, seed=2)
    reference = lm.repeated_random_tokens(bridge, repeated.length_range, 6, seed=3)
    head_sets = [[(1, 0)], [(1, 3)], [(0, 2)], [(1, 1), (0, 3)]]
    monkeypatch.setattr(ablate_heads, "PASS_TOKENS", repeated.tokens.shape[1] * 4)  # passes of 4 sequences and 2
    resumed = lm.ablate(bridge, repeated, head_sets, mode, reference, seed=7)
    monkeypatch.setattr(resume, "resumes_at_layer", lambda model: False)  # every pass from the tokens
    whole = lm.ablate(bridge, repeated, head_sets, mode, reference, seed=7)
    # the same float32 operations on the same residual: equal to rounding (1e-5 nats on losses of ~4 nats)
    assert torch.allclose(resumed[0].repeated_half_per_sequence, whole[0].repeated_half_per_sequence, atol=1e-5)
    for ours, theirs in zip(resumed[1], whole[1]):
        assert ours.heads == theirs.heads
        assert torch.allclose(ours.loss.repeated_half_per_sequence, theirs.loss.repeated_half_per_sequence, atol=1e-5)
        assert torch.allclose(ours.loss.first_half_per_sequence, theirs.loss.first_half_per_sequence, atol=1e-5)


def test_the_blocks_below_the_ablated_layer_do_not_run(bridges):
    bridge = bridges["llama"]
    repeated = lm.repeated_random_tokens(bridge, length=6, batch=3)
    calls = []
    mlp = bridge.blocks[0].original_component.mlp  # the block's own work (its call is kept, its forward skipped)
    handle = mlp.register_forward_hook(lambda *args: calls.append(1))
    try:
        lm.ablate(bridge, repeated, [[(1, 0)], [(1, 2)]])
    finally:
        handle.remove()
    # the clean pass, and the clean pass that stops at layer 1 to keep its residual: the ablated passes start there
    assert len(calls) == 2
    assert "forward" not in vars(bridge.blocks[0].original_component)  # handed back as it was


def test_the_scored_entries_are_all_the_induction_loss_reads(bridges):
    """Ablated passes compute the loss only where ``scored`` says (the rest NaN): a NaN anywhere else would reach
    the table. On the default protocol (|R| drawn per sequence, a filler before it) and on fixed lengths."""
    bridge = bridges["gpt2"]
    for repeated in (lm.repeated_random_tokens(bridge, batch=9, seed=4), lm.repeated_random_tokens(bridge, 7, 5)):
        per_token = torch.rand(repeated.tokens.shape[0], repeated.tokens.shape[1] - 1, dtype=torch.float64)
        scored = repeated.scored()
        assert 0 < scored.sum() < scored.numel()  # something is left out (prefixes, fillers, each R[0])
        full = induction_loss(per_token, repeated)
        holed = induction_loss(per_token.masked_fill(~scored, float("nan")), repeated)
        for name in ("first_half_per_sequence", "repeated_half_per_sequence", "icl_per_sequence"):
            assert torch.equal(getattr(full, name), getattr(holed, name)), name
