"""Probing every checkpoint of the shipped markov-k3 run, attention and behaviour probes, 1000 sequences.

Target: the whole run (>= 100 checkpoints) in <= 60 s on this 2-core machine. Printed side by side
with the reference measured in the same run: the same probes on all 1000 sequences at once, without
the chunking that ``probe_model`` does (large [batch, head, T, T] tensors are paged in and out).

Run from the repository root: ``.venv/bin/python bench/bench_probes.py``.
"""

from __future__ import annotations

import time

import torch

from induction_probes.circuits.runs.reader import Run
from induction_probes.probes.run_level.all_probes import probe_eval_set, probe_run
from induction_probes.probes.run_level.checkpoint_probes import probe_model

N_SEQS, TARGET_S = 1000, 60.0


def main() -> None:
    torch.set_num_threads(1)  # the package default
    run = Run.open("markov-k3")
    eval_set = probe_eval_set(run, N_SEQS, 12345)
    start = time.perf_counter()
    results = list(probe_run(run, eval_set))
    total = time.perf_counter() - start
    per_checkpoint = total / len(results)

    sample = run.steps[-5:]  # the unchunked reference on a few checkpoints, timed per checkpoint
    start = time.perf_counter()
    for step in sample:
        probe_model(run.load(step=step), eval_set, chunk=N_SEQS)
    unchunked = (time.perf_counter() - start) / len(sample)

    print(f"markov-k3: {len(results)} checkpoints, {N_SEQS} sequences, 1 thread")
    print(f"{'':24s}{'per checkpoint':>16s}{'whole run':>12s}")
    print(f"{'probe_run (chunks of 100)':24s}{per_checkpoint:15.3f}s{total:11.1f}s")
    print(f"{'unchunked reference':24s}{unchunked:15.3f}s{unchunked * len(results):11.1f}s (estimated)")
    verdict = "PASS" if total <= TARGET_S else "MISS"
    print(f"speed-up {unchunked / per_checkpoint:.2f}x; whole run {total:.1f} s (target <= {TARGET_S:.0f} s) {verdict}")


if __name__ == "__main__":
    main()
