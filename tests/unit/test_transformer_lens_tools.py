"""TransformerLens 4.3's own analysis tools, run unchanged on our models: activation patching, head
detection, residual decompositions with LayerNorm applied, logit attribution and composition scores.
Each is checked against what it must give (a run patched onto itself, our own probes, the logits)."""

import pytest
import torch
from tiny_models import tiny_model, with_affine_parts
from transformer_lens import patching
from transformer_lens.head_detector import detect_head
from transformer_lens.tools.analysis.direct_logit_attribution import direct_logit_attribution

from induction_probes.circuits.models.attention_masks import matching_keys
from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
from induction_probes.circuits.runs.reader import Run
from induction_probes.probes.attention.patterns import bigram_matching_score, previous_token_score

T = 16


def standard_model(d_mlp=None) -> HookedTransformer:
    """Absolute positions, LayerNorm with random gains and biases (so the affine step shows), biases."""
    config = dict(d_model=16, n_heads=2, n_ctx=50, d_vocab=5, positional="standard", normalization="LN")
    model = tiny_model(**config, use_bias=True, d_mlp=d_mlp, init_range=0.3, seed=3)
    return with_affine_parts(model, scale=0.5, seed=4)


MODELS = {
    "markov-k3": lambda: Run.open("markov-k3").load().eval(),
    "standard-LN": standard_model,
    "standard-LN-MLP": lambda: standard_model(d_mlp=32),
}


@pytest.fixture(params=list(MODELS), scope="module")
def model(request):
    return MODELS[request.param]()


def tokens_for(model, batch=3, seed=0):
    return torch.randint(0, model.cfg.d_vocab, (batch, T), generator=torch.Generator().manual_seed(seed))


PATCHERS = [name for name in dir(patching) if name.startswith("get_act_patch_") and "direct_path" not in name]
NEEDS_MLP = ("get_act_patch_mlp_out", "get_act_patch_block_every")  # an attention-only model has no MLP to patch
CASES = [(model, name) for model in MODELS for name in PATCHERS if model.endswith("MLP") or name not in NEEDS_MLP]


@pytest.mark.parametrize("model_name,name", CASES)
def test_every_activation_patcher_patching_a_run_onto_itself_gives_the_clean_metric(model_name, name):
    model = MODELS[model_name]()
    tokens = tokens_for(model)
    logits, cache = model.run_with_cache(tokens)

    def metric(out):
        return out[:, -1].log_softmax(-1)[:, 0].mean()

    result = getattr(patching, name)(model, tokens, cache, metric)
    result = result if isinstance(result, torch.Tensor) else torch.as_tensor(result)
    assert result.numel() > 1
    assert torch.allclose(result, metric(logits).expand_as(result), atol=1e-5)


def test_head_detection_agrees_with_our_probes(model):
    tokens = tokens_for(model, batch=1, seed=5)[0]
    _, cache = model.run_with_cache(tokens[None])
    previous = detect_head(model, tokens, "previous_token_head")
    induction = detect_head(model, tokens, "induction_head")
    match = matching_keys(tokens[None])
    for layer in range(model.cfg.n_layers):
        pattern = cache["pattern", layer]
        ours = previous_token_score(pattern)  # mean over queries t >= 1; TransformerLens divides by all T
        assert torch.allclose(previous[layer], ours * (T - 1) / T, atol=1e-5)
        mass, _, _ = bigram_matching_score(pattern, tokens[None])  # mean over queries that have a match
        with_match = match.any(-1).sum().item()
        assert torch.allclose(induction[layer], mass * with_match / T, atol=1e-5)


