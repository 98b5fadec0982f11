"""Short training runs: determinism, exact resume, crash safety, and what a run directory holds."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import induction_probes.circuits.runs.writer as checkpoint_module
import induction_probes.circuits.untrusted as atomic_writes  # where every file of a run is renamed into place
from induction_probes.circuits.recipes.gaussian_recipes import GaussianRecipe
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.runs.layout import checkpoint_file
from induction_probes.circuits.runs.reader import Run, sha256_of
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.training.train_loop import checkpoint_schedule, train_run

TINY = MarkovRecipe(
    task=MarkovTask(k=3, seq_len=20), steps=40, batch_size=16, eval_seqs=100, n_checkpoints=9, dropout=0.1
)


@pytest.fixture
def tiny_run(trained_once) -> Run:
    """TINY's run, trained once for the session: the tests given it only read it."""
    return trained_once(TINY)


def run_files(path: Path) -> dict[str, bytes]:
    """Everything a run promises to reproduce: config, manifest, metrics and weights (not resume/)."""
    files = [
        path / "config.json",
        path / "manifest.json",
        path / "metrics.jsonl",
        *sorted((path / "checkpoints").iterdir()),
    ]
    return {str(f.relative_to(path)): f.read_bytes() for f in files}


def test_schedule_is_log_spaced_early_and_linear_later():
    steps = checkpoint_schedule(4000, 150)
    assert steps[0] == 0 and steps[-1] == 4000 and 120 <= len(steps) <= 150
    assert steps == sorted(set(steps))
    early = [s for s in steps if s <= 200]
    assert len(early) > 40  # dense where the loss moves first
    late_gaps = {b - a for a, b in zip(steps, steps[1:]) if a > 400}
    assert max(late_gaps) - min(late_gaps) <= 1  # evenly spaced afterwards


def test_run_directory_layout_and_metrics(tiny_run):
    run = tiny_run
    assert run.steps == checkpoint_schedule(TINY.steps, TINY.n_checkpoints)
    for entry in run.manifest:
        assert entry["sequences_seen"] == entry["step"] * TINY.batch_size
        assert sha256_of(run.path / entry["file"]) == entry["sha256"]
    metrics = run.metrics()
    assert [m["step"] for m in metrics] == run.steps
    for m in metrics:
        assert {"step", "sequences_seen", "train_loss", "eval_loss", "last_token_kl"} <= m.keys()
        assert set(m["last_token_kl"]) == {"true", "uniform", "unigram", "bigram"}
        assert all(v >= 0 for v in m["last_token_kl"].values())
    config = json.loads((run.path / "config.json").read_text())
    assert config["task"] == {
        "name": "markov",
        "k": 3,
        "seq_len": 20,
        "n": 2,
        "alpha": 1.0,
        "prior": "dirichlet",
        "p": None,
        "mixture": None,
        "eval_prior": None,
    }
    assert (
        config["recipe"]["name"] == "markov"
        and config["recipe"]["model_seed"] == 0
        and config["recipe"]["data_seed"] == 1
    )
    assert run.recipe == TINY and run.task == TINY.task
    # At initialisation the model is nearly uniform: KL(uniform ‖ model) is tiny.
    assert metrics[0]["last_token_kl"]["uniform"] < 0.01
    assert not list(run.path.rglob("*.tmp"))


def test_same_seeds_give_byte_identical_files(tmp_path, tiny_run):
    a = tiny_run  # trained in another folder, earlier in the session
    b = train_run(TINY, tmp_path / "b", progress=False)
    assert run_files(a.path) == run_files(b.path)
    c = train_run(replace(TINY, data_seed=7), tmp_path / "c", progress=False)
    assert run_files(c.path)["metrics.jsonl"] != run_files(a.path)["metrics.jsonl"]


def test_checkpoints_written_in_the_background_or_in_turn_are_the_same_bytes(tmp_path):
    in_turn = train_run(TINY, tmp_path / "in-turn", progress=False, background=False)
    beside = train_run(TINY, tmp_path / "beside", progress=False, background=True)
    assert every_file(beside.path) == every_file(in_turn.path)  # resume/ too: copies were taken at their steps


