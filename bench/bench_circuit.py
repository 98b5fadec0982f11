"""``circuit`` on a language model of the size researchers study, against one exact every-head ablation of the same
sequences, in one process and one run (issue 63's target: at most 5x). The model: GPT-2 small's shape (12 layers of
12 heads, 31,477 edges), random weights written with ``save_pretrained``, as bench_lm.py builds it.

A random model has no in-context gap, and ``circuit`` stops there (every effect null). So the circuit side times
what the command runs on a model with a gap: the EAP-IG screen of every edge, the exact patching of the edges it
ranks highest, and the faithfulness pass (:func:`~induction_probes.probes.circuit.edges.patched_effects`), with the
gap set to 1 on every sequence (the cost depends on no value). Both sides run at the thread policy's count.

    .venv/bin/python bench/bench_circuit.py [--n-seqs 32] [--length 10-50] [--checked 100]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
TARGET = 5.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-seqs", type=int, default=32)
    parser.add_argument("--length", default="10-50")
    parser.add_argument("--checked", type=int, default=100)
    parser.add_argument("--model", type=Path, help="a saved GPT-2-small-shaped model (default: write one)")
    args = parser.parse_args()
    import torch
    from bench_lm import save_model

    from induction_probes import lm
    from induction_probes.circuits.threads import thread_policy
    from induction_probes.probes.circuit.contrasts import RepeatedContrast
    from induction_probes.probes.circuit.edges import THRESHOLD, patched_effects
    from induction_probes.probes.circuit.path_patching import model_edges

    folder = args.model or save_model("gpt2", Path(tempfile.mkdtemp(prefix="bench_circuit")) / "gpt2")
    bridge = lm.as_hooked(str(folder))
    low, _, high = args.length.partition("-")
    length = (int(low), int(high or low))
    repeated = lm.repeated_random_tokens(bridge, length, args.n_seqs)
    contrast = RepeatedContrast.of(bridge, repeated, seed=12346)
    with thread_policy(bridge) as threads:
        clean = contrast.measure(bridge, lambda hooks: bridge.run_with_hooks(contrast.clean, fwd_hooks=hooks))
        ones = torch.ones(args.n_seqs, dtype=torch.float64)
        started = time.perf_counter()  # the circuit first: it is the side that may run out of memory
        found = patched_effects(bridge, contrast, clean, ones, None, THRESHOLD, args.checked)
        circuit = time.perf_counter() - started
        print(f"circuit: {circuit:.1f} s, peak memory so far {resource_peak_mib():.0f} MiB", flush=True)
        started = time.perf_counter()
        lm.ablate(bridge, repeated, lm.single_heads(bridge))
        ablation = time.perf_counter() - started
    peak = resource_peak_mib()
    edges = len(model_edges(bridge))
    print(f"GPT-2-small-shaped model, {edges:,} edges, {args.n_seqs} sequences, |R| {args.length}, {threads} threads")
    print(f"every-head ablation: {ablation:.1f} s")
    print(f"circuit ({found.method}, then the faithfulness pass): {circuit:.1f} s")
    print(f"ratio: {circuit / ablation:.2f}x (target at most {TARGET:g}x); peak memory of the process {peak:.0f} MiB")


def resource_peak_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


if __name__ == "__main__":
    main()
