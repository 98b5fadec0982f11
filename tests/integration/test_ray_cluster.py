"""A sweep on a real Ray cluster of three nodes on loopback (a head and two workers, one CPU each) that loses
a worker node while it trains, and whose driver is killed and started again: every cell is reported once, and
the run directories are the bytes of a local sweep of the same spec made in the same test (issue 40)."""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray_cluster_utils = pytest.importorskip("ray.cluster_utils", reason="the ray extra is not installed")
psutil = pytest.importorskip("psutil", reason="Ray's own dependency, to find which node trains a cell")

from induction_probes.circuits.sweeps.sweep_runner import parse_spec, run_sweep  # noqa: E402

COMMAND = Path(sys.executable).with_name("induction-probes")
# six cells of a few seconds each on the loaded 2-core machine; their checkpoints (each with its resume state)
# are at steps 0, 1, 2, 3, 5, 8, 17, 33, 50, 67, 83, 100, 117, 133 and 150: a cell killed between steps 30
# and 110 has checkpoints to resume from and steps left to redo
SPEC = """
recipe = "markov"
seeds = [0, 1, 2, 3, 4, 5]
[base]
k = 3
seq_len = 12
steps = 150
batch_size = 8
eval_seqs = 30
n_checkpoints = 15
"""
CELLS = [f"base/seed-{seed}" for seed in range(6)]
TIMINGS: dict[str, float] = {}  # what the tests measured, printed at the end of the module (pytest -s)


def run_files(root: Path) -> dict[str, bytes]:
    """Every file of every cell (not the sweep's journal, which holds wall times)."""
    return {
        str(f.relative_to(root)): f.read_bytes()
        for f in sorted(root.rglob("*"))
        if f.is_file() and f.name != "sweep.jsonl"
    }


def journal(root: Path) -> list[dict]:
    path = root / "sweep.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def lock_holders(root: Path) -> dict[str, int]:
    """Which process holds each cell's lock now (from /proc/locks: the trainer holds its run's flock while
    it trains), by cell."""
    inodes = {}
    for cell in CELLS:
        try:
            inodes[os.stat(root / cell / "lock").st_ino] = cell
        except FileNotFoundError:
            pass
    holders = {}
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->" or fields[1] != "FLOCK":  # "->": a process waiting for a lock
            continue
        inode = int(fields[5].rsplit(":", 1)[1])
        if inode in inodes:
            holders[inodes[inode]] = int(fields[4])
    return holders


def last_step(run: Path) -> int:
    """The run's last checkpoint (-1 before its first)."""
    try:
        return json.loads((run / "manifest.json").read_text())[-1]["step"]
    except (FileNotFoundError, IndexError):
        return -1


def node_processes(node) -> set[int]:
    """The raylet of a Ray node and every process it started (its workers, which train the cells)."""
    raylet = psutil.Process(node.all_processes["raylet"][0].process.pid)
    return {raylet.pid, *(child.pid for child in raylet.children(recursive=True))}


def kill_now(pids: set[int]) -> None:
    """SIGKILL to each of these processes that still runs (psutil checks that a pid was not reused)."""
    processes = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            processes.append(psutil.Process(pid))
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(processes, timeout=10)


def listening_addresses(nodes) -> set[str]:
    """Where every process of these nodes (GCS, raylets, agents, workers) accepts connections."""
    pids = set()
    for node in nodes:
        for process in (p.process for processes in node.all_processes.values() for p in processes):
            pids |= {process.pid, *(child.pid for child in psutil.Process(process.pid).children(recursive=True))}
    found = set()
    for pid in pids:
        try:
            connections = psutil.Process(pid).net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        found |= {c.laddr.ip for c in connections if c.status == psutil.CONN_LISTEN}
    return found


def progress(root: Path) -> tuple:
    """What a sweep in ``root`` has done so far: its finished cells and each cell's last checkpoint."""
    return len(journal(root)), tuple(last_step(root / cell) for cell in CELLS)


