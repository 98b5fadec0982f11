"""A toy-model sweep end to end: cells trained by the toy's loop, a summary whose per-seed values are those of
the runs themselves, comparisons paired exactly when two conditions share their sequences, and statistics
that a shipped summary recomputes from its own records."""

import json

import pytest

from induction_probes.circuits.models.toy_model import reach_step, toy_phases
from induction_probes.circuits.runs.reader import Run
from induction_probes.cli import main
from induction_probes.probes.sweeps.summary_statistics import recompute_summary

SPEC = """
recipe = "toy"
seeds = [0, 1]
[base]
seq_len = 8
n_seqs = 256
steps = 900
[conditions.joint]
[conditions.boolean]
boolean = true
[conditions.layerwise]
layerwise_steps = 100
"""


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy-sweep")
    (root / "spec.toml").write_text(SPEC)
    assert main(["sweep", str(root / "spec.toml"), "--out", str(root / "runs")]) == 0
    assert main(["sweep", str(root / "spec.toml"), "--out", str(root / "runs")]) == 0  # finished cells are skipped
    return root


def test_the_summary_holds_each_runs_own_phases_and_half_way_steps(swept, capsys):
    capsys.readouterr()
    assert main(["summarize", str(swept / "runs"), "--json", "--plot", str(swept / "plots")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["summary"] == "toy" and summary["unfinished"] == []
    assert list(summary["conditions"]) == ["joint", "boolean", "layerwise"]
    run = Run.open(swept / "runs" / "boolean" / "seed-1")
    history = run.metrics()
    record = summary["conditions"]["boolean"]["runs"][1]
    assert record["seed"] == 1 and record["data_seed"] == 2 and run.recipe.boolean
    try:
        assert record["phases"] == toy_phases(history).to_json()
    except ValueError as error:
        assert record["phases"] == {"missing": str(error)}
    assert record["learned"]["w_KQ"] == reach_step(history, [h["w_KQ"] for h in history])
    assert record["curves"]["loss"] == [h["loss"] for h in history]
    assert sorted(p.name for p in (swept / "plots").iterdir()) == ["runs-losses.png", "runs-steps.png"]


def test_comparisons_are_paired_only_where_the_sequences_are_shared(swept, capsys):
    capsys.readouterr()
    assert main(["summarize", str(swept / "runs"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    kinds = {(c["a"], c["b"]): (c["paired"], c["test"]) for c in summary["comparisons"]}
    assert kinds == {("joint", "boolean"): (False, "Welch t"), ("joint", "layerwise"): (True, "paired t")}
    path = swept / "summary.json"
    path.write_text(json.dumps(summary))
    assert recompute_summary(path) == summary  # the statistics come from the per-seed records alone


def test_an_interrupted_toy_cell_is_refused_not_resumed(swept, capsys):
    cell = swept / "runs" / "joint" / "seed-0"
    manifest = json.loads((cell / "manifest.json").read_text())
    (cell / "manifest.json").write_text(json.dumps(manifest[:1]))  # as if it stopped after its first checkpoint
    assert main(["sweep", str(swept / "spec.toml"), "--out", str(swept / "runs")]) == 1
    assert "cannot be resumed" in capsys.readouterr().err
    (cell / "manifest.json").write_text(json.dumps(manifest))
