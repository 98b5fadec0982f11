"""What ``verify`` shows: the papers' hand-made constructions against their limits (Edelman et al.'s
Proposition 2.1, Wang et al.'s Theorems 4.1 and 4.3), and a trained ICL-MC run against Proposition 2.1 over
training, as text, JSON or figures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.runs.reader import as_run, run_task
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.probes.behaviour.icl_behaviour import log_spread_steps
from induction_probes.probes.circuit.contrasts import MarkovContrast
from induction_probes.probes.circuit.edges import edge_effects
from induction_probes.probes.comparison.construction_limits import check_prop21, check_wang_ih2, check_wang_ihn
from induction_probes.probes.comparison.trained_vs_prop21 import compare_with_prop21
from induction_probes.probes.figures.plots import figure_name
from induction_probes.probes.figures.plots_circuit import (
    plot_prop21,
    plot_prop21_comparison,
    plot_prop21_over_training,
)
from induction_probes.probes.report.circuit_views import construction_effects, construction_lines
from induction_probes.probes.report.tables import format_table, provenance, spread_steps, with_figures
from induction_probes.probes.run_level.all_probes import probe_eval_set

if TYPE_CHECKING:
    from induction_probes.circuits.devices import Device
    from induction_probes.circuits.runs.reader import Run, RunOrPath


def prop21_report(
    k: int,
    c: float,
    seq_len: int,
    n_seqs: int,
    seed: int,
    *,
    device: Device = None,
    plot: Path | None = None,
    as_json: bool = False,
) -> str | dict[str, Any]:
    """Proposition 2.1 against its exact limit, the error as c grows, and its probe scores."""
    result = check_prop21(k, c, seq_len, n_seqs, seed, device=device)
    figures = [plot_prop21(result, plot / f"prop21_k{k}.png")] if plot else []
    if as_json:
        return result.to_json() | {"figures": [str(f) for f in figures]}
    rows = [[f"{c:g}", f"{worst:.2e}", f"{mean:.2e}"] for c, worst, mean in result.error_by_c]
    kl = result.kl_bigram_by_position
    lines = [
        f"Proposition 2.1, k={result.k}, c={result.c:g}: {result.n_seqs} ICL-MC sequences of {result.seq_len} tokens",
        f"logits vs the exact c -> inf limit: max |error| {result.max_abs_error:.2e}, mean {result.mean_abs_error:.2e}",
        format_table(["c", "max |error|", "mean |error|"], rows),
        f"the limit differs from pure bigram frequencies by up to {result.bigram_gap:.3f} (position 0 keys itself)",
        f"KL(Bayes bigram || softmax(logits)): position 1 {kl[1]:.4f}, 10 {kl[10]:.4f}, last {kl[-1]:.4f}"
        " (the output is a frequency vector, not calibrated logits)",
        f"probes: layer 0 previous-token {result.previous_token:.4f}; layer 1 bigram-matching "
        f"{result.bigram_matching:.4f} (self-key edge predicts {result.bigram_matching_predicted:.4f}; "
        f"{result.bigram_matching_skip_first_key:.4f} over keys >= 1)",
    ]
    return with_figures("\n".join(lines), figures)


def prop21_comparison(
    run: RunOrPath,
    step: int | None,
    n_seqs: int,
    seed: int,
    c: float = 100.0,
    k: int | None = None,
    *,
    all_steps: bool = False,
    device: Device = None,
    plot: Path | None = None,
    as_json: bool = False,
) -> str | dict[str, Any]:
    """A trained ICL-MC run (a ``Run`` or a run's folder or shipped name) on bigram chains against
    Proposition 2.1 at ``step`` (None: the last), or with ``all_steps`` at :func:`figure_steps`, on ``n_seqs``
    sequences drawn with ``seed``; ``k``, if given, must be the run's."""
    run = as_run(run)
    steps = figure_steps(run) if all_steps else [run.entry(step)["step"]]
    task = run_task(run, MarkovTask)
    if k is not None and task.k != k:
        raise BadInput(f"run {run.path.name} has k={task.k}, but --k is {k}")
    if task.n != 2:
        raise BadInput(f"Proposition 2.1 is for bigram chains; run {run.path.name} has n={task.n}")
    eval_set = probe_eval_set(run, n_seqs, seed)
    tokens = eval_set.inputs
    results = {step: compare_with_prop21(run.load(step=step, device=device), tokens, task.k, c) for step in steps}
    edges = edge_tables(run, steps[-1], eval_set, device)
    figures = plot_comparison(run, results, task.k, plot) if plot else []
    if as_json:
        checkpoints = [{"step": step} | r.to_json() | {"failures": r.failures} for step, r in results.items()]
        tables = {name: table.to_json() if table else None for name, table in zip(("trained", "construction"), edges)}
        return provenance(run, steps, n_seqs, seed) | {"c": c, "checkpoints": checkpoints, "edges": tables}
    text = comparison_text(run, results, task.k, c, n_seqs)
    said = [f"path patching at step {steps[-1]} (circuit's method, each edge's share of the in-context gap):"]
    said += [f"  {line}" for line in construction_lines(*edges)]
    return with_figures("\n".join([text, *said]), figures)


def edge_tables(run: Run, step: int, eval_set, device) -> tuple:
    """Every edge of the run's checkpoint at ``step`` and of Proposition 2.1's construction, patched on the same
    sequences (:mod:`.circuit_views`; the construction's None where the model has another shape)."""
    contrast = MarkovContrast.of(eval_set)
    trained = edge_effects(run.load(step=step, device=device), contrast, step)
    return trained, construction_effects(run, contrast, trained.threshold)


def comparison_text(run: Run, results: dict, k: int, c: float, n_seqs: int) -> str:
    """The measures at each compared step, and the last step's verdict."""
    rows = [
        [
            step,
            r.attention_tv[0],
            r.attention_tv[1],
            r.positional_profile[1].item(),
            int(r.positional_profile.argmax()),
            r.diagonal_is_row_max,
            r.ov_top1_diagonal,
            "yes" if (r.ov_eigenvalues.real > 0).all() else "no",
        ]
        for step, r in results.items()
    ]
    headers = ["step", "attn TV L0", "attn TV L1", "profile@1", "peak", "diag-dominant rows", "OV top-1", "OV eig > 0"]
    final_step = list(results)[-1]
    final = results[final_step]
    verdict = "matches the construction's signatures" if final.matches else "differs: " + "; ".join(final.failures)
    caveats = [f"warning: {line}" for line in final.warnings]
    return "\n".join(
        [
            f"{run.path.name} against Proposition 2.1 (k={k}, c={c:g}) on {n_seqs} sequences",
            format_table(headers, rows),
            f"step {final_step}: {verdict}",
        ]
        + caveats
    )


def figure_steps(run: Run) -> list[int]:
    """Steps spread evenly in step value (a table's rows) and in log sequences seen (so that a figure's log
    axis shows the uniform phase and the plateau as well as the end)."""
    seen = {entry["step"]: entry["sequences_seen"] for entry in run.manifest}
    return sorted(spread_steps(run.steps) | log_spread_steps(seen))


def plot_comparison(run: Run, results: dict, k: int, directory: Path) -> list[Path]:
    """The final compared step's matrices against the construction's, and over training when several."""
    name, steps = run.path.name, list(results)
    final = steps[-1]
    path = directory / figure_name(f"prop21_vs_{name}", "matrices", [final])
    figures = [plot_prop21_comparison(results[final], f"{name}, step {final}", path)]
    if len(steps) > 1:
        metrics = {m["step"]: m for m in run.metrics()}
        path = directory / figure_name(f"prop21_vs_{name}", "over_training", steps)
        figures.append(plot_prop21_over_training(results, [metrics[s] for s in steps], k, name, path))
    return figures


def wang_ih2_report(
    d: int,
    beta: float,
    seq_len: int,
    n_seqs: int,
    seed: int,
    *,
    device: Device = None,
    as_json: bool = False,
) -> str | dict[str, Any]:
    """Wang et al.'s Theorem 4.1 against IH_2 on fresh Gaussian sequences, over a grid of β."""
    result = check_wang_ih2(d, beta, seq_len, n_seqs, seed, device=device)
    if as_json:
        return result.to_json()
    rows = [[f"{beta:g}", f"{error:.2e}"] for beta, error in result.error_by_beta]
    return "\n".join(
        [
            f"Theorem 4.1 (IH_2, W* = I), d={result.d}, L={result.seq_len}, {result.n_seqs} Gaussian sequences",
            format_table(["beta", "relative error"], rows),
            f"at beta={result.beta:g}: relative error {result.relative_error:.2e}, "
            f"layer 0 previous-token {result.previous_token:.4f}",
        ]
    )


def wang_ihn_report(
    d: int,
    n: int,
    heads: int | None,
    seq_len: int,
    n_seqs: int,
    seed: int,
    *,
    device: Device = None,
    as_json: bool = False,
) -> str | dict[str, Any]:
    """Wang et al.'s Theorem 4.3 against IH_n over a grid of first-layer head counts."""
    result = check_wang_ihn(d, n, heads, seq_len, n_seqs, seed, device=device)
    if as_json:
        return result.to_json()
    rows = [[heads, f"{error:.2e}"] for heads, error in result.error_by_heads]
    return "\n".join(
        [
            f"Theorem 4.3 (IH_{result.n}, W* = I), d={result.d}, L={result.seq_len}, "
            f"{result.n_seqs} Gaussian sequences",
            format_table(["heads H", "relative error"], rows),
            f"at H={result.heads}: relative error {result.relative_error:.2e}; "
            f"fitted error ~ C / H^{result.fitted_q:.1f} "
            f"(paper: C (n e^(1+0.01n) / H)^q, n e^(1+0.01n) = {result.paper_scale:.1f})",
        ]
    )
