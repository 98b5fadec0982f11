"""What the probes of an ICL-MC run show: attention per head, behaviour and progress measures as tables, and the
attention heatmaps, positional profiles, scores and progress measures as figures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from induction_probes.circuits.names import head_label
from induction_probes.probes.attention.patterns import chance_scores, run_with_patterns
from induction_probes.probes.behaviour.icl_behaviour import even_sequence, illustrative_steps, strategy_phases
from induction_probes.probes.figures.plots import (
    figure_name,
    plot_scores_over_training,
    step_caption,
)
from induction_probes.probes.figures.plots_circuit import plot_attention_heatmaps, plot_positional_profiles
from induction_probes.probes.figures.plots_progress import plot_progress_measures
from induction_probes.probes.progress.progress_measures import threshold_crossings
from induction_probes.probes.report.tables import format_table, provenance, spread_steps, with_figures
from induction_probes.probes.run_level.all_probes import probe_eval_set, probe_markov_run

if TYPE_CHECKING:
    from induction_probes.circuits.runs.reader import Run
    from induction_probes.probes.report.view_protocols import Output, ProbeSet, Shown
    from induction_probes.probes.run_level.checkpoint_probes import CheckpointProbes

PROBE_LABELS = {
    "previous_token": "previous-token",
    "bigram_matching": "bigram-matching",
    "bigram_matching_ideal": "bigram ideal (1-TV)",
}  # a registered probe's column is its name


def probe_markov_report(run: Run, steps: list[int], probes: ProbeSet, output: Output) -> Shown:
    """An ICL-MC run's probes at ``steps`` on the fresh sequences of ``probes``: attention per
    head, behaviour, progress measures (over training when several steps) and the figures, into ``plot``."""
    probe_set = probe_eval_set(run, probes.n_seqs, probes.seed)
    results = probe_markov_run(run, probe_set, run.saved_steps(steps), output.device)
    figures = plot_probes(run, results, probe_set.inputs, output.plot) if output.plot else []
    progress = [r.progress for r in results if r.progress is not None]
    if output.as_json:
        crossings = {"progress_thresholds": progress_thresholds(run, progress)} if progress else {}
        tidy = {"records": results.to_records(), "warnings": results.warnings}  # the long form of probes/tidy.py
        return (
            provenance(run, steps, probes.n_seqs, probes.seed)
            | crossings
            | {"checkpoints": [r.to_json() for r in results]}
            | tidy
        )
    sections = [probe_text(run, results[-1])] + ([probe_trajectory(results)] if len(steps) > 1 else [])
    if progress:
        sections.append(progress_text(run, progress))
    sections += ["\n".join(f"warning: {line}" for line in results.warnings)] if results.warnings else []
    return with_figures("\n\n".join(sections), figures)


def progress_thresholds(run: Run, progress: list) -> dict:
    """Per calibrated measure: chance, construction value, threshold, and the first step that reaches it."""
    seen = {entry["step"]: entry["sequences_seen"] for entry in run.manifest}
    return threshold_crossings(progress, run.model_config, seen)


def progress_text(run: Run, progress: list) -> str:
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


def probe_text(run: Run, result: CheckpointProbes) -> str:
    """One checkpoint's probes (a :class:`~induction_probes.probes.run_level.checkpoint_probes.CheckpointProbes`):
    every registered probe per head, the closest strategy, the KL to each strategy, the loss and the ICL score."""
    names = list(result.scores)  # every registered probe, in registration order
    rows = [
        [head_label(layer, head), *(result.scores[name][layer][head].item() for name in names)]
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


def plot_probes(run: Run, results, tokens, directory: Path) -> list[Path]:
    """Attention heatmaps on the first of ``tokens`` and positional profiles at the first, plateau and last
    probed steps; the scores (with chance levels on ``tokens``) and progress measures over training when
    several steps were probed."""
    name = run.path.name
    metrics = {m["step"]: m for m in run.metrics()}
    by_step = {r.step: r for r in results}
    shown = illustrative_steps(strategy_phases(list(metrics.values())), list(by_step))
    captions = {step: step_caption(metrics[step]) for step in shown}
    example = even_sequence(tokens)
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
        path = directory / figure_name(name, "positional", list(profiles))
        figures.append(plot_positional_profiles(profiles, captions, name, path))
    if len(results) > 1:
        steps = [r.step for r in results]
        path = directory / figure_name(name, "scores", steps)
        figures.append(
            plot_scores_over_training(results, [metrics[s] for s in steps], chance_scores(tokens[:100]), name, path)
        )
    progress = [r.progress for r in results if r.progress is not None]
    if len(progress) > 1:
        thresholds = progress_thresholds(run, progress)
        path = directory / f"{name}_progress.png"
        figures.append(plot_progress_measures(progress, [metrics[p.step] for p in progress], thresholds, name, path))
    return figures
