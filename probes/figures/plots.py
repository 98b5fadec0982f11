"""Figures, written as PNG files through matplotlib's object-oriented API: no pyplot, so no backend is
chosen and no global figure is kept (a notebook's own backend and figures are left alone), and no display
is needed.

One standard for every figure: its title says what it shows; both axes are labelled with their units;
a run's figures share one x-axis, training sequences seen on a log scale (so the short uniform phase is
as wide as the plateau), with the background shaded by the strategy the model is closest to and a key
for the shading; chance levels and baselines are drawn; annotations are rounded to what is meaningful;
and fonts stay readable when a slide shows the figure at half width.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text

from induction_probes.circuits.common.names import head_label, heads_label  # noqa: F401 (the figures' import)
from induction_probes.circuits.runs.writer import write_atomic
from induction_probes.circuits.tasks.markov.strategies import closest_strategy

STRATEGY_COLOURS = {"uniform": "tab:blue", "unigram": "tab:orange", "bigram": "tab:green", "trigram": "tab:red"}
SEQUENCES_LABEL = "training sequences seen (log scale)"


def theme(style: str = "ticks") -> None:
    """Seaborn's style at a font size that survives a slide (ticks 11 pt, labels 12 pt)."""
    sns.set_theme(style=style, context="notebook", font_scale=1.1)


def subplots(*grid, figsize: tuple[float, float], layout: str | None = None, **options):
    """A figure and its axes (``Figure.subplots``'s grid and options), made without pyplot: nothing global
    is touched and the figure is freed with its last reference."""
    fig = Figure(figsize=figsize, layout=layout)
    return fig, fig.subplots(*grid, **options)


def strategy_colour(name: str) -> str:
    return STRATEGY_COLOURS.get(name, "tab:purple")


def meaningful(value: float, scale: float, digits: int = 2) -> str:
    """``value`` to ``digits`` significant figures of ``scale`` (a panel's largest magnitude): float noise
    far below the scale (1.4e-10 beside 3300) reads 0."""
    if scale == 0:
        return "0"
    decimals = digits - 1 - math.floor(math.log10(abs(scale)))
    rounded = round(value, decimals)
    return f"{rounded:.{max(decimals, 0)}f}" if rounded != 0 else "0"


def with_sequences(metrics: list[dict]) -> list[dict]:
    """The checkpoints a log axis of sequences seen can show: all but step 0."""
    return [m for m in metrics if m["sequences_seen"] > 0]


def sequences_axis(ax: Axes, x: list[float]) -> None:
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
    model's own KL(true ‖ model) for reference."""
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
    phase_key(ax, kept, loc="lower left")
    ax.legend(loc="lower center", fontsize=9, title="curves", title_fontsize=9)
    return save(fig, path)


def strategy_curves(ax: Axes, x: list[float], metrics: list[dict], strategies) -> None:
    """KL(strategy ‖ model) at the last token for each of ``strategies``, and the model's KL(true ‖ model)."""
    for name in strategies:
        ax.plot(x, [m["last_token_kl"][name] for m in metrics], color=strategy_colour(name), label=f"to {name}", lw=2)
    ax.plot(x, [m["last_token_kl"]["true"] for m in metrics], color="black", ls="--", lw=1.5, label="KL(true ‖ model)")


def plot_loss_against_baselines(metrics: list[dict], baselines: dict[str, float], title: str, path: Path) -> Path:
    """KL(true ‖ model) at the last token, with each strategy's KL(true ‖ strategy) as a dashed line."""
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
    ax.set_ylim(0, 1.4 * max(*baselines.values(), *(m["last_token_kl"]["true"] for m in kept)))  # room for the key
    ax.set_title(f"{title}: test loss against the strategies' losses")
    phase_key(ax, kept, loc="lower left")
    ax.legend(loc="upper right", fontsize=9, title="KL(true ‖ ·)", title_fontsize=9)
    return save(fig, path)


def save(fig: Figure, path: Path) -> Path:
    """``fig`` as a PNG at ``path``, laid out tightly unless it chose a layout (a constrained one places
    colour bars that span several axes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    as_plain_text(fig)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, dpi=120, format="png")
    # by a rename, as a run's files: a link planted at the figure's name is replaced, never written through
    write_atomic(path.parent.resolve() / path.name, png.getvalue())
    return path


def as_plain_text(fig: Figure) -> None:
    """Every text of ``fig`` but the tick labels read as plain text, not mathtext: titles, labels and legends
    hold run and condition names, and a "$" in one must not start a formula. Tick labels keep mathtext,
    which the log axes' 10^k labels are written in."""
    ticks = {
        id(label)
        for ax in fig.axes
        for axis in (ax.xaxis, ax.yaxis)
        for tick in axis.get_major_ticks() + axis.get_minor_ticks()
        for label in (tick.label1, tick.label2)
    }
    for text in fig.findobj(Text):
        if id(text) not in ticks:
            text.set_parse_math(False)


