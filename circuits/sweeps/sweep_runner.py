"""Many runs from one experiment spec (``circuits/sweeps/sweep_spec.py``), each a standard run directory, on a
local process pool or a Ray cluster, resumable cell by cell. A cell's directory is
``DIR/<condition>[/<key>=<value>...]/seed-<S>``; the sweep writes its spec into ``DIR/spec.toml`` and a line
per finished cell, with its wall time, into ``DIR/sweep.jsonl``, which it holds locked while it runs (one sweep
at a time in a directory).

Reading and checking a spec needs no torch: the trainer, the run files and the pools are imported in the
functions that prepare or run cells (Ray only for ``--backend ray``)."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from induction_probes.circuits.devices import parse_device, resolve_device, visible_gpus
from induction_probes.circuits.sweeps.cells import (  # noqa: F401 (the sweep's API: a cell's status and its run)
    HEARTBEAT_SECONDS,
    cell_json,
    cell_status,
    died,
    is_finished,
    run_cell,
    training_line,
)
from induction_probes.circuits.sweeps.ray_backend import ray_results
from induction_probes.circuits.sweeps.sweep_spec import (  # noqa: F401 (the sweep's API: spec and running in one import)
    LOG_FILE,
    SPEC_FILE,
    Cell,
    Spec,
    SpecError,
    parse_spec,
    read_spec,
    schedule_notes,
)
from induction_probes.circuits.untrusted import is_temporary_of, lock_or_refuse, open_for_writing, write_atomic
from induction_probes.circuits.workers.ray_session import ray_address_answers
from induction_probes.circuits.workers.worker_start import safe_children, start_worker, worker_context


class SweepBusy(SpecError):
    """Another sweep is running in the directory (it holds the lock on its journal)."""


def prepare(spec: Spec, out: Path):
    """Claim ``out`` for this spec (a new or empty directory, or one holding the same spec) and return its
    journal, open for appending and locked for as long as it stays open: a second sweep on the same
    directory is refused at once (SweepBusy) instead of racing this one for its cells and its journal.
    The lock dies with its process, so a killed sweep leaves none behind."""
    refuse_another_sweep(spec, out)  # before anything is made: a refusal leaves the folder as it was
    out.mkdir(parents=True, exist_ok=True)
    # a link, folder or named pipe planted at the journal's name is refused in one line, never followed or waited on
    descriptor = open_for_writing(out / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    journal = os.fdopen(descriptor, "a")
    try:
        lock_or_refuse(
            journal, SweepBusy(f"another sweep is running in {out}; wait for it to finish or choose another --out")
        )
        refuse_another_sweep(spec, out)  # again, under the lock: another sweep may have claimed it meanwhile
        write_atomic(out / SPEC_FILE, spec.text.encode())  # the same cells: a new description or count is taken up
    except BaseException:
        journal.close()
        raise
    return journal


def refuse_another_sweep(spec: Spec, out: Path) -> None:
    """Refuse a directory that holds another spec's cells, or files and no sweep (a journal alone, or with the
    spec's temporary file, is what a sweep leaves while it writes its spec, or when killed before it did: the
    lock then tells a running sweep from a dead one)."""
    saved = out / SPEC_FILE
    if saved.exists() or saved.is_symlink():  # a pipe or a link there too: read_spec says why it is refused
        # the same cells in any order (seeds listed anew, say) are the same sweep
        if set(read_spec(saved, out).cells()) != set(spec.cells()):
            raise SpecError(f"{out} holds another sweep (its {SPEC_FILE} differs); choose another --out")
    elif out.exists() and not all(is_a_sweeps_first_file(path.name) for path in out.iterdir()):
        raise SpecError(f"{out} is not empty and holds no sweep; choose a new or empty --out")


def is_a_sweeps_first_file(name: str) -> bool:
    """The journal, or the temporary file the spec is written through."""
    return name == LOG_FILE or is_temporary_of(name, SPEC_FILE)


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


def local_results(root: Path, cells: list[dict], workers: int, report=print):
    """Run cells on a pool of ``workers`` processes (forked from a preloaded server, each with a torch no cell
    has used; started as :mod:`~induction_probes.circuits.workers.worker_start` says: no current folder on their
    path, dead with this process), yielding results as they finish. A worker that dies (killed, out of memory)
    breaks the whole pool: the cells whose files it never touched are queued again on a fresh pool (at most twice
    each), the others failed. Every :data:`~.cells.HEARTBEAT_SECONDS` without a finished cell, ``report`` hears
    where the cells in training are."""
    queue, tries = list(cells), dict.fromkeys((cell["path"] for cell in cells), 0)
    while queue:
        before = {cell["path"]: fingerprint(root / cell["path"]) for cell in queue}
        broken = []
        with (
            safe_children(),  # the workers and the resource tracker never import from the current folder
            ProcessPoolExecutor(
                min(workers, len(queue)), mp_context=worker_context(), initializer=start_worker
            ) as pool,
        ):
            futures = {pool.submit(run_cell, str(root), cell): cell for cell in queue}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=HEARTBEAT_SECONDS, return_when=FIRST_COMPLETED)
                if not done:
                    report(training_line(root, [futures[f] for f in futures if f.running()]))
                for future in done:
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
    report: Callable[[str], object] = print,
    device: str | None = None,
    gpus_per_cell: float = 0.0,
) -> list[dict[str, Any]]:
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

    if device is not None:
        parse_device(device)  # a name that is no device, on any backend: offline, before the address is tried
    if address is not None:
        ray_address_answers(address)  # before the folder is claimed or Ray imported: one line, in seconds
    remote = backend == "ray" and address is not None  # a cluster's nodes have their own devices
    if device is not None and not remote:  # a device this machine lacks: refused before the folder is made
        resolve_device(device)
    local_gpus = visible_gpus()  # a local pool places its cells on these
    check_placement(device, gpus_per_cell, None if remote else local_gpus, ray=backend == "ray")
    out = Path(out).resolve()  # every worker, on every node, must find the same directory
    with prepare(spec, out) as log:  # the journal, for people, appended to, and the sweep's lock
        for note in schedule_notes(spec.cells()):
            report(note)
        cells = [cell_json(cell) for cell in spec.cells()]
        recipes = {cell.relative_path: cell.recipe for cell in spec.cells()}
        done = [cell for cell in cells if already_done(out, cell, recipes[cell["path"]])]
        todo = [cell for cell in cells if cell not in done]
        skipped = ({"cell": cell["path"], "status": "skipped", "seconds": 0.0, "error": None} for cell in done)
        if not todo:
            trained = iter(())
        elif backend == "local":
            placed = place_cells(todo, device, gpus_per_cell, local_gpus)
            trained = local_results(out, placed, min(workers, len(todo)), report)
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
