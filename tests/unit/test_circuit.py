"""Path patching edge by edge (issue 63): the patched pass equals a hand-written one; on Proposition 2.1's construction
the previous-token head reaches the induction head through its key only, and the circuit keeps the gap; a circuit
that routes the previous token through the value is found there and not in the key; a decoy's edges carry
nothing; the command answers at one step and over training, and refuses what gives no interval."""

import json
import math

import pytest
import torch
from tiny_models import tiny_model

from induction_probes.circuits.constructions.edelman import prop21
from induction_probes.circuits.constructions.loading import load_construction
from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.cli import main
from induction_probes.probes.circuit.contrasts import MarkovContrast, corrupted_context
from induction_probes.probes.circuit.edges import edge_effects
from induction_probes.probes.circuit.path_patching import Edge, model_edges, patched_logits, sender_outputs

K, SEQ_LEN = 3, 100


@pytest.fixture(scope="module")
def eval_set():
    return MarkovTask(k=K, seq_len=SEQ_LEN).eval_set(300, 7)


def hand_written(model, tokens, corrupted, patch: dict) -> torch.Tensor:
    """An attention-only model without norms or biases, written out: ``patch`` maps (receiver, via) to the senders
    whose corrupted output replaces their clean one in that input."""
    n = tokens.shape[1]
    mask = torch.full((n, n), -math.inf).triu(1)

    def head(layer, h, q_in, k_in, v_in):
        attn = model.blocks[layer].attn
        q, k, v = q_in @ attn.W_Q[h], k_in @ attn.W_K[h], v_in @ attn.W_V[h]
        pattern = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask, dim=-1)
        return pattern @ v @ attn.W_O[h]

    def outputs(t):
        out = {"embed": model.embed.W_E[t] + model.pos_embed.W_pos[:n]}
        resid = out["embed"]
        for layer in range(2):
            for h in range(2):
                out[f"L{layer}H{h}"] = head(layer, h, resid, resid, resid)
            resid = resid + sum(out[f"L{layer}H{h}"] for h in range(2))
        return out, resid

    clean, _ = outputs(tokens)
    bad, _ = outputs(corrupted)
    now = {"embed": clean["embed"]}
    resid = now["embed"]
    for layer in range(2):
        for h in range(2):
            inputs = [
                resid + sum((bad[s] - now[s] for s in patch.get((f"L{layer}H{h}", via), [])), torch.zeros(()))
                for via in "qkv"
            ]
            now[f"L{layer}H{h}"] = head(layer, h, *inputs)
        resid = resid + sum(now[f"L{layer}H{h}"] for h in range(2))
    resid = resid + sum((bad[s] - now[s] for s in patch.get(("logits", "direct"), [])), torch.zeros(()))
    return resid @ model.unembed.W_U


@pytest.mark.parametrize(
    "edges",
    [
        [Edge("L0H1", "L1H0", "k")],
        [Edge("embed", "L1H1", "q"), Edge("L0H0", "logits", "direct"), Edge("embed", "L0H0", "v")],
    ],
)
def test_the_patched_pass_equals_a_hand_written_one(edges):
    torch.manual_seed(0)
    model = tiny_model(d_model=8, d_head=4, n_heads=2, n_ctx=6, d_vocab=5, positional="standard", init_range=0.5)
    tokens, corrupted = torch.randint(0, 5, (4, 6)), torch.randint(0, 5, (4, 6))
    ours = patched_logits(model, tokens, edges, sender_outputs(model, corrupted))
    patch: dict = {}
    for e in edges:
        patch.setdefault((e.receiver, e.via), []).append(e.sender)
    with torch.no_grad():
        theirs = hand_written(model, tokens, corrupted, patch)
    assert torch.allclose(ours, theirs, atol=1e-6)  # float32 sums in another order: rounding only
    assert not model.cfg.use_split_qkv_input  # the switch is as it was


def test_the_construction_reads_the_previous_token_through_the_key_only(eval_set):
    """Prop. 2.1, k = 3, c = 10: the previous-token head reaches the induction head through its key (0.547 measured,
    with the context from another chain: the clean values still carry part of the statistics), never through its
    query or value, and the circuit alone keeps the gap."""
    model = load_construction(*prop21(K, 10.0, SEQ_LEN, "float32"))
    found = edge_effects(model, MarkovContrast.of(eval_set))
    key = found.effect("L0H0", "L1H0", "k")
    assert key.value >= 0.3 and key.low > 0
    assert abs(found.effect("L0H0", "L1H0", "q").value) < 0.05
    assert abs(found.effect("L0H0", "L1H0", "v").value) < 0.05
    assert found.effect("L1H0", "logits", "direct").value > 0.99  # only the induction head writes to the logits
    assert found.faithfulness.value >= 0.9
    assert {e.name for e in found.circuit} == {
        "embed -> L0H0.v",
        "embed -> L1H0.v",
        "L0H0 -> L1H0.k",
        "L1H0 -> logits",
    }


