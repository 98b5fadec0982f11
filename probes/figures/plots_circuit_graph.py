"""The circuit as a layered graph (``circuit RUN --plot``): the embedding at the bottom, each layer's heads above it,
the logits at the top; an edge from a sender to a receiver's query, key or value input, or to the logits, drawn
with a width that grows with its share of the in-context gap, solid where it is in the circuit and faint where
not. One panel per checkpoint shown: at one step, that step; over training, the first checkpoint with a gap, the
checkpoint where the last circuit edge first lies above the threshold (the formation), and the last."""

from __future__ import annotations

import re
from pathlib import Path

from induction_probes.probes.figures.plots import save, subplots, theme

VIA_COLOURS = {"q": "tab:blue", "k": "tab:red", "v": "tab:green", "direct": "0.25"}
COMPONENT = re.compile(r"MLP(\d+)|L(\d+)(?:H|KV)\d+")  # an MLP, a head, or a key-value group of heads
INPUT_OFFSET = {"q": -0.3, "k": 0.0, "v": 0.3, "direct": 0.0}  # where on a receiver its three inputs arrive


def node_places(edges: list) -> dict[str, tuple[float, float]]:
    """(x, y) of every sender and receiver: the embedding at row 0, layer l's heads at row l + 1, the logits on top."""
    names = list(dict.fromkeys([e.sender for e in edges] + [e.receiver for e in edges]))
    rows: dict[int, list[str]] = {}
    for name in names:
        rows.setdefault(row_of(name, names), []).append(name)
    return {name: (i - (len(members) - 1) / 2, row) for row, members in rows.items() for i, name in enumerate(members)}


def row_of(name: str, names: list[str]) -> int:
    if name == "embed":
        return 0
    if name == "logits":
        return 1 + max(row_of(n, names) for n in names if n != "logits")
    component = COMPONENT.fullmatch(name)
    if component is None:
        raise ValueError(f"{name!r} names no component of a layer")
    return int(component.group(1) or component.group(2)) + 1


def draw_graph(ax, found) -> None:
    """One checkpoint's edges (:class:`~induction_probes.probes.circuit.edges.EdgeEffects`) on ``ax``."""
    ax.axis("off")
    if not found.edges:  # a screened model without a gap: nothing was patched
        ax.set_title(f"step {found.step}\n(no gap: no edge patched)", fontsize=10)
        return
    places = node_places(found.edges)
    circuit = set(found.circuit)
    for edge, effect in zip(found.edges, found.effects or [None] * len(found.edges)):
        share = 0.0 if effect is None else max(effect.value, 0.0)
        (x0, y0), (x1, y1) = places[edge.sender], places[edge.receiver]
        x1 += INPUT_OFFSET[edge.via]
        inside = edge in circuit
        ax.annotate(
            "",
            xy=(x1, y1 - 0.12),
            xytext=(x0, y0 + 0.12),
            arrowprops={
                "arrowstyle": "-|>",
                "color": VIA_COLOURS[edge.via],
                "lw": 0.5 + 6 * min(share, 1.0),
                "alpha": 0.95 if inside else 0.18,
                # an edge that skips a row bends around the row between, not through its nodes
                "connectionstyle": f"arc3,rad={0.45 if y1 - y0 > 1 else 0.05}",
            },
        )
    for name, (x, y) in places.items():
        ax.text(
            x, y, name, ha="center", va="center", fontsize=10, bbox={"boxstyle": "round", "fc": "white", "ec": "0.3"}
        )
    reach = max(2.0, 1 + max(abs(x) for x, _ in places.values()))  # a row of many heads widens the panel
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-0.5, max(y for _, y in places.values()) + 0.5)
    said = "no gap: no effects" if found.effects is None else f"faithfulness {found.faithfulness.value:.2f}"
    ax.set_title(f"step {found.step}\n({said})", fontsize=10)


def plot_circuit_graphs(found: list, title: str, path: Path) -> Path:
    """One panel per checkpoint in ``found`` (at most a few), the key of the inputs' colours below them."""
    theme()
    width = max(6.0, 3.6 * len(found) + 1)
    fig, axes = subplots(1, len(found), figsize=(width, 5.0), layout="constrained", squeeze=False)
    for ax, step in zip(axes[0], found):
        draw_graph(ax, step)
    for via, colour in VIA_COLOURS.items():
        axes[0][0].plot([], [], color=colour, lw=3, label="to the logits" if via == "direct" else f"into {via}")
    fig.legend(loc="outside lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle(title + "\nwidth: the share of the gap an edge carries; faint: below the threshold", fontsize=10)
    return save(fig, path)
