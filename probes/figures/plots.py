"""Figures, written as PNG files through matplotlib's object-oriented API: no pyplot, so no backend is
chosen and no global figure is kept (a notebook's own backend and figures are left alone), and no display
is needed.

One standard for every figure: its title says what it shows; both axes are labelled with their units;
a run's figures share one x-axis, training sequences seen on a log scale (so the short uniform phase is
as wide as the plateau), with the background shaded by the strategy the model is closest to and a key
for the shading; chance levels and baselines are drawn; annotations are rounded to what is meaningful;
and fonts stay readable when a slide shows the figure at half width. Where the data hold intervals (over
sequences or seeds) the figure draws them, as error bars or bands; every key sits beside or below the panels,
never on the data, and names every line drawn; a head has one colour (:func:`head_colour`) in every figure; and
:func:`save` raises any text under 10 px at the width the paper page shows the figure.
"""

from __future__ import annotations

import io
import math
import re
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import seaborn as sns
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text
from matplotlib.transforms import offset_copy

from induction_probes.circuits.names import head_label, heads_label  # noqa: F401 (the figures' import)
from induction_probes.circuits.tasks.markov.strategies import closest_strategy
from induction_probes.circuits.untrusted import write_atomic

STRATEGY_COLOURS = {"uniform": "tab:blue", "unigram": "tab:orange", "bigram": "tab:green", "trigram": "tab:red"}
SEQUENCES_LABEL = "training sequences seen (log scale)"
# heads' colours: none of the strategies' (a head's curve sits beside them) and none grey (the heads not shown)
HEAD_PALETTE = (
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:olive",
    "tab:cyan",
    "navy",
    "darkgoldenrod",
    "teal",
    "darkmagenta",
    "black",
    "lightcoral",
    "slateblue",
    "peru",
)
KEY_FONT = 11  # legends and annotations: 10 px or more where the paper page shows a figure (see displayed_px)
# The paper page (probes/paper/page.py) shows a figure in a column of (1150 − 2 · 16 − 16) / 2 px beside another,
# or across the whole text (1150 − 2 · 16 px) when it is wider than WIDE_INCHES: its text is read at that width.
PAGE_COLUMN_PX, PAGE_WIDE_PX, WIDE_INCHES = 551, 1118, 8.5
MIN_PX = 10.05  # the smallest text, in the page's pixels (a hair over 10: a size computed to 10 may round below)
DPI = 120


def theme(style: Literal["white", "dark", "whitegrid", "darkgrid", "ticks"] = "ticks") -> None:
    """Seaborn's style at a font size that survives a slide (ticks 11 pt, labels 12 pt)."""
    sns.set_theme(style=style, context="notebook", font_scale=1.1)


def subplots(
    *grid, figsize: tuple[float, float], layout: Literal["constrained", "compressed", "tight"] | None = None, **options
):
    """A figure and its axes (``Figure.subplots``'s grid and options), made without pyplot: nothing global
    is touched and the figure is freed with its last reference."""
    fig = Figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(*grid, **options)


def strategy_colour(name: str) -> str:
    return STRATEGY_COLOURS.get(name, "tab:purple")


def head_colour(label: str) -> str:
    """The one colour of the head ``label`` (L1H0) in every figure of a model: a function of its layer and index
    alone, so the induction and the Markov figures agree whichever heads each shows."""
    found = re.fullmatch(r"L(\d+)H(\d+)", label)
    index = 5 * int(found[1]) + int(found[2]) if found else zlib.crc32(label.encode())  # 13 colours: a prime
    return HEAD_PALETTE[index % len(HEAD_PALETTE)]


def is_wide(width_inches: float) -> bool:
    """Whether the paper page shows a figure this wide across the whole text, not in a column."""
    return width_inches > WIDE_INCHES


def displayed_px(fig: Figure, points: float) -> float:
    """How many screen pixels a font of ``points`` takes where the paper page shows ``fig``."""
    width = fig.get_figwidth()
    return points / 72 * (PAGE_WIDE_PX if is_wide(width) else PAGE_COLUMN_PX) / width


