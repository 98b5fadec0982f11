"""Many runs from one experiment spec (``circuits/sweeps/sweep_spec.py``), each a standard run directory, on a
local process pool or a Ray cluster, resumable cell by cell. A cell's directory is
``DIR/<condition>[/<key>=<value>...]/seed-<S>``; the sweep writes its spec into ``DIR/spec.toml`` and a line
per finished cell, with its wall time, into ``DIR/sweep.jsonl``, which it holds locked while it runs (one sweep
at a time in a directory).

Reading and checking a spec needs no torch: the trainer, the run files and the pools are imported in the
functions that prepare or run cells (Ray only for ``--backend ray``)."""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import time
from pathlib import Path

from induction_probes.circuits.common.registry import outside_registrations, register_again
from induction_probes.circuits.recipes import recipe_from_json
from induction_probes.circuits.sweeps.sweep_spec import (  # noqa: F401 (the sweep's API: spec and running in one import)
    LOG_FILE,
    SPEC_FILE,
    Cell,
    Spec,
    SpecError,
    parse_spec,
    read_spec,
)


def cell_status(path: Path, recipe, root: Path) -> str:
    """Whether a cell directory of the sweep in ``root`` is new, done or partial, from its own files; a
    SpecError if it holds another recipe, a CheckpointError if a link sits anywhere on the way below ``root``
    (a linked condition folder would put a run, or its lock, outside the sweep)."""
    from induction_probes.circuits.common.untrusted import refuse_links_below

    refuse_links_below(root, path, why="a sweep reads and writes only inside its own directory")
    config_path = path / "config.json"
    if not config_path.exists():
        return "new"
    from induction_probes.circuits.training.train import saved_recipe

    if saved_recipe(path) != recipe:
        raise SpecError(f"{path} holds a run of another recipe than this spec's")
    return "done" if is_finished(path) else "partial"


def is_finished(path: Path) -> bool:
    """Whether ``path`` holds a run that trained every step of its recipe and saved its last resume state."""
    from induction_probes.circuits.runs.layout import RESUME_FILE
    from induction_probes.circuits.runs.reader import read_manifest
    from induction_probes.circuits.training.train import saved_recipe

    if not (path / "config.json").is_file() or not (path / "manifest.json").is_file():
        return False
    steps = [entry["step"] for entry in read_manifest(path)]
    recipe = saved_recipe(path)
    resumable = recipe.name != "toy"  # the toy's loop saves no resume state: its last checkpoint ends it
    return bool(steps) and steps[-1] == recipe.steps and (not resumable or (path / RESUME_FILE).is_file())


def run_cell(root: str, cell_json: dict) -> dict:
    """Train one unfinished cell (fresh, or continued where it stopped) in its own process; never raises:
    a failure is reported in the result so that it never takes the other cells down."""
    import torch

    from induction_probes.circuits.training.train import RunLocked, train_run

    torch.set_num_threads(1)
    started = time.perf_counter()
    register_again(cell_json.get("registrations", []))  # the tasks, recipes, probes, priors its parent registered
    recipe = recipe_from_json(cell_json["recipe"], cell_json["task"])
    path = Path(root) / cell_json["path"]
    result = {"cell": cell_json["path"], "status": "", "seconds": 0.0, "error": None}
    try:
        status = cell_status(path, recipe, Path(root))
        if status == "done":  # finished by another sweep since this one looked
            return result | {"status": "skipped"}
        if recipe.name == "toy":
            final_kl = train_toy_cell(recipe, path, status, cell_json.get("device"))
        else:
            run = train_run(
                recipe if status == "new" else None,
                path,
                resume=status == "partial",
                progress=False,
                device=cell_json.get("device"),
            )
            final_kl = run.metrics()[-1].get("last_token_kl", {}).get("true")
        result |= {"status": "trained" if status == "new" else "resumed", "final_kl": final_kl}
    except RunLocked:  # another sweep (or trainer) is training it now: its status is that one's to report
        result |= {"status": "busy", "error": "another process is training this cell"}
    except Exception as error:  # noqa: BLE001 -- reported per cell, the sweep goes on
        result |= {"status": "failed", "error": f"{type(error).__name__}: {error}".splitlines()[0]}
    return result | {"seconds": round(time.perf_counter() - started, 2)}


def train_toy_cell(recipe, path: Path, status: str, device: str | None) -> None:
    """A toy cell (``train_toy``: seconds, no resume state): trained from its first step; an interrupted one
    is refused, since its files cannot be continued."""
    from induction_probes.circuits.training.toy import train_toy

    if status == "partial":
        raise SpecError(f"{path} holds an interrupted toy run, which cannot be resumed: remove it and run again")
    train_toy(recipe, path, device=device)
    return None  # a toy run has no KL


