"""The circuit on a formation movie's frames: for an ICL-MC run of ours, every edge patched at each checkpoint shown
(:func:`~induction_probes.probes.circuit.edges.edge_effects`, on the movie's probe sequences, each context from
another chain), listed on the frame with its interval, and the last frame's circuit edges drawn over the frames."""

from __future__ import annotations

from typing import TYPE_CHECKING

from induction_probes.circuits.models.model_config import HookedTransformerConfig
from induction_probes.probes.circuit.contrasts import MarkovContrast
from induction_probes.probes.circuit.edges import EdgeEffects, edge_effects
from induction_probes.probes.views.charts import Curve
from induction_probes.probes.views.movie_page import Chart

if TYPE_CHECKING:
    from induction_probes.circuits.devices import Device
    from induction_probes.circuits.runs.reader import Run


def frame_edges(run: Run, steps: list[int], probe_set, device: Device = None) -> dict[int, EdgeEffects]:
    """Each shown checkpoint's edges, where the run is an ICL-MC transformer's (none for other tasks and models:
    their corruption is not defined here)."""
    if run.task.name != "markov" or not isinstance(run.model_config, HookedTransformerConfig):
        return {}
    contrast = MarkovContrast.of(probe_set)
    return {step: edge_effects(run.load(step=step, device=device), contrast, step) for step in steps}


def edge_rows(found: EdgeEffects | None) -> list[dict]:
    """A frame's edges, largest share first, as the page lists them (none where the step has no gap)."""
    if found is None or found.effects is None:
        return []
    circuit = set(found.circuit)
    rows = [
        {"edge": e.name, "value": x.value, "low": x.low, "high": x.high, "circuit": e in circuit}
        for e, x in zip(found.edges, found.effects)
    ]
    return sorted(rows, key=lambda row: -row["value"])


def edges_chart(found: dict[int, EdgeEffects], steps: list[int]) -> Chart:
    """The last frame's circuit edges over the frames shown, with their bands, against the circuit's threshold."""
    last = found[steps[-1]]
    curves = []
    for edge in last.circuit:
        kept = [(step, e) for step in steps if (e := found[step].banded(edge)) is not None]
        values = [e.value for _, e in kept]
        curves.append(
            Curve(edge.name, [s for s, _ in kept], values, [e.low for _, e in kept], [e.high for _, e in kept])
        )
    return Chart("the circuit's edges: share of the in-context gap (path patching)", "share", curves, last.threshold)
