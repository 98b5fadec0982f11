"""Sweep throughput on 1 and on 2 local workers: the same 4-cell spec (the default ICL-MC model, k = 3,
batch 64, T = 100, 400 steps per cell), timed end to end, process start-up included. Prints training
steps per second of each and the ratio. Target: 2 workers >= 1.7x the steps per second of 1 (on this
2-core machine, with one torch thread per worker).

Run from the repository root: ``.venv/bin/python bench/bench_sweep.py``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from induction_probes.circuits.sweeps.sweep_runner import parse_spec, run_sweep

SPEC = """
recipe = "markov"
seeds = [0, 1, 2, 3]
[base]
k = 3
steps = 400
eval_seqs = 200
n_checkpoints = 5
"""


def steps_per_second(workers: int) -> float:
    spec = parse_spec(SPEC)
    total_steps = sum(cell.recipe.steps for cell in spec.cells())
    with tempfile.TemporaryDirectory() as directory:
        start = time.perf_counter()
        run_sweep(spec, Path(directory) / "sweep", workers=workers, report=lambda line: None)
        return total_steps / (time.perf_counter() - start)


def main() -> None:
    one, two = steps_per_second(1), steps_per_second(2)
    print(f"{'sweep of 4 cells x 400 steps':30s} {'1 worker':>9s} {'2 workers':>10s} {'ratio':>7s}")
    print(f"{'training steps per second':30s} {one:9.1f} {two:10.1f} {two / one:6.2f}x   (target >= 1.70x)")


if __name__ == "__main__":
    main()
