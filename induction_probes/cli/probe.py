"""``induction-probes probe`` and ``ablate``: attention and behaviour of a checkpoint or a whole run, and
what in-context learning loses when heads are ablated."""

from __future__ import annotations

import argparse
from pathlib import Path

import induction_probes.cli.lm as lm
from induction_probes.cli.common import (
    add_probe_set_options,
    add_run_argument,
    device_of,
    figure_lines,
    format_table,
    json_text,
    provenance,
    spread_steps,
)
from induction_probes.cli.views import view_of

# Loaded to build the parser, before a command is chosen: the handlers below import the library they call
# (torch, matplotlib) inside themselves, so that --help and usage errors load neither (tests/unit/test_structure.py).


def register(commands) -> None:
    probe = commands.add_parser("probe", help="attention and behaviour probes of a checkpoint or a whole run")
    add_run_argument(probe)
    probe.add_argument("--step", type=int, help="checkpoint step (default: the last)")
    probe.add_argument("--all-steps", action="store_true", help="probe every checkpoint of the run")
    add_probe_set_options(probe)
    lm.add_options(probe)
    probe.set_defaults(handler=run_probe)

    ablate = commands.add_parser("ablate", help="ablate heads and measure what in-context learning loses")
    add_run_argument(ablate)
    ablate.add_argument("--step", type=int, help="checkpoint step (default: the last)")
    ablate.add_argument("--mode", choices=["zero", "mean", "resample"], default="zero", help="default zero")
    ablate.add_argument("--heads", help="heads ablated together, as L.H,L.H (default: each head alone)")
    add_probe_set_options(ablate)
    lm.add_options(ablate, ablate=True)
    ablate.set_defaults(handler=run_ablate)


def open_hooked_run(name: str):
    """The run, unless it holds no attention heads to probe (the toy model's six parameters)."""
    from induction_probes.circuits.runs.reader import Run

    run = Run.open(name)
    if run.kind == "toy":
        raise ValueError(f"run {run.path.name} is a toy-model run: six parameters, no attention heads to probe")
    return run


def run_probe(args: argparse.Namespace) -> str:
    """Attention and behaviour probes of one checkpoint (default the last) or of every checkpoint, as the
    view of the run's task shows them (:mod:`induction_probes.cli.views`)."""
    if (model := lm.language_model(args)) is not None:
        return lm.run_probe(args, model)
    run = open_hooked_run(args.run)
    if args.all_steps and args.step is not None:
        raise ValueError("give --step or --all-steps, not both")
    return view_of(run).show("probe", run, args)


def probe_markov_text(run, args: argparse.Namespace) -> str:
    """An ICL-MC run's probes: attention per head, behaviour, progress measures, figures."""
    from induction_probes.probes.summary import probe_eval_set, probe_run

    steps = run.steps if args.all_steps else [run.entry(args.step)["step"]]
    probe_set = probe_eval_set(run, args.n_seqs, args.seed)
    results = probe_run(run, probe_set, steps, device=device_of(args))
    figures = plot_probes(run, results, probe_set.inputs, args.plot) if args.plot else []
    progress = [r.progress for r in results if r.progress is not None]
    if args.json:
        header = provenance(run, steps, args.n_seqs, args.seed)
        crossings = {"progress_thresholds": progress_thresholds(run, progress)} if progress else {}
        tidy = {"records": results.to_records(), "warnings": results.warnings}  # the long form of probes/tidy.py
        return json_text(header | crossings | {"checkpoints": [r.to_json() for r in results]} | tidy)
    sections = [probe_text(run, results[-1])] + ([probe_trajectory(results)] if args.all_steps else [])
    if progress:
        sections.append(progress_text(run, progress))
    sections += ["\n".join(f"warning: {line}" for line in results.warnings)] if results.warnings else []
    return "\n\n".join(sections) + "".join("\n" + line for line in figure_lines(figures))


def progress_thresholds(run, progress: list) -> dict:
    """Per calibrated measure: chance, construction value, threshold, and the first step that reaches it."""
    from induction_probes.probes.progress import config_calibration, first_crossing

    rows = {}
    for name, measure in config_calibration(run.model_config).items():
        step = first_crossing(progress, measure)
        rows[name] = {
            "chance": measure.chance,
            "construction": measure.construction,
            "threshold": measure.threshold,
            "value": progress[-1].value(name),
            "first_step": step,
            "first_sequences": None if step is None else run.entry(step)["sequences_seen"],
        }
    return rows