@pytest.mark.parametrize("stop", [13, 20])  # between checkpoints, and on one
def test_resume_reproduces_an_uninterrupted_run(tmp_path, stop, tiny_run):
    whole = tiny_run
    train_run(TINY, tmp_path / "split", stop_after=stop, progress=False)
    assert Run.open(tmp_path / "split").steps[-1] <= stop
    resumed = train_run(None, tmp_path / "split", resume=True, progress=False)
    assert run_files(resumed.path) == run_files(whole.path)


@pytest.mark.parametrize("background", [False, True])
def test_a_crash_while_saving_leaves_only_complete_checkpoints(tmp_path, monkeypatch, tiny_run, background):
    whole = tiny_run
    real_save = checkpoint_module.save_tensors
    calls = {"n": 0}

    def crash_on_the_fifth_weights_file(path, tensors, metadata=None):
        if "checkpoints" in str(path):
            calls["n"] += 1
            if calls["n"] == 5:
                path.with_name(f".{path.name}.k3j5x9q2.tmp").write_bytes(b"half a file")  # as write_atomic names it
                raise KeyboardInterrupt  # the process dies mid-write
        return real_save(path, tensors, metadata)

    monkeypatch.setattr(checkpoint_module, "save_tensors", crash_on_the_fifth_weights_file)
    with pytest.raises(KeyboardInterrupt):
        train_run(TINY, tmp_path / "crashed", progress=False, background=background)
    monkeypatch.setattr(checkpoint_module, "save_tensors", real_save)

    crashed = Run.open(tmp_path / "crashed")
    assert len(crashed.manifest) == 4
    for entry in crashed.manifest:  # every listed checkpoint is whole and loads
        assert sha256_of(crashed.path / entry["file"]) == entry["sha256"]
        crashed.load(step=entry["step"])
    resumed = train_run(None, tmp_path / "crashed", resume=True, progress=False)
    assert run_files(resumed.path) == run_files(whole.path)


class Killed(BaseException):
    """The writer dying: not an Exception, so no handler in the trainer can take it for an error."""


def every_file(root: Path) -> dict[str, bytes]:
    """Every file of a run, resume/ included (not the lock, which only marks who is writing)."""
    return {
        str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file() and f.name != "lock"
    }


def written_paths(tmp_path, monkeypatch) -> list[str]:
    """The files an uninterrupted run renames into place, in order: its write points."""
    real_replace, names = atomic_writes.os.replace, []

    def record(source, target):
        names.append(Path(target).name)
        real_replace(source, target)

    monkeypatch.setattr(atomic_writes.os, "replace", record)
    train_run(TINY, tmp_path / "recorded", progress=False)
    monkeypatch.setattr(atomic_writes.os, "replace", real_replace)
    return names


@pytest.mark.parametrize("background", [False, True])
def test_killed_at_any_write_point_of_the_first_or_a_later_checkpoint_resume_finishes_byte_for_byte(
    tmp_path, monkeypatch, tiny_run, background
):
    whole = every_file(tiny_run.path)
    names = written_paths(tmp_path, monkeypatch)
    resume_writes = [i for i, name in enumerate(names) if name == "state.safetensors"]
    first = range(0, resume_writes[0] + 1)  # config, step 0's weights, metrics, manifest, resume state
    later = range(resume_writes[3] + 1, resume_writes[4] + 1)  # the fifth checkpoint's writes
    real_replace = atomic_writes.os.replace
    for point in [*first, *later]:
        calls = {"n": 0}

        def die_at_the_write_point(source, target, point=point, calls=calls):
            if calls["n"] == point:
                raise Killed  # the temporary file is written and fsync'ed, the rename never happens
            calls["n"] += 1
            real_replace(source, target)

        out = tmp_path / f"killed-{point}"
        monkeypatch.setattr(atomic_writes.os, "replace", die_at_the_write_point)
        with pytest.raises(Killed):
            train_run(TINY, out, progress=False, background=background)
        monkeypatch.setattr(atomic_writes.os, "replace", real_replace)
        if (out / "config.json").exists():
            train_run(None, out, resume=True, progress=False)
        else:  # killed before the run had a config: nothing of it exists yet, so it is started again
            train_run(TINY, out, progress=False)
        assert every_file(out) == whole, f"killed while writing {names[point]} (write {point})"


