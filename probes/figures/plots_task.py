"""Figures of a run of any registered task (a task from outside the package): each registered attention probe
per head, at one checkpoint or over training, the task's own evaluation metrics over training, and those
metrics with heads ablated. They read only what every task has (the probes' per-layer values and the metrics'
names), so a new task gets them with no edit here."""

from __future__ import annotations

from pathlib import Path

from induction_probes.probes.figures.plots import (
    head_colour,
    head_label,
    legend_outside,
    save,
    sequences_axis,
    subplots,
    theme,
    with_sequences,
)
from induction_probes.probes.run_level.task_probes import scalar_metrics


def plot_task_probes(scores_by_step: dict[int, dict], sequences: dict[int, int], title: str, path: Path) -> Path:
    """One panel per registered probe: each head's value, as bars at one checkpoint or as a line against the
    training sequences seen over several (step 0, at no sequences, left out of the log axis).
    ``scores_by_step``: per step, per probe, one ``[head]`` tensor per layer."""
    theme()
    steps = list(scores_by_step)
    names = list(scores_by_step[steps[0]])
    fig, axes = subplots(1, len(names), figsize=(5.2 * len(names), 4.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        layers = scores_by_step[steps[0]][name]
        heads = [(layer, head) for layer, values in enumerate(layers) for head in range(len(values))]
        if len(steps) == 1:
            values = [layers[layer][head].item() for layer, head in heads]
            bars = ax.bar([head_label(*h) for h in heads], values, color="tab:gray", width=0.6)
            ax.bar_label(bars, labels=[f"{v:.3g}" for v in values], fontsize=9)
            ax.set(xlabel=f"head (step {steps[0]})")
        else:
            kept = [step for step in steps if sequences[step] > 0]
            x = [sequences[step] for step in kept]
            for layer, head in heads:
                values = [scores_by_step[step][name][layer][head].item() for step in kept]
                label = head_label(layer, head)
                ax.plot(x, values, marker="o", lw=1.8, color=head_colour(label), label=label)
            sequences_axis(ax, x)
            legend_outside(ax, below=True, ncol=4)
        ax.set(ylabel="probe value", title=name)
    fig.suptitle(f"{title}: attention probes per head")
    return save(fig, path)


def metric_names(metrics: list[dict]) -> list[str]:
    """The task's metrics in the last entry of ``metrics``: its finite numbers but the step and the sequences."""
    return [name for name in scalar_metrics(metrics[-1]) if name not in ("step", "sequences_seen")]


def plot_task_metrics(metrics: list[dict], title: str, path: Path) -> Path:
    """Each of the task's metrics (``metrics.jsonl``: training loss and the evaluation set's metrics) against
    the training sequences seen, one panel each, stacked on a shared axis."""
    theme()
    names, kept = metric_names(metrics), with_sequences(metrics)
    x = [m["sequences_seen"] for m in kept]
    fig, axes = subplots(len(names), 1, figsize=(8, 2.6 * len(names) + 0.8), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        ax.plot(x, [m.get(name, float("nan")) for m in kept], color="black", marker="o", lw=1.8)
        ax.set_ylabel(name)
    sequences_axis(axes[-1, 0], x)
    axes[0, 0].set_title(f"{title}: the task's metrics over training")
    return save(fig, path)


def plot_task_ablation(rows: list[tuple[str, dict[str, float]]], title: str, path: Path) -> Path:
    """Each of the task's metrics with each head set ablated ("none": the clean model), one panel each."""
    theme()
    names = list(rows[0][1])
    labels = [label for label, _ in rows]
    fig, axes = subplots(1, len(names), figsize=(max(5, 1.2 * len(rows) + 2) * len(names), 4.4), squeeze=False)
    for ax, name in zip(axes[0], names):
        values = [metrics.get(name, float("nan")) for _, metrics in rows]
        bars = ax.bar(labels, values, color="tab:gray", width=0.6)
        ax.bar_label(bars, labels=[f"{v:.3g}" for v in values], fontsize=9)
        ax.set(xlabel="ablated heads (none: the clean model)", ylabel=name)
    fig.suptitle(title)
    return save(fig, path)
