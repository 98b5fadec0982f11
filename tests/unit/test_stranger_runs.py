"""A run directory written by a stranger (issue 26): named pipes, tampered configs, NaN weights and
metrics, links at any level. Every case is one line on stderr and a non-zero status, never a hang, a
traceback or a number that is not one."""

import json
import math
import os
import shutil
import signal

import pytest
import torch
from safetensors.torch import load_file, save_file

from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.runs.reader import Run
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.training.train_loop import train_run
from induction_probes.circuits.untrusted import CheckpointError, read_bytes, refuse_links_below, require_finite
from induction_probes.cli import main

TINY = MarkovRecipe(task=MarkovTask(k=2, seq_len=8), steps=4, batch_size=4, eval_seqs=20, n_checkpoints=3)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    return train_run(TINY, tmp_path_factory.mktemp("runs") / "tiny", progress=False).path


@pytest.fixture
def run_dir(pristine, tmp_path):
    copy = tmp_path / "tiny"
    shutil.copytree(pristine, copy)
    (copy / "lock").unlink(missing_ok=True)
    return copy


def one_line(argv, capsys, status=2) -> str:
    signal.alarm(20)  # a reader blocked on a named pipe fails the test instead of hanging it
    try:
        assert main(argv) == status
    finally:
        signal.alarm(0)
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("induction-probes: error: "), err
    return err


@pytest.mark.parametrize(
    "name, command",
    [(name, command) for name in ("config.json", "manifest.json") for command in (["info"], ["report"], ["probe"])]
    + [("metrics.jsonl", ["info"]), ("metrics.jsonl", ["report"])],
)
def test_a_named_pipe_in_a_run_is_refused_not_waited_on(run_dir, name, command, capsys):
    (run_dir / name).unlink()
    os.mkfifo(run_dir / name)
    err = one_line([*command, str(run_dir)], capsys)
    assert name in err


def test_the_reader_refuses_links_at_every_level_and_big_or_odd_files(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f").write_text("x")
    (tmp_path / "root" / "a").mkdir(parents=True)
    (tmp_path / "root" / "a" / "b").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(CheckpointError, match="b is a symbolic link"):
        read_bytes(tmp_path / "root" / "a" / "b" / "f", root=tmp_path / "root")
    with pytest.raises(CheckpointError, match="not inside"):
        refuse_links_below(tmp_path / "root", tmp_path / "elsewhere" / "f")
    (tmp_path / "root" / "big").write_bytes(b"x" * 11)
    with pytest.raises(CheckpointError, match="larger"):
        read_bytes(tmp_path / "root" / "big", limit=10, root=tmp_path / "root")
    assert read_bytes(tmp_path / "root" / "big", limit=11, root=tmp_path / "root") == b"x" * 11
    with pytest.raises(CheckpointError, match="not a regular file"):
        read_bytes(tmp_path / "root" / "a", root=tmp_path / "root")


def test_require_finite_names_the_first_number_that_is_not():
    assert require_finite({"a": [1.0, 2]}, "x") == {"a": [1.0, 2]}
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match=r"x\['a'\]\[1\] is not a finite number"):
            require_finite({"a": [1.0, bad]}, "x")


@pytest.mark.parametrize("value", [{"x": 1}, ["HookedTransformer"], 3, None])
def test_a_model_class_that_is_not_a_name_is_one_line(run_dir, value, capsys, tmp_path):
    config = json.loads((run_dir / "config.json").read_text())
    config["model_class"] = value
    (run_dir / "config.json").write_text(json.dumps(config))
    assert "unknown model class" in one_line(["report", str(run_dir), "--html", str(tmp_path / "html")], capsys)


def test_step_true_is_not_step_one(run_dir):
    with pytest.raises(CheckpointError, match="step must be an integer"):
        Run.open(run_dir).load(step=True)
    with pytest.raises(CheckpointError, match="index must be an integer"):
        Run.open(run_dir).entry(index=1.0)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_weights_that_are_not_finite_are_refused_not_probed(run_dir, value, capsys):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    path = run_dir / manifest[-1]["file"]
    weights = load_file(path)
    name = sorted(weights)[0]
    weights[name].view(-1)[0] = value
    save_file(weights, path)
    from induction_probes.circuits.runs.reader import sha256_of

    manifest[-1]["sha256"] = sha256_of(path)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert "not finite" in one_line(["probe", str(run_dir)], capsys)
    with pytest.raises(CheckpointError, match=name):
        Run.open(run_dir).load()
    first = Run.open(run_dir).load(index=0)  # the other checkpoints still load
    assert all(torch.isfinite(p).all() for p in first.parameters())


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_metrics_that_are_not_numbers_are_refused_not_reported(run_dir, constant, capsys):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    lines[-1] = lines[-1].replace('"true": ', f'"true": {constant}, "was": ', 1)
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert "NaN or infinity" in one_line(["report", str(run_dir)], capsys)
    assert "NaN or infinity" in one_line(["report", str(run_dir), "--json"], capsys)


def edit_manifest(run_dir, edit) -> None:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps(edit(manifest)))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m[::-1], "not in increasing step order"),  # its "last" checkpoint would be step 0
        (lambda m: m + m[-1:], "not in increasing step order"),  # a checkpoint listed twice
        (lambda m: [e | {"sequences_seen": "many"} for e in m], "sequences_seen"),
        (lambda m: [e | {"sequences_seen": -5} for e in m], "sequences_seen"),
        (lambda m: [e | {"sequences_seen": True} for e in m], "sequences_seen"),
        (lambda m: [{k: v for k, v in e.items() if k != "sequences_seen"} for e in m], "sequences_seen"),
    ],
)
def test_a_manifest_out_of_order_or_with_counts_that_are_not_counts_is_refused(run_dir, edit, message, capsys):
    edit_manifest(run_dir, edit)
    with pytest.raises(CheckpointError, match=message):
        Run.open(run_dir)
    assert message in one_line(["info", str(run_dir)], capsys)


def test_sequences_seen_that_fall_as_steps_rise_are_refused(run_dir):
    edit_manifest(run_dir, lambda m: m[:-1] + [m[-1] | {"sequences_seen": m[-2]["sequences_seen"] - 1}])
    with pytest.raises(CheckpointError, match="sequences_seen"):
        Run.open(run_dir)


@pytest.mark.parametrize(
    "edit",
    [
        lambda config: config | {"recipe": "x" * 30_000_000},
        lambda config: config | {"task": config["task"] | {"prior": "y" * 30_000_000}},
        lambda config: config | {"model": config["model"] | {"z" * 30_000: 1}},
        lambda config: config | {"model_class": "w" * 30_000},
    ],
)
def test_a_huge_value_in_a_config_is_quoted_in_at_most_a_few_hundred_characters(run_dir, edit, capsys):
    config = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps(edit(config)))
    assert len(one_line(["info", str(run_dir)], capsys)) < 600