def legend_outside(ax: Axes, below: bool = False, sections: dict[str, list] | None = None, **options):
    """One legend beside the axes (right of them, or ``below`` them, under the tick labels and the x label: a fixed
    offset in points, which a fraction of the axes' height is not), never over the data. ``sections``: further
    keys (a title, then its handles) in the same legend, each under its title: a layout engine makes room for an
    axes' own legend, not for a second one added beside it, which it let run off the figure."""
    handles, labels = options.pop("handles", None), options.pop("labels", None)
    titles = []  # the rows that name a section, in bold
    if sections:
        if handles is None:
            handles, labels = ax.get_legend_handles_labels()
        labels = labels or [handle.get_label() for handle in handles]
        for title, extra in sections.items():
            titles.append(len(handles))
            handles = [*handles, Line2D([], [], ls="none"), *extra]  # an empty row, named with its title
            labels = [*labels, title, *(handle.get_label() for handle in extra)]
    if handles is not None:
        options["handles"] = handles
        options["labels"] = labels or [handle.get_label() for handle in handles]
    where = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)}
    if below:
        under = offset_copy(ax.transAxes, fig=ax.get_figure(root=True), y=-48, units="points")
        where = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0), "bbox_transform": under}
    legend = ax.legend(**where, borderaxespad=0, fontsize=KEY_FONT, title_fontsize=KEY_FONT, **options)
    for row in titles:
        legend.get_texts()[row].set_fontweight("bold")
    return legend


def meaningful(value: float, scale: float, digits: int = 2) -> str:
    """``value`` to ``digits`` significant figures of ``scale`` (a panel's largest magnitude): float noise
    far below the scale (1.4e-10 beside 3300) reads 0."""
    if scale == 0:
        return "0"
    decimals = digits - 1 - math.floor(math.log10(abs(scale)))
    rounded = round(value, decimals)
    return f"{rounded:.{max(decimals, 0)}f}" if rounded != 0 else "0"


def error_bars(values: list[float], bounds: list[tuple[float | None, float | None]]) -> np.ndarray | None:
    """[2, bars]: each bar's distance down and up to the ends of its interval ``bounds``; None where a bar has
    none."""
    known = [(low, high) for low, high in bounds if low is not None and high is not None]
    if len(known) < len(values):
        return None
    down = [value - low for value, (low, _) in zip(values, known)]
    return np.array([down, [high - value for value, (_, high) in zip(values, known)]])


def with_sequences(metrics: list[dict]) -> list[dict]:
    """The checkpoints a log axis of sequences seen can show: all but step 0."""
    return [m for m in metrics if m["sequences_seen"] > 0]


def sequences_axis(ax: Axes, x: Sequence[float]) -> None:
    """The shared x-axis of a run's figures, with a margin so that no curve touches the frame."""
    ax.set_xscale("log")
    ax.set_xlim(min(x) / 1.25, max(x) * 1.25)
    ax.set_xlabel(SEQUENCES_LABEL)


def log_limits(ax: Axes, values: list[float]) -> None:
    """A log y-axis that holds every positive value with a margin above and below."""
    positive = [v for v in values if v > 0]
    ax.set_yscale("log")
    ax.set_ylim(min(positive) / 1.5, max(positive) * 1.5)


def figure_name(run: str, what: str, steps: list[int], mode: str = "") -> str:
    """A figure's file name says its run, what it shows, its mode and its checkpoints:
    markov-k3_ablation_zero_step4000.png, markov-k3_attention_steps0-297-4000.png."""
    tag = (
        f"step{steps[0]}"
        if len(steps) == 1
        else "steps" + "-".join(map(str, steps if len(steps) <= 3 else steps[:: len(steps) - 1]))
    )
    return "_".join(part for part in (run, what, mode, tag) if part) + ".png"


def shade_closest_strategy(ax: Axes, x: list[float], metrics: list[dict]) -> None:
    """Background bands coloured by the closest strategy, each band from one checkpoint to the next."""
    closest = [closest_strategy(m["last_token_kl"]) for m in metrics]
    start = 0
    for i in range(1, len(x) + 1):
        if i == len(x) or closest[i] != closest[start]:
            ax.axvspan(x[start], x[min(i, len(x) - 1)], color=strategy_colour(closest[start]), alpha=0.15, lw=0)
            start = i


def plot_distance_to_strategies(metrics: list[dict], strategies: list[str], title: str, path: Path) -> Path:
    """KL(strategy ‖ model) at the last token against sequences seen (Edelman et al., Figure 1), with the
    model's own KL(true ‖ model) for reference; the keys beside the axes, off the curves."""
    theme()
    kept = with_sequences(metrics)
    x = [m["sequences_seen"] for m in kept]
    fig, ax = subplots(figsize=(8, 4.6))
    shade_closest_strategy(ax, x, kept)
    strategy_curves(ax, x, kept, strategies)
    log_limits(ax, [m["last_token_kl"][name] for m in kept for name in [*strategies, "true"]])
    sequences_axis(ax, x)
    ax.set_ylabel("KL(· ‖ model), last token (nats)")
    ax.set_title(f"{title}: distance from each strategy to the model")
    legend_outside(ax, title="curves", sections={"shading": phase_handles(kept)})
    return save(fig, path)


