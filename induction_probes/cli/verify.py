"""``induction-probes verify``: hand-made constructions against their limits, and trained runs against them."""

from __future__ import annotations

import argparse

from induction_probes.cli.common import (
    add_device_option,
    add_output_options,
    device_of,
    figure_lines,
    format_table,
    json_text,
    provenance,
    seed,
    spread_steps,
)

# Loaded to build the parser, before a command is chosen: the handlers below import the library they call
# (torch, matplotlib) inside themselves, so that --help and usage errors load neither (tests/unit/test_structure.py).


def register(commands) -> None:
    verify = commands.add_parser("verify", help="check a hand-made construction")
    constructions = verify.add_subparsers(dest="construction", required=True, parser_class=type(verify))
    prop21 = constructions.add_parser("prop21", help="Edelman et al.'s Proposition 2.1 (statistical induction)")
    prop21.add_argument("--k", type=int, help="number of states (>= 2; with --against, the run's)")
    prop21.add_argument("--c", type=float, default=100.0, help="the construction's scale (> 0, default 100)")
    prop21.add_argument("--seq-len", type=int, default=100, help="tokens per sequence (default 100)")
    prop21.add_argument("--n-seqs", type=int, default=500, help="ICL-MC sequences (default 500)")
    prop21.add_argument("--seed", type=seed, default=0, help="seed of those sequences")
    prop21.add_argument("--against", help="compare a trained run (directory or shipped name) with the construction")
    prop21.add_argument("--step", type=int, help="with --against: checkpoint step (default: the last)")
    prop21.add_argument("--all-steps", action="store_true", help="with --against: spread-out steps of the run")
    add_output_options(prop21)
    add_device_option(prop21)
    prop21.set_defaults(handler=run_verify_prop21)

    wang = constructions.add_parser("wang-ih2", help="Wang et al.'s Theorem 4.1 (vanilla induction head, ALiBi)")
    wang.add_argument("--beta", type=float, default=20.0, help="ALiBi slope of layer 0 (> 0, default 20)")
    wang.add_argument("--d", type=int, default=2, help="token dimension (default 2)")
    wang.add_argument("--seq-len", type=int, default=20, help="L (>= 4, default 20)")
    add_fresh_sequence_options(wang)
    wang.set_defaults(handler=run_verify_wang_ih2)

    wang_n = constructions.add_parser("wang-ihn", help="Wang et al.'s Theorem 4.3 (IH_n from H first-layer heads)")
    wang_n.add_argument("--n", type=int, required=True, help="n-gram order (>= 2)")
    wang_n.add_argument("--heads", type=int, help="first-layer heads H (>= n(n-1)/2; default that + 3(n-1))")
    wang_n.add_argument("--d", type=int, default=1, help="token dimension (default 1)")
    wang_n.add_argument("--seq-len", type=int, default=20, help="L (>= n + 2, default 20)")
    add_fresh_sequence_options(wang_n)
    wang_n.set_defaults(handler=run_verify_wang_ihn)


def add_fresh_sequence_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-seqs", type=int, default=1000, help="fresh sequences (default 1000)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of those sequences")
    add_output_options(parser, plot=False)
    add_device_option(parser)


def run_verify_prop21(args: argparse.Namespace) -> str:
    """Proposition 2.1 against its exact limit, the error as c grows, and its probe scores; with
    --against, a trained run against the construction."""
    if args.against is not None:
        return run_compare_prop21(args)
    if args.k is None:
        raise ValueError("--k is required (or --against RUN, whose k is used)")
    from induction_probes.probes.verify import check_prop21

    result = check_prop21(args.k, args.c, args.seq_len, args.n_seqs, args.seed, device=device_of(args))
    figures = []
    if args.plot:
        from induction_probes.probes.figures.plots_circuit import plot_prop21

        figures = [plot_prop21(result, args.plot / f"prop21_k{args.k}.png")]
    if args.json:
        return json_text(result.to_json() | {"figures": [str(f) for f in figures]})
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
    return "\n".join(lines + figure_lines(figures))


