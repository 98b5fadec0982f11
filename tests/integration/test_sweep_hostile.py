"""Sweeps and summaries against a stranger's folder or a careless spec (issue 26): caps checked before
anything is made, links at any level below the sweep, statuses that are what the cells' own files say,
summaries that count only this spec's runs and never print a number that is not one."""

import fcntl
import json
import multiprocessing
import os
import signal
import socket
import time

import pytest

from induction_probes.circuits.sweeps.sweep_runner import (
    SpecError,
    cell_json,
    parse_spec,
    prepare,
    read_spec,
    run_cell,
    run_sweep,
)
from induction_probes.cli import main

TINY = """
recipe = "markov"
seeds = [{seeds}]
[base]
k = 2
seq_len = 8
steps = {steps}
batch_size = 4
eval_seqs = 10
n_checkpoints = 2
"""


def tiny(seeds="0", steps=2, extra="") -> str:
    return TINY.format(seeds=seeds, steps=steps) + extra


def one_line(argv, capsys, status=2) -> str:
    assert main(argv) == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("induction-probes: error: "), err
    return err


@pytest.mark.parametrize(
    "base, extra, message",
    [
        (
            "",
            "[grid]\n"
            + "".join(
                f"{key} = [{', '.join(str(v) for v in range(1, 2001))}]\n"
                for key in ("steps", "eval_seqs", "batch_size")
            ),
            "above the limit of 10,000",
        ),
        ("", "[conditions." + "a" * 300 + "]\n", "300 characters"),
        ('heads = "2,1"', "", "heads = [2, 1]"),
        ("heads = " + "[" * 5000 + "]" * 5000, "", "nested too deeply"),
    ],
)
def test_a_spec_that_would_be_too_big_or_is_badly_named_is_refused_at_once(base, extra, message, tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(tiny(extra=extra).replace("k = 2", f"k = 2\n{base}"))
    started = time.monotonic()
    assert message in one_line(["sweep", str(spec), "--out", str(tmp_path / "out")], capsys)
    assert time.monotonic() - started < 10  # the 8-billion-cell grid took 8 GB and 48 s before the cap
    assert not (tmp_path / "out").exists()  # nothing claimed the folder


@pytest.mark.parametrize("n_seeds, message", [(20_000, "above the limit of 10,000"), (200_000, "larger than")])
def test_many_seeds_are_refused_by_count_or_by_the_size_of_the_spec(n_seeds, message, tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(tiny(seeds=", ".join(map(str, range(n_seeds)))))
    started = time.monotonic()
    assert message in one_line(["sweep", str(spec), "--out", str(tmp_path / "out")], capsys)
    assert time.monotonic() - started < 10  # 200,000 seeds were still parsing after 90 s


@pytest.mark.parametrize("command", ["sweep", "summarize"])
@pytest.mark.parametrize("kind", ["huge", "pipe"])
def test_a_huge_or_piped_spec_in_the_folder_is_not_read(command, kind, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    if kind == "huge":
        with open(out / "spec.toml", "wb") as handle:
            handle.truncate(3 << 30)  # sparse: 3 GB that take no disk
    else:
        os.mkfifo(out / "spec.toml")
    spec = tmp_path / "mine.toml"
    spec.write_text(tiny())
    argv = ["sweep", str(spec), "--out", str(out)] if command == "sweep" else ["summarize", str(out)]
    err = one_line(argv, capsys)
    assert ("larger than" if kind == "huge" else "not a regular file") in err


def test_reordered_seeds_are_the_same_sweep(tmp_path):
    prepare(parse_spec(tiny(seeds="0, 1, 2")), tmp_path / "out")
    prepare(parse_spec(tiny(seeds="2, 0, 1")), tmp_path / "out")
    with pytest.raises(SpecError, match="holds another sweep"):
        prepare(parse_spec(tiny(seeds="0, 1")), tmp_path / "out")


def test_a_linked_condition_or_cell_folder_gets_no_file_not_even_a_lock(tmp_path):
    spec = parse_spec(tiny())
    (cell,) = [cell_json(c) for c in spec.cells()]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for linked in ("base", "base/seed-0"):
        out = tmp_path / f"out-{linked.count('/')}"
        prepare(spec, out)
        (out / linked).parent.mkdir(parents=True, exist_ok=True)
        (out / linked).symlink_to(elsewhere, target_is_directory=True)
        result = run_cell(str(out), cell)
        assert result["status"] == "failed" and "symbolic link" in result["error"]
        assert list(elsewhere.iterdir()) == []


def test_the_sweep_writes_nothing_through_a_linked_condition_folder(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(tiny())
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    prepare(read_spec(spec), out)
    (out / "base").symlink_to(elsewhere, target_is_directory=True)
    assert main(["sweep", str(spec), "--out", str(out)]) == 1
    assert "base/seed-0: failed" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == []


def test_a_cell_finished_or_held_by_another_sweep_is_not_failed(tmp_path):
    spec = parse_spec(tiny())
    (cell,) = [cell_json(c) for c in spec.cells()]
    out = tmp_path / "out"
    prepare(spec, out)
    assert run_cell(str(out), cell)["status"] == "trained"
    assert run_cell(str(out), cell)["status"] == "skipped"  # it was AttributeError: 'NoneType' ... model_config
    other = tmp_path / "other"
    prepare(parse_spec(tiny(steps=3)), other)
    (other / "base" / "seed-0").mkdir(parents=True)
    with open(other / "base" / "seed-0" / "lock", "w") as lock:  # another sweep training the same cell
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = run_cell(str(other), cell_json(parse_spec(tiny(steps=3)).cells()[0]))
    assert result["status"] == "busy"


def test_a_killed_worker_fails_at_most_its_own_cell(tmp_path):
    spec = parse_spec(tiny(seeds="0, 1, 2, 3", steps=40))
    killed = []

    def kill_the_worker(line):
        if not killed:  # after the first cell: the worker is on the second, the others are queued
            for child in multiprocessing.active_children():
                os.kill(child.pid, 9)
                killed.append(child.pid)

    results = run_sweep(spec, tmp_path / "out", report=kill_the_worker)
    assert killed
    statuses = [r["status"] for r in results]
    assert statuses.count("failed") <= 1 and statuses.count("trained") >= 3, results
    again = run_sweep(spec, tmp_path / "out", report=lambda line: None)
    assert {r["status"] for r in again} <= {"skipped", "resumed", "trained"}


def unused_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_ray_address_where_nothing_listens_is_one_line_within_a_minute(tmp_path, capsys):
    spec = tmp_path / "spec.toml"
    spec.write_text(tiny())
    started = time.monotonic()
    address = f"127.0.0.1:{unused_loopback_port()}"
    err = one_line(
        ["sweep", str(spec), "--out", str(tmp_path / "out"), "--backend", "ray", "--address", address], capsys
    )
    assert time.monotonic() - started < 60 and f"no Ray cluster answers at {address}" in err
    assert not (tmp_path / "out").exists()  # refused before the folder was claimed


def test_the_device_of_a_remote_cluster_is_left_to_the_sweep(tmp_path, capsys):
    """--device cuda names the cluster's GPUs, not this machine's: the command line used to refuse it here
    ("this machine has no CUDA GPU") before the sweep's own check, which reads a cluster's device by name."""
    spec = tmp_path / "spec.toml"
    spec.write_text(tiny())
    address = f"127.0.0.1:{unused_loopback_port()}"
    argv = ["sweep", str(spec), "--out", str(tmp_path / "out"), "--backend", "ray", "--address", address]
    started = time.monotonic()
    err = one_line([*argv, "--device", "cuda", "--gpus-per-cell", "1"], capsys)
    assert f"no Ray cluster answers at {address}" in err and time.monotonic() - started < 60
    assert "is not a device" in one_line([*argv, "--device", "gpu"], capsys)  # still checked, by name
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory):
    """A finished two-seed sweep, trained in this process (each cell through the sweep's own run_cell)."""
    out = tmp_path_factory.mktemp("sweep") / "out"
    spec = parse_spec(tiny(seeds="0, 1"))
    prepare(spec, out)
    assert [run_cell(str(out), cell_json(c))["status"] for c in spec.cells()] == ["trained", "trained"]
    return out


@pytest.fixture
def sweep_dir(finished_sweep, tmp_path):
    import shutil

    shutil.copytree(finished_sweep, tmp_path / "out", symlinks=True)
    return tmp_path / "out"


def edit_metrics(path, edit):
    lines = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    (path / "metrics.jsonl").write_text("".join(json.dumps(edit(m)) + "\n" for m in lines))


def test_a_summary_counts_only_this_specs_finished_runs(sweep_dir, tmp_path, capsys):
    assert main(["summarize", str(sweep_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["conditions"]["base"]["n_seeds"] == 2
    from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
    from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
    from induction_probes.circuits.training.train_loop import train_run

    cell = sweep_dir / "base" / "seed-1"
    moved = tmp_path / "moved"
    cell.rename(moved)
    cell.symlink_to(moved, target_is_directory=True)  # the same run, linked from outside the sweep
    assert "symbolic link" in one_line(["summarize", str(sweep_dir)], capsys)
    cell.unlink()
    train_run(
        MarkovRecipe(task=MarkovTask(k=3, seq_len=8), steps=2, batch_size=4, eval_seqs=10, n_checkpoints=2),
        cell,
        progress=False,
    )  # a k = 3 run in a k = 2 sweep
    assert "another recipe" in one_line(["summarize", str(sweep_dir)], capsys)


@pytest.mark.parametrize("tamper", ["no kl", "nan", "infinity"])
def test_tampered_metrics_are_one_line_not_a_number(sweep_dir, tamper, capsys):
    value = {"nan": float("nan"), "infinity": float("inf")}.get(tamper)
    edit = (
        (lambda m: {k: v for k, v in m.items() if k != "last_token_kl"})
        if tamper == "no kl"
        else (lambda m: m | {"last_token_kl": m["last_token_kl"] | {"true": value}})
    )
    edit_metrics(sweep_dir / "base" / "seed-0", edit)
    for argv in (["summarize", str(sweep_dir)], ["summarize", str(sweep_dir), "--json"]):
        err = one_line(argv, capsys)
        assert "metrics.jsonl" in err and "Traceback" not in err


@pytest.mark.parametrize("kind", ["named pipe", "folder", "link"])
@pytest.mark.parametrize("command", ["sweep", "train"])
def test_a_pipe_folder_or_link_at_the_journal_or_a_lock_is_one_line_not_a_hang(kind, command, tmp_path, capsys):
    # issue 52 (B4): a named pipe at sweep.jsonl held the sweep for ever, as one at a run's lock held its trainer;
    # a folder or a link there gave status 1
    spec = tmp_path / "spec.toml"
    spec.write_text(tiny())
    out = tmp_path / "out"
    out.mkdir()
    target = out / ("sweep.jsonl" if command == "sweep" else "lock")
    if kind == "named pipe":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    else:
        target.symlink_to(tmp_path / "elsewhere")
    argv = ["sweep", str(spec)] if command == "sweep" else ["train", "markov", "--k", "2", "--steps", "2"]
    signal.alarm(120)  # a hang fails the test instead of holding the suite
    try:
        err = one_line([*argv, "--out", str(out)], capsys)
    finally:
        signal.alarm(0)
    assert f"{target} is {'a ' + kind if kind != 'link' else 'a symbolic link'}, not a regular file" in err, err
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("claimed", [False, True])
def test_an_interrupted_sweep_mentions_continuing_only_where_there_is_something_to_continue(claimed, tmp_path):
    # issue 52 (item 5): Ctrl-C said "run the same command again to continue" even before anything was made.
    # The interrupt is raised where Ctrl-C would land (inside run_sweep), before or after the folder is claimed.
    from induction_probes.probes.report import sweeps

    spec = tmp_path / "spec.toml"
    spec.write_text(tiny())
    out = tmp_path / "out"

    def interrupted(parsed, folder, **options):
        if claimed:
            prepare(parsed, folder).close()
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sweeps, "run_sweep", interrupted)
        with pytest.raises(KeyboardInterrupt) as stop:
            sweeps.sweep_report(spec, out)
    said = str(stop.value)
    assert ("run the same command again" in said) == claimed
    assert ("nothing was trained" in said) == (not claimed)


@pytest.mark.parametrize("damage", ["checkpoint cut in half", "metrics line cut in half"])
def test_a_finished_cell_damaged_since_is_reported_never_skipped(damage, tmp_path, capsys):
    # issue 52: a finished cell whose last checkpoint or metrics line was cut short was "skipped", status 0
    spec = tmp_path / "spec.toml"
    spec.write_text(tiny(steps=3))
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out)]) == 0
    cell = out / "base" / "seed-0"
    last = json.loads((cell / "manifest.json").read_text())[-1]["file"]
    victim = cell / last if damage.startswith("checkpoint") else cell / "metrics.jsonl"
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) - 40])
    capsys.readouterr()
    assert main(["sweep", str(spec), "--out", str(out)]) == 1
    said = capsys.readouterr()
    assert "skipped" not in said.err + said.out
    assert "finished but damaged" in said.err + said.out and "remove" in said.err + said.out


