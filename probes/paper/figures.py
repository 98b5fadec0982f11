"""The paper page's own figure: a construction's error against its size (Wang et al.'s Theorems 4.1 and
4.3), to the standard of :mod:`induction_probes.probes.figures.plots`. Every other figure of the page is drawn by
the helpers that the other commands use."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from induction_probes.probes.figures import plots
from induction_probes.probes.figures.plots import theme


def plot_error_curve(
    points: Sequence[tuple[float, float]], xlabel: str, title: str, path: Path, log_x: bool = False
) -> Path:
    """Relative error (log scale) of a construction against the parameter that sets its accuracy; errors at
    or below float64's resolution are drawn at 1e-16, where the axis ends."""
    theme()
    fig, ax = plots.subplots(figsize=(7, 4.2))
    x = [value for value, _ in points]
    ax.plot(
        x,
        [max(error, 1e-16) for _, error in points],
        "o-",
        color="tab:purple",
        lw=2,
        label="relative error E‖f − target‖² / E‖target‖²",
    )
    ax.axhline(1e-16, color="grey", ls=":", lw=1.2, label="float64 resolution (1e-16)")
    ax.set(yscale="log", xlabel=xlabel, ylabel="relative error (log scale)", title=title)
    if log_x:
        ax.set_xscale("log")
    ax.margins(x=0.06)
    plots.legend_outside(ax, below=True)
    return plots.save(fig, path)
