"""Path patching of Hugging Face language models through TransformerLens's bridge (issue 63, item 5): the patched
pass is the clean run with no edge patched and the corrupted run with every edge patched, on GPT-2, GPT-NeoX and
Llama with grouped-query attention, and equals a hand-written one on GPT-2; on a GPT-2 whose weights are an
induction circuit the key edge carries the gap and the decoys nothing; EAP-IG's screen is the gradient it claims
to be and passes the circuit's edges on; a step_N series has rows at every step and each circuit edge a formation
bracket; what gives no answer is one line."""

import json
import shutil

import pytest
import torch
from lm_circuits import induction_gpt2
from lm_models import no_network, saved_models  # noqa: F401 (no_network: a fixture for every test here)

from induction_probes import lm
from induction_probes.cli import main
from induction_probes.probes.circuit import edges as edges_module
from induction_probes.probes.circuit import screen as screen_module
from induction_probes.probes.circuit.contrasts import RepeatedContrast
from induction_probes.probes.circuit.edges import edge_effects
from induction_probes.probes.circuit.lm_patching import CircuitSettings, series_edges
from induction_probes.probes.circuit.path_patching import Edge, model_edges, patched_logits, sender_outputs
from induction_probes.probes.circuit.screen import FIRST_RESIDUAL, first_residual, from_embeddings, screen_edges

LENGTH = (8, 20)  # |R|: the repeat fits the circuit's context of 48 with its filler
SCALES = {0: 0.0, 100: 1.0, 200: 3.0, 300: 10.0}  # a series: the circuit's query-key scale grows with the step


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return saved_models(tmp_path_factory)


@pytest.fixture(scope="module")
def circuit_series(tmp_path_factory):
    root = tmp_path_factory.mktemp("circuit_series")
    for step, scale in SCALES.items():
        induction_gpt2(root / f"step_{step}", scale=scale)
    return root


def contrast_of(bridge, n_seqs: int = 6, length=5) -> RepeatedContrast:
    return RepeatedContrast.of(bridge, lm.repeated_random_tokens(bridge, length, n_seqs, seed=1), seed=2)


@pytest.mark.parametrize("architecture", ["gpt2", "neox", "llama"])
def test_no_edge_patched_is_the_clean_run_and_every_edge_the_corrupted_one(models, architecture):
    """The stream entering each input is the sum of the senders' outputs and of biases the two runs share, so
    patching every edge gives every input its corrupted value: the pass is the corrupted run."""
    bridge = lm.as_hooked(str(models[architecture]))
    contrast = contrast_of(bridge)
    corrupted = sender_outputs(bridge, contrast.corrupted)
    with torch.no_grad():
        clean, dirty = bridge(contrast.clean), bridge(contrast.corrupted)
    every = patched_logits(bridge, contrast.clean, model_edges(bridge), corrupted)
    assert (every - dirty).abs().max() < 1e-5  # float32 sums in another order: rounding of logits of size ~1
    assert (patched_logits(bridge, contrast.clean, [], corrupted) - clean).abs().max() < 1e-5
    assert not bridge.cfg.use_split_qkv_input  # the switch is as it was
    if architecture == "llama":  # grouped-query attention: keys and values belong to a group of two heads
        receivers = {e.receiver for e in model_edges(bridge) if e.via == "k"}
        assert receivers == {"L0KV0", "L0KV1", "L1KV0", "L1KV1"}


def test_a_key_edge_through_the_bridge_equals_one_written_by_hand(models):
    """L0H2 -> L1H1.k in GPT-2: head 1 of layer 1 gets its key from LayerNorm(clean stream + the sender's change),
    written here from the bridge's own weights, and every other input as it was."""
    bridge = lm.as_hooked(str(models["gpt2"]))
    contrast = contrast_of(bridge)
    corrupted, clean = sender_outputs(bridge, contrast.corrupted), sender_outputs(bridge, contrast.clean)
    ours = patched_logits(bridge, contrast.clean, [Edge("L0H2", "L1H1", "k")], corrupted)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(contrast.clean, names_filter=lambda n: n == "blocks.1.hook_resid_pre")
        stream = cache["blocks.1.hook_resid_pre"] + corrupted["L0H2"] - clean["L0H2"]
        centred = stream - stream.mean(-1, keepdim=True)
        ln = bridge.original_model.transformer.h[1].ln_1
        normal = centred / (centred.pow(2).mean(-1, keepdim=True) + ln.eps).sqrt() * ln.weight + ln.bias
        attn = bridge.blocks[1].attn
        key = normal @ attn.W_K[1] + attn.b_K[1]

        def replace(k, hook):
            k = k.clone()
            k[:, :, 1] = key
            return k

        theirs = bridge.run_with_hooks(contrast.clean, fwd_hooks=[("blocks.1.attn.hook_k", replace)])
    assert (ours - theirs).abs().max() < 1e-5


