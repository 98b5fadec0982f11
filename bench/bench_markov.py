"""Benchmark the ICL-MC task code in circuits/tasks/markov/chains.py against plain per-sequence references.

(a) Sampler: ``sample_markov`` (batched torch) against a per-sequence numpy loop (Dirichlet(1) table,
    stationary start by a linear solve, inverse-CDF draws position by position). Prints sequences/s of
    each; target: ours >= 20x faster. Also prints token and first-state frequencies of both as a sanity
    check that they sample the same process (not bit-identical: different random streams).
(b) Strategies: ``ngram_predictions`` for n = 1, 2, 3 against a per-position counting loop that follows
    the docstring's definition literally. Checks the results agree (allclose, atol 1e-12) and prints
    the speedup; target: >= 50x.

Run from the repository root: ``.venv/bin/python bench/bench_markov.py``.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from induction_probes.circuits.tasks.markov.chains import sample_markov
from induction_probes.circuits.tasks.markov.strategies import ngram_predictions

K, SEQ_LEN = 3, 100


def verdict(ratio: float, target: float) -> str:
    return "PASS" if ratio >= target else "MISS"


def best_time(fn, repeats: int = 3) -> float:
    """Fastest of a few runs: the least noisy estimate on a shared machine."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


# --- (a) sampler ------------------------------------------------------------------------------


def reference_sample(n_seqs: int, k: int, seq_len: int, rng: np.random.Generator) -> np.ndarray:
    """seq_len + 1 states per sequence, one bigram chain per sequence, one sequence at a time."""
    states = np.empty((n_seqs, seq_len + 1), dtype=np.int64)
    for s in range(n_seqs):
        table = rng.dirichlet(np.ones(k), size=k)  # row a = P(next | a)
        system = table.T - np.eye(k)  # (P^T - I) pi = 0, last equation replaced by sum(pi) = 1
        system[-1] = 1.0
        pi = np.linalg.solve(system, np.eye(k)[-1])
        cdf = np.cumsum(table, axis=1)
        uniforms = rng.random(seq_len + 1)
        state = min(int(np.searchsorted(np.cumsum(pi), uniforms[0], side="right")), k - 1)
        states[s, 0] = state
        for t in range(1, seq_len + 1):
            state = min(int(np.searchsorted(cdf[state], uniforms[t], side="right")), k - 1)
            states[s, t] = state
    return states


def bench_sampler() -> None:
    n_ref, n_ours = 2_000, 20_000
    t_ref = best_time(lambda: reference_sample(n_ref, K, SEQ_LEN, np.random.default_rng(0)), repeats=1)
    t_ours = best_time(lambda: sample_markov(n_ours, K, SEQ_LEN, generator=torch.Generator().manual_seed(0)))
    ref_rate, ours_rate = n_ref / t_ref, n_ours / t_ours
    ratio = ours_rate / ref_rate
    print(f"(a) sampler, k={K}, seq_len={SEQ_LEN} (seq_len + 1 states), bigram chains")
    print(f"    {'':24s}{'seqs':>8s}{'time s':>10s}{'seqs/s':>12s}")
    print(f"    {'reference numpy loop':24s}{n_ref:8d}{t_ref:10.3f}{ref_rate:12,.0f}")
    print(f"    {'sample_markov':24s}{n_ours:8d}{t_ours:10.3f}{ours_rate:12,.0f}")
    print(f"    speedup {ratio:.1f}x  (target >= 20x)  {verdict(ratio, 20)}")

    ref = reference_sample(n_ref, K, SEQ_LEN, np.random.default_rng(1))
    ours = sample_markov(n_ref, K, SEQ_LEN, generator=torch.Generator().manual_seed(1)).states.numpy()
    for name, states in (("reference", ref), ("sample_markov", ours)):
        tokens = np.bincount(states.ravel(), minlength=K) / states.size
        first = np.bincount(states[:, 0], minlength=K) / len(states)
        stay = (states[:, 1:] == states[:, :-1]).mean()
        print(
            f"    sanity {name:14s} token freq {np.round(tokens, 3)}  first state {np.round(first, 3)}"
            f"  P(repeat) {stay:.3f}"
        )


# --- (b) strategies ---------------------------------------------------------------------------


def reference_ngram(tokens: torch.Tensor, k: int, n: int, alpha: float = 1.0) -> torch.Tensor:
    """q_t(b) = (#{j <= t : x_{j-n+1..j-1} = c, x_j = b} + a) / (#{j <= t : x_{j-n+1..j-1} = c} + k a),
    with c = x_{t-n+2..t}; positions whose context is incomplete (t < n - 2) count nothing."""
    m = n - 1
    out = []
    for x in tokens.tolist():
        rows = []
        for t in range(len(x)):
            counts = [0] * k
            if t >= m - 1:
                context = x[t - m + 1 : t + 1] if m else []
                for j in range(m, t + 1):
                    if x[j - m : j] == context:
                        counts[x[j]] += 1
            total = sum(counts)
            rows.append([(c + alpha) / (total + k * alpha) for c in counts])
        out.append(rows)
    return torch.tensor(out, dtype=torch.float64)


def bench_strategies() -> None:
    n_seqs = 200
    tokens = sample_markov(n_seqs, K, SEQ_LEN, generator=torch.Generator().manual_seed(0)).inputs
    print(f"\n(b) ngram_predictions vs per-position counting loop, {n_seqs} seqs x T={SEQ_LEN}, k={K}, alpha=1")
    print(f"    {'n':>3s}{'ref s':>10s}{'ours ms':>10s}{'speedup':>10s}{'max|diff|':>12s}  allclose  target>=50x")
    for n in (1, 2, 3):
        start = time.perf_counter()
        ref = reference_ngram(tokens, K, n)
        t_ref = time.perf_counter() - start
        t_ours = best_time(lambda n=n: ngram_predictions(tokens, K, n, alpha=1.0), repeats=5)
        ours = ngram_predictions(tokens, K, n, alpha=1.0)
        same = torch.allclose(ours, ref, rtol=0.0, atol=1e-12)
        diff = (ours - ref).abs().max().item()
        ratio = t_ref / t_ours
        print(
            f"    {n:3d}{t_ref:10.3f}{t_ours * 1e3:10.3f}{ratio:9.0f}x{diff:12.2e}  {str(same):8s}  "
            f"{verdict(ratio, 50) if same else 'MISS (results differ)'}"
        )
        assert same, f"ngram_predictions n={n} differs from the reference by {diff}"


if __name__ == "__main__":
    torch.set_num_threads(1)  # single-thread comparison with the single-threaded references
    bench_sampler()
    bench_strategies()
