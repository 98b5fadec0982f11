"""Sweeps: specs refused in one line, cells that survive a kill and a failure, the same bytes through
the local pool and Ray, and summaries whose intervals match a hand computation."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from induction_probes.circuits.sweeps.sweep_runner import SpecError, parse_spec, run_sweep
from induction_probes.cli import main
from induction_probes.probes.sweeps.summary import (
    interval,
    is_finished,
    plateau_length,
    positional_checkpoints,
    transition_index,
)

COMMAND = Path(sys.executable).with_name("induction-probes")
SPEC = """
recipe = "markov"
seeds = [0, 1]
description = "two priors, two seeds"
[base]
k = 3
seq_len = 12
steps = {steps}
batch_size = 8
eval_seqs = 30
n_checkpoints = {checkpoints}
eval_prior = "dirichlet"
[conditions.doubly-stochastic]
prior = "doubly-stochastic"
[conditions.mixture]
prior = "mixture"
p = 0.75
"""


def write_spec(tmp_path: Path, steps: int = 12, checkpoints: int = 4, extra: str = "") -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(steps=steps, checkpoints=checkpoints) + extra)
    return path


def run_files(root: Path) -> dict[str, bytes]:
    """Every file of every run directory under ``root`` (not the sweep's own log, which holds wall times)."""
    return {
        str(f.relative_to(root)): f.read_bytes()
        for f in sorted(root.rglob("*"))
        if f.is_file() and f.name != "sweep.jsonl"
    }


@pytest.mark.parametrize(
    "text,message",
    [
        ('recipe = "markov"\nseeds = [0]\nbase = 3', "[base] must be a table"),
        ('recipe = "bogus"\nseeds = [0]', "recipe must be one of markov, minimal, gaussian, text, toy, got 'bogus'"),
        ('recipe = "markov"\nseeds = []', "seeds must be a non-empty list"),
        ('recipe = "markov"\nseeds = [0, 0]\n[base]\nk = 3', "seeds repeat"),
        ('recipe = "markov"\nseeds = [0]\nsteps = 3', "unknown keys steps"),
        (
            'recipe = "markov"\nseeds = [0]\n[base]\nk = 3\nwidth = 9',
            "[base] has keys the markov recipe does not know: width",
        ),
        ('recipe = "markov"\nseeds = [0]\n[base]\nk = 3\ndata_seed = 4', "(seeds come from `seeds`)"),
        (
            'recipe = "markov"\nseeds = [0]\n[base]\nk = 3\n[grid]\nlr = 0.1',
            "each [grid] entry must be a non-empty list",
        ),
        ('recipe = "markov"\nseeds = [0]\n[base]\nk = 3\n[conditions.a]\nprior = "spectrum"', "condition a: p is for"),
        ('recipe = "markov"\nseeds = [0]\n[base]\nk = 3\n[conditions.a', "is not valid TOML"),
        (
            'recipe = "markov"\nseeds = [0]\n[base]\nk = 3\n[conditions."../escaped"]',
            "cannot name a directory of the sweep",
        ),
        (
            'recipe = "markov"\nseeds = [0]\n[base]\nk = 3\n[conditions."/tmp/evil"]',
            "cannot name a directory of the sweep",
        ),
        (
            'recipe = "markov"\nseeds = [0]\n[base]\nk = 3\n[conditions."spec.toml"]',
            "cannot name a directory of the sweep",
        ),
        ('recipe = "markov"\nseeds = [0]\n[base]\nk = 3\n[grid]\nlr = [1, 1.0]', "are the same run"),
        ('recipe = "markov"\nseeds = [0]\ncount = "dirichelt"\n[base]\nk = 3', "count must name a prior"),
        ('recipe = "markov"\nseeds = [0]\ndescription = {a = 1}\n[base]\nk = 3', "description must be a string"),
        ('recipe = "markov"\nseeds = [0]\ndescription = 3\n[base]\nk = 3', "description must be a string"),
        (f'recipe = "{"x" * 5000}"\nseeds = [0]', "... (5,000 characters)"),  # quoted, not repeated whole
        # issue 52: named "--k is required", a command-line option, where the spec's key is meant
        ('recipe = "markov"\nseeds = [0]', "the spec sets no k, which the markov recipe requires: add `k = ...`"),
    ],
)
def test_a_bad_spec_is_refused_by_name_before_anything_runs(text, message, tmp_path, capsys):
    with pytest.raises(SpecError) as error:
        parse_spec(text, "spec.toml")
    assert message in str(error.value)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_cells_are_conditions_times_grid_times_seeds_with_the_seed_convention_of_train():
    spec = parse_spec(SPEC.format(steps=5, checkpoints=2) + "[grid]\nlr = [0.001, 0.003]\n")
    cells = spec.cells()
    assert [cell.relative_path for cell in cells[:4]] == [
        "doubly-stochastic/lr=0.001/seed-0",
        "doubly-stochastic/lr=0.001/seed-1",
        "doubly-stochastic/lr=0.003/seed-0",
        "doubly-stochastic/lr=0.003/seed-1",
    ]
    assert len(cells) == 8
    recipe = cells[3].recipe
    assert (recipe.model_seed, recipe.data_seed, recipe.eval_seed) == (1, 2, 3) and recipe.lr == 0.003
    assert recipe.task.prior == "doubly-stochastic" and recipe.task.eval_prior == "dirichlet"
    per_layer = parse_spec('recipe = "markov"\nseeds = [0]\n[base]\nk = 3\nn = 3\n[grid]\nheads = [[2, 1], [1, 1]]')
    assert [cell.relative_path for cell in per_layer.cells()] == ["base/heads=2,1/seed-0", "base/heads=1,1/seed-0"]
    assert per_layer.cells()[0].recipe.heads == (2, 1)


def test_a_sweep_killed_mid_way_finishes_with_the_files_of_an_uninterrupted_one(tmp_path):
    spec = write_spec(tmp_path, steps=300, checkpoints=30)
    whole = tmp_path / "whole"
    assert (
        subprocess.run([COMMAND, "sweep", spec, "--out", whole, "--workers", "2"], capture_output=True).returncode == 0
    )
    split = tmp_path / "split"
    process = subprocess.Popen(
        [COMMAND, "sweep", spec, "--out", split, "--workers", "2"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill once some cell has written a few checkpoints
        manifests = list(split.glob("*/seed-*/manifest.json"))
        if any(len(json.loads(m.read_text() or "[]")) >= 3 for m in manifests if m.stat().st_size):
            break
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert run_files(split) != run_files(whole)  # it really was cut short
    again = subprocess.run([COMMAND, "sweep", spec, "--out", split, "--workers", "2"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert run_files(split) == run_files(whole)


def test_a_failing_cell_is_reported_and_the_others_finish(tmp_path, capsys):
    spec = write_spec(tmp_path, extra="[conditions.diverges]\nlr = 1e30\n")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "2"]) == 1
    err = capsys.readouterr().err
    assert "diverges/seed-0: failed: FloatingPointError" in err
    assert "failed: diverges/seed-0, diverges/seed-1" in err.splitlines()[-1]
    finished = sorted(
        str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").glob("*/seed-*") if is_finished(p)
    )
    assert finished == [f"{name}/seed-{seed}" for name in ("doubly-stochastic", "mixture") for seed in (0, 1)]


def test_the_ray_backend_listens_on_loopback_only_and_writes_the_same_run_directories_as_the_local_pool(tmp_path):
    # one test for both, because starting a local Ray instance is the slowest step of the suite
    pytest.importorskip("ray", reason="the ray extra is not installed")  # make test installs it; imported before
    # the sweep, as a program using Ray would: the instance must still stay on loopback
    spec = parse_spec(write_spec(tmp_path).read_text())
    run_sweep(spec, tmp_path / "local", workers=2, report=lambda line: None)
    lines = []
    results = run_sweep(spec, tmp_path / "ray", workers=2, backend="ray", report=lines.append)
    assert {r["status"] for r in results} == {"trained"}
    # the schedule notes come first; the one line about the instance must name loopback
    ray_lines = [line for line in lines if "Ray instance" in line]
    assert len(ray_lines) == 1 and ray_lines[0].startswith("a local Ray instance at 127.0.0.1:"), lines
    assert run_files(tmp_path / "ray") == run_files(tmp_path / "local")


def test_a_sweep_directory_holds_one_spec(tmp_path, capsys):
    spec = write_spec(tmp_path)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 0
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out")]) == 0  # the same spec: every cell skipped
    assert "4 cells, 4 skipped" in capsys.readouterr().out
    (tmp_path / "other").mkdir()
    other = write_spec(tmp_path / "other", steps=13)
    assert main(["sweep", str(other), "--out", str(tmp_path / "out")]) == 2
    assert "holds another sweep" in capsys.readouterr().err


def test_the_interval_is_the_student_t_interval_of_the_mean():
    # by hand: mean 2.5, s = sqrt(5/3) = 1.2910, t(0.975, 3) = 3.1824, half-width 3.1824 * 1.2910 / 2 = 2.0542
    result = interval([1.0, 2.0, 3.0, 4.0])
    assert result["mean"] == 2.5 and result["n"] == 4
    assert result["low"] == pytest.approx(0.4458, abs=1e-4) and result["high"] == pytest.approx(4.5542, abs=1e-4)
    assert interval([7.0]) == {"mean": 7.0, "low": None, "high": None, "n": 1}


def test_transition_and_plateau_follow_their_definitions():
    closest = ["uniform", "unigram", "unigram", "bigram", "unigram", "bigram", "bigram"]
    x = [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    assert transition_index(closest, "bigram") == 5  # the last switch, not the first visit
    assert plateau_length(closest, x, 5) == 40.0  # from the first unigram checkpoint (10) to 50
    assert transition_index(["uniform", "bigram", "uniform"], "bigram") is None
    assert plateau_length(["uniform", "bigram"], [0.0, 5.0], 1) == 0.0


def test_the_positional_checkpoints_are_the_plateaus_middle_the_transition_and_the_end():
    closest = ["uniform", "unigram", "unigram", "unigram", "bigram", "unigram", "bigram", "bigram"]
    steps = [0, 10, 20, 40, 80, 100, 160, 200]
    # the plateau runs from step 10 (its first unigram checkpoint) to the transition at 160: middle 85; the nearest
    # checkpoint, 80, has bigram closest, so the plateau's is the nearest unigram-closest one, 100
    assert positional_checkpoints(closest, steps, 6) == {"plateau": 100, "transition": 160, "end": 200}
    assert positional_checkpoints(["uniform", "bigram"], [0, 5], 1) == {"plateau": None, "transition": 5, "end": 5}


def test_summarize_gives_every_condition_its_intervals_and_curves(tmp_path, capsys):
    spec = write_spec(tmp_path)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "out"), "--workers", "2"]) == 0
    capsys.readouterr()
    assert main(["summarize", str(tmp_path / "out"), "--json", "--count", "doubly-stochastic"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary["conditions"]) == {"doubly-stochastic", "mixture"}
    for name, condition in summary["conditions"].items():
        assert condition["n_seeds"] == 2 and condition["seeds"] == [0, 1]
        assert {"mean", "low", "high"} <= condition["transition"].keys() and {"mean", "low", "high"} <= condition[
            "final_kl"
        ].keys()
        finals = [
            json.loads((tmp_path / "out" / name / f"seed-{s}" / "metrics.jsonl").read_text().splitlines()[-1])
            for s in (0, 1)
        ]
        assert condition["final_kl"] == interval([f["last_token_kl"]["true"] for f in finals])
        per_batch = 8 if name == "doubly-stochastic" else 6  # round(0.75 * 8) doubly stochastic sequences a step
        assert condition["curves"]["x"] == [f * per_batch for f in condition["curves"]["steps"]]
        assert len(condition["curves"]["kl"]["bigram"]["mean"]) == len(condition["curves"]["steps"])
        assert all(
            math.isfinite(v) for v in condition["probes"]["previous_token_layer0"].values() if isinstance(v, float)
        )
        for run in condition["runs"]:  # per-seed curves at the checkpoint steps, and the fixed-level transition
            assert run["curve"]["steps"] == condition["curves"]["steps"]
            assert len(run["curve"]["kl"]["bigram"]) == len(condition["curves"]["steps"])
            assert run["transition_kl"] is None or run["transition_kl"] in condition["curves"]["x"]
    assert not summary["sweep"].startswith("/")
    measures = {c["measure"] for c in summary["comparisons"]}  # these short runs may reach no transition
    assert {"final_kl", "previous_token_layer0", "bigram_matching_last_layer"} <= measures
    assert all(c["test"] == "paired t" for c in summary["comparisons"])  # both conditions run seeds [0, 1]
    assert main(["summarize", str(tmp_path / "out"), "--count", "unigram"]) == 2
    assert "trains on no unigram sequences" in capsys.readouterr().err


def test_links_planted_at_the_sweeps_own_files_are_not_followed(tmp_path):
    spec = parse_spec(write_spec(tmp_path, steps=2, checkpoints=2).read_text())
    out = tmp_path / "sweep"
    run_sweep(spec, out, report=lambda line: None)
    watched = tmp_path / "watched"
    watched.write_text(spec.text)  # a valid spec, so the sweep goes on to write
    (out / "spec.toml").rename(tmp_path / "saved.toml")
    (out / "spec.toml").symlink_to(watched)
    with pytest.raises(SpecError, match="symbolic link"):  # the spec's link is neither read nor written through
        run_sweep(spec, out, report=lambda line: None)
    (out / "spec.toml").unlink()
    (tmp_path / "saved.toml").rename(out / "spec.toml")
    (out / "sweep.jsonl").unlink()
    (out / "sweep.jsonl").symlink_to(watched)
    with pytest.raises(ValueError, match="symbolic link"):  # the journal refuses its link: one line, status 2
        run_sweep(spec, out, report=lambda line: None)
    assert watched.read_text() == spec.text


GAUSSIAN_SPEC = 'recipe = "gaussian"\nseeds = [0, 1]\n[base]\nsteps = 3\nbatch_size = 8\nn_checkpoints = 2\n'


def test_a_gaussian_sweep_is_summarized_by_its_tasks_own_probes(tmp_path, capsys):
    from induction_probes.circuits.runs.reader import Run
    from induction_probes.probes.run_level.checkpoint_probes import probe_gaussian

    run_sweep(parse_spec(GAUSSIAN_SPEC), tmp_path / "out", report=lambda line: None)
    assert main(["summarize", str(tmp_path / "out"), "--json", "--probe-seqs", "40"]) == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    assert summary["summary"] == "task" and summary["recipe"] == "gaussian"
    (condition,) = summary["conditions"].values()
    assert condition["seeds"] == [0, 1]
    for record in condition["runs"]:  # each seed's best heads, as probe_gaussian gives them on the same sequences
        run = Run.open(tmp_path / "out" / "base" / f"seed-{record['seed']}")
        by_hand = probe_gaussian(run, probe_set=run.task.eval_set(40, 12345))
        window = {f"window_r2_distance{i}_layer0": value for i, value in enumerate(by_hand.window_r2)}
        assert record["probes"] == {
            "previous_token_layer0": max(by_hand.previous_token[0]),
            "previous_token_layer1": max(by_hand.previous_token[1]),
            "induction_layer1": max(by_hand.induction),
            **window,
            "target_r2_after_layer0_layer0": by_hand.target_r2_after_layer0,
        }
        assert record["final"]["relative_mse"] == run.metrics()[-1]["relative_mse"]
    values = [r["probes"]["induction_layer1"] for r in condition["runs"]]
    assert condition["probes"]["induction_layer1"] == interval(values)
    assert main(["summarize", str(tmp_path / "out"), "--probe-seqs", "40"]) == 0
    assert "induction_layer1" in capsys.readouterr().out