def value_routed(decoy: float) -> HookedTransformer:
    """Layer 0: Prop. 2.1's previous-token head. Layer 1, head 0: attends uniformly (no query or key weights) and
    its value reads the previous token's block into the output: the previous token reaches it through its value.
    Head 1 of each layer: a decoy that attends uniformly and writes the current token, at ``decoy``, into the
    output block."""
    _, weights = prop21(K, 10.0, SEQ_LEN, dtype="float32")
    d = 3 * K
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=d, d_head=d, n_heads=2, n_ctx=SEQ_LEN, d_vocab=K, positional=("relative", "none")
    )
    model = HookedTransformer(cfg)
    state = {name: torch.zeros_like(value) for name, value in model.state_dict().items()}
    state["embed.W_E"], state["unembed.W_U"] = weights["embed.W_E"], weights["unembed.W_U"]
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_rel"):
        state[f"blocks.0.attn.{name}"][0] = weights[f"blocks.0.attn.{name}"][0]
    previous, output, current = slice(K, 2 * K), slice(2 * K, 3 * K), slice(0, K)
    state["blocks.1.attn.W_V"][0][previous, output] = torch.eye(K)
    state["blocks.1.attn.W_O"][0] = torch.eye(d)
    for layer in (0, 1):
        state[f"blocks.{layer}.attn.W_V"][1][current, output] = decoy * torch.eye(K)
        state[f"blocks.{layer}.attn.W_O"][1] = torch.eye(d)
    model.load_state_dict(state)
    return model


def test_a_circuit_through_the_value_is_found_there_and_a_decoy_carries_nothing(eval_set):
    found = edge_effects(value_routed(decoy=0.01), MarkovContrast.of(eval_set))
    assert found.no_gap is None
    value, key = found.effect("L0H0", "L1H0", "v"), found.effect("L0H0", "L1H0", "k")
    assert value.value >= 0.5 and value.low > 0.1 and abs(key.value) < 0.01
    decoys = [found.effects[i].value for i, e in enumerate(found.edges) if "H1" in e.sender or "H1" in e.receiver]
    assert decoys and max(map(abs, decoys)) < 0.05


def test_the_corruption_keeps_the_last_tokens_and_takes_the_context_of_another_sequence():
    tokens = torch.arange(12).reshape(3, 4)
    corrupted = corrupted_context(tokens)
    assert torch.equal(corrupted[:, -1], tokens[:, -1])
    assert torch.equal(corrupted[:, :-1], tokens.roll(1, 0)[:, :-1])
    trigram = corrupted_context(tokens, kept=2)  # a second-order chain's next token depends on the last two
    assert torch.equal(trigram[:, -2:], tokens[:, -2:]) and torch.equal(trigram[:, :-2], tokens.roll(1, 0)[:, :-2])
    assert len(model_edges(tiny_model(d_model=8, d_head=4, n_heads=2, n_ctx=6, d_vocab=5))) == 3 * 2 + 3 * 3 * 2 + 5


def test_the_command_at_one_step_names_the_edges_that_match_the_construction(capsys, tmp_path):
    assert main(["circuit", "markov-k3", "--n-seqs", "120", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == [4000] and len(out["edges"]) == 12
    assert {"step", "sender", "receiver", "via", "effect"} <= out["edges"][0].keys()
    assert set(out["circuit"]) == {"step", "threshold", "edges", "faithfulness"}
    assert main(["circuit", "markov-k3", "--n-seqs", "120", "--plot", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    graph = tmp_path / "markov-k3_circuit_graph_steps4000.png"
    assert f"figure: {graph}" in text and graph.stat().st_size > 10_000
    assert "matches the construction's circuit: " in text and "L0H0 -> L1H0.k +0." in text


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--n-seqs", "1"], "at least 2"),
        (["--step", "4001"], "is not saved in run"),
        (["--step", "4000", "--all-steps"], "not both"),
    ],
)
def test_what_gives_no_answer_is_one_line(argv, says, capsys):
    assert main(["circuit", "markov-k3", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "run, says", [("minimal-k3", "patches a transformer's heads"), ("gaussian-ih2", "reads ICL-MC runs")]
)
def test_runs_without_its_heads_or_its_task_are_one_line(run, says, capsys):
    assert main(["circuit", run, "--n-seqs", "20"]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


def test_the_shipped_circuit_is_the_constructions_and_its_key_edge_stays_from_the_transition():
    """What docs/circuit.md and the README say of experiments/results/markov-k3-circuit."""
    from pathlib import Path

    shipped = Path(__file__).parents[2] / "experiments" / "results" / "markov-k3-circuit" / "circuit.json"
    answer = json.loads(shipped.read_text())
    assert len(answer["circuits"]) == len(answer["steps"]) == 137
    assert len(answer["edges"]) == 12 * 137  # edge rows at every checkpoint
    assert set(answer["circuits"][-1]["edges"]) == {
        "embed -> L0H0.v",
        "embed -> L1H0.v",
        "L0H0 -> L1H0.k",
        "L1H0 -> logits",
    }
    key = next(f for f in answer["formation"] if f["edge"] == "L0H0 -> L1H0.k")
    assert key["first_above"] == key["stays_from"] == 606
    graph = "experiments/results/markov-k3-circuit/markov-k3_circuit_graph_steps0-606-4000.png"
    assert graph in answer["figures"] and (shipped.parents[3] / graph).is_file()  # start, formation, end


def test_verify_prop21_against_a_run_gives_the_constructions_edges_beside_the_trained_ones(capsys):
    """Issue 63, item 4: the construction's edge table beside the trained run's last checkpoint."""
    argv = ["verify", "prop21", "--k", "3", "--against", "markov-k3", "--n-seqs", "150"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "matches the construction's circuit: " in text and "L0H0 -> L1H0.k +0." in text
    assert main([*argv, "--json"]) == 0
    edges = json.loads(capsys.readouterr().out)["edges"]
    assert edges["trained"]["circuit"]["edges"] == edges["construction"]["circuit"]["edges"]
