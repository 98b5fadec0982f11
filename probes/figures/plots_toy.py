"""Figures of Wang et al.'s toy model and the IH_4 capacity experiment, to the standard of
:mod:`induction_probes.probes.figures.plots`."""

from __future__ import annotations

import math
from pathlib import Path

import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from induction_probes.circuits.models.toy_model import PARAMETERS as TOY_PARAMETERS
from induction_probes.probes.figures import plots
from induction_probes.probes.figures.plots import sequences_axis, theme

TOY_PHASES = {"I": "tab:blue", "II": "tab:orange", "III": "tab:red", "IV": "tab:green"}
# Pairs of the toy's curves that coincide (p1 and p2, w_K and w_Q, the total loss and its 4-gram part):
# the second of each is dashed over the first, drawn wider, so both stay visible.
TOY_STYLES = {
    "p1": ("tab:blue", "-", 4),
    "p2": ("tab:orange", (0, (3, 2)), 2),
    "w_V1": ("tab:green", "-", 2),
    "w_K": ("tab:red", "-", 4),
    "w_Q": ("black", (0, (3, 2)), 2),
    "w_V2": ("tab:brown", "-", 2),
    "loss": ("tab:blue", "-", 4),
    "loss_4gram": ("tab:orange", (0, (3, 2)), 2),
    "loss_induction": ("tab:green", "-", 2),
}


def shade_toy_phases(ax: Axes, bounds: list[int]) -> list:
    """Shade phases I–IV between ``bounds``; the key's handles, each phase named with its steps (text
    labels over the plot collide where a phase lasts a few steps, as under Adam)."""
    handles = []
    for (start, end), (name, colour) in zip(zip(bounds, bounds[1:]), TOY_PHASES.items()):
        ax.axvspan(max(start, 1), end, color=colour, alpha=0.1, lw=0)
        handles.append(Patch(color=colour, alpha=0.25, label=f"{name}: steps {start}–{end}"))
    return handles


def plot_toy(history: list[dict], phases, title: str, path: Path) -> Path:
    """The toy run's loss parts (log scale) with phases I–IV shaded and keyed (if they all appeared), and
    its six parameters, against gradient steps on a log scale (phase I lasts tens of steps)."""
    theme()
    shown = [h for h in history if h["step"] > 0]  # a log axis has no step 0
    steps = [h["step"] for h in shown]
    fig, (top, bottom) = plots.subplots(2, 1, figsize=(9, 8), sharex=True, layout="constrained")  # room for the keys
    for key, label in (("loss", "total"), ("loss_4gram", "4-gram part"), ("loss_induction", "induction part")):
        colour, style, width = TOY_STYLES[key]
        top.plot(steps, [max(h[key], 1e-12) for h in shown], color=colour, ls=style, lw=width, label=label)
    top.set(yscale="log", ylabel="loss (½ MSE, log scale)")
    for name in TOY_PARAMETERS:
        colour, style, width = TOY_STYLES[name]
        bottom.plot(steps, [h[name] for h in shown], color=colour, ls=style, lw=width, label=name)
    bottom.set(ylabel="parameter value")
    plots.legend_outside(bottom, title="parameter")
    sequences_axis(bottom, steps)
    bottom.set_xlabel("gradient step (log scale; full batch)")
    phases_key = {}
    if phases:
        bounds = [0, phases.end_of_I, phases.end_of_II, phases.end_of_III, steps[-1]]
        shade_toy_phases(bottom, bounds)
        phases_key = {"phase": shade_toy_phases(top, bounds)}
    plots.legend_outside(top, title="loss", sections=phases_key)
    top.set_title(f"{title}\nloss parts and parameters through the phases")
    return plots.save(fig, path)


def plot_plateau_sweep(rows: list[tuple[int, float, int]], fit: tuple[float, float, float], path: Path) -> Path:
    """Plateau length against L·log(1/σ), one colour per L, with the fitted line."""
    sns.set_theme(style="ticks")
    fig, ax = plots.subplots(figsize=(6, 4))
    for length in sorted({r[0] for r in rows}):
        points = [(length * math.log(1 / s), p) for L_, s, p in rows if L_ == length]
        ax.plot(*zip(*points), "o", ms=7, label=f"L = {length}")
    x = [r[0] * math.log(1 / r[1]) for r in rows]
    slope, intercept, r2 = fit
    ax.plot(
        [min(x), max(x)],
        [slope * min(x) + intercept, slope * max(x) + intercept],
        "k--",
        label=f"{slope:.1f}·L·log(1/σ) {intercept:+.0f}, R² = {r2:.3f}",
    )
    ax.set(xlabel="L · log(1/σ)", ylabel="plateau length (steps)", title="toy model: plateau (phase II) length")
    plots.legend_outside(ax, below=True)
    return plots.save(fig, path)


