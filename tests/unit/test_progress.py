"""Progress measures from the weights: their values on Proposition 2.1 and at initialisation, and each
piece against the model's own forward pass on the inputs the measure idealises."""

import statistics
from dataclasses import replace

import pytest
import torch

from induction_probes.circuits.constructions.edelman import prop21
from induction_probes.circuits.constructions.loading import load_construction
from induction_probes.circuits.models.model import HookedTransformer
from induction_probes.circuits.recipes.clamps import previous_token_pattern
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.probes.progress.progress_measures import (
    calibration,
    composition,
    copying_score,
    folded,
    k_composition_match,
    layer1_residuals,
    ov_circuits,
    previous_token_match,
    progress_measures,
    unmeasurable_reason,
)

CONFIG = MarkovRecipe(task=MarkovTask(k=3)).model_config()  # the shipped markov-k3 architecture


def trained_like(seed: int = 0, **changes) -> HookedTransformer:
    """A model with weights large enough that every measure is far from chance (init_range 0.5)."""
    return HookedTransformer(replace(CONFIG, seed=seed, init_range=0.5, **changes)).double()


def test_construction_takes_every_ideal_value():
    measures = progress_measures(load_construction(*prop21(3, 100.0, 100)))
    assert measures.previous_token_match[0] == pytest.approx(1.0, abs=1e-9)
    assert measures.k_composition_match[0] == pytest.approx(1.0, abs=1e-9)
    assert measures.ov_copying_accuracy == [1.0]
    assert measures.ov_copying_score[0] == pytest.approx(1.0, abs=1e-12)
    assert measures.composition["K"][0][0] == pytest.approx(3**-0.5, abs=1e-12)
    assert measures.composition["Q"][0][0] == pytest.approx(0.0, abs=1e-12)
    assert measures.composition["V"][0][0] == pytest.approx(0.0, abs=1e-12)
    for name, measure in calibration(3, 100, 9).items():
        assert measures.value(name) == pytest.approx(measure.construction, abs=1e-9)


def test_initialisation_sits_at_chance():
    chance = calibration(3, CONFIG.n_ctx, CONFIG.d_model)
    models = [progress_measures(HookedTransformer(replace(CONFIG, seed=seed))) for seed in range(40)]
    assert chance["previous_token_match"].chance == pytest.approx(0.0423, abs=1e-4)  # mean of 1/(i+1), i = 1..99
    for m in models:  # near-zero queries: every softmax is uniform to a few parts in a thousand
        assert m.previous_token_match[0] == pytest.approx(chance["previous_token_match"].chance, rel=2e-3)
        assert m.k_composition_match[0] == pytest.approx(1 / 3, abs=2e-3)
    mean = lambda values: statistics.mean(values)  # noqa: E731
    assert mean([m.composition["K"][0][0] for m in models]) == pytest.approx(chance["composition_K"].chance, rel=0.1)
    assert mean([m.ov_copying_accuracy[0] for m in models]) == pytest.approx(1 / 3, abs=0.15)
    assert abs(mean([m.ov_copying_score[0] for m in models])) < 0.35  # symmetric about 0: see the sign test


def test_copying_score_is_odd_in_the_unembedding_and_known_on_simple_circuits():
    model = trained_like()
    before = progress_measures(model).ov_copying_score[0]
    with torch.no_grad():
        model.unembed.W_U.neg_()
    assert progress_measures(model).ov_copying_score[0] == pytest.approx(-before, abs=1e-12)
    assert copying_score(torch.eye(3)) == pytest.approx(1.0)
    assert copying_score(-torch.eye(3)) == pytest.approx(-1.0)
    rotation = torch.tensor([[0.0, 1.0, -1.0], [-1.0, 0.0, 1.0], [1.0, -1.0, 0.0]])  # skew: eigenvalues ±i√3
    assert copying_score(rotation) == pytest.approx(0.0, abs=1e-12)


def test_previous_token_match_is_layer_0_attention_without_its_content_term():
    model = trained_like()
    with torch.no_grad():
        model.blocks[0].attn.W_K.zero_()  # only the relative term is left in layer 0's scores
    expected = []
    for token in range(3):
        tokens = torch.full((1, CONFIG.n_ctx), token)
        _, cache = model.run_with_cache(tokens)
        expected.append(cache["pattern", 0][0, 0].diagonal(-1).mean().item())
    assert previous_token_match(model)[0] == pytest.approx(statistics.mean(expected), rel=1e-10)


