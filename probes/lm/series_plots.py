"""The figure of a language model's checkpoint series: head scores and induction losses over training,
on the same axes conventions as our runs' figures (probes/figures/plots.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.ticker import FuncFormatter, MaxNLocator

from induction_probes.probes.figures.plots import (
    head_colour,
    head_label,
    heads_label,
    legend_outside,
    save,
    sns,
    subplots,
    theme,
)
from induction_probes.probes.figures.plots_atlas import step_head_heatmap

SHOWN_HEADS = 3  # heads drawn in colour per score: the best at the last step


def step_axis(ax, steps: list[int]) -> None:
    """Training steps on a linear axis: a symlog one (step 0 kept) gave 40 % of the width to the first few
    hundred steps of Pythia's series, where nothing forms; a margin keeps the first and last points off the frame."""
    margin = 0.02 * (max(steps) - min(steps) or 1)
    ax.set_xlim(min(steps) - margin, max(steps) + margin)
    ax.xaxis.set_major_locator(MaxNLocator(6))
    ax.xaxis.set_major_formatter(
        FuncFormatter(lambda step, _: f"{step / 1000:g}k" if abs(step) >= 1000 else f"{step:g}")
    )
    ax.set_xlabel("training step (linear; k: thousand)" if max(steps) >= 1000 else "training step (linear)")


def threshold_line(ax, threshold: float) -> None:
    """The share of attention at which a head's score names its role (probes/lm/roles.py), marked and keyed."""
    ax.axhline(threshold, color="0.3", ls=":", lw=1.2, label=f"role threshold ({threshold:g})")


def score_panel(ax, results: list, score: str, title: str) -> None:
    """Every head's score in grey, the best ``SHOWN_HEADS`` at the last step in colour with its 95 % interval
    over sequences as a band."""
    steps = [r.step for r in results]
    estimates = [getattr(r.scores, score) for r in results]
    best = {(layer, head) for layer, head, _ in results[-1].scores.ranked(score)[:SHOWN_HEADS]}
    for layer, head in results[-1].scores.heads():
        curve = [e.value[layer, head].item() for e in estimates]
        shown = (layer, head) in best
        (line,) = ax.plot(
            steps,
            curve,
            lw=2 if shown else 0.8,
            color=head_colour(head_label(layer, head)) if shown else "0.75",  # a head's colour in every figure
            zorder=3 if shown else 1,
            label=f"head {head_label(layer, head)}" if shown else None,
            marker="o" if shown else None,
            ms=3,
        )
        if shown:
            low, high = ([getattr(e, bound)[layer, head].item() for e in estimates] for bound in ("low", "high"))
            ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.2, lw=0, zorder=2)
    ax.plot([], [], color="0.75", lw=0.8, label="the other heads")
    threshold_line(ax, results[-1].threshold)
    step_axis(ax, steps)
    ax.set_ylim(-0.03 if score != "content" else -0.23, 1.03)
    ax.set_ylabel("attention score")
    ax.set_title(title)
    legend_outside(ax, below=True, ncol=2)


def plot_lm_series(results: list, name: str, path: Path) -> Path:
    """Induction and previous-token scores of every head, and the loss on each copy of R, against step."""
    theme()
    fig, axes = subplots(1, 3, figsize=(16, 5.6), layout="constrained")  # constrained: room for the keys below
    score_panel(axes[0], results, "content", "content-based induction score\n(R + R minus control)")
    score_panel(axes[1], results, "previous_token", "previous-token score A[i, i-1]")
    loss_panel(axes[2], results)
    fig.suptitle(f"{name}: induction heads over training (bands: 95 % intervals over sequences)")
    return save(fig, path)


def loss_panel(ax, results: list) -> None:
    """The loss on each copy of R against step, with its 95 % interval over sequences as a band."""
    steps = [r.step for r in results]
    for part, colour, label in (
        ("first_half", "tab:blue", "first copy of R"),
        ("repeated_half", "tab:red", "repeated copy (induction loss)"),
    ):
        estimates = [r.loss.interval(part) for r in results]
        ax.plot(steps, [e.value for e in estimates], color=colour, lw=2, marker="o", ms=3, label=label)
        low = [e.value if e.low is None else e.low for e in estimates]  # one sequence: no interval, no band
        high = [e.value if e.high is None else e.high for e in estimates]
        ax.fill_between(steps, low, high, color=colour, alpha=0.2, lw=0)
    step_axis(ax, steps)
    ax.set_ylabel("loss (nats per token)")
    ax.set_title("loss on repeated random tokens")
    legend_outside(ax, below=True)


def plot_lm_ablation(baseline, results: list, title: str, path: Path) -> Path:
    """The repeated copy's loss with each head set ablated (95 % intervals over sequences as error bars),
    against the clean model's loss on both copies."""
    theme()
    labels = ["none"] + [heads_label(r.heads) for r in results]
    estimates = [baseline.interval("repeated_half")] + [r.loss.interval("repeated_half") for r in results]
    values = [e.value for e in estimates]
    errors = np.array(
        [
            [e.value - (e.low if e.low is not None else e.value) for e in estimates],
            [(e.high if e.high is not None else e.value) - e.value for e in estimates],
        ]
    )
    fig, ax = subplots(figsize=(max(6, 0.9 * len(labels) + 3), 4.4))
    ax.bar(labels, values, yerr=errors, capsize=3, color=["0.5"] + ["tab:red"] * len(results))
    ax.axhline(
        baseline.first_half, color="tab:blue", ls="--", lw=1.5, label=f"first copy, clean ({baseline.first_half:.2f})"
    )
    ax.axhline(
        baseline.repeated_half, color="0.3", ls=":", lw=1.5, label=f"repeat, clean ({baseline.repeated_half:.2f})"
    )
    ax.set_xlabel("ablated heads")
    ax.set_ylabel("loss on the repeated copy (nats per token)")
    ax.set_title(title)
    ax.set_title(title + "\n(error bars: 95 % intervals over sequences)")
    legend_outside(ax)
    ax.tick_params(axis="x", labelrotation=45)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    return save(fig, path)


def plot_ablation_atlas(result, title: str, path: Path) -> Path:
    """The share of the clean model's gap each head's ablation removes at each checkpoint
    (:class:`~induction_probes.probes.lm.ablate_series.SeriesAblation`), grey where the step's gap has 0 in its
    interval (no share)."""
    heads = [head_label(*h) for h in result.heads]
    title += "\n(grey: the gap's interval includes 0; intervals in the JSON)"
    return step_head_heatmap(result.shares(), heads, result.steps, title, "share of the gap removed", path, True)


def plot_lm_scores(scores, title: str, path: Path) -> Path:
    """Content-based induction and previous-token scores of every head as two [layer, head] heatmaps on one
    colour scale (the intervals are in the table and the JSON)."""

    theme()
    n_layers, n_heads = scores.shape
    fig, axes = subplots(1, 2, figsize=(2 * max(4.0, 0.45 * n_heads + 2), max(3.2, 0.35 * n_layers + 1.6)))
    names = ("content", "previous_token")
    for ax, name, label in zip(axes, names, ("content-based induction score", "previous-token score")):
        sns.heatmap(
            getattr(scores, name).value.numpy(),
            ax=ax,
            vmin=0,
            vmax=1,
            cmap="viridis",
            square=n_heads <= 16,
            cbar_kws={"label": "attention"},
            annot=n_layers * n_heads <= 64,
            fmt=".2f",
        )
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(label)
    fig.suptitle(title)
    return save(fig, path)