def wait_for(condition, seconds: float, what: str, root: Path | None = None):
    """``condition()``'s first true value, polled; refused once ``seconds`` pass with no progress of the sweep in
    ``root`` (a loaded machine trains slower, not never: a fixed wait failed there), or ``seconds`` in all."""
    deadline, seen = time.monotonic() + seconds, None
    while time.monotonic() < deadline:
        if found := condition():
            return found
        if root is not None and (now := progress(root)) != seen:  # still moving: the wait starts again
            deadline, seen = time.monotonic() + seconds, now
        time.sleep(0.05)
    raise AssertionError(f"timed out: {seconds} s without progress waiting for {what}")


def while_running(driver: subprocess.Popen, condition):
    """``condition``, refused at once with the driver's last words if the driver ended: a sweep that fails as it
    starts would otherwise be a wait timed out, saying nothing of why."""

    def check():
        if driver.poll() is not None:
            raise AssertionError(f"the sweep ended (status {driver.returncode}): {driver.communicate()[1][-2000:]}")
        return condition()

    return check


def finish(driver: subprocess.Popen, root: Path) -> tuple[str, str]:
    """The driver's output once it ends, waiting as long as its sweep makes progress."""
    wait_for(lambda: driver.poll() is not None, 90, "the sweep to end", root)
    return driver.communicate()


@pytest.fixture(scope="module")
def ray_env():
    """Ray's own files (sessions, the address of the latest cluster) in a temporary folder of this test's, so
    that no other Ray user on the machine finds this cluster; short, since Ray's socket paths must be."""
    folder = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    ours = {"RAY_TMPDIR": folder, "OMP_NUM_THREADS": "1", "RAY_ADDRESS": ""}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in ours.items():
            patch.setenv(key, value)
        yield os.environ | ours
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(ray_env):
    """A head and two worker nodes of one CPU each, every one on 127.0.0.1, no dashboard; all of their
    processes are killed at the end, whatever happened (Cluster.shutdown kills the nodes this test started,
    by their process ids: nothing else on the machine)."""
    started = time.perf_counter()
    loopback = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}
    cluster = ray_cluster_utils.Cluster(
        initialize_head=True, head_node_args=loopback | {"include_dashboard": False}, shutdown_at_exit=True
    )
    try:
        workers = [cluster.add_node(**loopback) for _ in range(2)]
        cluster.wait_for_nodes()
        TIMINGS["cluster start (s)"] = time.perf_counter() - started
        yield cluster, workers
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "spec.toml"
    path.write_text(SPEC)
    return path


@pytest.fixture(scope="module")
def local_files(spec_file, tmp_path_factory, ray_env) -> dict[str, bytes]:
    """The reference: the same spec swept on the local process pool, in this test."""
    started = time.perf_counter()
    out = tmp_path_factory.mktemp("local") / "sweep"
    results = run_sweep(parse_spec(spec_file.read_text()), out, workers=2, report=lambda line: None)
    assert [r["status"] for r in results] == ["trained"] * len(CELLS)
    TIMINGS["local reference sweep (s)"] = time.perf_counter() - started
    return run_files(out)


