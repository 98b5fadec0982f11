"""The hooked model: maths against a brute-force forward, causality, hooks, cache, state dicts."""

import itertools
import math

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformer_lens import ActivationCache

from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
from induction_probes.circuits.models.model_config import MixedHeadsConfig, transformer_config

SCHEMES = ["relative", "alibi", "standard", "none"]
MASKS = ["causal", "strict", ("strict", 2)]  # (mask, skip_first_keys)


def make_model(**overrides) -> HookedTransformer:
    if isinstance(overrides.get("mask"), tuple) and isinstance(overrides["mask"][1], int):
        overrides["mask"], overrides["skip_first_keys"] = overrides["mask"]
    settings = dict(n_layers=2, d_model=8, n_ctx=12, d_vocab=3, n_heads=2, dtype="float64", seed=1)
    model = HookedTransformer(transformer_config(**(settings | overrides)))
    with torch.no_grad():  # make slopes and weights large enough that every term matters
        for name, param in model.named_parameters():
            if name.endswith("alibi_slope"):
                param.uniform_(0.2, 1.0)
            elif name.split(".")[-1].startswith("W_"):
                param.mul_(20.0)
    return model


def tokens(batch=3, pos=12, k=3, seed=0):
    return torch.randint(0, k, (batch, pos), generator=torch.Generator().manual_seed(seed))


def brute_force_attention(attn, x, positional, strict, skip=0):
    """One attention layer, entry by entry, written from the formula in circuits/models/model.py."""
    batch, n_pos, _ = x.shape
    n_heads, _, d_head = attn.W_Q.shape
    out = torch.zeros_like(x)
    for b, h, i in itertools.product(range(batch), range(n_heads), range(n_pos)):
        q = x[b, i] @ attn.W_Q[h]
        keys = [j for j in range(n_pos) if (j < i if strict else j <= i) and j >= skip]
        scores = []
        for j in keys:
            score = q @ (x[b, j] @ attn.W_K[h]) / math.sqrt(d_head)
            if positional == "relative":
                score = score + q @ attn.W_rel[h, i - j] / math.sqrt(d_head)
            elif positional == "alibi":
                score = score - attn.alibi_slope[h] * (i - j - 1)
            scores.append(score)
        if not keys:
            continue  # a strict query with no key contributes nothing
        weights = torch.softmax(torch.stack(scores), 0)
        z = sum(w * (x[b, j] @ attn.W_V[h]) for w, j in zip(weights, keys))
        out[b, i] += z @ attn.W_O[h]
    return out


def brute_force_forward(model, toks):
    cfg = model.cfg
    resid = model.W_E[toks]
    if cfg.positional == "standard":
        resid = resid + model.pos_embed.W_pos[: toks.shape[1]]
    for layer, block in enumerate(model.blocks):
        resid = resid + brute_force_attention(
            block.attn, resid, cfg.layer_positional(layer), cfg.layer_mask(layer) == "strict", cfg.layer_skip(layer)
        )
    return resid @ model.W_U


@pytest.mark.parametrize("positional,mask", list(itertools.product(SCHEMES, MASKS)))
def test_forward_equals_brute_force_formula(positional, mask):
    model = make_model(positional=positional, mask=mask)
    toks = tokens(batch=2, pos=7)
    assert torch.allclose(model(toks), brute_force_forward(model, toks), atol=1e-10)


def test_relative_scores_equal_the_formula():
    model = make_model(positional="relative")
    toks = tokens(batch=2, pos=6)
    _, cache = model.run_with_cache(toks)
    q, k, attn = cache["q", 1], cache["k", 1], model.blocks[1].attn
    scores = cache["attn_scores", 1]
    for b, h, i, j in itertools.product(range(2), range(2), range(6), range(6)):
        if j > i:
            assert scores[b, h, i, j] == -math.inf
        else:
            expected = q[b, i, h] @ (k[b, j, h] + attn.W_rel[h, i - j]) / math.sqrt(model.cfg.d_head)
            assert torch.allclose(scores[b, h, i, j], expected, atol=1e-12)


@pytest.mark.parametrize("positional,mask", list(itertools.product(SCHEMES, MASKS)))
def test_output_at_t_ignores_later_tokens(positional, mask):
    model = make_model(positional=positional, mask=mask)
    toks = tokens(batch=4, pos=12)
    base = model(toks)
    for t in range(11):
        changed = toks.clone()
        changed[:, t + 1 :] = torch.randint(0, 3, changed[:, t + 1 :].shape, generator=torch.Generator().manual_seed(t))
        changed[:, t + 1 :] = (toks[:, t + 1 :] + 1 + changed[:, t + 1 :] % 2) % 3  # surely different
        out = model(changed)
        assert torch.equal(out[:, : t + 1], base[:, : t + 1]), t
        assert not torch.allclose(out[:, t + 1 :], base[:, t + 1 :])


