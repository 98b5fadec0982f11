"""A run's lock (``circuits/training/run_lock.py``): the kernel releases it with its process, so a killed
trainer's run is resumed, and the trainer that takes it over says so in a line; a trainer that stops on its own
leaves the lock empty, and nothing is said (issue 52, item 3)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_training import TINY

from induction_probes.circuits.training.train_loop import train_run


def test_a_trainer_that_stops_on_its_own_leaves_the_lock_empty_and_its_resume_says_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    train_run(TINY, out, stop_after=5, progress=False)
    assert (out / "lock").read_bytes() == b""
    train_run(None, out, resume=True, progress=False)
    assert "taking over" not in capsys.readouterr().err
    assert (out / "lock").read_bytes() == b""


def test_a_killed_trainers_lock_is_taken_over_and_said_so(tmp_path, capsys):
    out = tmp_path / "run"
    options = ["--k", "3", "--seq-len", "20", "--steps", "3000", "--batch-size", "16", "--eval-seqs", "100"]
    command = [str(Path(sys.executable).with_name("induction-probes")), "train", "markov", *options, "--out", str(out)]
    trainer = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    manifest, deadline = out / "manifest.json", time.monotonic() + 120
    while len(json.loads(manifest.read_text() or "[]") if manifest.is_file() else []) < 3:  # training, holding it
        assert trainer.poll() is None and time.monotonic() < deadline, "the trainer never wrote its checkpoints"
        time.sleep(0.01)
    os.kill(trainer.pid, signal.SIGKILL)
    trainer.wait()
    assert (out / "lock").read_text() == f"{trainer.pid}\n"  # what a killed holder leaves
    train_run(None, out, resume=True, stop_after=60, progress=False)
    assert f"note: {out}: its last trainer (process {trainer.pid}) was killed; taking over its lock" in (
        capsys.readouterr().err
    )
    assert (out / "lock").read_bytes() == b""