def test_residual_decompositions_add_up_to_the_residual_stream_and_the_logits(model):
    tokens = tokens_for(model)
    logits, cache = model.run_with_cache(tokens)
    final = cache[f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"]
    accumulated = cache.accumulated_resid(apply_ln=True)
    assert torch.allclose(accumulated[-1] @ model.W_U + model.b_U, logits, atol=1e-5)
    assert torch.allclose(cache.decompose_resid().sum(0), final, atol=1e-5)  # attn_out holds b_O
    full, labels = cache.get_full_resid_decomposition(expand_neurons=False, return_labels=True)
    assert torch.allclose(full.sum(0), final, atol=1e-5)
    assert labels[: len(model.all_head_labels())] == model.all_head_labels()
    heads = cache.stack_head_results(apply_ln=True)
    assert heads.shape == (len(model.all_head_labels()), *final.shape)


def test_logit_attribution_reads_the_normalised_final_residual(model):
    tokens = tokens_for(model)
    _, cache = model.run_with_cache(tokens)
    answers = tokens[:, -1]
    stack = cache.decompose_resid(pos_slice=-1)
    attributions = cache.logit_attrs(stack, tokens=answers, pos_slice=-1)
    # the components (biases inside attn_out) sum to the final residual; the tool centres it and divides by
    # the cached scale, without the gain and bias: the final LayerNorm's hook_normalized, projected
    normalised = cache["ln_final.hook_normalized"][:, -1]
    expected = (normalised * model.tokens_to_residual_directions(answers)).sum(-1)
    assert torch.allclose(attributions.sum(0), expected, atol=1e-4)
    result = direct_logit_attribution(model, tokens, answer_tokens=answers, unit="head", pos=-1)
    assert result.labels[: len(model.all_head_labels())] == model.all_head_labels()


def test_composition_scores_match_their_definition(model):
    for mode in "QKV":
        scores = model.all_composition_scores(mode)
        for (l0, h0), (l1, h1) in [((0, 0), (1, 0)), ((0, model.cfg.heads(0) - 1), (1, 0))]:
            ov = model.blocks[l0].attn.W_V[h0] @ model.blocks[l0].attn.W_O[h0]
            w_q, w_k = model.blocks[l1].attn.W_Q[h1], model.blocks[l1].attn.W_K[h1]
            right = {
                "Q": w_q @ w_k.T,
                "K": w_k @ w_q.T,
                "V": model.blocks[l1].attn.W_V[h1] @ model.blocks[l1].attn.W_O[h1],
            }[mode]
            expected = torch.linalg.norm(ov @ right) / (torch.linalg.norm(ov) * torch.linalg.norm(right))
            assert scores[l0, h0, l1, h1].item() == pytest.approx(expected.item(), rel=1e-4)
        assert (scores[1, :, 0] == 0).all() and (scores[0, :, 0] == 0).all()  # only earlier → later
    attn = model.blocks[1].attn
    assert torch.allclose(attn.OV.AB, attn.W_V @ attn.W_O) and torch.allclose(
        attn.QK.AB, attn.W_Q @ attn.W_K.transpose(-2, -1)
    )


def test_forward_options_of_transformer_lens(model):
    tokens = tokens_for(model)
    logits = model(tokens)
    loss = model(tokens, return_type="loss")
    per_token = model(tokens, return_type="loss", loss_per_token=True)
    expected = -logits[:, :-1].log_softmax(-1).gather(-1, tokens[:, 1:, None]).squeeze(-1)
    assert torch.allclose(per_token, expected, atol=1e-6) and torch.allclose(loss, expected.mean(), atol=1e-6)
    both = model(tokens, return_type="both")
    assert torch.equal(both[0], logits) and torch.equal(both[1], loss)
    assert model(tokens, return_type=None) is None
    middle = model(tokens, stop_at_layer=1)
    _, cache = model.run_with_cache(tokens)
    assert torch.allclose(middle, cache["blocks.1.hook_resid_pre"], atol=1e-6)
    assert torch.allclose(model(middle, start_at_layer=1), logits, atol=1e-5)
    assert torch.allclose(model(middle, start_at_layer=1, return_type="loss", tokens=tokens), loss, atol=1e-6)
    with pytest.raises(ValueError, match="return_type must be"):
        model(tokens, return_type="logit")


def test_layer_norm_hooks_hold_the_scale_and_the_input_before_the_affine_step():
    model = standard_model()
    tokens = tokens_for(model)
    _, cache = model.run_with_cache(tokens)
    x = cache["blocks.0.hook_resid_pre"]
    centred = x - x.mean(-1, keepdim=True)
    scale = (centred.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt()
    assert torch.allclose(cache["blocks.0.ln1.hook_scale"], scale, atol=1e-6)
    assert torch.allclose(cache["blocks.0.ln1.hook_normalized"], centred / scale, atol=1e-5)


def test_the_config_answers_what_transformer_lens_reads_and_saves_plain_json():
    cfg = standard_model(d_mlp=8).cfg
    assert (cfg.device, cfg.attn_only, cfg.normalization_type, cfg.n_key_value_heads, cfg.act_fn) == (
        "cpu",
        False,
        "LN",
        None,
        "relu",
    )
    assert cfg.dtype is torch.float32 and cfg.positional_embedding_type == "standard"
    assert cfg.to_dict()["dtype"] == "float32"
    assert HookedTransformerConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("component", ["q", "k", "v"])
def test_direct_path_patching_of_a_run_onto_itself_gives_the_clean_metric(model, component):
    tokens = tokens_for(model)
    logits, cache = model.run_with_cache(tokens)

    def metric(out):
        return out[:, -1].log_softmax(-1)[:, 0].mean()

    result = patching.get_act_patch_direct_path(
        model, tokens, cache, cache, metric, src_layer=0, src_head=0, component=component, verbose=False
    )
    assert torch.allclose(result[1:], metric(logits).expand_as(result[1:]), atol=1e-5)
    assert not model.cfg.use_split_qkv_input  # the tool switched the split inputs back off


def test_switched_hooks_fire_only_when_on_and_change_nothing_else(model):
    tokens = tokens_for(model)
    logits = model(tokens)
    with pytest.raises(ValueError, match="blocks.1.attn.hook_result fires only with use_attn_result"):
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_result", lambda act, hook: None)])
    with pytest.raises(ValueError, match="call model.set_use_split_qkv_input\\(True\\) first"):
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_q_input", lambda act, hook: None)])
    for setter, name in [
        ("set_use_split_qkv_input", "blocks.1.attn.hook_v_input"),
        ("set_use_attn_in", "blocks.0.attn.hook_attn_in"),
        ("set_use_attn_result", "blocks.1.attn.hook_result"),
    ]:
        getattr(model, setter)(True)
        try:
            switched, cache = model.run_with_cache(tokens)
            assert torch.allclose(switched, logits, atol=1e-6) and name in cache.keys()
        finally:
            getattr(model, setter)(False)
    _, cache = model.run_with_cache(tokens)
    assert not any(key.endswith(("_input", "hook_attn_in", "hook_result")) for key in cache.keys())
    model.set_use_attn_in(True)
    try:
        with pytest.raises(ValueError, match="exclude each other"):
            model.set_use_split_qkv_input(True)
    finally:
        model.set_use_attn_in(False)


def test_a_tool_that_reads_one_head_count_stops_with_one_clear_line_on_mixed_head_counts():
    from induction_probes.circuits.models.model_classes import build_model
    from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
    from induction_probes.circuits.tasks.markov.markov_task import MarkovTask

    trigram = build_model(MarkovRecipe(task=MarkovTask(k=3, n=3, seq_len=20), heads=(2, 1)).model_config()).eval()
    tokens = torch.randint(0, 3, (2, 12), generator=torch.Generator().manual_seed(0))
    _, cache = trigram.run_with_cache(tokens)
    assert trigram.all_head_labels() == ["L0H0", "L0H1", "L1H0"]  # ours see every head
    assert [trigram.cfg.heads(layer) for layer in range(2)] == [2, 1]
    tools = [
        lambda: detect_head(trigram, tokens[0], "previous_token_head"),
        lambda: patching.get_act_patch_attn_head_out_all_pos(trigram, tokens, cache, lambda out: out.sum()),
        lambda: cache.stack_head_results(),
    ]
    for tool in tools:
        with pytest.raises(ValueError, match=r"different head counts \(2 in layer 0, 1 in layer 1\)"):
            tool()