def test_vector_inputs_are_causal_and_linear_in_the_embedding():
    model = make_model(input_type="vectors", d_vocab=4, d_vocab_out=2, positional="alibi", mask="strict")
    x = torch.randn(3, 10, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    out = model(x)
    assert out.shape == (3, 10, 2)
    changed = x.clone()
    changed[:, 6:] += 1.0
    assert torch.equal(model(changed)[:, :6], out[:, :6])
    _, cache = model.run_with_cache(x)
    assert torch.allclose(cache["hook_embed"], x @ model.W_E)


def test_strict_mask_first_query_attends_nowhere():
    model = make_model(mask="strict")
    _, cache = model.run_with_cache(tokens())
    pattern = cache["pattern", 0]
    assert torch.equal(pattern[:, :, 0], torch.zeros_like(pattern[:, :, 0]))
    assert torch.allclose(pattern[:, :, 1:].sum(-1), torch.ones_like(pattern[:, :, 1:, 0]))
    assert torch.isfinite(pattern).all()


def test_run_with_cache_gives_a_transformer_lens_cache():
    model = make_model(use_attn_result=True)
    logits, cache = model.run_with_cache(tokens(batch=5, pos=9))
    assert isinstance(cache, ActivationCache)
    assert cache["pattern", 0].shape == (5, 2, 9, 9)  # [batch, head, query, key]
    assert cache["z", 1].shape == (5, 9, 2, model.cfg.d_head)
    assert cache["result", 0].shape == (5, 9, 2, model.cfg.d_model)
    assert torch.allclose(cache["result", 0].sum(2), cache["attn_out", 0])
    assert torch.allclose(cache["resid_post", 1] @ model.W_U, logits)
    assert "blocks.0.attn.hook_pos_scores" in cache.keys()
    assert not any(hook.fwd_hooks or hook.bwd_hooks for hook in model.hook_dict.values())


def test_hooks_can_edit_activations_and_are_removed():
    model = make_model()
    toks = tokens()
    clean = model(toks)

    def zero_head_0(z, hook):
        z = z.clone()
        z[:, :, 0] = 0.0
        return z

    ablated = model.run_with_hooks(toks, fwd_hooks=[("blocks.0.attn.hook_z", zero_head_0)])
    assert not torch.allclose(ablated, clean)
    assert torch.equal(model(toks), clean)


def test_stacked_weights_and_factored_circuits():
    model = make_model()
    assert model.W_Q.shape == (2, 2, 8, 4) and model.W_O.shape == (2, 2, 4, 8)
    assert torch.allclose(model.QK.AB, model.W_Q @ model.W_K.transpose(-1, -2))
    assert torch.allclose(model.OV.AB, model.W_V @ model.W_O)
    assert torch.equal(model.W_Q[1, 0], model.blocks[1].attn.W_Q[0])


def test_per_layer_heads():
    model = make_model(layer_heads=(3, 1), d_head=4)
    _, cache = model.run_with_cache(tokens())
    assert cache["pattern", 0].shape[1] == 3 and cache["pattern", 1].shape[1] == 1
    with pytest.raises(ValueError, match="different head counts"):
        _ = model.W_Q


def test_a_config_never_changes_its_class_and_json_picks_the_mixed_one():
    settings = dict(n_layers=2, d_model=8, n_ctx=12, d_vocab=3, d_head=4, layer_heads=(3, 1))
    with pytest.raises(ValueError, match="transformer_config"):
        HookedTransformerConfig(**settings)
    mixed = transformer_config(**settings)
    assert type(mixed) is MixedHeadsConfig and mixed.heads(0) == 3 and mixed.to_dict()["n_heads"] == 1
    assert type(HookedTransformerConfig.from_dict(mixed.to_dict())) is MixedHeadsConfig
    assert HookedTransformerConfig.from_dict(mixed.to_dict()) == mixed
    same = transformer_config(**(settings | {"layer_heads": (2, 2)}))
    # equal head counts: n_heads says them, as TransformerLens's tools read it (it said 1 here before)
    assert type(same) is HookedTransformerConfig and same.n_heads == 2 and same.max_heads == 2
    with pytest.raises(ValueError, match="contradicts"):
        HookedTransformerConfig(**(settings | {"layer_heads": (2, 2), "n_heads": 3}))


def test_state_dict_round_trip_through_safetensors(tmp_path):
    model = make_model(normalization="LN", d_mlp=16, use_bias=True, positional=("relative", "alibi"))
    path = tmp_path / "weights.safetensors"
    save_file(model.state_dict(), path)
    fresh = HookedTransformer(model.cfg.__class__.from_dict(model.cfg.to_dict() | {"seed": 99}))
    assert not torch.equal(fresh(tokens()), model(tokens()))
    fresh.load_state_dict(load_file(path))
    assert torch.equal(fresh(tokens()), model(tokens()))


def test_hand_made_weights_load_with_load_state_dict():
    cfg = HookedTransformerConfig(n_layers=1, d_model=2, n_ctx=4, d_vocab=2, positional="none", dtype="float64")
    model = HookedTransformer(cfg)
    eye = torch.eye(2, dtype=torch.float64)
    zeros = torch.zeros(1, 2, 2, dtype=torch.float64)
    model.load_state_dict(
        {
            "embed.W_E": eye,
            "unembed.W_U": eye,
            "blocks.0.attn.W_Q": zeros,
            "blocks.0.attn.W_K": zeros,
            "blocks.0.attn.W_V": eye[None],
            "blocks.0.attn.W_O": eye[None],
        }
    )
    # Zero scores → uniform attention over the prefix: output = one-hot + running mean of one-hots.
    out = model(torch.tensor([[0, 1, 1, 0]]))
    expected = torch.tensor([[2, 0], [0.5, 1.5], [1 / 3, 1 + 2 / 3], [1.5, 0.5]], dtype=torch.float64)
    assert torch.allclose(out[0], expected)


def test_gradients_reach_every_parameter():
    for positional in ("relative", "alibi", "standard"):
        model = make_model(
            positional=positional, normalization="LN", d_mlp=8, use_bias=True, dropout=0.1, dtype="float32"
        )
        model.train()
        logits = model(tokens())
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens(seed=5).flatten()).backward()
        for name, param in model.named_parameters():
            assert param.grad is not None and param.grad.abs().sum() > 0, (positional, name)


