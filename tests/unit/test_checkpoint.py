"""Opening runs and checkpoints: what is refused, with one line and status 2 from the CLI."""

import json
import pickle
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.runs.reader import Run, sha256_of
from induction_probes.circuits.runs.shipped import resolve_run
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.training.train_loop import train_run
from induction_probes.circuits.untrusted import CheckpointError
from induction_probes.cli import main

TINY = MarkovRecipe(task=MarkovTask(k=2, seq_len=8), steps=6, batch_size=4, eval_seqs=20, n_checkpoints=4)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return train_run(TINY, tmp_path_factory.mktemp("runs") / "tiny", progress=False).path


@pytest.fixture
def run_dir(pristine, tmp_path):
    copy = tmp_path / "tiny"
    shutil.copytree(pristine, copy)
    return copy


def last_file(run_dir):
    return run_dir / json.loads((run_dir / "manifest.json").read_text())[-1]["file"]


def test_loads_by_step_and_by_index(run_dir):
    run = Run.open(run_dir)
    assert run.steps == [0, 1, 3, 6]
    assert torch.equal(run.load(step=3).W_E, run.load(index=2).W_E)
    assert not torch.equal(run.load(step=3).W_E, run.load(step=1).W_E)
    assert torch.equal(run.load().W_E, run.load(index=-1).W_E)
    with pytest.raises(CheckpointError, match="step 5 is not saved in run"):
        run.load(step=5)
    with pytest.raises(CheckpointError, match="index 4 is out of range"):
        run.load(index=4)


def test_missing_run_and_unknown_shipped_name(tmp_path):
    with pytest.raises(CheckpointError, match="no run directory or shipped run named 'markov-k99'"):
        Run.open("markov-k99")
    with pytest.raises(CheckpointError, match="no run directory"):
        Run.open(tmp_path / "nowhere")


def test_sha256_mismatch_is_refused(run_dir):
    weights = load_file(last_file(run_dir))
    weights["embed.W_E"] = weights["embed.W_E"] + 1.0
    save_file(weights, last_file(run_dir))  # a valid file, but not the one that was trained
    with pytest.raises(CheckpointError, match="sha256 mismatch"):
        Run.open(run_dir).load()


@pytest.mark.parametrize(
    "file",
    ["/etc/passwd", "../../outside.safetensors", "checkpoints/../config.json", "checkpoints/step_00000001.safetensors"],
)
def test_a_manifest_cannot_point_outside_the_run_or_at_another_checkpoint(run_dir, file, tmp_path):
    outside = tmp_path / "outside.safetensors"
    save_file({"x": torch.zeros(1)}, outside)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest[-1]["file"] = file
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="does not name its own checkpoint file"):
        Run.open(run_dir).load()


def test_a_symlinked_checkpoint_or_a_missing_checksum_is_refused(run_dir, tmp_path):
    path = last_file(run_dir)
    target = tmp_path / "elsewhere.safetensors"
    path.rename(target)
    path.symlink_to(target)
    with pytest.raises(CheckpointError, match="is a symbolic link"):
        Run.open(run_dir).load()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for missing in (None, "pop"):
        entry = dict(manifest[-1])
        entry.pop("sha256") if missing == "pop" else entry.update(sha256=None)
        (run_dir / "manifest.json").write_text(json.dumps(manifest[:-1] + [entry]))
        with pytest.raises(CheckpointError, match="has no sha256 to verify"):
            Run.open(run_dir).load()


@pytest.mark.parametrize("damage", ["truncate", "not_safetensors"])
def test_corrupt_files_are_refused(run_dir, damage):
    path = last_file(run_dir)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"hello, I am not a tensor file")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest[-1]["sha256"] = sha256_of(path)  # so that the parser, not the checksum, has to catch it
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        Run.open(run_dir).load()


class Payload:
    """Unpickling this would create a file: proof that code ran."""

    marker = None

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_pickle_payload_is_refused_without_running(run_dir, tmp_path):
    Payload.marker = tmp_path / "pwned"
    path = last_file(run_dir)
    path.write_bytes(pickle.dumps({"embed.W_E": Payload()}))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest[-1]["sha256"] = sha256_of(path)  # a stranger would give the checksum of the payload
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        Run.open(run_dir).load()
    assert not Payload.marker.exists()
    pickle.loads(path.read_bytes())  # the payload is live: unpickling it does run code
    assert Payload.marker.exists()


def test_config_that_does_not_match_the_weights_is_refused(run_dir):
    config = json.loads((run_dir / "config.json").read_text())
    config["model"]["d_model"] = 8
    (run_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="do not match the config"):
        Run.open(run_dir).load()


def test_missing_files_are_refused(run_dir):
    last_file(run_dir).unlink()
    with pytest.raises(CheckpointError, match="missing checkpoint file"):
        Run.open(run_dir).load()
    (run_dir / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match="missing manifest.json"):
        Run.open(run_dir)