def progress_text(run, progress: list) -> str:
    """The circuit's pieces from the weights: each measure against its chance and construction values,
    and (over several checkpoints) the first step at which it is halfway from one to the other."""
    rows = progress_thresholds(run, progress)
    several = len(progress) > 1
    headers = ["measure (best head)", f"step {progress[-1].step}", "chance", "construction", "threshold"]
    table = [
        [name, r["value"], r["chance"], r["construction"], r["threshold"]]
        + (
            [f"{r['first_step']} ({r['first_sequences']} seqs)" if r["first_step"] is not None else "never"]
            if several
            else []
        )
        for name, r in rows.items()
    ]
    composition = progress[-1].composition
    lines = [
        "progress measures from the weights (threshold: halfway from chance to Proposition 2.1)",
        format_table(headers + (["first at threshold"] if several else []), table),
        "composition scores layer-0 head -> layer-1 head: "
        + "; ".join(f"{mode} {[[round(v, 3) for v in row] for row in composition[mode]]}" for mode in composition),
    ]
    return "\n".join(lines)


def probe_gaussian_text(run, args: argparse.Namespace) -> str:
    from induction_probes.probes.summary import probe_gaussian

    steps = run.steps if args.all_steps else [run.entry(args.step)["step"]]
    results = [probe_gaussian(run, step, args.n_seqs, args.seed, device=device_of(args)) for step in steps]
    figures = []
    if args.plot:
        from induction_probes.probes.figures.plots import figure_name
        from induction_probes.probes.figures.plots_circuit import plot_gaussian_scores

        sequences = [run.entry(step)["sequences_seen"] for step in steps]
        figures = [
            plot_gaussian_scores(
                results, sequences, run.path.name, args.plot / figure_name(run.path.name, "scores", steps)
            )
        ]
    if args.json:
        header = provenance(run, steps, args.n_seqs, args.seed)
        return json_text(header | {"checkpoints": [r.to_json() for r in results]})
    rows = [
        [r.step, r.relative_mse, max(r.previous_token[0]), max(r.induction)]
        for r in results
        if r.step in spread_steps([x.step for x in results])
    ]
    headers = ["step", "MSE / target variance", "layer 0 previous-token", "layer 1 induction (1-TV)"]
    title = f"run {run.path.name}: Gaussian induction task, {args.n_seqs} fresh sequences"
    return "\n".join([title, format_table(headers, rows)] + figure_lines(figures))


PROBE_LABELS = {
    "previous_token": "previous-token",
    "bigram_matching": "bigram-matching",
    "bigram_matching_ideal": "bigram ideal (1-TV)",
}  # a registered probe's column is its name


def probe_text(run, result) -> str:
    names = list(result.scores)  # every registered probe, in registration order
    rows = [
        [f"{layer}.{head}", *(result.scores[name][layer][head].item() for name in names)]
        for layer in range(len(result.previous_token))
        for head in range(len(result.previous_token[layer]))
    ]
    b = result.behaviour
    lines = [
        f"run {run.path.name}, step {result.step}: {b.closest_strategy} is the closest strategy",
        format_table(["head", *(PROBE_LABELS.get(name, name) for name in names)], rows),
        f"({100 * result.fraction_with_match:.1f}% of queries have a matching key)",
        format_table(["last-token KL(x||model)", "value"], [[k, v] for k, v in b.last_token_kl.items()]),
        f"loss {b.loss:.4f}, ICL score {b.icl_score:+.4f}{plus_minus(b.intervals['icl_score'])} (mean loss at "
        f"positions 90-99 minus 1-10; at 99 minus at 10: {b.icl_score_single_position:+.4f})",
    ]
    if result.positional_profile is not None:
        peaks = ", ".join(
            f"head {h}: distance {int(p.argmax())} ({p.max():.3f})" for h, p in enumerate(result.positional_profile)
        )
        lines.append(f"layer 0 positional profile peaks at {peaks}")
    return "\n".join(lines)