def strategy_curves(ax: Axes, x: list[float], metrics: list[dict], strategies) -> None:
    """KL(strategy ‖ model) at the last token for each of ``strategies``, and the model's KL(true ‖ model)."""
    for name in strategies:
        ax.plot(x, [m["last_token_kl"][name] for m in metrics], color=strategy_colour(name), label=f"to {name}", lw=2)
    ax.plot(x, [m["last_token_kl"]["true"] for m in metrics], color="black", ls="--", lw=1.5, label="KL(true ‖ model)")


def plot_loss_against_baselines(metrics: list[dict], baselines: dict[str, float], title: str, path: Path) -> Path:
    """KL(true ‖ model) at the last token, with each strategy's KL(true ‖ strategy) as a dashed line. The
    training metrics hold means only (no per-sequence values), so the curve has no band."""
    theme()
    kept = with_sequences(metrics)
    x = [m["sequences_seen"] for m in kept]
    fig, ax = subplots(figsize=(8, 4.6))
    shade_closest_strategy(ax, x, kept)
    ax.plot(x, [m["last_token_kl"]["true"] for m in kept], color="black", lw=2, label="model")
    for name, value in baselines.items():
        ax.axhline(value, color=strategy_colour(name), ls="--", lw=1.5, label=f"{name} strategy ({value:.3f})")
    sequences_axis(ax, x)
    ax.set_ylabel("KL(true ‖ model), last token (nats)")
    ax.set_ylim(0, 1.1 * max(*baselines.values(), *(m["last_token_kl"]["true"] for m in kept)))
    ax.set_title(f"{title}: KL(true ‖ model) at the last token against each strategy's")
    legend_outside(ax, title="KL(true ‖ ·)", sections={"shading": phase_handles(kept)})
    return save(fig, path)


def save(fig: Figure, path: Path) -> Path:
    """``fig`` as a PNG at ``path``, laid out tightly unless it chose a layout (a constrained one places
    colour bars that span several axes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    as_plain_text(fig)
    readable_text(fig)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
        # which leaves a placeholder engine behind, and savefig draws a figure that has any engine twice (once to
        # lay it out): the layout is done, so the figure keeps none and is drawn once
        fig.set_layout_engine(None)
    png = io.BytesIO()
    fig.savefig(png, dpi=DPI, format="png")
    # by a rename, as a run's files: a link planted at the figure's name is replaced, never written through
    write_atomic(path.parent.resolve() / path.name, png.getvalue())
    return path


def smallest_points(fig: Figure) -> float:
    """The font size, in points, that is MIN_PX pixels where the paper page shows ``fig``."""
    return MIN_PX / displayed_px(fig, 1.0)


def readable_text(fig: Figure) -> None:
    """Every text of ``fig`` raised to :func:`smallest_points` where it is smaller, tick labels through their
    axis (an axis makes new tick labels as the view changes, from its own settings), before the layout, which
    makes room for the larger text: a panel of a wide figure is read at the page's width, not the PNG's."""
    smallest = smallest_points(fig)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            # an axis gives all its major (or minor) tick labels one size: its first tick of each kind tells
            ticks = axis.get_major_ticks(1) + axis.get_minor_ticks(1)
            if any(float(tick.label1.get_fontsize()) < smallest for tick in ticks):
                axis.set_tick_params(which="both", labelsize=smallest)
    for text in texts_but_tick_labels(fig):
        if float(text.get_fontsize()) < smallest:
            text.set_fontsize(smallest)


def as_plain_text(fig: Figure) -> None:
    """Every text of ``fig`` but the tick labels read as plain text, not mathtext: titles, labels and legends
    hold run and condition names, and a "$" in one must not start a formula. Tick labels keep mathtext,
    which the log axes' 10^k labels are written in."""
    for text in texts_but_tick_labels(fig):
        text.set_parse_math(False)


