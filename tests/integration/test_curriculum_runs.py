"""A prior schedule end to end (training, resume, config.json, the command line, a sweep spec) and the
by-prior summary of a tiny sweep (``summarize --by-prior``)."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.runs.reader import Run
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.training.train_loop import train_run
from induction_probes.cli import main
from induction_probes.probes.behaviour.by_prior import evaluate_run_on_priors
from induction_probes.probes.sweeps.condition_tests import interval

# 40 steps of 16: the schedule switches at sequence 200, inside step 13's batch (sequences 192..207)
SCHEDULED = MarkovRecipe(
    task=MarkovTask(k=3, seq_len=20, curriculum="doubly-stochastic:200"),
    steps=40,
    batch_size=16,
    eval_seqs=100,
    n_checkpoints=9,  # checkpoints at steps 0, 1, 2, 8, 16, 24, 32, 40
)


def run_files(path: Path) -> dict[str, bytes]:
    files = [path / "config.json", path / "manifest.json", path / "metrics.jsonl", *(path / "checkpoints").iterdir()]
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(files)}


@pytest.mark.parametrize("stop", [10, 20])  # before the switch, and after it
def test_a_scheduled_run_stopped_and_resumed_writes_the_bytes_of_an_uninterrupted_one(tmp_path, stop):
    whole = train_run(SCHEDULED, tmp_path / "whole", progress=False)
    train_run(SCHEDULED, tmp_path / "split", stop_after=stop, progress=False)
    resumed = train_run(None, tmp_path / "split", resume=True, progress=False)
    assert run_files(resumed.path) == run_files(whole.path)
    config = json.loads((whole.path / "config.json").read_text())
    assert config["task"]["curriculum"] == "doubly-stochastic:200" and Run.open(whole.path).task == SCHEDULED.task


def test_until_the_switch_a_scheduled_run_is_a_doubly_stochastic_run_evaluated_on_the_task_s_chains(tmp_path):
    """Same seeds: the first 192 sequences (12 whole steps) are the doubly stochastic stream's, so every checkpoint
    up to step 8 matches a doubly stochastic run's to the byte; at step 16 (after the switch) they part."""
    scheduled = train_run(SCHEDULED, tmp_path / "scheduled", progress=False).metrics()
    task = MarkovTask(k=3, seq_len=20, prior="doubly-stochastic", eval_prior="dirichlet")
    plain = train_run(replace(SCHEDULED, task=task), tmp_path / "plain", progress=False).metrics()
    assert [m["step"] for m in scheduled[:4]] == [0, 1, 2, 8]
    assert scheduled[:4] == plain[:4]
    assert scheduled[4]["step"] == 16 and scheduled[4]["train_loss"] != plain[4]["train_loss"]


@pytest.mark.parametrize("value", ["doubly-stochastic", "doubly-stochastic:64000", "mixture:10"])
def test_a_bad_schedule_on_the_command_line_is_one_line_and_status_2(tmp_path, capsys, value):
    args = ["train", "markov", "--k", "3", "--steps", "10", "--curriculum", value, "--out", str(tmp_path / "r")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "curriculum" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


SPEC = """
recipe = "markov"
seeds = [0, 1]
description = "a schedule against none"
[base]
k = 3
seq_len = 12
steps = 12
batch_size = 8
eval_seqs = 30
n_checkpoints = 4
[conditions.none]
[conditions.doubly-stochastic-first]
curriculum = "doubly-stochastic:40"
"""


def test_summarize_by_prior_adds_each_seed_s_losses_per_prior_and_their_paired_comparisons(tmp_path, capsys):
    (tmp_path / "spec.toml").write_text(SPEC)
    out = tmp_path / "out"
    assert main(["sweep", str(tmp_path / "spec.toml"), "--out", str(out)]) == 0
    assert Run.open(out / "doubly-stochastic-first" / "seed-1").task.curriculum == "doubly-stochastic:40"
    capsys.readouterr()
    args = ["summarize", str(out), "--by-prior", "doubly-stochastic,unigram", "--probe-seqs", "30"]
    assert main([*args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    per_seed = {}
    for name, condition in summary["conditions"].items():
        for record in condition["runs"]:  # the same evaluation, done again here: exactly equal
            again = evaluate_run_on_priors(
                Run.open(out / name / f"seed-{record['seed']}"), ("doubly-stochastic", "unigram"), 30
            )
            assert record["by_prior"] == {p: {"loss": e["loss"], "kl": e["kl"]} for p, e in again.items()}
        for prior in ("doubly-stochastic", "unigram"):
            losses = [r["by_prior"][prior]["loss"] for r in condition["runs"]]
            assert condition["by_prior"][prior]["loss"] == interval(losses)
            per_seed[name, prior] = losses
    comparisons = {c["measure"]: c for c in summary["comparisons"]}
    entry = comparisons["by_prior.unigram.loss"]  # b − a per seed, paired (both conditions run seeds 0 and 1)
    assert (entry["a"], entry["b"], entry["test"]) == ("none", "doubly-stochastic-first", "paired t")
    differences = [b - a for a, b in zip(per_seed["none", "unigram"], per_seed["doubly-stochastic-first", "unigram"])]
    assert entry["difference"]["mean"] == pytest.approx(sum(differences) / 2, rel=1e-12)
    assert {"by_prior.doubly-stochastic.kl", "by_prior.unigram.kl", "final_kl"} <= comparisons.keys()
    # the summary.json read back: the same comparisons, recomputed from its per-seed records
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert main(["summarize", str(tmp_path / "summary.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["comparisons"] == summary["comparisons"]
    assert main(args) == 0
    assert "evaluated on" in capsys.readouterr().out
    assert main(["summarize", str(out), "--by-prior", "mixture"]) == 2
    assert "evaluated by prior on" in capsys.readouterr().err
    assert main(["summarize", str(tmp_path / "summary.json"), "--by-prior", "unigram"]) == 2
    assert "not a summary.json" in capsys.readouterr().err