def plot_capacity_table(rows: list[tuple[str, int, int, float]], path: Path) -> Path:
    """Final MSE / target variance of each IH_4 model, as bars (lower is better)."""
    sns.set_theme(style="ticks")
    fig, ax = plots.subplots(figsize=(6, 3.6))
    labels = [label for label, *_ in rows]
    values = [error for *_, error in rows]
    ax.bar(labels, values, color=["tab:red" if v > 0.3 else "tab:green" for v in values])
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set(ylabel="MSE / target variance", title="IH_4 (d = 2): who can represent it", ylim=(0, 1.1))
    return plots.save(fig, path)


# --- sweeps: means over seeds with 95 % interval bands ---------------------------------------------


SEED_COLOURS = sns.color_palette("tab10", 10)


def plot_toy_sweep_losses(summary: dict, path: Path) -> Path:
    """One column per condition: the total loss (top) and its induction part (bottom) of every seed against
    steps (log-log), each seed's end of the plateau (II) marked with a dot where its phases appeared."""
    theme()
    names = list(summary["conditions"])
    fig, axes = plots.subplots(2, len(names), figsize=(4.2 * len(names), 7), sharex=True, sharey="row", squeeze=False)
    for column, name in enumerate(names):
        for k, run in enumerate(summary["conditions"][name]["runs"]):
            curves, colour = run["curves"], SEED_COLOURS[k % 10]
            shown = [i for i, step in enumerate(curves["step"]) if step > 0]
            steps = [curves["step"][i] for i in shown]
            for row, key in enumerate(("loss", "loss_induction")):
                values = [max(curves[key][i], 1e-12) for i in shown]
                axes[row][column].plot(steps, values, color=colour, lw=1.5, label=f"seed {run['seed']}")
                end = run["phases"].get("end_of_II")
                if end:
                    at = min(range(len(steps)), key=lambda i: abs(steps[i] - end))
                    axes[row][column].plot([steps[at]], [values[at]], "o", color=colour, ms=6)
        axes[0][column].set_title(name)
        axes[1][column].set_xlabel("step (log scale)")
        for ax in axes[:, column]:
            ax.set(xscale="log", yscale="log")
    axes[0][0].set_ylabel("total loss (½ MSE)")
    axes[1][0].set_ylabel("induction part")
    plots.legend_outside(axes[0][-1], title="dot: end of\nplateau (II)")
    fig.suptitle(f"toy sweep {Path(summary['sweep']).name}: every seed")
    return plots.save(fig, path)


def plot_toy_sweep_steps(summary: dict, path: Path) -> Path:
    """Per condition, every seed's phase boundaries and the steps at which p1, p2 and w_KQ made half their
    change, as dots on a log step axis (one row per measure, one colour per condition)."""
    theme()
    measures = [("end of I", "phases", "end_of_I"), ("end of II", "phases", "end_of_II")]
    measures += [("end of III", "phases", "end_of_III")]
    measures += [(f"{name} half-way", "learned", name) for name in ("p1", "p2", "w_KQ")]
    names = list(summary["conditions"])
    fig, ax = plots.subplots(figsize=(8, 4.5))
    for c, name in enumerate(names):
        for row, (_, part, key) in enumerate(measures):
            values = [run[part].get(key) for run in summary["conditions"][name]["runs"]]
            values = [v for v in values if v]
            offset = (c - (len(names) - 1) / 2) * 0.18
            ax.plot(
                values,
                [row + offset] * len(values),
                "o",
                color=SEED_COLOURS[c],
                alpha=0.7,
                ms=7,
                label=name if row == 0 else None,
            )
    ax.set_yticks(range(len(measures)), [label for label, *_ in measures])
    ax.set(xscale="log", xlabel="step (log scale)", title=f"toy sweep {Path(summary['sweep']).name}: per seed")
    ax.invert_yaxis()
    plots.legend_outside(ax, title="condition")
    return plots.save(fig, path)


def plot_toy_sweep(summary: dict, directory: Path) -> list[Path]:
    name = Path(summary["sweep"]).name
    return [
        plot_toy_sweep_losses(summary, directory / f"{name}-losses.png"),
        plot_toy_sweep_steps(summary, directory / f"{name}-steps.png"),
    ]
