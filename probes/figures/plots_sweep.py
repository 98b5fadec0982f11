"""Figures of the summary of an ICL-MC sweep (:mod:`induction_probes.probes.sweeps.summary`): each condition's test
loss and distance to each strategy, mean and 95 % band over seeds, and layer 0's positional profiles where the
runs hold them. They read only the summary, in the standard of :mod:`induction_probes.probes.figures.plots`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import seaborn as sns
from matplotlib.axes import Axes

from induction_probes.probes.figures import plots
from induction_probes.probes.figures.plots import strategy_colour, subplots, theme
from induction_probes.probes.sweeps.summary_statistics import POSITIONAL_POINTS


def band(ax: Axes, x: list[float], curve: dict, colour: str | tuple[float, float, float], label: str) -> None:
    """A mean curve and its 95 % band (no band where the interval is undefined, e.g. one seed)."""
    ax.plot(x, curve["mean"], color=colour, lw=2, label=label)
    if all(value is not None for value in curve["low"]):
        ax.fill_between(x, curve["low"], curve["high"], color=colour, alpha=0.2, lw=0)


def plot_sweep_summary(summary: dict, directory: Path) -> list[Path]:
    """Two figures: KL(true ‖ model) of every condition, with its transition interval marked, and one
    panel per condition of the distance to each strategy, all against the same log-scaled x-axis; a third, of
    layer 0's positional profiles, where the summary has the even/odd measures."""
    sns.set_theme(style="ticks")
    conditions = summary["conditions"]
    name = Path(summary["sweep"]).name
    colours = dict(zip(conditions, sns.color_palette("colorblind", len(conditions))))
    fig, ax = subplots(figsize=(7, 4.2))
    for condition, values in conditions.items():
        curves = values["curves"]
        x, kl = curves["x"][1:], {key: series[1:] for key, series in curves["kl"]["true"].items()}  # log x: no 0
        band(ax, x, kl, colours[condition], f"{condition} ({values['n_seeds']} seeds)")
        transition = values["transition"]
        if transition["low"] is not None:
            ax.axvspan(transition["low"], transition["high"], color=colours[condition], alpha=0.12, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(summary["x_axis"])
    ax.set_ylabel("KL(true ‖ model), last token")
    ax.set_title(
        f"{name}: KL(true ‖ model) at the last token, mean and 95% band over seeds\n"
        "(vertical bands: 95% interval of the transition)"
    )
    plots.legend_outside(ax, below=True)
    paths = [plots.save(fig, directory / f"{name}-kl.png")]
    fig, axes = subplots(1, len(conditions), figsize=(max(6.5, 4.2 * len(conditions)), 4.2), squeeze=False, sharey=True)
    for ax, (condition, values) in zip(axes[0], conditions.items()):
        curves = values["curves"]
        for strategy, curve in curves["kl"].items():
            if strategy != "true":
                band(ax, curves["x"][1:], {k: v[1:] for k, v in curve.items()}, strategy_colour(strategy), strategy)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{condition} ({values['n_seeds']} seeds)", fontsize=10)
    fig.supxlabel(summary["x_axis"], fontsize=11)
    axes[0][0].set_ylabel("KL(strategy ‖ model), last token")
    plots.legend_outside(axes[0][-1], title="strategy")  # right of the last panel: every panel has the same three
    fig.suptitle(f"{name}: distance to each strategy,\nmean and 95% band over seeds", fontsize=11)
    paths.append(plots.save(fig, directory / f"{name}-strategies.png"))
    if any("even_odd" in values for values in conditions.values()):
        paths.append(plot_even_odd(summary, directory))
    return paths


def plot_even_odd(summary: dict, directory: Path) -> Path:
    """Per condition with the even/odd measures, layer 0's positional profile at distances 2..19 on the plateau,
    at the transition and at the end: each seed's (thin) and their mean (bars, odd distances dark), so an
    alternation stands out from the spike at distance 1, which is left out; each panel gives the odd-over-neighbours
    excess over seeds with its interval (Edelman et al. Fig. 3 middle)."""
    theme()
    conditions = {name: c for name, c in summary["conditions"].items() if "even_odd" in c}
    distances = np.arange(2, 20)
    fig, axes = subplots(
        len(conditions), 3, figsize=(13, 3.6 * len(conditions)), squeeze=False, sharex=True, sharey="row"
    )
    for row, (name, condition) in zip(axes, conditions.items()):
        for ax, point in zip(row, POSITIONAL_POINTS):
            profiles = [
                np.asarray(run["positional_layer0"]["profiles"][point])[distances]
                for run in condition["runs"]
                if point in run.get("positional_layer0", {}).get("profiles", {})
            ]
            if profiles:
                for profile in profiles:
                    ax.plot(distances, profile, color="grey", lw=0.7, alpha=0.6)
                colours = ["tab:purple" if d % 2 else "thistle" for d in distances]
                ax.bar(distances, np.mean(profiles, axis=0), color=colours, alpha=0.85)
            excess = condition["even_odd"]["excess"][point]
            text = "no seed" if excess["mean"] is None else f"odd above neighbours {excess['mean']:+.2g}"
            if excess["low"] is not None:
                text += f" [{excess['low']:+.2g}, {excess['high']:+.2g}]"
            ax.set_title(f"{name}, {point} ({len(profiles)} seeds)\n{text}", fontsize=10)
            ax.set_xticks(distances[::2])
        row[0].set_ylabel("weight on distance d")
    for ax in axes[-1]:
        ax.set_xlabel("distance i − j")
    fig.suptitle(
        f"{Path(summary['sweep']).name}: layer 0's positional profile over seeds\n(bars: mean, odd distances dark; "
        "grey: each seed; distance 1 left out)"
    )
    return plots.save(fig, directory / f"{Path(summary['sweep']).name}-even-odd.png")
