"""Attention drawn as lines, as Edelman et al. draw it (Fig. 2): one line from each query to each of its keys,
of width 3·a and opacity 0.45·a, where a is the attention divided by the largest attention of that query
(so every query's heaviest key gets the full line, and nothing is thresholded away); the last layer is drawn
from the last query only, the position whose prediction the induction head makes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from jaxtyping import Float
from matplotlib.collections import LineCollection
from torch import Tensor

from induction_probes.probes.figures import plots
from induction_probes.probes.figures.plots import theme

LINE_WIDTH, LINE_ALPHA = 3.0, 0.45  # points and opacity at a = 1, the authors' plotting code
LINE_COLOUR = (0.12, 0.3, 0.6)


def attention_lines(pattern: Float[Tensor, "query_pos key_pos"], last_only: bool) -> list[tuple[int, int, float]]:
    """(query, key, a) for every line: each drawn query's causal row (keys 0..query) divided by its maximum;
    only the last query's with ``last_only``. A query whose row is all zero (no key under a strict mask)
    draws nothing."""
    n_pos = pattern.shape[0]
    lines = []
    for query in [n_pos - 1] if last_only else range(n_pos):
        row = pattern[query, : query + 1].double()
        top = row.max().item()
        if top > 0:
            lines += [(query, key, weight / top) for key, weight in enumerate(row.tolist())]
    return lines


def draw_lines(ax, lines: list[tuple[int, int, float]], tokens: list[int], title: str) -> LineCollection:
    """Queries on the upper row, keys on the lower, each position labelled with its token."""
    segments = [[(query, 1.0), (key, 0.0)] for query, key, _ in lines]
    weights = np.array([a for _, _, a in lines])
    colours = [(*LINE_COLOUR, LINE_ALPHA * a) for a in weights]
    collection = LineCollection(segments, linewidths=LINE_WIDTH * weights, colors=colours)
    ax.add_collection(collection)
    for position, token in enumerate(tokens):
        for height, va in ((1.0, "bottom"), (0.0, "top")):
            ax.text(position, height + (0.04 if va == "bottom" else -0.04), str(token), ha="center", va=va, fontsize=8)
    ax.set_xlim(-0.8, len(tokens) - 0.2)
    ax.set_ylim(-0.25, 1.25)
    ax.set_yticks([0.0, 1.0], ["key", "query"])
    ax.set_xticks([])
    ax.set_title(title, fontsize=10)
    return collection


def plot_attention_lines(
    patterns_by_step: dict[int, list], tokens, captions: dict[int, str], title: str, path: Path, n_pos: int = 24
) -> Path:
    """Head 0 of every layer (rows) at each step (columns) on one sequence's first ``n_pos`` positions, drawn
    as :func:`attention_lines`: every query in the layers before the last, the last query in the last."""
    theme("white")
    steps = list(patterns_by_step)
    n_layers = len(patterns_by_step[steps[0]])
    n_pos = min(n_pos, tokens.shape[-1])
    shown = [int(t) for t in tokens[:n_pos]]
    fig, axes = plots.subplots(
        n_layers, len(steps), figsize=(5 * len(steps), 2.2 * n_layers + 0.6), squeeze=False, layout="constrained"
    )
    for col, step in enumerate(steps):
        for layer, pattern in enumerate(patterns_by_step[step]):
            last = layer == n_layers - 1
            lines = attention_lines(pattern[0, 0, :n_pos, :n_pos], last_only=last)
            who = "from the last token" if last else "every token"
            draw_lines(axes[layer][col], lines, shown, f"layer {layer} ({who}), {captions[step]}")
    fig.suptitle(f"{title}: attention as lines (width and opacity ∝ attention / the query's largest)")
    return plots.save(fig, path)
