"""Worker processes run only our code and die with their driver (issue 52, B1, B2, B5).

Modules planted in the folder a command is started from (``pickle.py``, ``tomllib.py``, ``safetensors.py``,
``torch.py``, ``sitecustomize.py``) would each write a marker if imported: none may, in the driver, its spawned
workers, multiprocessing's resource tracker or Ray's workers. A sweep's driver killed mid-cell takes its worker
with it, and the same command then resumes the cell rather than finding it busy. Workers come from a fork server
that preloads torch and starts afresh when the environment changes."""

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from plugin_distributions import installed_plugin

from induction_probes.circuits.workers.worker_start import (
    drop_current_folder,
    safe_children,
    start_worker,
    worker_context,
)

BIN = Path(sys.executable).parent
PLANTED = ("pickle", "tomllib", "safetensors", "torch", "sitecustomize")
SPEC = """
recipe = "markov"
seeds = [0]
[base]
k = 2
seq_len = 8
steps = {steps}
batch_size = 4
eval_seqs = 10
n_checkpoints = {checkpoints}
"""


def plant(folder: Path, markers: Path) -> None:
    for name in PLANTED:
        (folder / f"{name}.py").write_text(f"open({str(markers / name)!r}, 'w').close()\n", encoding="utf-8")


def command(args: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    return subprocess.run(
        [str(BIN / "induction-probes"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def hostile_folder(tmp_path) -> tuple[Path, Path]:
    folder, markers = tmp_path / "here", tmp_path / "markers"
    folder.mkdir()
    markers.mkdir()
    plant(folder, markers)
    (folder / "spec.toml").write_text(SPEC.format(steps=3, checkpoints=2), encoding="utf-8")
    return folder, markers


def test_the_planted_modules_would_run_from_the_current_folder(hostile_folder):
    # the hazard is real: a plain `python -c` started there imports them (sitecustomize only where the folder
    # is on the path before `site` runs, as PYTHONPATH=. would put it)
    folder, markers = hostile_folder
    subprocess.run([sys.executable, "-c", "import tomllib"], cwd=folder, check=True, env={"PATH": os.environ["PATH"]})
    assert (markers / "tomllib").exists()


def test_sweep_and_summarize_import_nothing_from_the_current_folder(hostile_folder):
    folder, markers = hostile_folder
    swept = command(["sweep", "spec.toml", "--out", "runs", "--workers", "1"], folder)
    assert swept.returncode == 0, swept.stderr
    assert "trained" in swept.stdout
    summary = command(["summarize", "runs", "--json"], folder)
    assert summary.returncode == 0, summary.stderr
    assert json.loads(summary.stdout)
    assert sorted(p.name for p in markers.iterdir()) == []


@pytest.mark.slow
def test_ray_workers_import_nothing_from_the_drivers_folder(hostile_folder):
    folder, markers = hostile_folder
    swept = command(["sweep", "spec.toml", "--out", "runs", "--workers", "1", "--backend", "ray"], folder)
    assert swept.returncode == 0, swept.stderr
    assert "trained" in swept.stdout
    assert sorted(p.name for p in markers.iterdir()) == []


def test_safe_children_sets_and_restores_the_flag(monkeypatch):
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    with safe_children():
        flag = subprocess.run([sys.executable, "-c", "import sys; print(sys.flags.safe_path)"], capture_output=True)
    assert flag.stdout.strip() == b"True" and "PYTHONSAFEPATH" not in os.environ


def test_drop_current_folder_removes_every_spelling_of_it_unless_pythonpath_declares_it(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr(sys, "path", ["", ".", str(tmp_path), "/usr/lib/python3"])
    drop_current_folder()
    assert sys.path == ["/usr/lib/python3"]
    monkeypatch.setenv("PYTHONPATH", ".")  # the documented way to run a plugin beside you: kept
    monkeypatch.setattr(sys, "path", ["", str(tmp_path), "/usr/lib/python3"])
    drop_current_folder()
    assert sys.path == [str(tmp_path), "/usr/lib/python3"]


def worker_state() -> tuple[str | None, bool]:
    """What a worker sees at its first task: the test's mark, and whether torch came preloaded."""
    return os.environ.get("INDUCTION_PROBES_TEST_MARK"), "torch" in sys.modules


def test_workers_start_with_torch_loaded_and_the_environment_of_their_pool(monkeypatch):
    states = []
    for mark in ("first", "second"):  # a changed environment starts the fork server afresh
        monkeypatch.setenv("INDUCTION_PROBES_TEST_MARK", mark)
        with safe_children(), ProcessPoolExecutor(1, mp_context=worker_context(), initializer=start_worker) as pool:
            states.append(pool.submit(worker_state).result(timeout=120))
    assert states == [("first", True), ("second", True)]


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the workers in /proc")
def test_a_killed_drivers_worker_stops_and_the_rerun_resumes(tmp_path):
    (tmp_path / "spec.toml").write_text(SPEC.format(steps=600, checkpoints=30), encoding="utf-8")
    args = [str(BIN / "induction-probes"), "sweep", "spec.toml", "--out", "runs", "--workers", "1"]
    driver = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cell = tmp_path / "runs" / "base" / "seed-0"
    deadline = time.monotonic() + 120
    while not (cell / "resume").exists() and time.monotonic() < deadline:  # training, with a resume state
        time.sleep(0.5)
    assert (cell / "resume").exists(), "the worker never wrote a resume state"
    workers = [c for c in children(driver.pid) if "python" in Path(f"/proc/{c}/cmdline").read_text()]
    assert workers
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 20
    while any(alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(w) for w in workers), "a worker outlived its driver"
    again = command(["sweep", "spec.toml", "--out", "runs", "--workers", "1"], tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr
    assert "resumed" in again.stdout and "busy" not in again.stdout


@pytest.mark.slow
def test_plugins_beside_you_and_installed_ones_reach_the_workers(tmp_path):
    # docs/extending.md's way to run a plugin from the current folder: PYTHONPATH=. declares it, so the workers
    # keep it (only the implicit entry goes); and issue 50's installed plugin, an entry point every process of the
    # tool imports: the driver and the worker each write their process id
    from test_extending import PLUGIN

    (tmp_path / "first_token_plugin.py").write_text(PLUGIN)
    (tmp_path / "spec.toml").write_text('recipe = "first-token"\nseeds = [0]\n[base]\nsteps = 2\nn_checkpoints = 2\n')
    marks = tmp_path / "marks"
    marks.mkdir()
    # the installed plugin writes the id of each process that imports it
    installed_plugin(
        tmp_path, "pid_plugin", f"import os\nopen(os.path.join({str(marks)!r}, str(os.getpid())), 'w').close()\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([".", str(Path(__file__).parent)]),
        "INDUCTION_PROBES_PLUGINS": "first_token_plugin",
    }
    args = [str(BIN / "induction-probes"), "sweep", "spec.toml", "--out", "runs", "--workers", "1"]
    swept = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = swept.communicate(timeout=300)
    assert swept.returncode == 0 and "1 trained" in output, output
    pids = {int(path.name) for path in marks.iterdir()}
    assert swept.pid in pids and len(pids) >= 2, (swept.pid, pids)  # the driver's import, and a worker's