def died(cell: dict, error: Exception) -> dict:
    """The result of a cell whose worker process died before it could report."""
    message = f"{type(error).__name__}: {error}".splitlines()[0]
    return {"cell": cell["path"], "status": "failed", "seconds": 0.0, "error": f"its worker died ({message})"}


def cell_json(cell: Cell) -> dict:
    return {
        "path": cell.relative_path,
        "recipe": cell.recipe.to_json(),
        "task": cell.recipe.task.to_json(),
        "registrations": outside_registrations(),
    }


class SweepBusy(SpecError):
    """Another sweep is running in the directory (it holds the lock on its journal)."""


def prepare(spec: Spec, out: Path):
    """Claim ``out`` for this spec (a new or empty directory, or one holding the same spec) and return its
    journal, open for appending and locked for as long as it stays open: a second sweep on the same
    directory is refused at once (SweepBusy) instead of racing this one for its cells and its journal.
    The lock dies with its process, so a killed sweep leaves none behind."""
    from induction_probes.circuits.runs.writer import write_atomic  # torch comes with it: not needed to parse a spec

    refuse_another_sweep(spec, out)  # before anything is made: a refusal leaves the folder as it was
    out.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a link planted at the journal's name is refused, not followed
    descriptor = os.open(out / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    journal = os.fdopen(descriptor, "a")
    try:
        try:
            fcntl.flock(journal, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SweepBusy(
                f"another sweep is running in {out}; wait for it to finish or choose another --out"
            ) from None
        refuse_another_sweep(spec, out)  # again, under the lock: another sweep may have claimed it meanwhile
        write_atomic(out / SPEC_FILE, spec.text.encode())  # the same cells: a new description or count is taken up
    except BaseException:
        journal.close()
        raise
    return journal


def refuse_another_sweep(spec: Spec, out: Path) -> None:
    """Refuse a directory that holds another spec's cells, or files and no sweep (a journal alone is what a
    sweep killed before it wrote its spec leaves)."""
    saved = out / SPEC_FILE
    if saved.exists() or saved.is_symlink():  # a pipe or a link there too: read_spec says why it is refused
        # the same cells in any order (seeds listed anew, say) are the same sweep
        if set(read_spec(saved, out).cells()) != set(spec.cells()):
            raise SpecError(f"{out} holds another sweep (its {SPEC_FILE} differs); choose another --out")
    elif out.exists() and any(path.name != LOG_FILE for path in out.iterdir()):
        raise SpecError(f"{out} is not empty and holds no sweep; choose a new or empty --out")


def place_cells(cells: list[dict], device: str | None, gpus_per_cell: float, n_gpus: int) -> list[dict]:
    """Each cell with the device it trains on: ``device`` (default cpu), or with ``gpus_per_cell`` the
    visible GPUs in turn (cell i on cuda:(i mod n_gpus)); several processes share a GPU when fewer
    GPUs than workers are visible, as a fraction asks."""
    if not gpus_per_cell:
        return [cell | {"device": device} for cell in cells]
    return [cell | {"device": f"cuda:{index % n_gpus}"} for index, cell in enumerate(cells)]


def check_placement(device: str | None, gpus_per_cell: float, n_gpus: int | None, ray: bool = False) -> None:
    """Refuse, before anything is written, a GPU share that is not a number in (0, 1] or a whole number
    of GPUs, a share beside a non-CUDA ``device``, GPUs asked of a machine without one (``n_gpus``
    None: not known here, a Ray cluster's), and on Ray a CUDA device without a share (Ray hands a task
    a GPU only for the share it asks: without one, every cell would share cuda:0 unscheduled)."""
    if (
        isinstance(gpus_per_cell, bool)
        or not isinstance(gpus_per_cell, (int, float))
        or not (gpus_per_cell == 0 or 0 < gpus_per_cell <= 1 or float(gpus_per_cell).is_integer() and gpus_per_cell > 0)
    ):
        raise SpecError(
            f"--gpus-per-cell must be a fraction in (0, 1] or a whole number of GPUs, got {gpus_per_cell!r}"
        )
    if gpus_per_cell and device is not None and not device.startswith("cuda"):
        raise SpecError(f"--gpus-per-cell places cells on CUDA GPUs; it cannot go with --device {device}")
    if gpus_per_cell and n_gpus == 0:
        raise SpecError(f"--gpus-per-cell {gpus_per_cell:g} asks for a GPU, but this machine has no CUDA GPU")
    if ray and not gpus_per_cell and device is not None and device.startswith("cuda"):
        raise SpecError(f"with --backend ray, --device {device} needs --gpus-per-cell (each cell's share of a GPU)")


def local_results(root: Path, cells: list[dict], workers: int):
    """Run cells on a pool of ``workers`` processes (spawned: a clean torch in each), yielding results as
    they finish. A worker that dies (killed, out of memory) breaks the whole pool: the cells whose files
    it never touched are queued again on a fresh pool (at most twice each), the others failed."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    queue, tries = list(cells), dict.fromkeys((cell["path"] for cell in cells), 0)
    while queue:
        before = {cell["path"]: fingerprint(root / cell["path"]) for cell in queue}
        broken = []
        with ProcessPoolExecutor(min(workers, len(queue)), mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(run_cell, str(root), cell): cell for cell in queue}
            for future in as_completed(futures):
                try:
                    yield future.result()
                except Exception as error:  # noqa: BLE001 -- run_cell never raises: its worker died
                    broken.append((futures[future], error))
        queue = []
        for cell, error in broken:
            tries[cell["path"]] += 1
            if fingerprint(root / cell["path"]) == before[cell["path"]] and tries[cell["path"]] <= 2:
                queue.append(cell)
            else:
                yield died(cell, error)


def fingerprint(path: Path) -> list[tuple]:
    """Every file below ``path`` with its size and modification time (links not followed): what a worker
    changes as soon as it starts a cell."""
    found = []
    for folder, _, files in os.walk(path):
        for name in files:
            status = os.lstat(os.path.join(folder, name))
            found.append((os.path.join(folder, name), status.st_size, status.st_mtime_ns))
    return sorted(found)


RAY_CONNECT_SECONDS = 10  # to reach a cluster's address before Ray's own, much longer, retries begin


def ray_address_answers(address: str) -> None:
    """Refuse a ``host:port`` (or ``ray://host:port``) where nothing listens, within seconds: ``ray.init``
    itself retries such an address for minutes. Other forms (``auto``) are left to Ray."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_SECONDS).close()
    except OSError as error:
        raise SpecError(
            f"no Ray cluster answers at {address} ({error.strerror or error}): start one with "
            "`ray start --head`, or leave out --address for a local instance"
        ) from None


def keep_local_ray_on_loopback() -> None:
    """Ray reads its clusters switch once, when it is imported, and the processes it starts read it from the
    environment: a program that imported Ray before the sweep set the variable would still get this machine's
    network address, so the in-process constant follows the variable too (unless the user set it to 1)."""
    from ray._private import ray_constants

    if os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0":
        ray_constants.ENABLE_RAY_CLUSTER = False


def answers_on_loopback_only(address: str) -> bool:
    """Whether ``address`` is a cluster on this machine's loopback that answers there only (its nodes started
    with ``--node-ip-address 127.0.0.1``). Ray replaces a loopback address by this machine's network address,
    where such a cluster does not listen, and then retries for minutes; its own loopback mode keeps it."""
    import socket

    from ray._private.services import node_ip_address_from_perspective

    host, _, port = address.rpartition(":")
    if address.startswith("ray://") or host.strip("[]") not in ("127.0.0.1", "localhost", "::1") or not port.isdigit():
        return False
    try:
        socket.create_connection((node_ip_address_from_perspective(), int(port)), timeout=2).close()
    except OSError:
        return True
    return False


def ray_results(
    root: Path, cells: list[dict], workers: int, address: str | None, report=print, gpus_per_cell: float = 0.0
):
    """Run cells as Ray tasks of one CPU (and ``gpus_per_cell`` GPUs) each: on the cluster at ``address``,
    or on a local Ray instance of ``workers`` CPUs, bound to this machine's loopback address only. Every node
    must see ``root`` at the same path (a shared filesystem). Ray gives a task its GPU share through
    CUDA_VISIBLE_DEVICES, so it trains on cuda."""
    if address is None:
        # Ray takes this machine's network address for a node unless clusters are off, as on macOS: then its
        # head, its workers and the processes they start listen on the loopback address only
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise SpecError("the ray backend needs Ray: pip install 'induction-probes[ray]'") from None
    if address is None or answers_on_loopback_only(address):
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        keep_local_ray_on_loopback()
    if address is None:
        # "local": a new instance, never the cluster that a `ray start` on this machine last recorded
        context = ray.init(address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False)
        where = context.address_info["gcs_address"]
        local = where.rpartition(":")[0] in ("127.0.0.1", "localhost", "[::1]")
        report(f"a local Ray instance at {where}" + (" (this machine only)" if local else ""))
    else:
        ray.init(address=address, log_to_driver=False)
    try:
        gpus = ray.cluster_resources().get("GPU", 0)
        if gpus_per_cell > gpus:  # Ray would wait forever for a GPU that is not there
            raise SpecError(f"--gpus-per-cell {gpus_per_cell:g} asks for more GPUs than the Ray cluster has ({gpus:g})")
        # a task whose worker or node dies is run again (Ray's default of 3 retries, kept whatever Ray's default
        # becomes): run_cell then finds the cell partial and resumes it from its last checkpoint, on any node
        remote = ray.remote(num_cpus=1, num_gpus=gpus_per_cell, max_retries=3)(run_cell)
        if gpus_per_cell:
            cells = [cell | {"device": "cuda"} for cell in cells]
        pending = {remote.remote(str(root), cell): cell for cell in cells}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            cell = pending.pop(done[0])
            try:
                yield ray.get(done[0])
            except Exception as error:  # noqa: BLE001 -- a worker that died
                yield died(cell, error)
    finally:
        ray.shutdown()


def already_done(out: Path, cell: dict, recipe) -> bool:
    """Whether a cell is finished; a cell that cannot be looked at (a link on its way) goes to its worker,
    which reports why, in that cell's line, while the others run."""
    try:
        return cell_status(out / cell["path"], recipe, out) == "done"
    except ValueError:
        return False


def run_sweep(
    spec: Spec,
    out: str | Path,
    *,
    workers: int = 1,
    backend: str = "local",
    address: str | None = None,
    report=print,
    device: str | None = None,
    gpus_per_cell: float = 0.0,
) -> list[dict]:
    """Train every cell of ``spec`` under ``out``; finished cells are skipped, interrupted ones resumed.
    ``report`` gets one line per finished cell. Returns the cells' results in spec order. Cells train on
    ``device`` (default cpu), or with ``gpus_per_cell`` on a share of a GPU each: Ray's ``num_gpus``, or
    the local pool's visible GPUs in turn."""
    if backend not in ("local", "ray"):
        raise SpecError(f"backend must be local or ray, got {backend!r}")
    if not isinstance(workers, int) or workers < 1:
        raise SpecError(f"workers must be an integer >= 1, got {workers!r}")
    if address is not None and backend != "ray":
        raise SpecError("--address is for the ray backend")
    from induction_probes.circuits.common.devices import parse_device, resolve_device, visible_gpus

    if device is not None:
        parse_device(device)  # a name that is no device, on any backend: offline, before the address is tried
    if address is not None:
        ray_address_answers(address)  # before the folder is claimed or Ray imported: one line, in seconds
    remote = backend == "ray" and address is not None  # a cluster's nodes have their own devices
    if device is not None and not remote:  # a device this machine lacks: refused before the folder is made
        resolve_device(device)
    n_gpus = None if remote else visible_gpus()
    check_placement(device, gpus_per_cell, n_gpus, ray=backend == "ray")
    out = Path(out).resolve()  # every worker, on every node, must find the same directory
    with prepare(spec, out) as log:  # the journal, for people, appended to, and the sweep's lock
        cells = [cell_json(cell) for cell in spec.cells()]
        recipes = {cell.relative_path: cell.recipe for cell in spec.cells()}
        done = [cell for cell in cells if already_done(out, cell, recipes[cell["path"]])]
        todo = [cell for cell in cells if cell not in done]
        skipped = ({"cell": cell["path"], "status": "skipped", "seconds": 0.0, "error": None} for cell in done)
        if not todo:
            trained = iter(())
        elif backend == "local":
            trained = local_results(out, place_cells(todo, device, gpus_per_cell, n_gpus), min(workers, len(todo)))
        else:
            trained = ray_results(out, place_cells(todo, device, 0.0, 0), workers, address, report, gpus_per_cell)
        finished: dict[str, dict] = {}
        started = time.perf_counter()
        for result in itertools.chain(skipped, trained):
            finished[result["cell"]] = result
            log.write(json.dumps(result) + "\n")
            log.flush()
            report(progress_line(result, len(finished), len(cells), len(done), time.perf_counter() - started))
    return [finished[cell["path"]] for cell in cells]


def progress_line(result: dict, n_done: int, n_cells: int, n_skipped: int, elapsed: float) -> str:
    """One line per finished cell; the time left is extrapolated from the cells trained so far."""
    line = f"[{n_done}/{n_cells}] {result['cell']}: {result['status']}"
    if result["status"] in ("failed", "busy"):
        return f"{line}: {result['error']}"
    if result["status"] != "skipped":
        kl = result.get("final_kl")
        line += f" in {result['seconds']:.0f} s" + (f", final KL(true||model) {kl:.4f}" if kl is not None else "")
    if n_done > n_skipped and n_done < n_cells:
        line += f"; {elapsed:.0f} s so far, about {elapsed / (n_done - n_skipped) * (n_cells - n_done):.0f} s to go"
    return line
