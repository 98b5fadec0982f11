"""Two sweeps and a summary at once on one folder (issue 40): the second sweep refuses in one line, the first
finishes every cell once, and a summary taken while it trains counts only the cells finished by then."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from induction_probes.circuits.runs.layout import RESUME_FILE
from induction_probes.circuits.sweeps.sweep_runner import (
    SweepBusy,
    cell_json,
    cell_status,
    is_finished,
    parse_spec,
    prepare,
    run_cell,
)
from induction_probes.circuits.training.train_loop import train_run
from induction_probes.cli import main

COMMAND = Path(sys.executable).with_name("induction-probes")
# six cells of several seconds each, trained one at a time: five are left when the summary starts, which it
# reads within seconds (at 150 steps a cell, an idle machine finished the sweep before the summary looked)
SPEC = """
recipe = "markov"
seeds = [0, 1, 2, 3, 4, 5]
[base]
k = 3
seq_len = 12
steps = 500
batch_size = 8
eval_seqs = 30
n_checkpoints = 8
"""
CELLS = [f"base/seed-{seed}" for seed in range(6)]


def finished(out: Path) -> set[str]:
    path = out / "sweep.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {json.loads(line)["cell"] for line in lines}


def test_a_second_sweep_on_a_folder_in_use_is_refused_in_one_line_and_writes_nothing(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    journal = prepare(parse_spec(SPEC), out)  # what a running sweep holds
    before = sorted(out.rglob("*"))
    with pytest.raises(SweepBusy, match="another sweep is running in"):
        prepare(parse_spec(SPEC), out)
    assert main(["sweep", str(spec), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "another sweep is running in" in err, err
    assert sorted(out.rglob("*")) == before and (out / "sweep.jsonl").read_text() == ""
    journal.close()  # the sweep ended (its lock goes with it): the folder is free again
    prepare(parse_spec(SPEC), out).close()


def test_a_sweep_caught_writing_its_spec_is_busy_not_a_stranger_s_folder(tmp_path):
    # the window two sweeps started at once hit: the first holds the lock and has only its journal and the
    # spec's temporary file; the second must be told the folder is in use, not that it holds no sweep
    out = tmp_path / "out"
    journal = prepare(parse_spec(SPEC), out)
    (out / "spec.toml").rename(out / ".spec.toml.x1y2.tmp")
    with pytest.raises(SweepBusy, match="another sweep is running in"):
        prepare(parse_spec(SPEC), out)
    journal.close()
    (out / "stray.txt").write_text("a stranger's file")
    with pytest.raises(ValueError, match="is not empty and holds no sweep"):  # a file of another kind still is
        prepare(parse_spec(SPEC), out)


def test_two_sweeps_and_a_summary_at_once_on_one_folder(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    command = [COMMAND, "sweep", spec, "--out", out]
    sweeps = [subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        deadline = time.monotonic() + 90
        while len(finished(out)) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        before = finished(out)
        assert before, "no cell finished within 90 s"
        summary = subprocess.run(
            [COMMAND, "summarize", out, "--json", "--probe-seqs", "20"], capture_output=True, text=True
        )
        after = finished(out)
        outcomes = [sweep.communicate(timeout=120) + (sweep.returncode,) for sweep in sweeps]
    finally:
        for sweep in sweeps:
            if sweep.poll() is None:
                sweep.kill()
                sweep.wait()
    # one sweep refused at once, in one line, status 2 (bad input: a folder in use, as for `train`)
    refused = [(err, code) for _, err, code in outcomes if code != 0]
    assert len(refused) == 1 and refused[0][1] == 2, outcomes
    assert refused[0][0].count("\n") == 1 and "another sweep is running in" in refused[0][0]
    # the other trained every cell, each once
    journal = [json.loads(line) for line in (out / "sweep.jsonl").read_text().splitlines()]
    assert sorted(r["cell"] for r in journal) == CELLS and {r["status"] for r in journal} == {"trained"}
    # the summary counted the cells finished while it ran, and listed the others as unfinished
    assert summary.returncode == 0, summary.stderr
    result = json.loads(summary.stdout)
    counted = {f"base/seed-{seed}" for seed in result["conditions"]["base"]["seeds"]}
    assert before <= counted <= after, (before, counted, after)
    assert sorted(counted | set(result["unfinished"])) == CELLS and not counted & set(result["unfinished"])
    assert result["unfinished"], "the sweep had finished before the summary looked: it read no sweep in progress"


def test_a_cell_killed_between_its_last_checkpoint_and_its_resume_state_is_resumed_not_counted(tmp_path):
    # The trainer lists its last checkpoint in the manifest, then saves that step's resume state: a cell
    # killed in between holds the manifest of a finished run and the resume state of the checkpoint before.
    # It is made here from two real runs of one recipe: one finished, one stopped at that checkpoint.
    spec = parse_spec(
        'recipe = "markov"\nseeds = [0]\n[base]\nk = 2\nseq_len = 8\nsteps = 6\nbatch_size = 4\n'
        "eval_seqs = 10\nn_checkpoints = 3\n"
    )
    (cell,) = spec.cells()
    whole, stopped = tmp_path / "whole", tmp_path / "stopped"
    train_run(cell.recipe, whole, progress=False)
    steps = [entry["step"] for entry in json.loads((whole / "manifest.json").read_text())]
    train_run(cell.recipe, stopped, stop_after=steps[-2], progress=False)
    out = tmp_path / "sweep"
    prepare(spec, out).close()
    killed = out / cell.relative_path
    shutil.copytree(whole, killed)
    shutil.copyfile(stopped / RESUME_FILE, killed / RESUME_FILE)
    assert (stopped / RESUME_FILE).read_bytes() != (whole / RESUME_FILE).read_bytes()  # it really is stale
    assert not is_finished(killed) and cell_status(killed, cell.recipe, out) == "partial"
    assert is_finished(whole)
    result = run_cell(str(out), cell_json(cell))
    assert result["status"] == "resumed", result
    assert {p.relative_to(killed): p.read_bytes() for p in killed.rglob("*") if p.is_file()} == {
        p.relative_to(whole): p.read_bytes() for p in whole.rglob("*") if p.is_file()
    }