def test_a_sweep_says_where_its_cells_are_while_none_finishes(tmp_path, monkeypatch):
    # issue 52 (sweeps): nothing was printed for 4 minutes while the first cells trained
    import re

    from induction_probes.circuits.sweeps import sweep_runner as sweep

    monkeypatch.setattr(sweep, "HEARTBEAT_SECONDS", 0.5)
    lines = []
    results = run_sweep(parse_spec(tiny(steps=600)), tmp_path / "out", report=lines.append)
    assert [r["status"] for r in results] == ["trained"]
    beats = [line for line in lines if line.startswith("training: ")]
    assert beats and all(re.fullmatch(r"training: base/seed-0 (starting|at step \d+ of 600)", b) for b in beats)
    steps = [int(m.group(1)) for b in beats if (m := re.search(r"at step (\d+)", b))]
    assert steps and steps == sorted(steps)  # read from the cell's metrics as they grow


def test_a_spec_that_shortens_a_cosine_schedule_is_told_so():
    # issue 52 (sweeps): a sweep of "the default recipe" at steps = 800 rescaled its cosine decay without a word
    from induction_probes.circuits.sweeps.sweep_spec import schedule_notes

    short = parse_spec('recipe = "markov"\nseeds = [0, 1]\n[base]\nk = 3\nsteps = 800\n')
    notes = schedule_notes(short.cells())
    assert notes == [
        "note: condition base trains 800 steps where the markov recipe's default is 4000: its cosine learning-rate "
        "decay is rescaled to end at step 800, so its schedule is not the default recipe's (schedule_steps = 4000 "
        'keeps the default\'s rates, cut at step 800; lr_schedule = "constant" keeps the rate fixed)'
    ]
    kept = parse_spec('recipe = "markov"\nseeds = [0]\n[base]\nk = 3\nsteps = 800\nschedule_steps = 4000\n')
    assert schedule_notes(kept.cells()) == []  # the spec chose the span: nothing to tell
    assert schedule_notes(parse_spec('recipe = "markov"\nseeds = [0]\n[base]\nk = 3\n').cells()) == []
    constant = parse_spec('recipe = "markov"\nseeds = [0]\n[base]\nk = 3\nsteps = 800\nlr_schedule = "constant"\n')
    assert schedule_notes(constant.cells()) == []
