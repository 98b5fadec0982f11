"""What evaluating during training costs (issue 62, item 6): the default ICL-MC recipe (k = 3, 2,000 evaluation
sequences) trained for 400 steps with 40 checkpoints against the same run with 2, each checkpoint an evaluation of
every sequence and a write. Both run twice, interleaved, in one process on one torch thread (as the command line
trains), so that a shared machine's changing load falls on both alike; the faster of each pair is kept. Prints the
two times, their ratio against the target (at most 1.3), and what one evaluation costs in training steps.

    .venv/bin/python bench/bench_eval_cost.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.training.train_loop import checkpoint_schedule, train_run

STEPS, MANY, FEW = 400, 40, 2
TARGET = 1.3


def timed_run(checkpoints: int, folder: Path) -> float:
    recipe = MarkovRecipe(task=MarkovTask(k=3), steps=STEPS, n_checkpoints=checkpoints)
    start = time.perf_counter()
    train_run(recipe, folder, progress=False)
    return time.perf_counter() - start


def main() -> None:
    torch.set_num_threads(1)
    times: dict[int, list[float]] = {MANY: [], FEW: []}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(2):
            for checkpoints in (MANY, FEW):
                times[checkpoints].append(timed_run(checkpoints, Path(scratch) / f"{checkpoints}-{round_}"))
    many, few = min(times[MANY]), min(times[FEW])
    saved = {n: len(checkpoint_schedule(STEPS, n)) for n in (MANY, FEW)}
    per_evaluation = (many - few) / (saved[MANY] - saved[FEW])
    per_step = few / STEPS  # an upper bound: the 2-checkpoint run's time is nearly all training steps
    ratio = many / few
    print(f"{STEPS} steps, {saved[MANY]} checkpoints: {many:.1f} s; {saved[FEW]} checkpoints: {few:.1f} s")
    print(f"ratio {ratio:.2f}x (target <= {TARGET}x): {'met' if ratio <= TARGET else 'MISSED'}")
    print(f"one evaluation and write: {per_evaluation:.3f} s, about {per_evaluation / per_step:.1f} training steps")


if __name__ == "__main__":
    main()
