"""The step × head atlas of an ablation over training (``ablate --all-steps``): heads down, checkpoints across,
one colour per (step, head) effect; grey where a step has no value (a language model's gap with 0 in its
interval, where no share of it is given)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.ticker import FuncFormatter

from induction_probes.probes.figures.plots import save, sns, subplots, theme


def step_head_heatmap(
    values: list[list[float | None]],
    heads: list[str],
    steps: list,
    title: str,
    colour_label: str,
    path: Path,
    percent: bool = False,
) -> Path:
    """``values`` [head][step] as a heatmap. ``percent``: shares, coloured from 0 to 100 % (a share beyond
    either end is drawn at it); otherwise from 0 to the largest value (a fall is drawn at 0)."""
    theme()
    grid = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)
    top = 1.0 if percent else max(float(np.nanmax(grid)) if np.isfinite(grid).any() else 0.0, 1e-12)
    width = min(13.0, max(6.0, 0.5 * len(steps) + 3))  # wider than a page helps no one: steps share it
    fig, ax = subplots(figsize=(width, min(20.0, max(3.5, 0.18 * len(heads) + 1.5))), layout="constrained")
    colours = sns.color_palette("rocket_r", as_cmap=True).with_extremes(bad="0.85")
    image = ax.imshow(np.ma.masked_invalid(grid), aspect="auto", cmap=colours, vmin=0, vmax=top, interpolation="none")
    every = max(1, -(-len(steps) // 20))  # at most 20 step labels
    ax.set_xticks(range(0, len(steps), every), [str(s) for s in steps[::every]], rotation=45, ha="right")
    ax.set_yticks(range(len(heads)), heads, fontsize=8 if len(heads) <= 48 else 5)
    ax.set_xlabel("checkpoint (training step)")
    ax.set_ylabel("ablated head")
    bar = fig.colorbar(image, ax=ax)
    bar.set_label(colour_label)
    if percent:
        bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{100 * value:.0f}%"))
    ax.set_title(title)
    ax.grid(False)
    return save(fig, path)
