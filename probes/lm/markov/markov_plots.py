"""Figures of the ICL-MC probe of a language model (:mod:`.markov_probe`): one model's KL to each strategy and mass on
the k tokens per position with its heads' two scores, and a checkpoint series' KLs and best heads against step,
on the conventions of our runs' figures (probes/figures/plots.py) and the language-model series figure. Beside
KL(true ‖ model), dotted, the references KL(true ‖ uniform) and KL(true ‖ bigram): where the model's distance to
the truth would be, were it to predict as each strategy does (the verdict needs it below the uniform one)."""

from __future__ import annotations

from pathlib import Path

from induction_probes.circuits.errors import BadInput
from induction_probes.probes.figures.plots import (
    error_bars,
    head_colour,
    legend_outside,
    save,
    strategy_colour,
    subplots,
    theme,
)
from induction_probes.probes.lm.markov.markov_measure import REFERENCES, reference_key
from induction_probes.probes.lm.markov.markov_probe import MarkovProbe
from induction_probes.probes.lm.series_plots import step_axis

SHOWN_HEADS = 3  # heads drawn in colour per score over steps: the best at the last step
NAMED_HEADS = 4  # heads named in one model's scatter, per score: the marked ones first, then the best
CURVES = (("unigram", strategy_colour("unigram")), ("bigram", strategy_colour("bigram")), ("true", "0.2"))
REFERENCE_CURVES = tuple((s, strategy_colour(s)) for s in REFERENCES)  # KL(true ‖ s), dotted in s's colour
TITLES = {"bigram_matching": "bigram-matching score", "previous_token": "previous-token score A[i, i-1]"}


def band(ax, x, value, low, high, colour: str, label: str, **line) -> None:
    """A curve with its 95 % interval as a band of the same colour."""
    ax.plot(x, value, color=colour, lw=2, label=label, **line)
    ax.fill_between(x, low, high, color=colour, alpha=0.2, lw=0)


def windows(ax, result: MarkovProbe) -> None:
    """The early and late windows of the verdict, shaded."""
    for name, positions in (("early", result.early), ("late", result.late)):
        ax.axvspan(positions.start - 0.5, positions.stop - 0.5, color="0.92", zorder=0)
        middle = (positions.start + positions.stop - 1) / 2
        ax.text(middle, 0.98, name, transform=ax.get_xaxis_transform(), ha="center", va="top", color="0.4")


def kl_panel(ax, result: MarkovProbe) -> None:
    positions = range(result.protocol.seq_len)
    for name, colour in CURVES:
        value, low, high = result.behaviour.curve(name)
        band(ax, positions, value, low, high, colour, f"KL({name} || model)", ls="--" if name == "true" else "-")
    for name, colour in REFERENCE_CURVES:
        value, low, high = result.behaviour.curve(reference_key(name))
        band(ax, positions, value, low, high, colour, f"KL(true || {name}), reference", ls=":")
    windows(ax, result)
    ax.set_xlabel("input position t")
    ax.set_ylabel("KL (nats), mean over draws x sequences")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)  # room above the curves for the windows' names
    ax.set_title(f"model's prediction over the k tokens vs each strategy\n(bands: {result.protocol.coverage})")
    legend_outside(ax, below=True)


def mass_panel(ax, result: MarkovProbe) -> None:
    value, low, high = result.behaviour.curve("mass")
    band(ax, range(result.protocol.seq_len), value, low, high, "tab:purple", "softmax mass on the k tokens")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("input position t")
    ax.set_ylabel("probability")
    ax.set_title(f"mass on the k = {result.protocol.k} chain tokens (mean {result.mass.value:.3f})")
    legend_outside(ax, below=True)


def named_heads(result: MarkovProbe) -> set[str]:
    """The marked heads, and the best few by each score."""
    named = {h.label for score in TITLES for h in result.marked(score)}
    for score in TITLES:
        named |= {h.label for h in sorted(result.heads, key=lambda h: -getattr(h, score).value)[:NAMED_HEADS]}
    return named