def thousands(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def step_caption(entry: dict) -> str:
    """A checkpoint as a figure names it: step, sequences seen and closest strategy (a metrics entry)."""
    return (
        f"step {entry['step']} ({thousands(entry['sequences_seen'])} seqs, {closest_strategy(entry['last_token_kl'])})"
    )


def plot_scores_over_training(
    results: list, metrics: list[dict], chance: dict[str, float], title: str, path: Path
) -> Path:
    """Layer 0's previous-token and the last layer's bigram-matching scores (best head) against sequences
    seen, shaded by phase, each with its chance level (attention spread evenly over the keys).
    ``metrics`` holds the run's metrics entry of each result's step."""
    theme()
    kept = [(r, m) for r, m in zip(results, metrics) if m["sequences_seen"] > 0]
    x = [m["sequences_seen"] for _, m in kept]
    last = len(results[0].bigram_matching) - 1
    curves = {
        "previous_token": ("tab:purple", "layer 0 previous-token", [r.previous_token[0].max().item() for r, _ in kept]),
        "bigram_matching": (
            "tab:brown",
            f"layer {last} bigram-matching",
            [r.bigram_matching[-1].max().item() for r, _ in kept],
        ),
    }
    fig, ax = subplots(figsize=(8, 4.6))
    shade_closest_strategy(ax, x, [m for _, m in kept])
    for name, (colour, label, values) in curves.items():
        ax.plot(x, values, color=colour, lw=2, label=label)
        ax.axhline(chance[name], color=colour, ls=":", lw=1.5, label=f"chance ({chance[name]:.2f})")
    sequences_axis(ax, x)
    ax.set_ylabel("score of the best head (attention mass)")
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(f"{title}: circuit scores over training")
    phase_key(ax, [m for _, m in kept], loc="center left")
    ax.legend(loc="upper left", fontsize=9)
    return save(fig, path)


def phase_key(ax: Axes, metrics: list[dict], loc: str = "lower left") -> None:
    """A legend entry for each strategy whose shading appears, so the bands need no caption."""
    shown = dict.fromkeys(closest_strategy(m["last_token_kl"]) for m in metrics)
    handles = [Patch(color=strategy_colour(name), alpha=0.15, label=f"closest: {name}") for name in shown]
    ax.add_artist(ax.legend(handles=handles, loc=loc, fontsize=8, title="shading", title_fontsize=8))


def strategies_above(metrics: list[dict], height: float) -> tuple:
    """A two-panel figure on a shared log x-axis of sequences seen (step 0, at no sequences, left out), both
    shaded by the closest strategy; the top panel holds KL(strategy ‖ model) and the model's KL(true ‖ model).
    Returns (figure, top, bottom, x, the metrics kept)."""
    theme()
    kept = with_sequences(metrics)
    x = [m["sequences_seen"] for m in kept]
    fig, (top, bottom) = subplots(2, 1, figsize=(8, height), sharex=True)
    for ax in (top, bottom):
        shade_closest_strategy(ax, x, kept)
    strategy_curves(top, x, kept, ("uniform", "unigram", "bigram"))
    top.set_yscale("log")
    top.set_ylabel("KL(· ‖ model), last token (nats)")
    top.legend(loc="center left", fontsize=8)
    sequences_axis(bottom, x)
    return fig, top, bottom, x, kept


def plot_progress_measures(progress: list, metrics: list[dict], thresholds: dict, title: str, path: Path) -> Path:
    """Above: KL(strategy ‖ model) and the model's KL(true ‖ model), last token. Below: each progress measure
    rescaled so that chance is 0 and Proposition 2.1 is 1 (its threshold is 0.5), with a mark where it first
    reaches the threshold. Shared log x-axis of sequences seen, shaded by the closest strategy."""
    fig, top, bottom, x, kept = strategies_above(metrics, height=7)
    keep = [i for i, m in enumerate(metrics) if m["sequences_seen"] > 0]  # the checkpoints the x-axis holds
    colours = dict(zip(thresholds, sns.color_palette("dark", len(thresholds))))
    styles = {"ov_copying_accuracy": (0, (4, 2))}  # dashed: it sits on the copying score once both reach 1
    scaled = {
        name: [(progress[i].value(name) - row["chance"]) / (row["construction"] - row["chance"]) for i in keep]
        for name, row in thresholds.items()
    }
    for name, row in thresholds.items():
        bottom.plot(x, scaled[name], color=colours[name], lw=2, ls=styles.get(name, "-"), label=name.replace("_", " "))
        if row["first_sequences"]:
            bottom.axvline(row["first_sequences"], color=colours[name], ls=":", lw=1.2)
    bottom.axhline(0.5, color="grey", lw=1, ls="--", label="threshold (halfway)")
    values = [v for curve in scaled.values() for v in curve]
    bottom.set_ylim(min(-0.1, *values) - 0.05, max(1.0, *values) + 0.1)
    bottom.set_ylabel("measure, rescaled\n(chance 0, construction 1)")
    phase_key(bottom, kept, loc="lower right")
    bottom.legend(loc="upper left", fontsize=8)
    top.set_title(f"{title}: the circuit's pieces, read from the weights")
    return save(fig, path)
