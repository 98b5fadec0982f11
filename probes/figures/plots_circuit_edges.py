"""The circuit over training (``circuit RUN --all-steps --plot``): each edge of the last checkpoint's circuit, its
share of the in-context gap at every checkpoint with its 95 % band, below the strategies' KL on a shared log axis
of sequences seen, and the threshold an edge passes to be in the circuit."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

from induction_probes.probes.figures.plots import legend_outside, save, strategies_above

if TYPE_CHECKING:
    from induction_probes.circuits.runs.reader import Run

STYLES = ("-", "--", ":", "-.")


def plot_edges_over_training(run: Run, found: list, directory: Path) -> Path:
    """``found``: one :class:`~induction_probes.probes.circuit.edges.EdgeEffects` per checkpoint, in step order."""
    metrics = run.metrics()
    seen = {m["step"]: m["sequences_seen"] for m in metrics}
    fig, top, bottom, x, kept = strategies_above(metrics, height=7, width=10, outside=True)
    last = found[-1]
    colours = itertools.cycle([f"C{i}" for i in range(10)])
    for edge, style in zip(last.circuit, itertools.cycle(STYLES)):
        points = [(seen[f.step], f.effect(edge.sender, edge.receiver, edge.via)) for f in found if seen[f.step] > 0]
        points = [(s, e) for s, e in points if e is not None and e.low is not None]
        xs = [s for s, _ in points]
        colour = next(colours)
        bottom.plot(xs, [e.value for _, e in points], ls=style, color=colour, lw=1.6, label=edge.name)
        bottom.fill_between(xs, [e.low for _, e in points], [e.high for _, e in points], color=colour, alpha=0.2)
    bottom.axhline(last.threshold, color="0.3", ls=":", lw=1.2, label=f"circuit threshold ({last.threshold:g})")
    bottom.set_ylabel("share of the in-context gap\ncarried by the edge alone")
    legend_outside(bottom)
    top.set_title(f"{run.path.name}: the circuit's edges over training (bands: 95 % over sequences)")
    return save(fig, directory / f"{run.path.name}_circuit_edges.png")