def test_a_writer_killed_while_writing_the_first_config_leaves_a_directory_the_same_command_starts(tmp_path, tiny_run):
    """SIGKILL leaves write_atomic's temporary file behind (an exception would have removed it)."""
    whole = every_file(tiny_run.path)
    out = tmp_path / "killed"
    out.mkdir()
    (out / "lock").touch()
    (out / ".config.json.k3j5x9q2.tmp").write_bytes(b'{"half a')
    train_run(TINY, out, progress=False)
    assert every_file(out) == whole
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / ".notes.tmp").write_text("someone else's")  # not ours: the directory is not empty
    with pytest.raises(ValueError, match="not empty"):
        train_run(TINY, tmp_path / "other", progress=False)


def test_starting_over_an_existing_run_is_refused(tmp_path):
    train_run(TINY, tmp_path / "run", stop_after=3, progress=False)
    with pytest.raises(ValueError, match="already holds a run"):
        train_run(TINY, tmp_path / "run", progress=False)


def test_loaded_checkpoint_reproduces_the_logged_metrics(tiny_run):
    run = tiny_run
    eval_set = TINY.task.eval_set(TINY.eval_seqs, TINY.eval_seed)
    for index in (0, 4, -1):
        model = run.load(index=index)
        with torch.no_grad():
            metrics = eval_set.metrics(model(eval_set.sample.inputs))
        assert metrics["last_token_kl"] == run.metrics()[index]["last_token_kl"]
    assert torch.equal(run.load(step=run.steps[4]).W_Q, run.load(index=4).W_Q)


def test_gaussian_runs_resume_to_the_same_bytes(tmp_path):
    cfg = GaussianRecipe(task=GaussianTask(seq_len=8), steps=30, batch_size=32, eval_seqs=64, n_checkpoints=6)
    whole = train_run(cfg, tmp_path / "whole", progress=False)
    train_run(cfg, tmp_path / "split", stop_after=11, progress=False)
    resumed = train_run(None, tmp_path / "split", resume=True, progress=False)
    assert run_files(resumed.path) == run_files(whole.path)
    assert {"eval_loss", "relative_mse"} <= whole.metrics()[-1].keys()


def test_a_damaged_resume_state_is_refused_in_one_line(tmp_path, capsys):
    from induction_probes.cli import main

    train_run(TINY, tmp_path / "run", stop_after=3, progress=False)
    path = tmp_path / "run" / "resume" / "state.safetensors"
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x01  # one bit of the last tensor
    path.write_bytes(bytes(data))
    assert main(["train", "markov", "--out", str(tmp_path / "run"), "--resume"]) == 2
    assert "does not match its checksum" in capsys.readouterr().err


def test_a_run_that_crashed_before_its_first_resume_state_starts_over_on_resume(tmp_path, tiny_run):
    whole = tiny_run
    crashed = tmp_path / "crashed"
    train_run(TINY, crashed, stop_after=0, progress=False)
    (crashed / "resume" / "state.safetensors").unlink()  # as if killed between the step-0 files
    train_run(None, crashed, resume=True, progress=False)
    assert every_file(crashed) == every_file(whole.path)