def plus_minus(estimate) -> str:
    """ " ± half-width" of an interval over sequences (nothing for one sequence, which has none)."""
    return "" if estimate.half_width is None else f" ± {estimate.half_width:.4f}"


def probe_trajectory(results) -> str:
    """Scores over training at spread-out steps and wherever the closest strategy changes."""
    changes = {
        b.step for a, b in zip(results, results[1:]) if a.behaviour.closest_strategy != b.behaviour.closest_strategy
    }
    wanted = spread_steps([r.step for r in results]) | changes
    rows = [
        [
            r.step,
            r.previous_token[0].max().item(),
            r.bigram_matching[-1].max().item(),
            r.behaviour.last_token_kl["true"],
            r.behaviour.closest_strategy,
        ]
        for r in results
        if r.step in wanted
    ]
    return format_table(
        ["step", "layer 0 prev-token", "last layer bigram-matching", "KL(true||model)", "closest"], rows
    )


def plot_probes(run, results, tokens, directory: Path) -> list[Path]:
    """Attention heatmaps on the first of ``tokens`` and positional profiles at the first, plateau and last
    probed steps; the scores (with chance levels on ``tokens``) and progress measures over training when
    several steps were probed."""
    from induction_probes.probes.attention import chance_scores, run_with_patterns
    from induction_probes.probes.behaviour import illustrative_steps, strategy_phases
    from induction_probes.probes.figures.plots import figure_name, plot_scores_over_training, step_caption
    from induction_probes.probes.figures.plots_circuit import plot_attention_heatmaps, plot_positional_profiles

    name = run.path.name
    metrics = {m["step"]: m for m in run.metrics()}
    by_step = {r.step: r for r in results}
    shown = illustrative_steps(strategy_phases(list(metrics.values())), list(by_step))
    captions = {step: step_caption(metrics[step]) for step in shown}
    example = varied_sequence(tokens)
    patterns = {step: run_with_patterns(run.load(step=step), example[None])[1] for step in shown}
    figures = [
        plot_attention_heatmaps(patterns, example, captions, name, directory / figure_name(name, "attention", shown))
    ]
    profiles = {
        step: by_step[step].positional_profile[0].numpy()
        for step in shown
        if by_step[step].positional_profile is not None
    }
    if profiles:
        figures.append(
            plot_positional_profiles(
                profiles, captions, name, directory / figure_name(name, "positional", list(profiles))
            )
        )
    if len(results) > 1:
        steps = [r.step for r in results]
        figures.append(
            plot_scores_over_training(
                results,
                [metrics[s] for s in steps],
                chance_scores(tokens[:100]),
                name,
                directory / figure_name(name, "scores", steps),
            )
        )
    progress = [r.progress for r in results if r.progress is not None]
    if len(progress) > 1:
        from induction_probes.probes.figures.plots import plot_progress_measures

        thresholds = progress_thresholds(run, progress)
        figures.append(
            plot_progress_measures(
                progress, [metrics[p.step] for p in progress], thresholds, name, directory / f"{name}_progress.png"
            )
        )
    return figures


def varied_sequence(tokens, n_pos: int = 30, candidates: int = 100):
    """Of the first ``candidates`` sequences, the one whose first ``n_pos`` tokens have the most even
    counts: where one token dominates, nearly every key matches and a heatmap shows no pattern."""
    import torch

    counts = torch.nn.functional.one_hot(tokens[:candidates, :n_pos]).sum(1).double()
    share = counts / n_pos
    entropy = -(share * share.clamp_min(1e-12).log()).sum(-1)
    return tokens[int(entropy.argmax())]


def run_ablate(args: argparse.Namespace) -> str:
    from induction_probes.probes.ablation import heads_in_layer, parse_heads
    from induction_probes.probes.summary import single_heads

    if (model := lm.language_model(args)) is not None:
        return lm.run_ablate(args, model)
    run = open_hooked_run(args.run)
    model = run.load(step=args.step, device=device_of(args))
    cfg = model.cfg
    head_sets = (
        [parse_heads(args.heads, cfg.n_layers, lambda layer: heads_in_layer(cfg, layer))]
        if args.heads
        else single_heads(model)
    )
    return view_of(run).show("ablate", run, model, head_sets, args)


