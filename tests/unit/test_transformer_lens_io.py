"""Weights in and out of TransformerLens: its state-dict format both ways, a natively booted
TransformerBridge that computes what our model computes (and runs our probes), and TransformerLens's
weight processing keeping log-probabilities."""

import logging

import pytest
import torch
from tiny_models import tiny_model, with_affine_parts

from induction_probes.circuits.constructions.edelman import prop21
from induction_probes.circuits.constructions.loading import load_construction
from induction_probes.circuits.interop.transformer_lens_io import (
    PROCESSING,
    load_transformer_lens_state_dict,
    process_weights,
    state_dict_from_bridge,
    to_bridge,
    transformer_lens_state_dict,
)
from induction_probes.circuits.models.model import HookedTransformer
from induction_probes.circuits.runs.reader import Run
from induction_probes.probes.ablation.head_ablation import run_ablated
from induction_probes.probes.attention.patterns import bigram_matching_score, previous_token_score, run_with_patterns

logging.getLogger("transformer_lens").setLevel(logging.ERROR)


def standard_model(use_bias=True) -> HookedTransformer:
    config = dict(d_model=16, n_heads=2, n_ctx=30, d_vocab=4, positional="standard", normalization="LN")
    model = tiny_model(**config, use_bias=use_bias, init_range=0.3, seed=1)
    return with_affine_parts(model, scale=0.4, seed=2)


def tokens(n=3, length=20, seed=0, k=4):
    return torch.randint(0, k, (n, length), generator=torch.Generator().manual_seed(seed))


def test_a_natively_booted_bridge_computes_what_our_model_computes_hook_by_hook():
    model = standard_model()
    bridge = to_bridge(model)
    assert not bridge.compatibility_mode
    logits, ours = model.run_with_cache(tokens())
    bridge_logits, theirs = bridge.run_with_cache(tokens())
    assert torch.allclose(bridge_logits, logits, atol=1e-5)
    # the native bridge fires hook_attn_scores with the softmaxed pattern (a TransformerLens 4.3 bug): left out
    shared = [name for name in set(ours.keys()) & set(theirs.keys()) if not name.endswith("hook_attn_scores")]
    assert {
        "blocks.0.ln1.hook_scale",
        "blocks.1.ln1.hook_normalized",
        "ln_final.hook_normalized",
        "blocks.1.attn.hook_z",
        "blocks.0.attn.hook_pattern",
    } <= set(shared)
    for name in shared:
        assert torch.allclose(ours[name], theirs[name], atol=1e-5), name


def test_state_dicts_go_both_ways_exactly():
    model = standard_model()
    bridge = to_bridge(model)
    again = HookedTransformer(model.cfg)
    load_transformer_lens_state_dict(again, state_dict_from_bridge(bridge))
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    plain = standard_model(use_bias=False)
    exported = transformer_lens_state_dict(plain)
    assert exported["blocks.0.attn.mask"].dtype == torch.bool and exported["blocks.0.attn.IGNORE"] == -torch.inf
    assert not exported["blocks.1.attn.b_Q"].any() and not exported["unembed.b_U"].any()
    theirs = HookedTransformer(plain.cfg)
    load_transformer_lens_state_dict(theirs, exported)  # buffers and zero biases have no place, and need none
    assert torch.equal(theirs(tokens()), plain(tokens()))
    exported["blocks.0.attn.b_V"] += 1.0
    with pytest.raises(ValueError, match="blocks.0.attn.b_V has no place in this model"):
        load_transformer_lens_state_dict(theirs, exported)


def test_what_transformer_lens_cannot_express_is_refused_in_one_line():
    with pytest.raises(ValueError, match="absolute \\('standard'\\) positions and causal masks only"):
        transformer_lens_state_dict(Run.open("markov-k3").load())


def test_our_probes_on_a_bridge_equal_ours_on_the_same_weights():
    model = standard_model()
    bridge = to_bridge(model)
    inputs, reference = tokens(seed=3), tokens(n=6, seed=4)
    _, ours = run_with_patterns(model, inputs)
    _, theirs = run_with_patterns(bridge, inputs)
    for mine, other in zip(ours, theirs):
        assert torch.allclose(previous_token_score(mine), previous_token_score(other), atol=1e-5)
        assert torch.allclose(
            bigram_matching_score(mine, inputs)[0], bigram_matching_score(other, inputs)[0], atol=1e-5
        )
    for mode in ("zero", "mean", "resample"):
        ablated = run_ablated(model, inputs, [(0, 1), (1, 0)], mode, reference)
        assert torch.allclose(run_ablated(bridge, inputs, [(0, 1), (1, 0)], mode, reference), ablated, atol=1e-5), mode


MODELS = {
    "markov-k3": lambda: Run.open("markov-k3").load().eval(),
    "prop21": lambda: load_construction(*prop21(3, 100.0, 100)).eval(),
    "standard-LN": standard_model,
}


@pytest.mark.parametrize("name", MODELS)
def test_each_weight_processing_step_keeps_the_log_probabilities(name):
    model = MODELS[name]()
    inputs = tokens(n=4, length=min(model.cfg.n_ctx, 60), k=model.cfg.d_vocab)
    reference = model(inputs).log_softmax(-1)
    applied = 0
    for step in PROCESSING:
        try:
            processed = process_weights(model, **{other: other == step for other in PROCESSING})
        except ValueError as refusal:  # only where the maths cannot hold, saying why
            assert str(refusal).startswith(f"{step}: ") and (
                "LayerNorm" in str(refusal) or "positional" in str(refusal)
            )
            continue
        applied += 1
        assert torch.allclose(processed(inputs).log_softmax(-1), reference, atol=1e-5), step
    assert applied >= 2
    assert torch.allclose(process_weights(model)(inputs).log_softmax(-1), reference, atol=1e-5)


def test_folding_leaves_layer_norms_that_only_normalise():
    processed = process_weights(standard_model())
    assert all(torch.equal(processed.blocks[layer].ln1.w, torch.ones(16)) for layer in range(2))
    assert not processed.ln_final.b.any() and not processed.blocks[0].attn.b_V.any()
    assert processed.W_U.mean(-1).abs().max() < 1e-6  # centred unembedding
