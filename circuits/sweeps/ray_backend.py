"""The Ray backend of a sweep (``circuits/sweeps/sweep_runner.py``): each cell a Ray task of one CPU, on a local
instance bound to loopback or on a running cluster; a task whose worker or node dies is run again and
resumes its cell. Ray is imported only when a sweep runs on it."""

from __future__ import annotations

import os
from pathlib import Path

from induction_probes.circuits.sweeps.cells import HEARTBEAT_SECONDS, died, run_cell, training_line
from induction_probes.circuits.sweeps.sweep_spec import SpecError
from induction_probes.circuits.workers.ray_session import ray_session


def ray_results(
    root: Path, cells: list[dict], workers: int, address: str | None, report=print, gpus_per_cell: float = 0.0
):
    """Run cells as Ray tasks of one CPU (and ``gpus_per_cell`` GPUs) each, in a :func:`ray_session`. Every node
    must see ``root`` at the same path (a shared filesystem). Ray gives a task its GPU share through
    CUDA_VISIBLE_DEVICES, so it trains on cuda."""
    with ray_session(workers, address, report) as ray:
        gpus = ray.cluster_resources().get("GPU", 0)
        if gpus_per_cell > gpus:  # Ray would wait forever for a GPU that is not there
            raise SpecError(f"--gpus-per-cell {gpus_per_cell:g} asks for more GPUs than the Ray cluster has ({gpus:g})")
        # a task whose worker or node dies is run again (Ray's default of 3 retries, kept whatever Ray's default
        # becomes): run_cell then finds the cell partial and resumes it from its last checkpoint, on any node
        remote = ray.remote(num_cpus=1, num_gpus=gpus_per_cell, max_retries=3)(run_cell)
        if gpus_per_cell:
            cells = [cell | {"device": "cuda"} for cell in cells]
        # the workers run in Ray's working directory, not this one: the root by its absolute path
        pending = {remote.remote(os.path.abspath(root), cell): cell for cell in cells}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=HEARTBEAT_SECONDS)
            if not done:  # Ray does not say which tasks run: the cells with metrics are the ones started
                report(training_line(root, list(pending.values())))
                continue
            cell = pending.pop(done[0])
            try:
                yield ray.get(done[0])
            except Exception as error:  # noqa: BLE001 -- a worker that died
                yield died(cell, error)
