"""The text task end to end, on a text this test writes: trained from the command line, probed, swept over two
seeds and summarized, each summary value checked against the run's own files or a hand computation."""

from __future__ import annotations

import json
import random

import pytest

from induction_probes.circuits.runs.reader import Run
from induction_probes.cli import main
from induction_probes.probes.sweeps.condition_tests import paired_comparison

TINY = ["--seq-len", "16", "--d-head", "8", "--d-mlp", "16", "--batch-size", "8", "--eval-seqs", "20"]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """Random words, each line said twice: a text in which the context helps."""
    words = ["".join(random.Random(i).choices("abcdefgh", k=4)) for i in range(40)]
    chooser = random.Random(0)
    lines = [" ".join(chooser.choices(words, k=5)) for _ in range(60)]
    path = tmp_path_factory.mktemp("text") / "words.txt"
    path.write_text("".join(f"{line}\n{line}\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def sweep(text, tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    spec = root / "spec.toml"
    spec.write_text(
        'recipe = "text"\nseeds = [0, 1]\n[base]\n'
        f'file = "{text}"\nseq_len = 16\nd_head = 8\nd_mlp = 16\nbatch_size = 8\neval_seqs = 20\n'
        "steps = 24\nn_checkpoints = 5\n"
    )
    assert main(["sweep", str(spec), "--out", str(root / "out")]) == 0
    return root / "out"


def settled(steps: list[int], values: list[float]) -> int:
    """The first step from which on the curve stays past half its change, written out again."""
    change = values[-1] - values[0]
    for i in range(len(steps)):
        if all((v - values[0]) * change >= change * change / 2 for v in values[i:]):
            return steps[i]
    raise AssertionError("the last value always qualifies")


def test_train_and_probe_a_text_run_from_the_command_line(text, tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(["train", "text", "--file", str(text), *TINY, "--steps", "6", "--n-checkpoints", "3", "--out", str(out)])
        == 0
    )
    run = Run.open(out)
    assert run.task.name == "text" and run.task.n_bytes == text.stat().st_size
    capsys.readouterr()
    assert main(["probe", str(out), "--n-seqs", "10", "--json"]) == 0
    probes = json.loads(capsys.readouterr().out)
    assert {"eval_loss", "accuracy", "late_minus_early_loss"} <= {r["measure"] for r in probes["records"]}


def test_a_missing_text_is_one_line_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "text", "--file", str(tmp_path / "absent.txt"), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not exist" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_the_summary_holds_each_seeds_curves_weights_and_tests(sweep, capsys):
    assert main(["summarize", str(sweep), "--json", "--probe-seqs", "30"]) == 0
    summary = json.loads(capsys.readouterr().out)
    (condition,) = summary["conditions"].values()
    for record in condition["runs"]:
        run = Run.open(sweep / "base" / f"seed-{record['seed']}")
        metrics = run.metrics()
        curves = record["curves"]
        assert curves["steps"] == run.steps and curves["eval_loss"] == [m["eval_loss"] for m in metrics]
        weights = record["weights"]
        last = run.load()
        assert weights["moved"]["W_pos"][0] == 0.0
        assert weights["norm"]["W_pos"][-1] == pytest.approx(last.pos_embed.W_pos.double().norm().item(), rel=1e-12)
        first_keys = Run.open(run.path).load(step=run.steps[0]).blocks[1].attn.W_K.double()
        moved = (last.blocks[1].attn.W_K.double() - first_keys).norm().item()
        assert weights["moved"]["W_K_layer1"][-1] == pytest.approx(moved, rel=1e-12)
        assert record["reached"]["eval_loss"] == settled(curves["steps"], curves["eval_loss"])
        assert record["reached"]["moved.W_Q_layer0"] == settled(weights["steps"], weights["moved"]["W_Q_layer0"])
        eval_set = run.task.eval_set(run.recipe.eval_seqs, run.recipe.eval_seed)  # the curves' own windows
        assert record["baselines"] == run.task.baselines(eval_set)
        bigram = record["baselines"]["bigram"]
        arrival = next((s for s, loss in zip(curves["steps"], curves["eval_loss"]) if loss <= bigram + 0.05), None)
        assert record["plateau"]["arrival"] == arrival
    records = condition["runs"]
    positions = [r["reached"]["moved.W_pos"] for r in records]
    maps = [min(v for k, v in r["reached"].items() if k.startswith(("moved.W_Q", "moved.W_K"))) for r in records]
    test = condition["order_tests"]["attention_minus_positions"]
    assert {k: v for k, v in test.items() if k != "n_positions_first"} == paired_comparison(positions, maps, False)
    assert test["n_positions_first"] == sum(p < m for p, m in zip(positions, maps))
    assert main(["summarize", str(sweep), "--probe-seqs", "30"]) == 0
    table = capsys.readouterr().out
    assert "earliest W_Q / W_K half-way step − the positions': " in table and "bigram predictor's loss" in table