def circuit_and_contrast(folder):
    bridge = lm.as_hooked(str(folder))
    contrast = RepeatedContrast.of(bridge, lm.repeated_random_tokens(bridge, LENGTH, 32, seed=1), seed=2)
    return bridge, contrast


@pytest.fixture(scope="module")
def induction(tmp_path_factory):
    return circuit_and_contrast(induction_gpt2(tmp_path_factory.mktemp("induction") / "gpt2"))


@pytest.mark.parametrize("decoy, key_at_least", [(0.0, 0.9), (0.1, 0.85)])
def test_the_key_edge_of_an_induction_circuit_carries_the_gap_and_a_decoy_nothing(decoy, key_at_least, tmp_path):
    """Measured over two draws of sequences: the key edge carries 0.93 and 0.95 of the gap without decoys, 0.89 and
    0.92 beside decoys of weight 0.1 (0.85 and 0.87 at 0.3). Not 1: with the key patched the induction head finds
    no match, and the clean values it then averages still hold the first copy's tokens; and the decoys copy the
    context's tokens too, so that part of the gap is theirs, though no single edge of theirs carries 0.01 of it."""
    bridge, contrast = circuit_and_contrast(induction_gpt2(tmp_path / "gpt2", decoy=decoy))
    found = edge_effects(bridge, contrast)
    key = found.effect("L0H0", "L1H0", "k")
    assert key.value >= key_at_least and key.low > 0
    assert abs(found.effect("L0H0", "L1H0", "q").value) < 0.05 and abs(found.effect("L0H0", "L1H0", "v").value) < 0.05
    decoys = [x.value for e, x in zip(found.edges, found.effects) if "H1" in e.sender or "H1" in e.receiver]
    assert decoys and max(map(abs, decoys)) < 0.05
    assert {e.name for e in found.circuit} == {
        "embed -> L0H0.v",
        "embed -> L1H0.v",
        "L0H0 -> L1H0.k",
        "L1H0 -> logits",
    }
    assert found.faithfulness.value >= 0.9 and found.method == "every edge (37) patched exactly"


def test_the_screen_is_the_gradient_it_claims_and_passes_the_circuits_edges_on(induction, monkeypatch):
    """With one step, EAP-IG's estimate of an edge is the derivative of the measure along the edge's change at the
    clean run: a patch of ε times that change, exact, divided by ε, agrees to the first order's error."""
    bridge, contrast = induction
    clean, corrupted = sender_outputs(bridge, contrast.clean), sender_outputs(bridge, contrast.corrupted)
    edge, epsilon = Edge("embed", "L1H0", "v"), 1e-3
    nudged = {name: clean[name] + epsilon * (corrupted[name] - clean[name]) for name in clean}
    before = contrast.measure(bridge, lambda hooks: bridge.run_with_hooks(contrast.clean, fwd_hooks=hooks))
    patched = patched_logits(bridge, contrast.clean, [edge], nudged)
    derivative = (contrast.from_logits(patched) - before).mean().item() / epsilon
    screen = screen_edges(bridge, contrast, [edge], gap=1.0, steps=1)
    assert screen.estimate(edge) == pytest.approx(derivative, rel=0.02)  # O(ε) curvature, and float32 rounding
    whole = screen_edges(bridge, contrast, model_edges(bridge), gap=1.0)
    monkeypatch.setattr(screen_module, "SCREEN_NUMBERS", 1)  # one sequence a chunk: the sums are the same
    chunked = screen_edges(bridge, contrast, model_edges(bridge), gap=1.0)
    assert torch.allclose(chunked.estimates, whole.estimates, rtol=1e-4, atol=1e-6)
    monkeypatch.setattr(edges_module, "EXACT_EDGES", 10)  # screen the 37 edges, patch the 6 it ranks highest
    found = edge_effects(bridge, contrast, checked=6)
    assert found.screen is not None and len(found.edges) == 6
    assert {"L0H0 -> L1H0.k", "L1H0 -> logits"} <= {e.name for e in found.circuit}
    assert found.method.startswith("EAP-IG (5 steps) screened all 37 edges")