@pytest.mark.parametrize(
    "args,message",
    [
        (["info", "markov-k99"], "no run directory or shipped run named 'markov-k99'"),
        (["report", "/no/such/run"], "no run directory"),
    ],
)
def test_cli_refuses_in_one_line(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


@pytest.mark.parametrize("step", [None, 3])
def test_info_loads_the_checkpoint_and_refuses_damage_in_one_line(run_dir, capsys, step):
    args = [] if step is None else ["--step", str(step)]
    assert main(["info", str(run_dir), *args]) == 0
    assert "parameters, sha256 verified" in capsys.readouterr().out
    target = Run.open(run_dir).entry(step)["file"]
    shutil.copy(run_dir / "checkpoints" / "step_00000000.safetensors", run_dir / target)  # valid, but not its own
    assert main(["info", str(run_dir), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("induction-probes: error: ") and "sha256 mismatch" in err


def test_info_refuses_a_step_that_is_not_in_the_run(run_dir, capsys):
    assert main(["info", str(run_dir), "--step", "5"]) == 2
    assert "step 5 is not saved in run" in capsys.readouterr().err


def test_a_new_run_goes_only_into_a_missing_or_empty_directory(tmp_path, capsys):
    precious = tmp_path / "notes"
    precious.mkdir()
    (precious / "config.json").write_text("my own file")
    argv = ["train", "markov", "--k", "3", "--seq-len", "8", "--steps", "2", "--n-checkpoints", "2", "--eval-seqs", "5"]
    assert main([*argv, "--out", str(precious)]) == 2
    assert "is not empty: a new run goes into a missing or empty directory" in capsys.readouterr().err
    assert (precious / "config.json").read_text() == "my own file"
    (tmp_path / "empty").mkdir()
    assert main([*argv, "--out", str(tmp_path / "empty")]) == 0


def folder_state(folder):
    return {p.relative_to(folder): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("held", [{"notes.txt": "mine"}, {"manifest.json": "[]", "config.json": "{}"}])
def test_a_refused_new_run_leaves_the_folder_exactly_as_it_was(held, tmp_path, capsys):
    """The refusal came after the lock was taken, and left a lock file behind in the user's folder."""
    folder = tmp_path / "used"
    folder.mkdir()
    for name, text in held.items():
        (folder / name).write_text(text)
    before = folder_state(folder)
    argv = ["train", "markov", "--k", "3", "--seq-len", "8", "--steps", "2", "--n-checkpoints", "2", "--eval-seqs", "5"]
    assert main([*argv, "--out", str(folder)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("induction-probes: error: ")
    assert folder_state(folder) == before


def test_a_run_prints_as_its_path_not_its_manifest():
    text = repr(Run.open("markov-k3"))
    assert "markov-k3" in text and "sha256" not in text and len(text) < 300


@pytest.mark.parametrize(
    "section,key,value",
    [
        ("model", "n_layers", 1_000_000),  # built first, this grew to gigabytes
        ("model", "d_vocab", 10**10),
        ("model", "d_vocab", 1e10),
        ("model", "n_ctx", 10**9),
        ("recipe", "eval_seqs", 10**9),
        ("task", "seq_len", 10**8),
    ],
)
def test_sizes_in_a_config_are_checked_against_the_limits_before_anything_is_built(
    run_dir, capsys, section, key, value
):
    import resource

    config = json.loads((run_dir / "config.json").read_text())
    config[section][key] = value
    config["model"]["layer_heads"] = None  # so that only the size is wrong
    (run_dir / "config.json").write_text(json.dumps(config))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert main(["info", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("limit of" in err or "must be an integer" in err)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # kB: nothing big was allocated


@pytest.mark.parametrize("name", ["config.json", "manifest.json", "metrics.jsonl"])
def test_a_run_file_that_is_a_link_or_too_large_is_refused_before_it_is_read(tmp_path, name):
    from induction_probes.circuits.limits import MAX_TEXT_BYTES

    run = tmp_path / "run"
    shutil.copytree(resolve_run("markov-k3"), run)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes((run / name).read_bytes())  # the same content: only where it lives differs
    (run / name).unlink()
    (run / name).symlink_to(elsewhere)
    with pytest.raises(CheckpointError, match="symbolic link"):
        Run.open(run).metrics()
    (run / name).unlink()
    with open(run / name, "wb") as handle:  # sparse: no disk used, and it must not be read into memory
        handle.truncate(MAX_TEXT_BYTES + 1)
    with pytest.raises(CheckpointError, match="larger than"):
        Run.open(run).metrics()


class ReaderWatch:
    """A named pipe outside the run that tells whether anything opened it for reading: a writer's
    non-blocking open succeeds only while a reader holds it (and unblocks that reader, so nothing hangs)."""

    def __init__(self, path):
        import os
        import threading

        self.path, self.seen, self.stop = path, False, threading.Event()
        os.mkfifo(path)
        self.thread = threading.Thread(target=self.poll, daemon=True)

    def poll(self) -> None:
        import os

        while not self.stop.is_set():
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
                self.seen = True
            except OSError:  # ENXIO: no reader
                pass
            self.stop.wait(0.001)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


@pytest.mark.parametrize("how", ["absolute", "relative", "symlinked file", "symlinked folder"])
def test_a_hostile_manifest_opens_no_file_outside_the_run(run_dir, tmp_path, how):
    watched = tmp_path / "watched"
    with ReaderWatch(watched) as watch:
        manifest = json.loads((run_dir / "manifest.json").read_text())
        if how in ("absolute", "relative"):
            manifest[-1]["file"] = str(watched) if how == "absolute" else "../watched"
            (run_dir / "manifest.json").write_text(json.dumps(manifest))
        elif how == "symlinked file":
            last_file(run_dir).unlink()
            last_file(run_dir).symlink_to(watched)
        else:
            (tmp_path / "elsewhere").mkdir()
            target = tmp_path / "elsewhere" / last_file(run_dir).name
            target.symlink_to(watched)
            shutil.rmtree(run_dir / "checkpoints")
            (run_dir / "checkpoints").symlink_to(tmp_path / "elsewhere")
        with pytest.raises(CheckpointError):
            Run.open(run_dir).load()
    assert not watch.seen


def test_the_reader_watch_sees_a_reader(tmp_path):
    with ReaderWatch(tmp_path / "watched") as watch:
        with open(tmp_path / "watched", "rb") as handle:  # blocks until the watch's writer opens, then EOF
            handle.read()
    assert watch.seen