def sweep_command(spec_file: Path, out: Path, address: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [COMMAND, "sweep", spec_file, "--out", out, "--backend", "ray", "--address", address],
        env=env,
        start_new_session=True,  # its own process group: killing it kills the driver, never this test
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def cell_lines(stderr: str) -> list[str]:
    """The cells of the sweep's progress lines ("[3/6] base/seed-2: resumed in 4 s, ...")."""
    return [line.split("] ", 1)[1].split(":", 1)[0] for line in stderr.splitlines() if line.startswith("[")]


def test_a_sweep_that_loses_a_worker_node_finishes_with_the_bytes_of_a_local_sweep(
    cluster, spec_file, local_files, ray_env, tmp_path
):
    started = time.perf_counter()
    ray_cluster, workers = cluster
    doomed = workers[0]
    out = tmp_path / "sweep"
    driver = sweep_command(spec_file, out, ray_cluster.address, ray_env)
    try:

        def a_cell_of_the_doomed_node_part_way():  # a few checkpoints in, some steps left
            on_node = node_processes(doomed)
            for cell, pid in lock_holders(out).items():
                if pid in on_node and 30 <= last_step(out / cell) <= 110:
                    return cell

        doomed_cell = while_running(driver, a_cell_of_the_doomed_node_part_way)
        victim = wait_for(doomed_cell, 90, "a cell trained on the first worker node", out)
        saved_at_kill = last_step(out / victim)
        # the cluster's every process listens on the loopback address only (IPv4, or IPv4-mapped IPv6)
        assert listening_addresses([ray_cluster.head_node, *workers]) <= {"127.0.0.1", "::ffff:127.0.0.1"}
        killed = time.perf_counter()
        dead = node_processes(doomed)
        # the whole node at once, as a machine that is lost: its raylet and workers, then Ray's other processes of
        # it. Ray's SIGKILL to the raylet alone left the cell's worker running: on an idle machine it finished
        # the cell and returned it to the driver (results go to their owner, not through the raylet)
        kill_now(dead)
        ray_cluster.remove_node(doomed, allow_graceful=False)
        workers.remove(doomed)

        def retried():  # another node's worker holds the cell's lock, or has finished it
            holder = lock_holders(out).get(victim)
            return (holder is not None and holder not in dead) or victim in {r["cell"] for r in journal(out)}

        wait_for(retried, 60, "the killed cell to be trained again", out)
        TIMINGS["lost node: kill to the cell's retry (s)"] = time.perf_counter() - killed
        stdout, stderr = finish(driver, out)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    finished = time.perf_counter()
    assert driver.returncode == 0, stderr
    results = journal(out)
    assert sorted(r["cell"] for r in results) == CELLS  # each cell reported done once, none lost
    assert sorted(cell_lines(stderr)) == CELLS
    by_cell = {r["cell"]: r for r in results}
    assert by_cell[victim]["status"] == "resumed", by_cell[victim]  # continued from its checkpoint on another node
    assert {r["status"] for cell, r in by_cell.items() if cell != victim} == {"trained"}
    assert run_files(out) == local_files
    TIMINGS["lost node: the killed cell's last checkpoint, step (of 150)"] = saved_at_kill
    TIMINGS["lost node: its resumed cell's own time (s)"] = by_cell[victim]["seconds"]
    TIMINGS["lost node: kill to sweep end (s)"] = finished - killed
    TIMINGS["lost node: test (s)"] = finished - started


def test_a_killed_driver_started_again_resumes_to_the_bytes_of_a_local_sweep(
    cluster, spec_file, local_files, ray_env, tmp_path
):
    started = time.perf_counter()
    ray_cluster, _ = cluster
    out = tmp_path / "sweep"
    driver = sweep_command(spec_file, out, ray_cluster.address, ray_env)
    try:
        # some cells finished, and another one part way (the driver trains two or three at once)
        two_finished = while_running(driver, lambda: len(journal(out)) >= 2 and lock_holders(out))
        wait_for(two_finished, 90, "two finished cells", out)
    finally:
        if driver.poll() is None:  # else its group is gone, and killpg's error would hide why it ended
            os.killpg(driver.pid, signal.SIGKILL)
        driver.communicate()
    # and its cells' trainers: Ray stops a dead driver's tasks only once it notices, and on an idle machine a cell
    # finished in between (the rerun rightly skipped it, though the dead driver never reported it)
    kill_now(set(lock_holders(out).values()))
    first = {r["cell"]: r["status"] for r in journal(out)}
    assert run_files(out) != local_files  # it really was cut short
    killed = time.perf_counter()
    again = sweep_command(spec_file, out, ray_cluster.address, ray_env)
    stdout, stderr = finish(again, out)
    assert again.returncode == 0, stderr
    second = {r["cell"]: r["status"] for r in journal(out)[len(first) :]}
    assert sorted(second) == CELLS  # every cell once in the second run
    assert {second[cell] for cell in first} == {"skipped"}  # none of the first run's cells trained again
    assert {status for cell, status in second.items() if cell not in first} <= {"trained", "resumed"}
    assert "resumed" in second.values()  # a cell part way when the driver died continued from its checkpoint
    assert run_files(out) == local_files
    TIMINGS["killed driver: cells it had finished"] = len(first)
    TIMINGS["killed driver: second run (s)"] = time.perf_counter() - killed
    TIMINGS["killed driver: test (s)"] = time.perf_counter() - started


def teardown_module():
    print("\n" + "\n".join(f"{key}: {value:.1f}" for key, value in TIMINGS.items()))
