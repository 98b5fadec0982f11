"""What ``induction-probes circuit RUN`` shows for an ICL-MC run of ours: every edge's share of the in-context gap
(:mod:`~induction_probes.probes.circuit.edges`), the circuit and its faithfulness at one checkpoint, beside
Proposition 2.1's construction; with ``all_steps`` the edge × step table and each circuit edge's formation bracket,
and with ``plot`` each circuit edge's effect over training with its band. Callable from Python:

>>> circuit_report("markov-k3", as_json=True)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from induction_probes.circuits.constructions.edelman import prop21
from induction_probes.circuits.constructions.loading import load_construction
from induction_probes.circuits.defaults import CIRCUIT_SEQS, PROBE_SEED
from induction_probes.circuits.devices import Device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.model_sources import format_steps
from induction_probes.circuits.models.model_config import HookedTransformerConfig
from induction_probes.circuits.runs.reader import Run, RunOrPath, as_run, run_task
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.probes.circuit.contrasts import MarkovContrast
from induction_probes.probes.circuit.edges import THRESHOLD, EdgeEffects, check_settings, edge_effects
from induction_probes.probes.circuit.path_patching import Edge
from induction_probes.probes.figures.plots_circuit_edges import plot_edges_over_training
from induction_probes.probes.figures.plots_circuit_graph import plot_circuit_graphs
from induction_probes.probes.intervals import Estimate
from induction_probes.probes.report.tables import figure_lines, format_table, provenance
from induction_probes.probes.run_level.all_probes import probe_eval_set
from induction_probes.probes.tidy import crossing_step, first_reached
from induction_probes.probes.views.movie_page import spread

CONSTRUCTION_C = 100.0  # Prop. 2.1's scale, as `verify prop21` builds it by default
SHOWN_STEPS = 8  # checkpoints the over-training table lists (every one is in the JSON)
SHOWN_EDGES = 24  # edges a table lists (every one is in the JSON)
MAX_GRAPHS = 6  # panels of the layered graph a user may ask for


def circuit_report(
    run: RunOrPath,
    *,
    step: int | None = None,
    all_steps: bool = False,
    n_seqs: int = CIRCUIT_SEQS,
    seed: int = PROBE_SEED,
    threshold: float = THRESHOLD,
    device: Device = None,
    plot: Path | None = None,
    graph_at: list[int] | None = None,
    as_json: bool = False,
) -> str | dict[str, Any]:
    """Path patching of every edge of the run's checkpoint at ``step`` (default the last), or with ``all_steps``
    of every checkpoint, on ``n_seqs`` fresh sequences of ``seed``; ``threshold``: the share of the gap an edge
    needs to be in the circuit; ``graph_at``: the steps whose layered graph ``plot`` draws (default
    :func:`graph_steps`' choice)."""
    run = as_run(run)  # a toy run is a Gaussian one, refused below with the rest
    if run.task.name != "markov":
        raise BadInput(f"circuit reads ICL-MC runs; {run.path.name} is a {run.task.name} run")
    if not isinstance(run.model_config, HookedTransformerConfig):
        raise BadInput(f"circuit patches a transformer's heads; {run.path.name} is a {run.kind} model")
    check_settings(n_seqs, threshold)
    if all_steps and step is not None:
        raise BadInput("give --step or --all-steps, not both")
    eval_set = probe_eval_set(run, n_seqs, seed)
    steps = run.steps if all_steps else [run.entry(step)["step"]]
    check_graph_steps(graph_at, steps, plot)
    contrast = MarkovContrast.of(eval_set)
    found = [edge_effects(run.load(step=s, device=device), contrast, s, threshold) for s in steps]
    figures = circuit_figures(run, found, Path(plot), graph_at) if plot else []
    header = provenance(run, steps, n_seqs, seed)
    if all_steps:
        return series_answer(f"run {run.path.name}", found, header, figures, as_json)
    construction = construction_effects(run, contrast, threshold)
    if as_json:
        return header | found[0].to_json() | {"construction": construction and construction.to_json()}
    return "\n".join(step_lines(run, found[0], construction, n_seqs) + figure_lines(figures))


def circuit_figures(
    run: Run, found: list[EdgeEffects], directory: Path, graph_at: list[int] | None = None
) -> list[Path]:
    """The layered graph at the checkpoints :func:`graph_steps` picks (or at ``graph_at``), and over several
    checkpoints each circuit edge's effect against training."""
    shown = graph_steps(found, graph_at)
    name = run.path.name
    steps = "-".join(str(f.step) for f in shown)
    title = f"{name}: the circuit, edge by edge"
    figures = [plot_circuit_graphs(shown, title, directory / f"{name}_circuit_graph_steps{steps}.png")]
    return figures + ([plot_edges_over_training(run, found, directory)] if len(found) > 1 else [])


def check_graph_steps(graph_at: list[int] | None, steps: Sequence[int | None], plot: Path | None) -> None:
    """The steps a user names for the layered graph: drawn with ``plot``, each a checkpoint patched here, a few."""
    if graph_at is None:
        return
    if plot is None:
        raise BadInput("--graph-steps names the layered graph's steps: give --plot DIR too")
    if missing := [s for s in graph_at if s not in steps]:
        raise BadInput(f"--graph-steps {missing[0]} is not a checkpoint patched here (steps {format_steps(steps)})")
    if not 1 <= len(graph_at) <= MAX_GRAPHS:
        raise BadInput(f"--graph-steps draws 1 to {MAX_GRAPHS} panels, got {len(graph_at)} steps")


def graph_steps(found: list[EdgeEffects], wanted: list[int] | None = None) -> list[EdgeEffects]:
    """The checkpoints a graph shows: those at the ``wanted`` steps; else the one checkpoint, or over training the
    first with a gap, the formation (the first from which the last circuit edge to arrive lies above the threshold
    to the end), and the last."""
    if wanted is not None:
        return [f for f in found if f.step in wanted]
    if len(found) == 1:
        return found
    with_gap = [f for f in found if f.effects is not None] or found
    formed = [b["stays_from"] for b in formation(found).values() if b["stays_from"] is not None]
    window = next((f for f in found if formed and f.step == max(formed)), None)
    return list({id(f): f for f in [with_gap[0], *([window] if window else []), found[-1]]}.values())


def construction_effects(run: Run, contrast: MarkovContrast, threshold: float) -> EdgeEffects | None:
    """Prop. 2.1's construction for the run's task, patched on the same sequences; None where the run's model has
    another shape than the construction's two layers of one head."""
    cfg = run.model_config
    with_mlps = getattr(cfg, "d_mlp", None) is not None  # the minimal model has none to read
    if cfg.n_layers != 2 or any(cfg.heads(layer) != 1 for layer in range(cfg.n_layers)) or with_mlps:
        return None
    task = run_task(run, MarkovTask)
    model = load_construction(*prop21(task.k, CONSTRUCTION_C, task.seq_len, "float32"))
    return edge_effects(model, contrast, None, threshold)


def effect_cell(found: EdgeEffects, index: int) -> str:
    return estimate_text(None if found.effects is None else found.effects[index], "+")


def estimate_text(estimate: Estimate | None, sign: str = "") -> str:
    """A share of the gap with its interval, to 3 decimals ("-" for none; the value alone where no interval)."""
    if estimate is None:
        return "-"
    form = f"{sign}.3f"
    value = f"{estimate.value:{form}}"
    return value if estimate.low is None else f"{value} [{estimate.low:{form}}, {estimate.high:{form}}]"


def step_lines(run: Run, found: EdgeEffects, construction: EdgeEffects | None, n_seqs: int) -> list[str]:
    gap = found.gap
    lines = [
        f"run {run.path.name}, step {found.step}: path patching of every edge on {n_seqs} fresh sequences, each "
        "context from another chain; effect: the share of the in-context gap the edge alone carries [95 %]",
        f"gap (KL to the truth at the last token, corrupted − clean): {gap.value:.4f} [{gap.low:.4f}, {gap.high:.4f}]",
    ]
    if found.no_gap:
        return [*lines, f"no effects: {found.no_gap}, so there is no in-context signal to share out"]
    in_circuit = set(found.circuit)
    body = []
    for i, edge in enumerate(found.edges):
        theirs = [effect_cell(construction, i), "yes" if edge in construction.circuit else ""] if construction else []
        body.append([edge.name, effect_cell(found, i), "yes" if edge in in_circuit else "", *theirs])
    headers = ["edge", "effect [95 %]", "in circuit"]
    headers += [f"Prop. 2.1 (c = {CONSTRUCTION_C:g})", "in its circuit"] if construction else []
    lines += [
        format_table(headers, body),
        f"circuit (effect >= {found.threshold:g}): {', '.join(e.name for e in found.circuit) or 'none'}; "
        f"faithfulness {estimate_text(found.faithfulness)} (the share of the gap kept with every other edge patched)",
    ]
    return lines + construction_lines(found, construction)


def construction_lines(found: EdgeEffects, construction: EdgeEffects | None) -> list[str]:
    """Which trained edges match the construction's circuit (in both, or in neither), each with its interval."""
    if construction is None:
        return ["Prop. 2.1's construction has two layers of one head: this model has another shape"]
    theirs, ours = set(construction.circuit), set(found.circuit)
    both = [f"{e.name} {effect_cell(found, found.edges.index(e))}" for e in found.edges if e in theirs and e in ours]
    missing = [e.name for e in found.edges if e in theirs and e not in ours]
    extra = [e.name for e in found.edges if e in ours and e not in theirs]
    return [
        f"matches the construction's circuit: {', '.join(both) or 'none'}",
        f"the construction's, missing here: {', '.join(missing) or 'none'}; here, not in the construction's: "
        f"{', '.join(extra) or 'none'}",
    ]


def formation(found: list[EdgeEffects]) -> dict[str, dict]:
    """Each edge of the last checkpoint's circuit: the first step whose interval lies above the threshold, and
    the first step from which it stays there to the end."""
    last = found[-1]
    steps = [f.step for f in found]
    brackets = {}
    for edge in last.circuit:
        lows = [lower_bound(f.effect(edge.sender, edge.receiver, edge.via)) for f in found]
        brackets[edge.name] = {
            "first_above": first_reached(steps, lows, last.threshold),
            "stays_from": crossing_step(steps, lows, last.threshold),
        }
    return brackets


def lower_bound(effect) -> float:
    """An effect's interval's low end; below every threshold where there is none (no gap, one sequence)."""
    return float("-inf") if effect is None or effect.low is None else effect.low


def series_answer(name: str, found: list[EdgeEffects], header: dict, figures: list, as_json: bool) -> str | dict:
    """The edge × step table and each circuit edge's formation bracket; ``name``: what was patched, in words."""
    brackets = formation(found)
    if as_json:
        answers = [f.to_json() for f in found]
        return header | {
            "edges": [edge for answer in answers for edge in answer["edges"]],
            "circuits": [answer["circuit"] for answer in answers],
            "methods": [{"step": answer["step"], "method": answer["method"]} for answer in answers],
            "formation": [{"edge": name} | b for name, b in brackets.items()],
            "figures": [str(f) for f in figures],
        }
    shown = spread(found, SHOWN_STEPS)
    edges = shown_edges(found)
    body = [[edge.name, *(effect_value(f, edge) for f in shown)] for edge in edges]
    every = sum(1 for _ in dict.fromkeys(e for f in found for e in f.edges))
    return "\n".join(
        [
            f"{name}: each edge's share of the in-context gap at {len(found)} checkpoints (intervals in the JSON)",
            format_table(["edge", *(f"step {f.step}" for f in shown)], body),
            *(
                []
                if len(edges) == every
                else [f"shown: the {len(edges)} edges that carry the most at any step, of the {every} patched"]
            ),
            f"formation of the last checkpoint's circuit (threshold {found[-1].threshold:g}; the first step whose "
            "interval lies",
            "above it, and the first from which it stays there):",
            *(
                f"  {name}: above from step {b['first_above']}, there to the end from step {b['stays_from']}"
                for name, b in brackets.items()
            ),
            *figure_lines(figures),
        ]
    )


def shown_edges(found: list[EdgeEffects]) -> list[Edge]:
    """The edges a table lists: every one, or of more than :data:`SHOWN_EDGES` the ones with the largest effect at
    any checkpoint, in the model's order."""
    edges = list(dict.fromkeys(e for f in found for e in f.edges))
    if len(edges) <= SHOWN_EDGES:
        return edges
    peak = {
        e: max((abs(x.value) for f in found if (x := f.effect(e.sender, e.receiver, e.via))), default=0.0)
        for e in edges
    }
    kept = set(sorted(edges, key=lambda e: -peak[e])[:SHOWN_EDGES])
    return [e for e in edges if e in kept]


def effect_value(found: EdgeEffects, edge: Edge) -> str:
    effect = found.effect(edge.sender, edge.receiver, edge.via)
    return "-" if effect is None else f"{effect.value:+.2f}"