def test_a_second_trainer_on_the_same_directory_stops_at_once(tmp_path):
    import fcntl

    from induction_probes.circuits.untrusted import CheckpointError

    out = tmp_path / "run"
    out.mkdir()
    with open(out / "lock", "a") as held:  # the first trainer, still running
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(CheckpointError, match="another trainer is writing"):
            train_run(TINY, out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["lock"]  # nothing written by the second


# Every name a writer of this or an earlier version could write through, relative to the run.
OLD_TEMPORARY_NAMES = [
    "config.json.tmp",
    "manifest.json.tmp",
    "metrics.jsonl.tmp",
    "resume/state.safetensors.tmp",
    "lock.tmp",
]


def plant_links(run: Path, target: Path) -> list[Path]:
    """Links to ``target`` at every old temporary name and at every checkpoint file still to come."""
    names = OLD_TEMPORARY_NAMES + [f".{name}.tmp" for name in ("config.json", "manifest.json", "metrics.jsonl")]
    for step in checkpoint_schedule(TINY.steps, TINY.n_checkpoints):
        file = checkpoint_file(step)
        names += [file + ".tmp"] + ([] if (run / file).exists() else [file])
    links = [run / name for name in names]
    for link in links:
        link.symlink_to(target)
    return links


def own_files(path: Path) -> dict[str, bytes]:
    return {name: data for name, data in run_files(path).items() if not (path / name).is_symlink()}


def test_links_planted_in_a_run_are_never_written_through(tmp_path, tiny_run):
    watched = tmp_path / "watched"
    watched.write_bytes(b"not the run's")
    whole = tiny_run
    split = tmp_path / "split"
    train_run(TINY, split, stop_after=13, progress=False)
    plant_links(split, watched)
    resumed = train_run(None, split, resume=True, progress=False)
    assert watched.read_bytes() == b"not the run's"
    assert own_files(resumed.path) == run_files(whole.path)  # the links at checkpoint names were replaced, not followed
    assert (split / "resume" / "state.safetensors.tmp").is_symlink()  # someone else's link is left where it was


@pytest.mark.parametrize("command", [["train", "markov", "--k", "3", "--steps", "2"], ["toy", "--steps", "2"]])
def test_a_new_run_is_not_written_into_a_directory_with_planted_links(tmp_path, command, capsys):
    from induction_probes.cli import main

    watched = tmp_path / "watched"
    watched.write_bytes(b"not the run's")
    out = tmp_path / "run"
    out.mkdir()
    for name in ("config.json.tmp", "metrics.jsonl.tmp", "manifest.json.tmp"):
        (out / name).symlink_to(watched)
    assert main([*command, "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert watched.read_bytes() == b"not the run's"
    written = {p.name for p in out.iterdir()} - {"config.json.tmp", "manifest.json.tmp", "metrics.jsonl.tmp"}
    assert written <= {"lock"}  # at most the trainer's empty lock file


def test_a_link_at_the_lock_or_a_run_folder_is_refused_in_one_line(tmp_path, capsys):
    from induction_probes.cli import main

    watched = tmp_path / "watched"
    watched.mkdir()
    out = tmp_path / "run"
    out.mkdir()
    (out / "lock").symlink_to(watched / "lock")
    assert main(["train", "markov", "--k", "3", "--steps", "2", "--out", str(out)]) == 2
    assert "lock is a symbolic link" in capsys.readouterr().err
    assert list(watched.iterdir()) == []
    (out / "lock").unlink()
    train_run(TINY, out, stop_after=3, progress=False)
    shutil.rmtree(out / "checkpoints")
    (out / "checkpoints").symlink_to(watched, target_is_directory=True)
    assert main(["train", "markov", "--out", str(out), "--resume"]) == 2
    assert "is a symbolic link" in capsys.readouterr().err
    assert list(watched.iterdir()) == []


def test_checkpoints_are_written_with_the_mode_of_the_json_files(tmp_path):
    run = train_run(TINY, tmp_path / "run", stop_after=1, progress=False)
    modes = {
        path.name: path.stat().st_mode & 0o777 for path in run.path.rglob("*") if path.is_file() and path.name != "lock"
    }
    assert len(set(modes.values())) == 1, modes
    assert modes["config.json"] & 0o044 == 0o044  # readable by others, as files open() creates under the usual umask


def test_ctrl_c_saves_the_step_it_reached_and_resume_finishes_byte_for_byte(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    recipe = replace(TINY, steps=300)
    whole = train_run(recipe, tmp_path / "whole", progress=False)
    out = tmp_path / "interrupted"
    options = [
        "--k",
        "3",
        "--seq-len",
        "20",
        "--steps",
        "300",
        "--batch-size",
        "16",
        "--eval-seqs",
        "100",
        "--n-checkpoints",
        "9",
        "--dropout",
        "0.1",
        "--out",
        str(out),
    ]
    command = [str(Path(sys.executable).with_name("induction-probes")), "train", "markov", *options]
    trainer = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"OMP_NUM_THREADS": "1"},
    )
    deadline = time.monotonic() + 120
    while len(json.loads((out / "manifest.json").read_text() or "[]") if (out / "manifest.json").is_file() else []) < 2:
        assert trainer.poll() is None and time.monotonic() < deadline, trainer.communicate()
        time.sleep(0.005)
    trainer.send_signal(signal.SIGINT)  # in the training loop: its step-1 checkpoint is written
    stdout, stderr = trainer.communicate(timeout=120)
    assert trainer.returncode == 130 and "Traceback" not in stderr, stderr
    last_line = stderr.strip().splitlines()[-1]
    assert last_line.startswith("induction-probes: interrupted at step ") and last_line.endswith(f"{out} --resume")
    stopped = int(last_line.split("step ")[1].split(",")[0])
    assert 1 <= stopped < 300
    train_run(None, out, resume=True, progress=False)
    assert every_file(out) == every_file(whole.path)  # resume/ included: the state saved at the stop was exact
