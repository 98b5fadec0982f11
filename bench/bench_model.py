"""Benchmark our HookedTransformer (circuits/models/model.py) against a plain eager twin (bench/plain_model.py).

Model: 2 layers, 1 head each, attention only, relative positions, d_model 16, k = 3, n_ctx 100.
Batch 64 of T = 100 ICL-MC tokens. Measured, interleaved (plain, ours, ours, plain, ...) so that machine
noise hits both alike, as the median of several repeats of STEPS steps after warm-up:

  (i)   plain training step: forward, cross-entropy over all positions, backward, AdamW step
  (ii)  our training step, no hooks attached
  (iii) plain no-grad forward
  (iv)  our no-grad ``run_with_cache``

Targets: (ii)/(i) >= 0.95 and (iv)/(iii) >= 0.7, at 1 and at 2 threads. Then a candidate fast path:
``torch.compile`` of our model for the training step (hooks idle), its compile time (limit 60 s), its
agreement with the eager logits (1e-5) and its throughput against the plain eager step; the package
would keep it only at >= 1.2x.

Run from the repository root: ``.venv/bin/python bench/bench_model.py``.
"""

from __future__ import annotations

import copy
import os
import signal
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
import torch._inductor.config
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
from plain_model import plain_twin  # noqa: E402

from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig  # noqa: E402
from induction_probes.circuits.tasks.markov.chains import sample_markov  # noqa: E402

BATCH, T, K, D_MODEL = 64, 100, 3, 16
STEPS, REPEATS, WARMUP = 50, 5, 10
COMPILE_LIMIT_S = 60


def verdict(ratio: float, target: float) -> str:
    return "PASS" if ratio >= target else "MISS"


def trainer(model, inputs, targets):
    """A closure doing one full training step of ``model`` with its own AdamW."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        loss = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def forwarder(fn, inputs):
    def step():
        with torch.no_grad():
            fn(inputs)

    return step


def steps_per_s(step) -> float:
    start = time.perf_counter()
    for _ in range(STEPS):
        step()
    return STEPS / (time.perf_counter() - start)


def interleaved(steps: dict) -> dict:
    """Median steps/s of each step function, run in turn, reversing the order on every repeat."""
    for step in steps.values():
        for _ in range(WARMUP):
            step()
    rates = {name: [] for name in steps}
    for repeat in range(REPEATS):
        for name in list(steps)[:: 1 if repeat % 2 == 0 else -1]:
            rates[name].append(steps_per_s(steps[name]))
    return {name: statistics.median(values) for name, values in rates.items()}


def make_models():
    cfg = HookedTransformerConfig(n_layers=2, d_model=D_MODEL, n_ctx=T, d_vocab=K, n_heads=1, seed=0)
    ours = HookedTransformer(cfg)
    return ours, plain_twin(ours)


def report_load(when: str) -> None:
    """Other processes on this small machine wreck multi-thread timings: say how busy it was."""
    load, cores = os.getloadavg()[0], os.cpu_count()
    warning = "  WARNING: machine busy, timings unreliable" if load > 0.5 * cores else ""
    print(f"[{when}] 1-min load average {load:.2f} on {cores} cores{warning}")


def main() -> None:
    report_load("start")
    sample = sample_markov(BATCH, K, T, generator=torch.Generator().manual_seed(0))
    inputs, targets = sample.inputs, sample.targets

    ours, plain = make_models()
    diff = (ours(inputs) - plain(inputs)).abs().max().item()
    print(f"logits ours vs plain: max|diff| = {diff:.2e}  ({'OK' if diff < 1e-5 else 'MISMATCH'} at 1e-5)")
    assert diff < 1e-5

    print(f"\nbatch {BATCH}, T {T}, d_model {D_MODEL}, k {K}; median of {REPEATS} x {STEPS} steps, steps/s")
    header = f"{'threads':>7s}{'train plain':>13s}{'train ours':>12s}{'ratio':>7s}{'':6s}"
    print(header + f"{'fwd plain':>11s}{'cache ours':>12s}{'ratio':>7s}")
    train_rate = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        ours, plain = make_models()  # fresh weights and optimizers for each thread count
        rates = interleaved(
            {
                "train plain": trainer(plain, inputs, targets),
                "train ours": trainer(ours, inputs, targets),
                "fwd plain": forwarder(plain, inputs),
                "cache ours": forwarder(ours.run_with_cache, inputs),
            }
        )
        train_ratio = rates["train ours"] / rates["train plain"]
        fwd_ratio = rates["cache ours"] / rates["fwd plain"]
        train_rate[threads] = rates["train ours"]
        print(
            f"{threads:7d}{rates['train plain']:13.1f}{rates['train ours']:12.1f}{train_ratio:7.3f} "
            f"{verdict(train_ratio, 0.95)} {rates['fwd plain']:11.1f}{rates['cache ours']:12.1f}"
            f"{fwd_ratio:7.3f} {verdict(fwd_ratio, 0.7)}"
        )
    print("targets: train ours/plain >= 0.95, run_with_cache/plain forward >= 0.7")
    best = max(train_rate, key=train_rate.get)
    print(
        f"our training step is faster with {best} thread(s) ({train_rate[best] / train_rate[3 - best]:.2f}x the other)"
    )

    bench_compile(best, inputs, targets)
    report_load("end")


class CompileTimeout(Exception):
    pass


def bench_compile(threads: int, inputs, targets) -> None:
    """torch.compile our model for training (hooks idle) at the faster thread count."""
    torch.set_num_threads(threads)
    print(f"\ntorch.compile(ours), training step, {threads} thread(s)")
    ours, plain = make_models()
    torch._inductor.config.force_disable_caches = True  # time a cold compile, not a cache hit
    warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
    compiled = torch.compile(copy.deepcopy(ours))
    step = trainer(compiled, inputs, targets)

    def timeout(*_):
        raise CompileTimeout

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(COMPILE_LIMIT_S)
    start = time.perf_counter()
    try:
        logits = compiled(inputs)  # compiles the training-mode forward and backward graphs
        logits.sum().backward()
        step()
        compile_s = time.perf_counter() - start
    except CompileTimeout:
        print(f"compile did not finish within {COMPILE_LIMIT_S} s: skipped")
        return
    except Exception as error:  # noqa: BLE001 - report any compile failure and carry on
        print(f"compile failed after {time.perf_counter() - start:.1f} s: {type(error).__name__}: {error}")
        return
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    print(f"compile time (first forward + backward + step): {compile_s:.1f} s")

    diff = (logits - ours(inputs)).abs().max().item()
    print(
        f"compiled vs eager logits (same weights): max|diff| = {diff:.2e}  "
        f"({'OK' if diff < 1e-5 else 'MISMATCH'} at 1e-5)"
    )
    rates = interleaved({"train plain": trainer(plain, inputs, targets), "train compiled": step})
    ratio = rates["train compiled"] / rates["train plain"]
    print(
        f"train plain eager {rates['train plain']:.1f} steps/s, compiled ours {rates['train compiled']:.1f} "
        f"steps/s, ratio {ratio:.3f}  (kept as a fast path only if >= 1.2) {verdict(ratio, 1.2)}"
    )


if __name__ == "__main__":
    main()
