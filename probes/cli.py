"""The ``induction-probes`` command.

Every sub-command prints a readable table, or JSON with ``--json``. Bad input of any kind ends with one
line on stderr and exit status 2, never a traceback: argparse errors and the ``ValueError``s that the
API raises for invalid arguments are both reported that way.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields
import sys
from collections.abc import Sequence
from pathlib import Path

PROG = "induction-probes"


class UsageError(Exception):
    """Raised instead of argparse's usage dump, so that every error is one line."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would print the usage too
        raise UsageError(message)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned first column, right-aligned numbers, 4 decimals."""
    cells = [[f"{c:.4f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        first = values[0].ljust(widths[0])
        return "  ".join([first, *(v.rjust(w) for v, w in zip(values[1:], widths[1:]))])

    return "\n".join([line(list(headers)), line(["-" * w for w in widths]), *map(line, cells)])


def run_baselines(args: argparse.Namespace) -> str:
    from circuits.tasks.markov import strategy_baselines

    result = strategy_baselines(
        args.k, args.seq_len, n=args.n, alpha=args.alpha, n_seqs=args.n_seqs, seed=args.seed
    )
    if args.json:
        return json.dumps(vars(result) | {"task": "markov"}, indent=2)
    rows = [["true", "-", result.mean_ce["true"]]]
    rows += [[name, kl, result.mean_ce[name]] for name, kl in result.last_token_kl.items()]
    title = (
        f"ICL-MC strategy baselines: k={result.k}, n={result.n}, T={result.seq_len}, "
        f"alpha={result.alpha:g}, {result.n_seqs} sequences, seed {result.seed}"
    )
    table = format_table(["strategy", "last-token KL(true||s)", "mean CE over positions"], rows)
    return f"{title}\n{table}"


def run_train(args: argparse.Namespace) -> str:
    from circuits.train import GaussianTrainConfig, MarkovTrainConfig, saved_config, train_run

    config_class = GaussianTrainConfig if getattr(args, "task_config", None) == "gaussian" else MarkovTrainConfig
    known = {f.name for f in fields(config_class)}
    options = {name: getattr(args, name) for name in known if getattr(args, name, None) is not None}
    if args.seed is not None:
        options = {"model_seed": args.seed, "data_seed": args.seed + 1, "eval_seed": args.seed + 2} | options
    if args.resume:
        saved = vars(saved_config(args.out))
        clashes = [f"--{name.replace('_', '-')}" for name, value in options.items() if saved[name] != value]
        if clashes:
            raise ValueError(f"--resume continues the saved config; these options differ from it: {', '.join(clashes)}")
        cfg = None
    else:
        if config_class is MarkovTrainConfig and args.k is None:
            raise ValueError("--k is required to start a run")
        cfg = config_class(**options)
    run = train_run(cfg, args.out, resume=args.resume, stop_after=args.stop_after)
    return info_text(run)


def info_text(run, step: int | None = None) -> str:
    """Config, checkpoint steps and final metrics of a run; loads the checkpoint at ``step`` (default
    the last), which verifies its sha256 and its shapes against the config."""
    model = run.load(step=step)
    n_params = sum(p.numel() for p in model.parameters())
    train_cfg = run.config.get("train", {})
    lines = [f"run {run.path}", "config: " + ", ".join(f"{k}={v}" for k, v in train_cfg.items())]
    steps = run.steps
    lines.append(f"checkpoints: {len(steps)} steps from {steps[0]} to {steps[-1]}" if steps else "checkpoints: none")
    metrics = run.metrics()
    lines.append(f"loaded step {run.entry(step)['step']}: {n_params} parameters, sha256 verified")
    if metrics:
        last = metrics[-1]
        lines.append(f"final step {last['step']} ({last['sequences_seen']} sequences), train loss {last['train_loss']:.4g}")
        if "last_token_kl" in last:
            rows = [[name, value] for name, value in last["last_token_kl"].items()]
            lines.append(format_table(["last-token KL(x||model)", "value"], rows))
        else:
            lines.append(f"eval MSE {last['eval_loss']:.4g}, MSE / target variance {last['relative_mse']:.4g}")
    return "\n".join(lines)


def run_info(args: argparse.Namespace) -> str:
    from circuits.checkpoint import Run

    run = Run.open(args.run)
    text = info_text(run, args.step)
    if args.json:
        final = (run.metrics() or [None])[-1]
        return json.dumps({"path": str(run.path), "config": run.config, "steps": run.steps, "final": final}, indent=2)
    return text


def spread_steps(steps: list[int], n_rows: int = 12) -> set[int]:
    """About ``n_rows`` of ``steps``, evenly spread in step value: a readable summary of a run."""
    return {min(steps, key=lambda s: abs(s - steps[-1] * i / (n_rows - 1))) for i in range(n_rows)}


def report_rows(metrics: list[dict], phase_starts: set[int]) -> list[dict]:
    """Checkpoints evenly spread in step, plus the first checkpoint of every phase."""
    wanted = spread_steps([m["step"] for m in metrics]) | phase_starts
    return [m for m in metrics if m["step"] in wanted]


def run_report(args: argparse.Namespace) -> str:
    """The main job: a run's loss against the strategies over training, its phases and figures."""
    from circuits.checkpoint import Run
    from circuits.train import saved_train_config
    from probes.behaviour import strategy_phases

    run = Run.open(args.run)
    cfg, metrics = saved_train_config(run.path), run.metrics()
    if not metrics:
        raise ValueError(f"run {run.path} has no metrics yet")
    baselines = {name: kl.mean().item() for name, kl in cfg.eval_set().strategy_kl().items()}
    phases = strategy_phases(metrics)
    figures = plot_report(run, metrics, baselines, phases, args.plot) if args.plot else []
    if args.json:
        result = {"run": str(run.path), "baselines": baselines, "phases": [vars(p) for p in phases]}
        return json.dumps(result | {"metrics": metrics, "figures": [str(f) for f in figures]}, indent=2)
    title = f"run {run.path.name}: ICL-MC k={cfg.k}, T={cfg.seq_len}, {cfg.steps} steps of {cfg.batch_size} sequences"
    baseline_text = ", ".join(f"{name} {value:.4f}" for name, value in baselines.items())
    lines = [
        title,
        f"strategy baselines on its {cfg.eval_seqs} evaluation sequences, last-token KL(true||s): {baseline_text}",
        "",
        metrics_table(metrics, list(baselines), phases),
        "",
        "phases (closest strategy): " + " -> ".join(map(phase_text, phases)),
    ]
    return "\n".join(lines + [f"figure: {path}" for path in figures])