def ablate_markov_text(run, model, head_sets, args: argparse.Namespace) -> str:
    """KL to the truth, loss, ICL score and closest strategy of an ICL-MC model with each head set ablated."""
    from induction_probes.probes.summary import ablation_study, probe_eval_set

    eval_set = probe_eval_set(run, args.n_seqs, args.seed)
    reference = probe_eval_set(run, args.n_seqs, args.seed + 1).inputs  # other sequences
    baseline, results = ablation_study(model, eval_set, head_sets, args.mode, reference, args.seed)
    step = run.entry(args.step)["step"]
    figures = plot_ablations(run, step, baseline, results, eval_set, args.mode, args.plot) if args.plot else []
    if args.json:
        base = {
            "last_token_kl": baseline.last_token_kl,
            "loss": baseline.loss,
            "icl_score": baseline.icl_score,
            "closest_strategy": baseline.closest_strategy,
        }
        header = provenance(run, [step], args.n_seqs, args.seed)
        return json_text(header | {"mode": args.mode, "baseline": base, "ablations": [r.to_json() for r in results]})
    return "\n".join([ablation_text(run, step, args.mode, args.n_seqs, baseline, results)] + figure_lines(figures))


def ablation_text(run, step: int, mode: str, n_seqs: int, baseline, results) -> str:
    rows = [["none", baseline.last_token_kl["true"], baseline.loss, baseline.icl_score, baseline.closest_strategy]]
    rows += [
        [
            ",".join(f"{l}.{h}" for l, h in r.heads),
            r.behaviour.last_token_kl["true"],
            r.behaviour.loss,
            r.behaviour.icl_score,
            r.behaviour.closest_strategy,
        ]
        for r in results
    ]
    title = f"run {run.path.name}, step {step}: {mode} ablation on {n_seqs} sequences"
    return "\n".join([title, format_table(["ablated heads", "KL(true||model)", "loss", "ICL score", "closest"], rows)])


def gaussian_ablation_text(run, model, head_sets, args: argparse.Namespace) -> str:
    from induction_probes.probes.summary import gaussian_ablation_study  # loads the model on its own device

    baseline, ablated = gaussian_ablation_study(
        run, head_sets, args.mode, args.step, args.n_seqs, args.seed, device=device_of(args)
    )
    names = [",".join(f"{l}.{h}" for l, h in heads) for heads, _ in ablated]
    if args.json:
        header = provenance(run, [run.entry(args.step)["step"]], args.n_seqs, args.seed)
        return json_text(
            header
            | {
                "mode": args.mode,
                "baseline": {"relative_mse": baseline},
                "ablations": [
                    {"heads": name.split(","), "mode": args.mode, "relative_mse": value}
                    for name, (_, value) in zip(names, ablated)
                ],
            }
        )
    rows = [["none", baseline]] + [[name, value] for name, (_, value) in zip(names, ablated)]
    title = f"run {run.path.name}: {args.mode} ablation on {args.n_seqs} Gaussian sequences"
    figures = []
    if args.plot:
        from induction_probes.probes.figures.plots import figure_name, heads_label
        from induction_probes.probes.figures.plots_circuit import plot_error_bars

        step = run.entry(args.step)["step"]
        path = args.plot / figure_name(run.path.name, "ablation", [step], args.mode)
        bars = [("none", baseline)] + [(heads_label(heads), value) for heads, value in ablated]
        figures = [plot_error_bars(bars, f"{run.path.name}, step {step}: {args.mode} ablation of each head", path)]
    return "\n".join([title, format_table(["ablated heads", "MSE / target variance"], rows)] + figure_lines(figures))


def plot_ablations(run, step: int, baseline, results, eval_set, mode: str, directory: Path) -> list[Path]:
    from induction_probes.probes.figures.plots import figure_name
    from induction_probes.probes.figures.plots_circuit import plot_ablation_bars

    name = run.path.name
    strategy_kl = {strategy: kl.mean().item() for strategy, kl in eval_set.strategy_kl().items()}
    title = f"{name}, step {step}: {mode} ablation of each head"
    return [
        plot_ablation_bars(
            baseline, results, strategy_kl, title, directory / figure_name(name, "ablation", [step], mode)
        )
    ]
