"""Figures, written as PNG files with matplotlib's Agg backend (no display needed).

Training curves use sequences seen (thousands) on the x-axis, as Edelman et al. do, and shade the
background by the strategy the model is closest to, so the uniform → unigram → bigram phases read at a
glance.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from circuits.tasks.markov import closest_strategy  # noqa: E402

STRATEGY_COLOURS = {"uniform": "tab:blue", "unigram": "tab:orange", "bigram": "tab:green", "trigram": "tab:red"}


def strategy_colour(name: str) -> str:
    return STRATEGY_COLOURS.get(name, "tab:purple")


def shade_closest_strategy(ax: plt.Axes, x: list[float], metrics: list[dict]) -> None:
    """Background bands coloured by the closest strategy, each band from one checkpoint to the next."""
    closest = [closest_strategy(m["last_token_kl"]) for m in metrics]
    start = 0
    for i in range(1, len(x) + 1):
        if i == len(x) or closest[i] != closest[start]:
            ax.axvspan(x[start], x[min(i, len(x) - 1)], color=strategy_colour(closest[start]), alpha=0.15, lw=0)
            start = i


def plot_distance_to_strategies(metrics: list[dict], strategies: list[str], title: str, path: Path) -> Path:
    """KL(strategy ‖ model) at the last token against sequences seen (Edelman et al., Figure 1)."""
    sns.set_theme(style="ticks")
    x = [m["sequences_seen"] / 1000 for m in metrics]
    fig, ax = plt.subplots(figsize=(7, 4))
    shade_closest_strategy(ax, x, metrics)
    for name in strategies:
        ax.plot(x, [m["last_token_kl"][name] for m in metrics], color=strategy_colour(name), label=name, lw=2)
    ax.set_yscale("log")
    lowest = min(m["last_token_kl"][name] for m in metrics for name in strategies)
    ax.set_ylim(bottom=max(lowest, 1e-3))  # an untrained model is uniform to ~1e-6: keep the phases readable
    ax.set_xlabel("training sequences seen (thousands)")
    ax.set_ylabel("KL(strategy ‖ model), last token")
    ax.set_title(f"{title}: distance to each strategy (shading: closest)")
    ax.legend(title="strategy")
    return save(fig, path)


def plot_loss_against_baselines(
    metrics: list[dict], baselines: dict[str, float], title: str, path: Path
) -> Path:
    """KL(true ‖ model) at the last token, with each strategy's KL(true ‖ strategy) as a dashed line."""
    sns.set_theme(style="ticks")
    x = [m["sequences_seen"] / 1000 for m in metrics]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(x, [m["last_token_kl"]["true"] for m in metrics], color="black", lw=2, label="model")
    for name, value in baselines.items():
        ax.axhline(value, color=strategy_colour(name), ls="--", lw=1.5, label=f"{name} strategy ({value:.3f})")
    ax.set_xlabel("training sequences seen (thousands)")
    ax.set_ylabel("KL(true ‖ model), last token")
    ax.set_ylim(0, None)
    ax.set_title(f"{title}: test loss against the strategy baselines")
    ax.legend(loc="center right")
    return save(fig, path)


def save(fig: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
