"""What ``induction-probes circuit MODEL_OR_SERIES`` shows for a Hugging Face language model: every edge's share
of the in-context gap on repeated random tokens (:mod:`~induction_probes.probes.circuit.lm_patching`), the
circuit and its faithfulness at one checkpoint, or with ``all_steps`` the edge × step table of a ``step_N`` series
and each circuit edge's formation bracket; with ``plot`` the layered graph and, over a series, each circuit edge
against the step. Callable from Python:

>>> circuit_language_model("path/to/model", as_json=True)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from induction_probes.circuits.defaults import LM_CIRCUIT_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.model_sources import ModelSource, Series, as_source, require_model
from induction_probes.probes.circuit.edges import CHECKED_EDGES, THRESHOLD, EdgeEffects
from induction_probes.probes.circuit.lm_patching import (
    CircuitSettings,
    checkpoint_edges,
    series_edges,
)
from induction_probes.probes.figures.plots_circuit_edges import plot_edges_over_steps
from induction_probes.probes.figures.plots_circuit_graph import plot_circuit_graphs
from induction_probes.probes.report.circuit_views import (
    SHOWN_EDGES,
    check_graph_steps,
    effect_cell,
    estimate_text,
    graph_steps,
    series_answer,
)
from induction_probes.probes.report.lm_views import (
    all_steps_of,
    figure_stem,
    header,
    protocol_json,
    quiet_transformers,
    title,
)
from induction_probes.probes.report.tables import figure_lines, format_table

CORRUPTION = "repeated random tokens against the same sequences with their first copy of R redrawn"


def circuit_language_model(
    model: ModelSource | Series | str | os.PathLike,
    *,
    step: int | None = None,
    all_steps: bool = False,
    n_seqs: int = LM_CIRCUIT_SEQS,
    length: int | tuple[int, int] | None = None,
    seed: int = PROBE_SEED,
    threshold: float = THRESHOLD,
    checked: int = CHECKED_EDGES,
    marked: bool = False,
    device: str = "cpu",
    threads: int | None = None,
    backend: str | None = None,
    address: str | None = None,
    progress: bool = False,
    plot: Path | None = None,
    graph_at: list[int] | None = None,
    as_json: bool = False,
) -> str | dict[str, Any]:
    """Path patching of every edge of the language model (a folder, a cache name or a ``step_N`` series) at
    ``step`` (default the last), or with ``all_steps`` at every checkpoint of a series (``backend="ray"``: one Ray
    task each). ``checked``: of a model with more than 300 edges, those the EAP-IG screen ranks highest are patched
    exactly; ``marked``: instead, only the edges among the heads ``probe`` marks; ``graph_at``: the steps whose
    layered graph ``plot`` draws."""
    source = model if isinstance(model, (ModelSource, Series)) else as_source(os.fspath(model))
    settings = CircuitSettings(length, n_seqs, seed, threshold, checked, threads, marked)
    protocol = protocol_json(length, n_seqs, seed)
    quiet_transformers()
    if all_steps:
        series = all_steps_of(source, step)
        check_graph_steps(graph_at, series.steps, plot)
        found = series_edges(series, settings, device, progress, backend or "local", address)
        figures = lm_figures(series.name, found, plot, figure_stem(series, series.checkpoints[-1]), graph_at)
        answer_header = header(series, None, protocol) | {"corruption": CORRUPTION}
        return series_answer(f"series {series.name}", found, answer_header, figures, as_json)
    if backend is not None or address is not None:
        raise BadInput("--backend and --address spread a series' checkpoints: give --all-steps too")
    checkpoint = require_model(source, step)
    check_graph_steps(graph_at, [checkpoint.step], plot)
    found = checkpoint_edges(checkpoint, settings, device)
    figures = lm_figures(checkpoint.describe(), [found], plot, figure_stem(source, checkpoint), graph_at)
    if as_json:
        return (
            header(source, checkpoint, protocol)
            | {"corruption": CORRUPTION}
            | found.to_json()
            | {"figures": [str(f) for f in figures]}
        )
    return "\n".join(step_lines(title(source, checkpoint), found, n_seqs) + figure_lines(figures))


def lm_figures(
    name: str, found: list[EdgeEffects], plot: Path | None, stem: str, graph_at: list[int] | None = None
) -> list[Path]:
    """The layered graph at the checkpoints that tell the story (or at ``graph_at``), and over a series each
    circuit edge's effect."""
    if plot is None:
        return []
    shown = graph_steps(found, graph_at)
    steps = "-".join(str(f.step) for f in shown)
    figures = [
        plot_circuit_graphs(
            shown, f"{name}: the circuit, edge by edge", Path(plot) / f"{stem}_circuit_graph_steps{steps}.png"
        )
    ]
    return figures + (
        [plot_edges_over_steps(name, found, Path(plot) / f"{stem}_circuit_edges.png")] if len(found) > 1 else []
    )


def step_lines(name: str, found: EdgeEffects, n_seqs: int) -> list[str]:
    gap = found.gap
    lines = [
        f"{name}: path patching on {n_seqs} sequences of {CORRUPTION}; effect: the share of the in-context gap the "
        "edge alone carries [95 %]",
        f"method: {found.method}",
        f"gap (the repeated copy's loss, corrupted − clean): {gap.value:.4f} [{gap.low:.4f}, {gap.high:.4f}]",
    ]
    if found.no_gap:
        return [*lines, f"no effects: {found.no_gap}, so there is no in-context signal to share out"]
    effects = found.effects or []
    order = sorted(range(len(found.edges)), key=lambda i: -effects[i].value)[:SHOWN_EDGES]
    circuit = set(found.circuit)
    screened = ["EAP-IG estimate"] if found.screen else []
    body = [
        [found.edges[i].name, effect_cell(found, i), "yes" if found.edges[i] in circuit else ""]
        + ([f"{found.screen.estimate(found.edges[i]):+.3f}"] if found.screen else [])
        for i in order
    ]
    return lines + [
        format_table(["edge", "effect [95 %]", "in circuit", *screened], body),
        f"shown: the {len(order)} edges that carry the most, of {len(found.edges)} patched (all in the JSON)",
        f"circuit (effect >= {found.threshold:g}): {', '.join(e.name for e in found.circuit) or 'none'}; "
        f"faithfulness {estimate_text(found.faithfulness)} (the share of the gap kept with every other edge patched)",
    ]