def heads_panel(ax, result: MarkovProbe) -> None:
    """Each head at (previous-token score, bigram-matching score), with both intervals; chance dashed, the
    verdict's thresholds dotted."""
    for h in result.heads:
        x, y = h.previous_token, h.bigram_matching
        xerr, yerr = (error_bars([e.value], [(e.low, e.high)]) for e in (x, y))
        ax.errorbar(x.value, y.value, xerr=xerr, yerr=yerr, fmt="o", ms=4, color="tab:red", alpha=0.8)
        if h.label in named_heads(result):
            ax.annotate(h.label, (x.value, y.value), xytext=(4, 4), textcoords="offset points", fontsize=9)
    for score, line in (("previous_token", ax.axvline), ("bigram_matching", ax.axhline)):
        line(result.chance[score], color="0.5", ls="--", lw=1)
        line(result.threshold(score), color="0.3", ls=":", lw=1)
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("previous-token score")
    ax.set_ylabel("bigram-matching score")
    ax.set_title("each head (dashed: chance; dotted: thresholds)")


def plot_markov_model(result: MarkovProbe, title: str, path: Path) -> Path:
    """KL to each strategy and mass on the k tokens per position, and every head's two scores."""
    theme()
    fig, axes = subplots(1, 3, figsize=(16, 6.4), layout="constrained")  # constrained: room for the keys below
    kl_panel(axes[0], result)
    mass_panel(axes[1], result)
    heads_panel(axes[2], result)
    fig.suptitle(title)
    return save(fig, path)


def best_heads(result: MarkovProbe, score: str) -> list[str]:
    return [h.label for h in sorted(result.heads, key=lambda h: -getattr(h, score).value)[:SHOWN_HEADS]]


def series_steps(results: list[MarkovProbe]) -> list[int]:
    """The step of each result of a series: a panel over training needs every one."""
    steps = [r.step for r in results]
    if any(step is None for step in steps):
        raise BadInput("a figure over training needs the step of every probed checkpoint")
    return [step for step in steps if step is not None]


def score_panel(ax, results: list[MarkovProbe], score: str) -> None:
    """Every head's score against step in grey, the best ``SHOWN_HEADS`` at the last step in colour with bands,
    chance dashed and the verdict's threshold dotted."""
    steps, best = series_steps(results), best_heads(results[-1], score)
    for index, head in enumerate(results[-1].heads):
        estimates = [getattr(r.heads[index], score) for r in results]
        if head.label in best:
            low, high = [e.low for e in estimates], [e.high for e in estimates]
            colour = head_colour(head.label)  # the head's colour in every figure of the model, the induction one's too
            band(ax, steps, [e.value for e in estimates], low, high, colour, head.label, marker="o", ms=4)
        else:
            ax.plot(steps, [e.value for e in estimates], color="0.75", lw=0.8, zorder=1)
    ax.plot(steps, [r.chance[score] for r in results], color="0.5", ls="--", lw=1, label="chance")
    ax.plot(steps, [r.threshold(score) for r in results], color="0.3", ls=":", lw=1.2, label="verdict's threshold")
    ax.plot([], [], color="0.75", lw=0.8, label="the other heads")
    step_axis(ax, steps)
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("attention score")
    ax.set_title(TITLES[score])
    legend_outside(ax, below=True, ncol=2)


def plot_markov_series(results: list[MarkovProbe], name: str, path: Path) -> Path:
    """Late-position KL to each strategy, and the best heads' two scores, against training step."""
    theme()
    fig, axes = subplots(1, 3, figsize=(16, 6), layout="constrained")  # constrained: room for the keys below
    steps = series_steps(results)
    for strategy, colour in CURVES:
        estimates = [r.kl(strategy) for r in results]
        low, high = [e.low for e in estimates], [e.high for e in estimates]
        band(
            axes[0],
            steps,
            [e.value for e in estimates],
            low,
            high,
            colour,
            f"KL({strategy} || model)",
            marker="o",
            ms=4,
        )
    for strategy, colour in REFERENCE_CURVES:  # the same sequences at every step: flat unless the sequences differ
        estimates = [r.reference(strategy) for r in results]
        low, high = [e.low for e in estimates], [e.high for e in estimates]
        label = f"KL(true || {strategy}), reference"
        band(axes[0], steps, [e.value for e in estimates], low, high, colour, label, ls=":")
    step_axis(axes[0], steps)
    axes[0].set_ylim(bottom=0)
    axes[0].set_ylabel("KL (nats), late positions")
    axes[0].set_title(f"prediction over the k tokens vs each strategy\n(bands: {results[-1].protocol.coverage})")
    legend_outside(axes[0], below=True)
    score_panel(axes[1], results, "bigram_matching")
    score_panel(axes[2], results, "previous_token")
    fig.suptitle(f"{name}: statistical induction on ICL-MC chains over training")
    return save(fig, path)