def test_float64_and_float32():
    assert make_model(dtype="float32")(tokens()).dtype == torch.float32
    assert make_model(dtype="float64")(tokens()).dtype == torch.float64


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"positional": "rotary"}, "positional must be one of"),
        ({"mask": ("causal",)}, "mask has 1 entries for 2 layers"),
        ({"positional": ("standard", "relative")}, "standard positions are absolute"),
        ({"n_heads": 3}, "not divisible"),
        ({"n_layers": 0}, "n_layers must be an integer >= 1"),
        ({"dtype": "float16"}, "dtype must be one of"),
        ({"dropout": 1.5}, "dropout must be in"),
    ],
)
def test_bad_configs_raise(overrides, message):
    settings = dict(n_layers=2, d_model=8, n_ctx=12, d_vocab=3, n_heads=2) | overrides
    with pytest.raises(ValueError, match=message):
        HookedTransformerConfig(**settings)


def test_unknown_config_keys_are_refused():
    with pytest.raises(ValueError, match="unknown HookedTransformerConfig keys: d_banana"):
        HookedTransformerConfig.from_dict({"n_layers": 1, "d_model": 4, "n_ctx": 4, "d_vocab": 2, "d_banana": 1})


@pytest.mark.parametrize(
    "bad,message",
    [
        (torch.tensor([[0, 3]]), "tokens must be integers in 0..2"),
        (torch.tensor([[0, -1]]), "tokens must be integers in 0..2"),
        (torch.zeros(1, 13, dtype=torch.long), "sequence length must be in 1..12"),
        (torch.zeros(1, 4), "tokens must be integers"),
        (torch.zeros(1, 2, 4, dtype=torch.long), "must have 2 dims"),  # one sequence [pos] gains a batch dim
    ],
)
def test_bad_token_inputs_raise(bad, message):
    with pytest.raises(ValueError, match=message):
        make_model()(bad)


def test_nan_vector_input_raises():
    model = make_model(input_type="vectors", d_vocab=2)
    x = torch.zeros(1, 3, 2)
    x[0, 1, 0] = math.nan
    with pytest.raises(ValueError, match="finite"):
        model(x)
