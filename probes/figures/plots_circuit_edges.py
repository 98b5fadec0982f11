"""The circuit over training (``circuit RUN --all-steps --plot``): each edge of the last checkpoint's circuit, its
share of the in-context gap at every checkpoint with its 95 % band, below the strategies' KL on a shared log axis
of sequences seen, and the threshold an edge passes to be in the circuit."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from induction_probes.probes.figures.plots import legend_outside, save, strategies_above

if TYPE_CHECKING:
    from induction_probes.circuits.runs.reader import Run

STYLES = ("-", "--", ":", "-.")


def plot_edges_over_training(run: Run, found: list, directory: Path) -> Path:
    """``found``: one :class:`~induction_probes.probes.circuit.edges.EdgeEffects` per checkpoint, in step order."""
    metrics = run.metrics()
    seen = {m["step"]: m["sequences_seen"] for m in metrics}
    fig, top, bottom, x, kept = strategies_above(metrics, height=7, width=10, outside=True)
    draw_edges(bottom, [f for f in found if seen[f.step] > 0], lambda f: seen[f.step])
    top.set_title(f"{run.path.name}: the circuit's edges over training (bands: 95 % over sequences)")
    return save(fig, directory / f"{run.path.name}_circuit_edges.png")


def plot_edges_over_steps(name: str, found: list, path: Path) -> Path:
    """A checkpoint series' circuit edges against the step (a language model's series has no sequence count)."""
    fig = Figure(figsize=(10, 4.5), layout="constrained")
    ax = fig.subplots()
    draw_edges(ax, found, lambda f: f.step)
    ax.set_xlabel("training step")
    ax.set_title(f"{name}: the circuit's edges over training (bands: 95 % over sequences)")
    return save(fig, path)


def draw_edges(ax: Axes, found: list, x_of: Callable) -> None:
    """Each edge of the last checkpoint's circuit against ``x_of(checkpoint)``, with its band, and the threshold."""
    last = found[-1]
    colours = itertools.cycle([f"C{i}" for i in range(10)])
    for edge, style in zip(last.circuit, itertools.cycle(STYLES)):
        points = [(x_of(f), e) for f in found if (e := f.banded(edge)) is not None]
        xs = [s for s, _ in points]
        colour = next(colours)
        ax.plot(xs, [e.value for _, e in points], ls=style, color=colour, lw=1.6, label=edge.name)
        ax.fill_between(xs, [e.low for _, e in points], [e.high for _, e in points], color=colour, alpha=0.2)
    ax.axhline(last.threshold, color="0.3", ls=":", lw=1.2, label=f"circuit threshold ({last.threshold:g})")
    ax.set_ylabel("share of the in-context gap\ncarried by the edge alone")
    legend_outside(ax)