def texts_but_tick_labels(artist: Artist) -> Iterator[Text]:
    """Every Text under ``artist`` except the ticks' labels, found without making the ticks: an axis is only
    its label and offset text here (its children would be every major and minor tick, which asking for them
    creates: an eighth of the paper page's time, on its log axes)."""
    if isinstance(artist, Text):
        yield artist
    children = [artist.label, artist.offsetText] if isinstance(artist, Axis) else artist.get_children()
    for child in children:
        yield from texts_but_tick_labels(child)


def thousands(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def step_caption(entry: dict) -> str:
    """A checkpoint as a figure names it: step, sequences seen and closest strategy (a metrics entry)."""
    return (
        f"step {entry['step']} ({thousands(entry['sequences_seen'])} seqs, {closest_strategy(entry['last_token_kl'])})"
    )


def best_head_band(results: list, score: str, layer: int) -> tuple[list[float], list[float], list[float]]:
    """The best head of ``layer`` by ``score`` at each checkpoint: its value and the 95 % interval over the probe
    sequences (NaN where a result carries none, which leaves a gap in the band)."""
    values, lows, highs = [], [], []
    for r in results:
        scores = r.scores[score][layer]
        best = int(scores.argmax())
        bounds = getattr(r, "intervals", {}).get(score)
        low, high = (bounds[layer][0][best].item(), bounds[layer][1][best].item()) if bounds else (math.nan,) * 2
        values, lows, highs = values + [scores[best].item()], lows + [low], highs + [high]
    return values, lows, highs


def plot_scores_over_training(
    results: list, metrics: list[dict], chance: dict[str, float], title: str, path: Path
) -> Path:
    """Layer 0's previous-token and the last layer's bigram-matching scores (best head, with its 95 % interval
    over the probe sequences as a band) against sequences seen, shaded by phase, each with its chance level
    (attention spread evenly over the keys). ``metrics`` holds the run's metrics entry of each result's step."""
    theme()
    kept = [(r, m) for r, m in zip(results, metrics) if m["sequences_seen"] > 0]
    x = [m["sequences_seen"] for _, m in kept]
    last = len(results[0].scores["bigram_matching"]) - 1
    curves = {
        "previous_token": ("tab:purple", "layer 0 previous-token", 0),
        "bigram_matching": ("tab:brown", f"layer {last} bigram-matching", last),
    }
    fig, ax = subplots(figsize=(8, 4.6))
    shade_closest_strategy(ax, x, [m for _, m in kept])
    for name, (colour, label, layer) in curves.items():
        values, low, high = best_head_band([r for r, _ in kept], name, layer)
        ax.plot(x, values, color=colour, lw=2, label=label)
        ax.fill_between(x, low, high, color=colour, alpha=0.25, lw=0, label="its 95 % interval")
        ax.axhline(chance[name], color=colour, ls=":", lw=1.5, label=f"chance ({chance[name]:.2f})")
    sequences_axis(ax, x)
    ax.set_ylabel("score of the best head\n(attention mass)")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(f"{title}: circuit scores over training")
    legend_outside(ax, sections={"shading": phase_handles([m for _, m in kept])})
    return save(fig, path)


def phase_handles(metrics: list[dict]) -> list[Patch]:
    """A key entry for each strategy whose shading appears, so the bands need no caption."""
    shown = dict.fromkeys(closest_strategy(m["last_token_kl"]) for m in metrics)
    return [Patch(color=strategy_colour(name), alpha=0.15, label=f"closest: {name}") for name in shown]


def strategies_above(metrics: list[dict], height: float, width: float = 8, outside: bool = False) -> tuple:
    """A two-panel figure on a shared log x-axis of sequences seen (step 0, at no sequences, left out), both
    shaded by the closest strategy; the top panel holds KL(strategy ‖ model) and the model's KL(true ‖ model),
    with its key inside (or ``outside``, right of the panel). Returns (figure, top, bottom, x, the metrics kept)."""
    theme()
    kept = with_sequences(metrics)
    x = [m["sequences_seen"] for m in kept]
    layout = "constrained" if outside else None  # constrained layout makes room for keys outside the axes
    fig, (top, bottom) = subplots(2, 1, figsize=(width, height), sharex=True, layout=layout)
    for ax in (top, bottom):
        shade_closest_strategy(ax, x, kept)
    strategy_curves(top, x, kept, ("uniform", "unigram", "bigram"))
    top.set_yscale("log")
    top.set_ylabel("KL(· ‖ model), last token (nats)")
    if outside:
        legend_outside(top, sections={"shading": phase_handles(kept)})
    else:
        top.legend(loc="center left", fontsize=8)
    sequences_axis(bottom, x)
    return fig, top, bottom, x, kept
