"""What evaluating during training costs (issue 62, item 6): the default ICL-MC recipe (k = 3, 2,000 evaluation
sequences) trained for 400 steps with 40 checkpoints against the same run with 2, each checkpoint an evaluation of
every sequence and a write. Timed both ways a trainer can take its checkpoints: in the background on a spare core
(the default where the machine has one, circuits/training/checkpoint_queue.py) and in turn. Every run goes twice,
interleaved, in one process on one torch thread (as the command line trains), so that a shared machine's changing
load falls on all alike; the faster of each pair is kept. Prints the times, the CPU seconds (the background spends
the second core's), the ratio against the target (at most 1.3), and what one checkpoint adds in training steps.

    .venv/bin/python bench/bench_eval_cost.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.threads import usable_cores
from induction_probes.circuits.training.train_loop import checkpoint_schedule, train_run

STEPS, MANY, FEW = 400, 40, 2
TARGET = 1.3
WAYS = {"background": True, "in turn": False}


def timed_run(checkpoints: int, background: bool, folder: Path) -> tuple[float, float]:
    """Wall and CPU seconds (every thread of the process) of one run."""
    recipe = MarkovRecipe(task=MarkovTask(k=3), steps=STEPS, n_checkpoints=checkpoints)
    wall, cpu = time.perf_counter(), time.process_time()
    train_run(recipe, folder, progress=False, background=background)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    torch.set_num_threads(1)
    runs = [(way, n) for way in WAYS for n in (MANY, FEW)]
    times: dict[tuple[str, int], list[tuple[float, float]]] = {run: [] for run in runs}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(2):
            for way, checkpoints in runs:
                folder = Path(scratch) / f"{way}-{checkpoints}-{round_}".replace(" ", "-")
                times[way, checkpoints].append(timed_run(checkpoints, WAYS[way], folder))
    saved = {n: len(checkpoint_schedule(STEPS, n)) for n in (MANY, FEW)}
    print(f"{STEPS} steps, {saved[MANY]} checkpoints against {saved[FEW]}; {usable_cores()} cores, one torch thread")
    for way in WAYS:
        (many, many_cpu), (few, few_cpu) = min(times[way, MANY]), min(times[way, FEW])
        per_checkpoint = (many - few) / (saved[MANY] - saved[FEW])
        ratio = many / few
        verdict = "met" if ratio <= TARGET else "MISSED"
        print(
            f"{way}: {many:.1f} s ({many_cpu:.1f} CPU-s) against {few:.1f} s ({few_cpu:.1f} CPU-s): "
            f"ratio {ratio:.2f}x (target <= {TARGET}x): {verdict}; "
            f"a checkpoint adds {per_checkpoint:.3f} s, about {per_checkpoint / (few / STEPS):.1f} training steps"
        )


if __name__ == "__main__":
    main()