def test_the_edges_among_the_heads_probe_marks_are_patched_when_asked(tmp_path, capsys):
    """--marked: probe marks the previous-token and induction heads, and only the edges among them, the embedding,
    the MLPs and the logits are patched; the decoys' edges are left out, and the circuit is the same."""
    folder = induction_gpt2(tmp_path / "gpt2")
    argv = ["circuit", str(folder), "--marked", "--length", "8-20", "--quiet", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    # L0H0 from the embedding (3), L1H0 from the embedding, L0H0 and MLP0 (9), the logits from five senders (5)
    assert out["method"].startswith("the 17 edges among the heads probe marks (L0H0, L1H0)")
    assert {(e["sender"], e["receiver"]) for e in out["edges"]}.isdisjoint({("L0H1", "L1H0"), ("embed", "L1H1")})
    assert "L0H0 -> L1H0.k" in out["circuit"]["edges"] and out["circuit"]["faithfulness"]["value"] >= 0.9


def test_the_screens_path_starts_from_the_corrupted_input_embeddings(induction):
    """EAP-IG's points replace the input embeddings: at the path's start the pass is the corrupted run."""
    bridge, contrast = induction
    start = first_residual(bridge, contrast.corrupted)
    with torch.no_grad():
        moved = bridge.run_with_hooks(contrast.clean, fwd_hooks=[(FIRST_RESIDUAL, from_embeddings(start))])
        assert (moved - bridge(contrast.corrupted)).abs().max() < 1e-5


def test_a_series_has_edge_rows_at_every_step_and_the_key_edge_a_formation_bracket(circuit_series, tmp_path, capsys):
    argv = ["circuit", str(circuit_series), "--all-steps", "--n-seqs", "16", "--length", "8-20", "--quiet"]
    assert main([*argv, "--json", "--plot", str(tmp_path), "--graph-steps", "0,200"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert any(path.endswith("_circuit_graph_steps0-200.png") for path in out["figures"])  # the steps asked for
    assert sorted({e["step"] for e in out["edges"]}) == sorted(SCALES)
    assert all(len([e for e in out["edges"] if e["step"] == step]) == 37 for step in SCALES)
    brackets = {b["edge"]: b for b in out["formation"]}
    assert brackets["L0H0 -> L1H0.k"]["stays_from"] in (100, 200)  # the key edge forms as the scale grows
    assert all(
        path.endswith(".png") and (tmp_path / path.split("/")[-1]).stat().st_size > 10_000 for path in out["figures"]
    )
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "L0H0 -> L1H0.k: above from step" in text


@pytest.mark.slow  # a local Ray instance starts (about 14 s)
def test_on_ray_from_a_relative_path_the_series_gives_the_local_numbers(circuit_series, monkeypatch, local_ray):
    monkeypatch.chdir(circuit_series.parent)  # a worker starts in another folder: the path must travel absolute
    settings = CircuitSettings(length=LENGTH, n_seqs=8, threads=1)
    local = series_edges(circuit_series.name, settings)
    on_ray = series_edges(circuit_series.name, CircuitSettings(length=LENGTH, n_seqs=8), backend="ray")
    assert [f.to_json() for f in on_ray] == [f.to_json() for f in local]  # one thread on both: the same bits


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--n-seqs", "1"], "one sequence gives no interval"),
        (["--step", "7"], "step 7"),
        (["--backend", "ray"], "give --all-steps too"),
    ],
)
def test_what_gives_no_answer_is_one_line(circuit_series, extra, says, capsys):
    assert main(["circuit", str(circuit_series), "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


def test_graph_steps_need_a_plot_and_checkpoints_that_were_patched(circuit_series, tmp_path, capsys):
    argv = ["circuit", str(circuit_series), "--all-steps", "--quiet", "--graph-steps"]
    assert main([*argv, "0"]) == 2
    assert "give --plot DIR too" in capsys.readouterr().err
    assert main([*argv, "7", "--plot", str(tmp_path)]) == 2
    assert "--graph-steps 7 is not a checkpoint patched here (steps 0, 100, 200, 300)" in capsys.readouterr().err
    assert main([*argv, "0,x", "--plot", str(tmp_path)]) == 2
    assert "steps must look like 0,606,4000" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before anything was patched or drawn


def test_a_series_of_two_models_and_a_language_model_option_on_a_run_are_one_line(
    circuit_series, models, tmp_path, capsys
):
    mixed = tmp_path / "mixed"
    shutil.copytree(circuit_series / "step_0", mixed / "step_0")
    shutil.copytree(models["gpt2"], mixed / "step_5")
    assert main(["circuit", str(mixed), "--all-steps", "--quiet"]) == 2
    assert "is not one model" in capsys.readouterr().err
    assert main(["circuit", "markov-k3", "--checked", "5"]) == 2
    assert "applies to language models only" in capsys.readouterr().err