def metrics_table(metrics: list[dict], strategies: list[str], phases: list) -> str:
    from circuits.tasks.markov import closest_strategy

    headers = ["step", "seqs (k)", "train loss", "KL(true||model)", *(f"KL({s}||model)" for s in strategies), "closest"]
    rows = [
        [m["step"], f"{m['sequences_seen'] / 1000:.1f}", m["train_loss"], m["last_token_kl"]["true"],
         *(m["last_token_kl"][s] for s in strategies), closest_strategy(m["last_token_kl"])]
        for m in report_rows(metrics, {p.first_step for p in phases})
    ]
    return format_table(headers, rows)


def phase_text(phase) -> str:
    seen = f"{phase.first_sequences / 1000:.1f}k-{phase.last_sequences / 1000:.1f}k seqs"
    return f"{phase.strategy} (steps {phase.first_step}-{phase.last_step}, {seen})"


def plot_report(run, metrics: list[dict], baselines: dict[str, float], phases: list, directory: Path) -> list[Path]:
    from probes.plots import plot_distance_to_strategies, plot_loss_against_baselines, plot_minimal_parameters

    name = run.path.name
    figures = [
        plot_distance_to_strategies(metrics, list(baselines), name, directory / f"{name}_strategies.png"),
        plot_loss_against_baselines(metrics, baselines, name, directory / f"{name}_loss.png"),
    ]
    if run.config.get("model_class") == "MinimalModel":  # v and W on the plateau, at the drop, at the end
        plateau, drop = phases[-2] if len(phases) > 1 else phases[0], phases[-1]
        steps = sorted({(plateau.first_step + plateau.last_step) // 2, drop.first_step, run.steps[-1]})
        steps = [min(run.steps, key=lambda s: abs(s - wanted)) for wanted in steps]
        figures += plot_minimal_parameters({s: run.load(step=s) for s in steps}, name, directory, name)
    return figures


def run_probe(args: argparse.Namespace) -> str:
    """Attention and behaviour probes of one checkpoint (default the last) or of every checkpoint."""
    from circuits.checkpoint import Run
    from probes.summary import probe_eval_set, probe_run

    run = Run.open(args.run)
    if args.all_steps and args.step is not None:
        raise ValueError("give --step or --all-steps, not both")
    if run.config.get("task") == "gaussian":
        return probe_gaussian_text(run, args)
    steps = run.steps if args.all_steps else [run.entry(args.step)["step"]]
    probe_set = probe_eval_set(run, args.n_seqs, args.seed)
    results = list(probe_run(run, probe_set, steps))
    figures = plot_probes(run, results, probe_set.sample.inputs[:1], args.plot) if args.plot else []
    if args.json:
        payload = [r.to_json() for r in results]
        return json.dumps(payload if args.all_steps else payload[0], indent=2)
    sections = [probe_text(run, results[-1])] + ([probe_trajectory(results)] if args.all_steps else [])
    return "\n\n".join(sections) + "".join(f"\nfigure: {path}" for path in figures)


def probe_gaussian_text(run, args: argparse.Namespace) -> str:
    from probes.summary import probe_gaussian

    steps = run.steps if args.all_steps else [args.step]
    results = [probe_gaussian(run, step, args.n_seqs, args.seed) for step in steps]
    if args.json:
        payload = [r.to_json() for r in results]
        return json.dumps(payload if args.all_steps else payload[0], indent=2)
    rows = [[r.step, r.relative_mse, max(r.previous_token[0]), max(r.induction)] for r in results
            if r.step in spread_steps([x.step for x in results])]
    headers = ["step", "MSE / target variance", "layer 0 previous-token", "layer 1 induction (1-TV)"]
    return f"run {run.path.name}: Gaussian induction task, {args.n_seqs} fresh sequences\n" + format_table(headers, rows)


def probe_text(run, result) -> str:
    n_layers, n_heads = result.previous_token.shape
    rows = [
        [f"{layer}.{head}", result.previous_token[layer, head].item(), result.bigram_matching[layer, head].item(),
         result.bigram_matching_ideal[layer, head].item()]
        for layer in range(n_layers) for head in range(n_heads)
    ]
    b = result.behaviour
    lines = [
        f"run {run.path.name}, step {result.step}: {b.closest_strategy} is the closest strategy",
        format_table(["head", "previous-token", "bigram-matching", "bigram ideal (1-TV)"], rows),
        f"({100 * result.fraction_with_match:.1f}% of queries have a matching key)",
        format_table(["last-token KL(x||model)", "value"], [[k, v] for k, v in b.last_token_kl.items()]),
        f"loss {b.loss:.4f}, ICL score {b.icl_score:+.4f} (loss at position 99 minus position 10)",
    ]
    if result.positional_profile is not None:
        profile = result.positional_profile[0]
        peak = int(profile.argmax())
        lines.append(f"layer 0 positional profile peaks at distance {peak} ({profile[peak]:.3f})")
    return "\n".join(lines)


def probe_trajectory(results) -> str:
    """Scores over training at spread-out steps and wherever the closest strategy changes."""
    changes = {b.step for a, b in zip(results, results[1:]) if a.behaviour.closest_strategy != b.behaviour.closest_strategy}
    wanted = spread_steps([r.step for r in results]) | changes
    rows = [
        [r.step, r.previous_token[0].max().item(), r.bigram_matching[-1].max().item(), r.behaviour.last_token_kl["true"],
         r.behaviour.closest_strategy]
        for r in results
        if r.step in wanted
    ]
    return format_table(["step", "layer 0 prev-token", "last layer bigram-matching", "KL(true||model)", "closest"], rows)


def run_ablate(args: argparse.Namespace) -> str:
    from circuits.checkpoint import Run
    from probes.ablation import heads_in_layer, parse_heads
    from probes.summary import ablation_study, probe_eval_set, single_heads

    run = Run.open(args.run)
    model = run.load(step=args.step)
    cfg = model.cfg
    head_sets = [parse_heads(args.heads, cfg.n_layers, lambda layer: heads_in_layer(cfg, layer))] if args.heads else single_heads(model)
    if run.config.get("task") == "gaussian":
        return gaussian_ablation_text(run, head_sets, args)
    eval_set = probe_eval_set(run, args.n_seqs, args.seed)
    reference = probe_eval_set(run, args.n_seqs, args.seed + 1).sample.inputs  # other sequences
    baseline, results = ablation_study(model, eval_set, head_sets, args.mode, reference, args.seed)
    figures = plot_ablations(run, baseline, results, args.plot) if args.plot else []
    if args.json:
        base = {"last_token_kl": baseline.last_token_kl, "loss": baseline.loss, "icl_score": baseline.icl_score,
                "closest_strategy": baseline.closest_strategy}
        return json.dumps({"baseline": base, "ablations": [r.to_json() for r in results]}, indent=2)
    rows = [["none", baseline.last_token_kl["true"], baseline.loss, baseline.icl_score, baseline.closest_strategy]]
    rows += [
        [",".join(f"{l}.{h}" for l, h in r.heads), r.behaviour.last_token_kl["true"], r.behaviour.loss,
         r.behaviour.icl_score, r.behaviour.closest_strategy]
        for r in results
    ]
    title = f"run {run.path.name}, step {run.entry(args.step)['step']}: {args.mode} ablation on {args.n_seqs} sequences"
    table = format_table(["ablated heads", "KL(true||model)", "loss", "ICL score", "closest"], rows)
    return "\n".join([title, table] + [f"figure: {path}" for path in figures])


def gaussian_ablation_text(run, head_sets, args: argparse.Namespace) -> str:
    from probes.summary import gaussian_ablation_study

    baseline, ablated = gaussian_ablation_study(run, head_sets, args.mode, args.step, args.n_seqs, args.seed)
    names = [",".join(f"{l}.{h}" for l, h in heads) for heads, _ in ablated]
    if args.json:
        return json.dumps({"baseline": {"relative_mse": baseline},
                           "ablations": [{"heads": name.split(","), "mode": args.mode, "relative_mse": value}
                                         for name, (_, value) in zip(names, ablated)]}, indent=2)
    rows = [["none", baseline]] + [[name, value] for name, (_, value) in zip(names, ablated)]
    title = f"run {run.path.name}: {args.mode} ablation on {args.n_seqs} Gaussian sequences"
    return "\n".join([title, format_table(["ablated heads", "MSE / target variance"], rows)])


def plot_probes(run, results, example, directory: Path) -> list[Path]:
    """Attention heatmaps on one ``example`` sequence at three steps, positional profiles, and the
    scores over training when several steps were probed."""
    from probes.attention import run_with_patterns
    from probes.plots import plot_attention_heatmaps, plot_positional_profiles, plot_scores_over_training, three_steps

    name = run.path.name
    patterns = {r.step: run_with_patterns(run.load(step=r.step), example)[1] for r in three_steps(results)}
    figures = [
        plot_attention_heatmaps(patterns, name, directory / f"{name}_attention.png"),
        plot_positional_profiles(results, name, directory / f"{name}_positional.png"),
    ]
    if len(results) > 1:
        figures.append(plot_scores_over_training(results, name, directory / f"{name}_scores.png"))
    return figures


def plot_ablations(run, baseline, results, directory: Path) -> list[Path]:
    from probes.plots import plot_ablation_bars

    return [plot_ablation_bars(baseline, results, run.path.name, directory / f"{run.path.name}_ablation.png")]


def run_verify_prop21(args: argparse.Namespace) -> str:
    """Proposition 2.1 against its exact limit, the error as c grows, and its probe scores; with
    --against, a trained run against the construction."""
    from probes.compare import check_prop21

    if args.against is not None:
        return run_compare_prop21(args)

    result = check_prop21(args.k, args.c, args.seq_len, args.n_seqs, args.seed)
    figures = []
    if args.plot:
        from probes.plots import plot_prop21

        figures = [plot_prop21(result, args.plot / f"prop21_k{args.k}.png")]
    if args.json:
        return json.dumps(result.to_json() | {"figures": [str(f) for f in figures]}, indent=2)
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
    return "\n".join(lines + [f"figure: {path}" for path in figures])


def run_compare_prop21(args: argparse.Namespace) -> str:
    from circuits.checkpoint import Run
    from circuits.train import saved_train_config
    from probes.compare import compare_with_prop21
    from probes.summary import probe_eval_set

    run = Run.open(args.against)
    cfg = saved_train_config(run.path)
    if cfg.k != args.k:
        raise ValueError(f"run {run.path.name} has k={cfg.k}, but --k is {args.k}")
    if cfg.n != 2:
        raise ValueError(f"Proposition 2.1 is for bigram chains; run {run.path.name} has n={cfg.n}")
    tokens = probe_eval_set(run, args.n_seqs, args.seed).sample.inputs
    steps = [s for s in run.steps if s in spread_steps(run.steps)] if args.all_steps else [run.entry(args.step)["step"]]
    results = {step: compare_with_prop21(run.load(step=step), tokens, args.k, args.c) for step in steps}
    final_step, final = steps[-1], results[steps[-1]]
    figures = []
    if args.plot:
        from probes.plots import plot_prop21_comparison

        figures = [plot_prop21_comparison(final, f"{run.path.name} step {final_step}", args.plot / f"prop21_vs_{run.path.name}.png")]
    if args.json:
        return json.dumps({str(step): r.to_json() | {"failures": r.failures()} for step, r in results.items()}, indent=2)
    rows = [
        [step, r.attention_tv[0], r.attention_tv[1], r.positional_profile[1].item(), int(r.positional_profile.argmax()),
         r.diagonal_is_row_max, r.ov_top1_diagonal, "yes" if (r.ov_eigenvalues.real > 0).all() else "no"]
        for step, r in results.items()
    ]
    headers = ["step", "attn TV L0", "attn TV L1", "profile@1", "peak", "diag-dominant rows", "OV top-1", "OV eig > 0"]
    failures = final.failures()
    verdict = "matches the construction's signatures" if not failures else "differs: " + "; ".join(failures)
    lines = [f"{run.path.name} against Proposition 2.1 (k={args.k}, c={args.c:g}) on {args.n_seqs} sequences",
             format_table(headers, rows), f"step {final_step}: {verdict}"]
    return "\n".join(lines + [f"figure: {path}" for path in figures])


def run_verify_wang_ih2(args: argparse.Namespace) -> str:
    """Wang et al.'s Theorem 4.1 against IH_2 on fresh Gaussian sequences, over a grid of β."""
    from probes.compare import check_wang_ih2

    result = check_wang_ih2(args.d, args.beta, args.seq_len, args.n_seqs, args.seed)
    if args.json:
        return json.dumps(result.to_json(), indent=2)
    rows = [[f"{beta:g}", f"{error:.2e}"] for beta, error in result.error_by_beta]
    return "\n".join([
        f"Theorem 4.1 (IH_2, W* = I), d={result.d}, L={result.seq_len}, {result.n_seqs} Gaussian sequences",
        format_table(["beta", "relative error"], rows),
        f"at beta={result.beta:g}: relative error {result.relative_error:.2e}, "
        f"layer 0 previous-token {result.previous_token:.4f}",
    ])


def run_verify_wang_ihn(args: argparse.Namespace) -> str:
    """Wang et al.'s Theorem 4.3 against IH_n over a grid of first-layer head counts."""
    from probes.compare import check_wang_ihn

    result = check_wang_ihn(args.d, args.n, args.heads, args.seq_len, args.n_seqs, args.seed)
    if args.json:
        return json.dumps(result.to_json(), indent=2)
    rows = [[heads, f"{error:.2e}"] for heads, error in result.error_by_heads]
    return "\n".join([
        f"Theorem 4.3 (IH_{result.n}, W* = I), d={result.d}, L={result.seq_len}, {result.n_seqs} Gaussian sequences",
        format_table(["heads H", "relative error"], rows),
        f"at H={result.heads}: relative error {result.relative_error:.2e}; fitted error ~ C / H^{result.fitted_q:.1f} "
        f"(paper: C (n e^(1+0.01n) / H)^q, n e^(1+0.01n) = {result.paper_scale:.1f})",
    ])


def build_parser() -> Parser:
    parser = Parser(prog=PROG, description="Probe induction heads in small attention-only transformers.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    baselines = commands.add_parser("baselines", help="in-context strategy baselines of a task")
    tasks = baselines.add_subparsers(dest="task", required=True, parser_class=Parser)
    markov = tasks.add_parser("markov", help="ICL-MC: last-token KL and mean CE of each strategy")
    add_markov_task_options(markov, with_defaults=True)
    markov.add_argument("--n-seqs", type=int, default=20_000, help="sequences to average over")
    markov.add_argument("--seed", type=int, default=0, help="seed of the sampled chains")
    markov.add_argument("--json", action="store_true", help="machine-readable output")
    markov.set_defaults(handler=run_baselines)

    train = commands.add_parser("train", help="train a model and write a run directory")
    train_tasks = train.add_subparsers(dest="task", required=True, parser_class=Parser)
    markov_train = train_tasks.add_parser("markov", help="ICL-MC: the 2-layer relative-position model")
    add_markov_task_options(markov_train, with_defaults=False)  # unset options keep a resumed run's values
    markov_train.add_argument("--steps", type=int, help="optimiser steps (default 4000)")
    markov_train.add_argument("--batch-size", type=int, help="sequences per step (default 64)")
    markov_train.add_argument("--lr", type=float, help="AdamW learning rate (default 1e-3)")
    markov_train.add_argument("--weight-decay", type=float, help="AdamW weight decay on the linear maps (default 0.1)")
    markov_train.add_argument("--lr-schedule", choices=["cosine", "constant"], help="default cosine decay to 0")
    markov_train.add_argument("--d-model", type=int, help="width per first-layer head (default 16)")
    markov_train.add_argument("--dropout", type=float, help="dropout probability (default 0)")
    markov_train.add_argument("--layer-norm", action=argparse.BooleanOptionalAction, default=None, help="pre-LN (default on)")
    add_run_options(markov_train)
    markov_train.set_defaults(handler=run_train)

    minimal_train = train_tasks.add_parser("minimal", help="ICL-MC: Edelman et al.'s minimal model (eq. 6), SGD")
    add_markov_task_options(minimal_train, with_defaults=False)
    minimal_train.add_argument("--first-layer", choices=["softmax", "linear"], help="default softmax")
    minimal_train.add_argument("--steps", type=int, help="SGD steps (default 1000)")
    minimal_train.add_argument("--batch-size", type=int, help="sequences per step (default 128)")
    minimal_train.add_argument("--lr", type=float, help="SGD rate of W (default 0.01)")
    minimal_train.add_argument("--lr-v", type=float, help="SGD rate of v (default 1.0)")
    minimal_train.add_argument("--lr-schedule", choices=["cosine", "constant"], help="default constant")
    add_run_options(minimal_train)
    minimal_train.set_defaults(handler=run_train, architecture="minimal", first_layer="softmax", steps=1000,
                               batch_size=128, lr=0.01, lr_v=1.0, lr_schedule="constant")

    gaussian_train = train_tasks.add_parser("gaussian", help="Wang et al.'s Gaussian induction task, MSE")
    gaussian_train.add_argument("--target", choices=["ih2", "ihn", "mixed"], help="default ih2")
    gaussian_train.add_argument("--n", type=int, help="n of IH_n (with --target ihn)")
    gaussian_train.add_argument("--heads", type=int, help="first-layer heads (default 1)")
    gaussian_train.add_argument("--d", type=int, help="token dimension (default 2)")
    gaussian_train.add_argument("--d-model", type=int, help="residual width (default 8)")
    gaussian_train.add_argument("--seq-len", type=int, help="L (default 20)")
    gaussian_train.add_argument("--w-star", type=float, help="W* = w_star * I (default 1)")
    gaussian_train.add_argument("--alpha-star", type=float, help="weight of the 4-gram term (mixed, default 2)")
    gaussian_train.add_argument("--boolean", action="store_true", default=None, help="±1 tokens instead of Gaussian")
    gaussian_train.add_argument("--optimizer", choices=["adam", "sgd"], help="default adam")
    gaussian_train.add_argument("--steps", type=int, help="default 600")
    gaussian_train.add_argument("--batch-size", type=int, help="default 512")
    gaussian_train.add_argument("--lr", type=float, help="default 1e-2")
    gaussian_train.add_argument("--slope-lr", type=float, help="rate of the ALiBi slopes (default 1e-1)")
    gaussian_train.add_argument("--lr-schedule", choices=["cosine", "constant"], help="default cosine")
    add_run_options(gaussian_train)
    gaussian_train.set_defaults(handler=run_train, task_config="gaussian")

    toy = commands.add_parser("toy", help="Wang et al.'s toy model: four phases, and the plateau sweep")
    toy.add_argument("--seq-len", type=int, default=20, help="L (>= 4, default 20)")
    toy.add_argument("--sigma", type=float, default=1e-2, help="initial scale of the weights (> 0, default 0.01)")
    toy.add_argument("--alpha", type=float, default=2.0, help="α*, the 4-gram weight in the target (default 2)")
    toy.add_argument("--boolean", action="store_true", help="±1 tokens instead of Gaussian")
    toy.add_argument("--optimizer", choices=["gd", "adam"], default="gd", help="default gd (gradient descent)")
    toy.add_argument("--steps", type=int, default=5000, help="gradient steps (default 5000)")
    toy.add_argument("--layerwise-steps", type=int, default=0,
                     help="train layer 1 alone for this many steps, then freeze it (default 0: joint training)")
    toy.add_argument("--lr", type=float, default=0.1, help="step size (default 0.1)")
    toy.add_argument("--n-seqs", type=int, default=8192, help="sequences in the full batch (default 8192)")
    toy.add_argument("--sweep", action="store_true", help="plateau length over L in {10,20,40}, σ in {1e-2,1e-3,1e-4}")
    toy.add_argument("--out", type=Path, help="write config.json and metrics.jsonl here")
    toy.add_argument("--plot", type=Path, metavar="DIR", help="write figures (PNG) into DIR")
    toy.add_argument("--json", action="store_true", help="machine-readable output")
    toy.set_defaults(handler=run_toy)

    experiment = commands.add_parser("experiment", help="the rebuttal experiments that need several runs")
    experiments = experiment.add_subparsers(dest="experiment", required=True, parser_class=Parser)
    ih4 = experiments.add_parser("ih4", help="IH_4: one head or D = 2d fails, enough heads and D = n·d succeed")
    ih4.add_argument("--steps", type=int, default=10_000, help="Adam steps per model (default 10000, ~8 min in all)")
    ih4.add_argument("--plot", type=Path, metavar="DIR", help="write the figure (PNG) into DIR")
    ih4.add_argument("--json", action="store_true", help="machine-readable output")
    ih4.set_defaults(handler=run_experiment_ih4)

    info = commands.add_parser("info", help="config, checkpoint steps and final metrics of a run")
    info.add_argument("run", help="run directory or shipped run name (e.g. markov-k3)")
    info.add_argument("--step", type=int, help="checkpoint to load and verify (default: the last)")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.set_defaults(handler=run_info)

    report = commands.add_parser("report", help="loss against the strategies over a run, phases, figures")
    report.add_argument("run", help="run directory or shipped run name (e.g. markov-k3)")
    report.add_argument("--plot", type=Path, metavar="DIR", help="write the figures (PNG) into DIR")
    report.add_argument("--json", action="store_true", help="machine-readable output")
    report.set_defaults(handler=run_report)

    probe = commands.add_parser("probe", help="attention and behaviour probes of a checkpoint or a whole run")
    probe.add_argument("run", help="run directory or shipped run name")
    probe.add_argument("--step", type=int, help="checkpoint step (default: the last)")
    probe.add_argument("--all-steps", action="store_true", help="probe every checkpoint of the run")
    add_probe_set_options(probe)
    probe.set_defaults(handler=run_probe)

    ablate = commands.add_parser("ablate", help="ablate heads and measure what in-context learning loses")
    ablate.add_argument("run", help="run directory or shipped run name")
    ablate.add_argument("--step", type=int, help="checkpoint step (default: the last)")
    ablate.add_argument("--mode", choices=["zero", "mean", "resample"], default="zero", help="default zero")
    ablate.add_argument("--heads", help="heads ablated together, as L.H,L.H (default: each head alone)")
    add_probe_set_options(ablate)
    ablate.set_defaults(handler=run_ablate)

    verify = commands.add_parser("verify", help="check a hand-made construction")
    constructions = verify.add_subparsers(dest="construction", required=True, parser_class=Parser)
    prop21 = constructions.add_parser("prop21", help="Edelman et al.'s Proposition 2.1 (statistical induction)")
    prop21.add_argument("--k", type=int, required=True, help="number of states (>= 2)")
    prop21.add_argument("--c", type=float, default=100.0, help="the construction's scale (> 0, default 100)")
    prop21.add_argument("--seq-len", type=int, default=100, help="tokens per sequence (default 100)")
    prop21.add_argument("--n-seqs", type=int, default=500, help="ICL-MC sequences (default 500)")
    prop21.add_argument("--seed", type=int, default=0, help="seed of those sequences")
    prop21.add_argument("--json", action="store_true", help="machine-readable output")
    prop21.add_argument("--plot", type=Path, metavar="DIR", help="write the figure (PNG) into DIR")
    prop21.add_argument("--against", help="compare a trained run (directory or shipped name) with the construction")
    prop21.add_argument("--step", type=int, help="with --against: checkpoint step (default: the last)")
    prop21.add_argument("--all-steps", action="store_true", help="with --against: spread-out steps of the run")
    prop21.set_defaults(handler=run_verify_prop21)

    wang = constructions.add_parser("wang-ih2", help="Wang et al.'s Theorem 4.1 (vanilla induction head, ALiBi)")
    wang.add_argument("--beta", type=float, default=20.0, help="ALiBi slope of layer 0 (> 0, default 20)")
    wang.add_argument("--d", type=int, default=2, help="token dimension (default 2)")
    wang.add_argument("--seq-len", type=int, default=20, help="L (>= 4, default 20)")
    wang.add_argument("--n-seqs", type=int, default=1000, help="fresh sequences (default 1000)")
    wang.add_argument("--seed", type=int, default=0, help="seed of those sequences")
    wang.add_argument("--json", action="store_true", help="machine-readable output")
    wang.set_defaults(handler=run_verify_wang_ih2)

    wang_n = constructions.add_parser("wang-ihn", help="Wang et al.'s Theorem 4.3 (IH_n from H first-layer heads)")
    wang_n.add_argument("--n", type=int, required=True, help="n-gram order (>= 2)")
    wang_n.add_argument("--heads", type=int, help="first-layer heads H (>= n(n-1)/2; default that + 3(n-1))")
    wang_n.add_argument("--d", type=int, default=1, help="token dimension (default 1)")
    wang_n.add_argument("--seq-len", type=int, default=20, help="L (>= n + 2, default 20)")
    wang_n.add_argument("--n-seqs", type=int, default=1000, help="fresh sequences (default 1000)")
    wang_n.add_argument("--seed", type=int, default=0, help="seed of those sequences")
    wang_n.add_argument("--json", action="store_true", help="machine-readable output")
    wang_n.set_defaults(handler=run_verify_wang_ihn)
    return parser


SWEEP_LENGTHS, SWEEP_SIGMAS = (10, 20, 40), (1e-2, 1e-3, 1e-4)


def run_toy(args: argparse.Namespace) -> str:
    """Wang et al.'s toy model: one run with its phases marked, or the plateau sweep over L and σ."""
    if args.sweep:
        return run_toy_sweep(args)
    from circuits.checkpoint import write_atomic, write_json
    from circuits.minimal import ToyConfig, train_toy
    from probes.behaviour import toy_phases

    cfg = ToyConfig(seq_len=args.seq_len, sigma=args.sigma, alpha_star=args.alpha, boolean=args.boolean,
                    optimizer=args.optimizer, steps=args.steps, lr=args.lr, n_seqs=args.n_seqs,
                    layerwise_steps=args.layerwise_steps)
    history = train_toy(cfg)
    phases = toy_phases(history)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        write_json(args.out / "config.json", {"task": "toy", "toy": vars(cfg)})
        write_atomic(args.out / "metrics.jsonl", "".join(json.dumps(h) + "\n" for h in history).encode())
    figures = []
    if args.plot:
        from probes.plots import plot_toy

        kind = ("_boolean" if cfg.boolean else "") + ("_adam" if cfg.optimizer == "adam" else "")
        title = f"toy model: L={cfg.seq_len}, σ={cfg.sigma:g}, α*={cfg.alpha_star:g}, {cfg.optimizer}" + (", ±1 tokens" if cfg.boolean else "")
        figures = [plot_toy(history, phases, title, args.plot / f"toy_L{cfg.seq_len}_sigma{cfg.sigma:g}{kind}.png")]
    if args.json:
        return json.dumps({"config": vars(cfg), "phases": vars(phases) | {"plateau": phases.plateau},
                           "final": history[-1]}, indent=2)
    last = history[-1]
    lines = [
        f"toy model, L={cfg.seq_len}, sigma={cfg.sigma:g}, alpha*={cfg.alpha_star:g}: {cfg.steps} {cfg.optimizer} steps, lr {cfg.lr:g}"
        + (", ±1 tokens" if cfg.boolean else ""),
        f"phase I ends at step {phases.end_of_I}, the plateau (II) at {phases.end_of_II} "
        f"(length {phases.plateau}), the emergence (III) at {phases.end_of_III}; IV after",
        f"final loss {last['loss']:.2e} (4-gram part {last['loss_4gram']:.2e}, induction part {last['loss_induction']:.2e})",
        "final parameters: " + ", ".join(f"{name} {last[name]:.3f}" for name in ("p1", "p2", "w_V1", "w_K", "w_Q", "w_V2")),
    ]
    return "\n".join(lines + [f"figure: {path}" for path in figures])


def run_toy_sweep(args: argparse.Namespace) -> str:
    import itertools

    from circuits.minimal import ToyConfig, train_toy
    from probes.behaviour import fit_plateau, toy_phases

    rows = []
    for length, sigma in itertools.product(SWEEP_LENGTHS, SWEEP_SIGMAS):
        cfg = ToyConfig(seq_len=length, sigma=sigma, alpha_star=args.alpha, boolean=args.boolean, lr=args.lr,
                        steps=6000, n_seqs=2048)
        rows.append((length, sigma, toy_phases(train_toy(cfg)).plateau))
    fit = fit_plateau(rows)
    figures = []
    if args.plot:
        from probes.plots import plot_plateau_sweep

        figures = [plot_plateau_sweep(rows, fit, args.plot / "toy_plateau_sweep.png")]
    if args.json:
        return json.dumps({"rows": [{"seq_len": L, "sigma": s, "plateau": p} for L, s, p in rows],
                           "fit": {"slope": fit[0], "intercept": fit[1], "r2": fit[2]}}, indent=2)
    table = format_table(["L", "sigma", "plateau (steps)"], [[L, f"{s:g}", p] for L, s, p in rows])
    summary = f"plateau ≈ {fit[0]:.2f}·L·log(1/σ) {fit[1]:+.0f} steps, R² = {fit[2]:.3f}"
    return "\n".join([table, summary] + [f"figure: {path}" for path in figures])


IH4_MODELS = (("1 head, D = n·d", 1, 8), ("6 heads, D = 2d", 6, 4), ("6 heads, D = n·d", 6, 8))


def run_experiment_ih4(args: argparse.Namespace) -> str:
    """The rebuttal's capacity experiment: IH_4 (d = 2) needs several first-layer heads and D ≥ n·d."""
    import tempfile

    from circuits.train import GaussianTrainConfig, train_run

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for label, heads, width in IH4_MODELS:
            cfg = GaussianTrainConfig(target="ihn", n=4, d=2, heads=heads, d_model=width, steps=args.steps, n_checkpoints=20)
            run = train_run(cfg, Path(scratch) / f"h{heads}_D{width}", progress=False)
            rows.append((label, heads, width, run.metrics()[-1]["relative_mse"]))
    figures = []
    if args.plot:
        from probes.plots import plot_capacity_table

        figures = [plot_capacity_table(rows, args.plot / "ih4_capacity.png")]
    if args.json:
        return json.dumps([{"model": label, "heads": h, "d_model": w, "relative_mse": e} for label, h, w, e in rows], indent=2)
    table = format_table(["model", "heads", "D", "MSE / target variance"], [list(row) for row in rows])
    return "\n".join([f"IH_4, d = 2, L = 20, {args.steps} Adam steps each", table] + [f"figure: {p}" for p in figures])


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Where a training run goes, its seeds, evaluation and schedule, and stopping and resuming."""
    parser.add_argument("--out", type=Path, required=True, help="run directory to create (or continue)")
    parser.add_argument("--seed", type=int, help="sets model, data and eval seeds to S, S+1, S+2")
    parser.add_argument("--model-seed", type=int, help="initial weights and dropout (default 0)")
    parser.add_argument("--data-seed", type=int, help="training sequences (default 1)")
    parser.add_argument("--eval-seed", type=int, help="fixed evaluation set (default 2)")
    parser.add_argument("--eval-seqs", type=int, help="evaluation sequences (default 2000)")
    parser.add_argument("--n-checkpoints", type=int, help="checkpoints on the schedule")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out")
    parser.add_argument("--stop-after", type=int, help="stop at this step; continue later with --resume")


def add_markov_task_options(parser: argparse.ArgumentParser, with_defaults: bool) -> None:
    """--k, --seq-len, --n, --alpha; without defaults an option left out reads None."""
    parser.add_argument("--k", type=int, required=with_defaults, help="number of states (>= 2)")
    parser.add_argument("--seq-len", type=int, default=100 if with_defaults else None,
                        help="input tokens per sequence (>= 2, default 100)")
    parser.add_argument("--n", type=int, default=2 if with_defaults else None,
                        help="chain of order n-1 (default 2, the bigram task)")
    parser.add_argument("--alpha", type=float, default=1.0 if with_defaults else None,
                        help="Dirichlet parameter of each row (default 1)")


def add_probe_set_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-seqs", type=int, default=1000, help="fresh sequences to probe on (default 1000)")
    parser.add_argument("--seed", type=int, default=12345, help="seed of those sequences (default 12345)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--plot", type=Path, metavar="DIR", help="write figures (PNG) into DIR")


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    # These models are tiny: on the 2-core machine one thread beat two (bench/bench_model.py).
    torch.set_num_threads(1)
    try:
        args = build_parser().parse_args(argv)
        print(args.handler(args))
    except (UsageError, ValueError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except FloatingPointError as error:  # a diverged training run: not bad input, still one line
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