def layer1_input(model, x: int, y: int) -> torch.Tensor:
    """The residual entering layer 1 at position 1 of the sequence y, x, with layer 0 forced to attend to
    the previous token: the model's own forward pass."""
    tokens = torch.tensor([[y, x]])
    hooks = [("blocks.0.attn.hook_pattern", lambda p, hook: previous_token_pattern(tokens)[:, None].to(p.dtype))]
    captured = []
    hooks.append(("blocks.1.hook_resid_pre", lambda r, hook: captured.append(r[0, 1].detach())))
    model.run_with_hooks(tokens, fwd_hooks=hooks)
    return captured[0]


def test_layer_1_residuals_are_the_forward_pass_with_an_ideal_layer_0():
    model = trained_like(use_bias=True)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.rsplit(".", 1)[-1] in ("w", "b", "b_Q", "b_K", "b_V", "b_O"):
                p.normal_(0, 0.3)  # biases and LayerNorm gains away from their neutral values
    residual = layer1_residuals(model)
    for x in range(3):
        for y in range(3):
            assert torch.allclose(residual[x, y], layer1_input(model, x, y), atol=1e-12)


def test_k_composition_match_and_ov_circuit_against_the_model_from_layer_1():
    model = trained_like()
    residual = layer1_residuals(model)  # [x, y, d]
    _, cache = model.run_with_cache(residual.reshape(1, 9, -1), start_at_layer=1, tokens=None)
    q = cache["q", 1][0, :, 0].reshape(3, 3, -1)  # [x, y, d_head]
    k = cache["k", 1][0, :, 0].reshape(3, 3, -1)
    scores = q.mean(1) @ k.mean(0).T / CONFIG.d_head**0.5  # query token a (mean over y), key's previous token b
    expected = torch.softmax(scores, -1).diagonal().mean().item()
    assert k_composition_match(model, residual)[0] == pytest.approx(expected, rel=1e-10)
    v = cache["v", 1][0, :, 0].reshape(3, 3, -1).mean(1)
    out = v @ model.blocks[1].attn.W_O[0]
    centred = (out - out.mean(-1, keepdim=True)) * model.ln_final.w
    assert torch.allclose(ov_circuits(model, residual)[0], centred @ model.W_U, atol=1e-12)


def test_composition_scores_are_transformer_lens_scores_with_layernorm_folded():
    model = trained_like(normalization=None)
    mine = composition(model)
    for mode in "QKV":
        assert mine[mode][0][0] == pytest.approx(model.all_composition_scores(mode)[0, 0, 1, 0].item(), rel=1e-10)
    ln_model = trained_like()
    block = ln_model.blocks[1]
    with torch.no_grad():
        block.ln1.w.normal_(1.0, 0.3)
    x = torch.randn(5, CONFIG.d_model, dtype=torch.float64)
    centred = x - x.mean(-1, keepdim=True)
    scale = (centred.pow(2).mean(-1, keepdim=True) + block.ln1.eps).sqrt()
    direct = block.ln1(x) @ block.attn.W_Q[0]
    assert torch.allclose(
        direct, (x / scale) @ folded(block, block.attn.W_Q)[0] + block.ln1.b @ block.attn.W_Q[0], atol=1e-12
    )


def test_models_the_measures_do_not_apply_to_are_named():
    assert unmeasurable_reason(HookedTransformer(replace(CONFIG, positional="standard")))
    assert unmeasurable_reason(HookedTransformer(replace(CONFIG, n_layers=1, layer_heads=(1,))))
    assert unmeasurable_reason(HookedTransformer(CONFIG)) is None
    with pytest.raises(ValueError, match="relative positions"):
        progress_measures(HookedTransformer(replace(CONFIG, positional="alibi")))


def test_threshold_crossings_name_the_first_step_at_threshold_and_its_sequences():
    from induction_probes.probes.progress.progress_measures import threshold_crossings

    # an initialisation (at chance), large random weights, and the construction (every measure ideal) last
    construction = load_construction(*prop21(3, 100.0, 100))
    cfg = construction.cfg
    models = {10: HookedTransformer(cfg), 20: HookedTransformer(replace(cfg, seed=1, init_range=0.5)), 30: construction}
    progress = [progress_measures(model, step) for step, model in models.items()]
    seen = {10: 1000, 20: 2000, 30: 3000}
    rows = threshold_crossings(progress, cfg, seen)
    assert list(rows) == list(calibration(cfg.d_vocab, cfg.n_ctx, cfg.d_model))
    for name, row in rows.items():
        first = next((p.step for p in progress if p.value(name) >= row["threshold"]), None)  # by hand
        assert row["first_step"] == first and row["first_sequences"] == (None if first is None else seen[first])
        assert (
            row["value"] == progress[-1].value(name) and row["threshold"] == (row["chance"] + row["construction"]) / 2
        )
    assert all(row["first_step"] is not None for row in rows.values())  # the construction reaches every threshold