def run_compare_prop21(args: argparse.Namespace) -> str:
    from induction_probes.circuits.runs.reader import Run
    from induction_probes.circuits.tasks.markov.task import MarkovTask
    from induction_probes.probes.compare import compare_with_prop21
    from induction_probes.probes.summary import probe_eval_set, run_task

    run = Run.open(args.against)
    task = run_task(run, MarkovTask)
    if args.k is not None and task.k != args.k:
        raise ValueError(f"run {run.path.name} has k={task.k}, but --k is {args.k}")
    if task.n != 2:
        raise ValueError(f"Proposition 2.1 is for bigram chains; run {run.path.name} has n={task.n}")
    k = task.k
    tokens = probe_eval_set(run, args.n_seqs, args.seed).inputs
    steps = figure_steps(run) if args.all_steps else [run.entry(args.step)["step"]]
    device = device_of(args)
    results = {step: compare_with_prop21(run.load(step=step, device=device), tokens, k, args.c) for step in steps}
    figures = plot_comparison(run, results, k, args.plot) if args.plot else []
    if args.json:
        checkpoints = [{"step": step} | r.to_json() | {"failures": r.failures()} for step, r in results.items()]
        header = provenance(run, steps, args.n_seqs, args.seed)
        return json_text(header | {"c": args.c, "checkpoints": checkpoints})
    return "\n".join([comparison_text(run, results, k, args.c, args.n_seqs)] + figure_lines(figures))


def comparison_text(run, results: dict, k: int, c: float, n_seqs: int) -> str:
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
    failures = results[final_step].failures()
    verdict = "matches the construction's signatures" if not failures else "differs: " + "; ".join(failures)
    caveats = [f"warning: {line}" for line in results[final_step].warnings]
    return "\n".join(
        [
            f"{run.path.name} against Proposition 2.1 (k={k}, c={c:g}) on {n_seqs} sequences",
            format_table(headers, rows),
            f"step {final_step}: {verdict}",
        ]
        + caveats
    )


def figure_steps(run) -> list[int]:
    """Steps spread evenly in step value (a table's rows) and in log sequences seen (so that a figure's log
    axis shows the uniform phase and the plateau as well as the end)."""
    from induction_probes.probes.behaviour import log_spread_steps

    seen = {entry["step"]: entry["sequences_seen"] for entry in run.manifest}
    return sorted(spread_steps(run.steps) | log_spread_steps(seen))


def plot_comparison(run, results: dict, k: int, directory) -> list:
    """The final compared step's matrices against the construction's, and over training when several."""
    from induction_probes.probes.figures.plots import figure_name
    from induction_probes.probes.figures.plots_circuit import plot_prop21_comparison, plot_prop21_over_training

    name, steps = run.path.name, list(results)
    final = steps[-1]
    figures = [
        plot_prop21_comparison(
            results[final], f"{name}, step {final}", directory / figure_name(f"prop21_vs_{name}", "matrices", [final])
        )
    ]
    if len(steps) > 1:
        metrics = {m["step"]: m for m in run.metrics()}
        figures.append(
            plot_prop21_over_training(
                results,
                [metrics[s] for s in steps],
                k,
                name,
                directory / figure_name(f"prop21_vs_{name}", "over_training", steps),
            )
        )
    return figures


def run_verify_wang_ih2(args: argparse.Namespace) -> str:
    """Wang et al.'s Theorem 4.1 against IH_2 on fresh Gaussian sequences, over a grid of β."""
    from induction_probes.probes.verify import check_wang_ih2

    result = check_wang_ih2(args.d, args.beta, args.seq_len, args.n_seqs, args.seed, device=device_of(args))
    if args.json:
        return json_text(result.to_json())
    rows = [[f"{beta:g}", f"{error:.2e}"] for beta, error in result.error_by_beta]
    return "\n".join(
        [
            f"Theorem 4.1 (IH_2, W* = I), d={result.d}, L={result.seq_len}, {result.n_seqs} Gaussian sequences",
            format_table(["beta", "relative error"], rows),
            f"at beta={result.beta:g}: relative error {result.relative_error:.2e}, "
            f"layer 0 previous-token {result.previous_token:.4f}",
        ]
    )


def run_verify_wang_ihn(args: argparse.Namespace) -> str:
    """Wang et al.'s Theorem 4.3 against IH_n over a grid of first-layer head counts."""
    from induction_probes.probes.verify import check_wang_ihn

    result = check_wang_ihn(args.d, args.n, args.heads, args.seq_len, args.n_seqs, args.seed, device=device_of(args))
    if args.json:
        return json_text(result.to_json())
    rows = [[heads, f"{error:.2e}"] for heads, error in result.error_by_heads]
    return "\n".join(
        [
            f"Theorem 4.3 (IH_{result.n}, W* = I), d={result.d}, L={result.seq_len}, {result.n_seqs} Gaussian sequences",
            format_table(["heads H", "relative error"], rows),
            f"at H={result.heads}: relative error {result.relative_error:.2e}; fitted error ~ C / H^{result.fitted_q:.1f} "
            f"(paper: C (n e^(1+0.01n) / H)^q, n e^(1+0.01n) = {result.paper_scale:.1f})",
        ]
    )
