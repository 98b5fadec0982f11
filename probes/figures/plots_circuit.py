"""Figures of what a circuit does at a few checkpoints: attention, positional profiles, ablations, the
Gaussian task's scores, Proposition 2.1 against the trained weights, and the minimal model's parameters.
They follow the standard of :mod:`induction_probes.probes.figures.plots`, whose helpers they share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from induction_probes.circuits.models.attention_masks import matching_keys
from induction_probes.probes.figures import plots
from induction_probes.probes.figures.plots import (
    error_bars,
    figure_name,
    heads_label,
    log_limits,
    meaningful,
    sequences_axis,
    shade_closest_strategy,
    strategy_colour,
    theme,
)


def plot_positional_profiles(
    profiles_by_step: dict[int, np.ndarray], captions: dict[int, str], title: str, path: Path, n_distances: int = 20
) -> Path:
    """Layer 0's effective positional encoding (softmax over distance of q·r_d, head 0) at a few steps,
    against the uniform profile of a head that ignores position."""
    theme()
    steps = list(profiles_by_step)
    fig, axes = plots.subplots(1, len(steps), figsize=(4.6 * len(steps), 4), sharey=True, squeeze=False)
    for ax, step in zip(axes[0], steps):
        profile = np.asarray(profiles_by_step[step])
        shown = profile[:n_distances]  # a short run has fewer distances than the window
        ax.bar(range(len(shown)), shown, color="tab:purple", label="layer 0, head 0")
        ax.axhline(1 / len(profile), color="grey", ls="--", lw=1.2, label=f"uniform (1/{len(profile)})")
        ax.set_title(captions[step], fontsize=11)
        ax.set_xlabel("distance i − j (positions)")
    axes[0][0].set_ylabel("weight on distance d\n(softmax over d of q·r_d)")
    plots.legend_outside(axes[0][0], below=True)
    fig.suptitle(f"{title}: layer 0's positional profile (where it looks, whatever the tokens)")
    return plots.save(fig, path)


def interval_errors(behaviours: list, measure: str, values: list[float]) -> np.ndarray | None:
    """[2, bars]: each bar's distance down and up to the ends of its 95 % interval over the sequences on
    ``measure`` (a ``Behaviour``'s ``intervals``); None where a bar has none (one sequence)."""
    estimates = [getattr(b, "intervals", {}).get(measure) for b in behaviours]
    return error_bars(values, [(None, None) if e is None else (e.low, e.high) for e in estimates])


def plot_ablation_bars(baseline, results: list, strategy_kl: dict[str, float], title: str, path: Path) -> Path:
    """Last-token KL(true ‖ model) with each head set ablated, against the clean model, with its 95 % interval
    over the sequences as an error bar, coloured by the strategy the ablated model is closest to, with each
    strategy's own KL(true ‖ strategy) drawn; the keys right of the axes."""
    theme()
    labels = ["none"] + [heads_label(r.heads) for r in results]
    behaviours = [baseline] + [r.behaviour for r in results]
    values = [b.last_token_kl["true"] for b in behaviours]
    errors = interval_errors(behaviours, "last_token_kl.true", values)
    closest = [b.closest_strategy for b in behaviours]
    fig, ax = plots.subplots(figsize=(max(5, 0.9 * len(labels) + 1.5) + 3, 4.6))
    bars = ax.bar(labels, values, yerr=errors, capsize=4, color=[strategy_colour(c) for c in closest], width=0.6)
    ax.bar_label(bars, labels=[f"{v:.3f}" for v in values], fontsize=plots.KEY_FONT, padding=3)
    lines = [
        ax.axhline(v, color=strategy_colour(name), ls="--", lw=1.3, label=f"{name} strategy ({v:.3f})")
        for name, v in strategy_kl.items()
    ]
    top = max(*values, *strategy_kl.values(), *([] if errors is None else np.add(values, errors[1])))
    ax.set_ylim(0, 1.15 * top)  # room for the bars' labels
    ax.set_xlabel("ablated heads (none: the clean model)")
    ax.set_ylabel("KL(true ‖ model), last token (nats)")
    ax.set_title(title + ("" if errors is None else "\n(error bars: 95 % interval over sequences)"))
    keys = [Patch(color=strategy_colour(c), label=f"closest: {c}") for c in dict.fromkeys(closest)]
    plots.legend_outside(ax, handles=lines, title="KL(true ‖ strategy)", sections={"bar colour": keys})
    return plots.save(fig, path)


def plot_gaussian_scores(results: list, sequences: list[int], title: str, path: Path) -> Path:
    """A Gaussian-task run's circuit scores and error at the probed checkpoints (one, or every one) against
    sequences seen, with the error of predicting the mean (1) as its baseline."""
    theme()
    kept = [(r, n) for r, n in zip(results, sequences) if n > 0] or list(zip(results, sequences))
    x = [max(n, 1) for _, n in kept]
    fig, ax = plots.subplots(figsize=(8, 4.6))
    marker = "o-" if len(x) < 20 else "-"
    ax.plot(
        x,
        [max(r.previous_token[0]) for r, _ in kept],
        marker,
        color="tab:purple",
        lw=2,
        label="layer 0 previous-token (best head)",
    )
    ax.plot(
        x,
        [max(r.induction) for r, _ in kept],
        marker,
        color="tab:brown",
        lw=2,
        label="layer 1 induction, 1 − TV to IH₂ (best head)",
    )
    ax.set(ylabel="score (attention mass)", ylim=(-0.03, 1.08))
    error = ax.twinx()
    error.plot(x, [r.relative_mse for r, _ in kept], "--", color="black", lw=1.5, label="MSE / target variance")
    error.axhline(1.0, color="grey", ls=":", lw=1.2, label="predicting the mean (1)")
    log_limits(error, [r.relative_mse for r, _ in kept] + [1.0])
    error.set_ylabel("MSE / target variance (log scale)")
    sequences_axis(ax, x)
    lines = ax.get_legend_handles_labels(), error.get_legend_handles_labels()
    plots.legend_outside(ax, below=True, handles=lines[0][0] + lines[1][0], labels=lines[0][1] + lines[1][1], ncol=2)
    ax.set_title(f"{title}: circuit scores and error on fresh sequences")
    return plots.save(fig, path)


def plot_error_bars(rows: Sequence[tuple[str, float]], title: str, path: Path) -> Path:
    """MSE over the target's variance with each head set ablated ("none": the clean model), with each value's 95 %
    interval over the sequences as an error bar where it carries one (``low`` and ``high``), against the error
    of predicting the mean (1)."""
    theme()
    values = [value for _, value in rows]
    errors = error_bars(values, [(getattr(v, "low", None), getattr(v, "high", None)) for v in values])
    fig, ax = plots.subplots(figsize=(max(6, 1.2 * len(rows) + 1.5), 4.4))
    bars = ax.bar([label for label, _ in rows], values, yerr=errors, capsize=4, color="tab:gray", width=0.6)
    ax.bar_label(bars, labels=[f"{value:.3g}" for value in values], fontsize=plots.KEY_FONT, padding=3)
    ax.axhline(1.0, color="black", ls="--", lw=1.2, label="predicting the mean (1)")
    top = max(1.0, *values, *([] if errors is None else np.add(values, errors[1])))
    ax.set_ylim(0, 1.15 * top)
    ax.set(xlabel="ablated heads (none: the clean model)", ylabel="MSE / target variance")
    ax.set_title(title + ("" if errors is None else "\n(error bars: 95 % interval over sequences)"))
    plots.legend_outside(ax, below=True)
    return plots.save(fig, path)


def plot_attention_heatmaps(
    patterns_by_step: dict[int, list], tokens, captions: dict[int, str], title: str, path: Path, n_pos: int = 30
) -> Path:
    """Attention of head 0 on one sequence, every layer (rows) at each step (columns), keys after the
    query masked. Ticks give each position's token; on layers ≥ 1 a ring marks every key whose previous
    token is the query's token, where a statistical induction head should attend."""
    theme("white")
    steps = list(patterns_by_step)
    n_layers = len(patterns_by_step[steps[0]])
    n_pos = min(n_pos, tokens.shape[-1])  # a run's sequences may be shorter than the window shown
    tokens = tokens[:n_pos]
    match = matching_keys(tokens[None])[0].numpy()
    ring_q, ring_k = np.nonzero(match)
    fig, axes = plots.subplots(
        n_layers, len(steps), figsize=(5 * len(steps) + 1, 5 * n_layers), squeeze=False, layout="constrained"
    )
    upper = np.triu(np.ones((n_pos, n_pos), dtype=bool), k=1)
    images = []  # one colour scale, 0 to 1, for all: the colour bar reads any of them
    for col, step in enumerate(steps):
        for layer, pattern in enumerate(patterns_by_step[step]):
            ax = axes[layer][col]
            images.append(
                ax.imshow(
                    np.ma.masked_array(pattern[0, 0, :n_pos, :n_pos].numpy(), upper), cmap="viridis", vmin=0, vmax=1
                )
            )
            if layer > 0:
                ax.scatter(
                    ring_k,
                    ring_q,
                    s=14,
                    facecolors="none",
                    edgecolors="white",
                    linewidths=0.7,
                    label="key's previous token = query's token",
                )
            ax.set_xticks(range(n_pos), [str(t) for t in tokens.tolist()], fontsize=7)
            ax.set_yticks(range(n_pos), [str(t) for t in tokens.tolist()], fontsize=7)
            ax.set_title(f"layer {layer}, {captions[step]}", fontsize=11)
            ax.set_xlabel("key position j → (tick: its token)")
            ax.set_ylabel("query position i → (tick: its token)")
    fig.colorbar(images[-1], ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    if n_layers > 1:
        plots.legend_outside(axes[-1][0], below=True, facecolor="lightgrey")  # grey: the white rings show
    joint = "\n" if len(steps) == 1 else " "  # one column is too narrow for the title on one line
    fig.suptitle(f"{title}:{joint}attention on one sequence (first {n_pos} positions, head 0)", fontsize=14)
    return plots.save(fig, path)


def plot_prop21(result, path: Path) -> Path:
    """Proposition 2.1: error against c, and KL from the Bayes bigram predictor by position."""
    sns.set_theme(style="ticks")
    fig, (left, right) = plots.subplots(1, 2, figsize=(10, 3.8))
    cs = [c for c, _, _ in result.error_by_c]
    left.plot(cs, [max(worst, 1e-17) for _, worst, _ in result.error_by_c], "o-", label="max |error|")
    left.plot(cs, [max(mean, 1e-17) for _, _, mean in result.error_by_c], "s-", label="mean |error|")
    left.set(
        xscale="log",
        yscale="log",
        xlabel="scale c of the construction's weights (log)",
        ylabel="|output − its c → ∞ limit|",
        title=f"k={result.k}: error against the c → ∞ limit",
    )
    left.margins(x=0.08)
    plots.legend_outside(left, below=True, ncol=2)
    right.plot(result.kl_bigram_by_position.numpy(), color="tab:green")
    right.set(
        xlabel="position in the sequence (0-indexed)",
        ylabel="KL(Bayes bigram ‖ softmax), nats",
        title=f"c={result.c:g}: statistics, not calibrated logits",
    )
    right.margins(x=0.02)
    return plots.save(fig, path)


def annotated_heatmap(ax: Axes, matrix: np.ndarray, title: str, xlabel: str, ylabel: str, colourbar: str) -> None:
    """A k × k matrix on a symmetric colour scale with a labelled colour bar; its entries are written in
    (k ≤ 6) at two significant figures of its largest one, smaller as k grows so that they never overlap."""
    k = matrix.shape[0]
    limit = float(abs(matrix).max()) or 1.0
    annot = np.vectorize(lambda v: meaningful(v, limit))(matrix) if k <= 6 else False
    sns.heatmap(
        matrix,
        ax=ax,
        cmap="RdBu_r",
        vmin=-limit,
        vmax=limit,
        annot=annot,
        fmt="",
        square=True,
        annot_kws={"fontsize": 13 if k <= 3 else 10},
        cbar_kws={"label": colourbar, "shrink": 0.85},
    )
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def plot_prop21_comparison(result, title: str, path: Path) -> Path:
    """Trained (left) against Proposition 2.1 (right): layer 1's token matching (above) and its OV circuit
    (below), k × k each."""
    theme("white")
    fig, axes = plots.subplots(2, 2, figsize=(11, 9.5))
    matching = ("key's previous token b", "query token a", "mean attention score")
    ov = ("logit of token b", "attended token a", "logit change")
    annotated_heatmap(axes[0][0], result.token_matching.numpy(), "trained: layer 1 token matching", *matching)
    annotated_heatmap(
        axes[0][1], result.token_matching_analytic.numpy(), "Prop. 2.1: token matching (c²/√d · I)", *matching
    )
    annotated_heatmap(axes[1][0], result.ov_circuit.numpy(), "trained: layer 1 OV circuit", *ov)
    annotated_heatmap(axes[1][1], result.ov_circuit_analytic.numpy(), "Prop. 2.1: OV circuit (I)", *ov)
    fig.suptitle(f"{title} against Proposition 2.1: both should be diagonal")
    return plots.save(fig, path)


def plot_prop21_over_training(results: dict, metrics: list[dict], k: int, title: str, path: Path) -> Path:
    """The comparison with Proposition 2.1 at each compared step, against sequences seen: every measure
    is 1 on the construction. ``metrics`` holds the run's metrics entry of each step in ``results``."""
    theme()
    kept = [(r, m) for r, m in zip(results.values(), metrics) if m["sequences_seen"] > 0]
    x = [m["sequences_seen"] for _, m in kept]
    curves = {
        "layer 0 attention, 1 − TV to the construction's": [1 - r.attention_tv[0] for r, _ in kept],
        "layer 1 attention, 1 − TV to the construction's": [1 - r.attention_tv[1] for r, _ in kept],
        "layer 0 positional profile at distance 1": [r.positional_profile[1].item() for r, _ in kept],
        "layer 1 token matching: rows with a diagonal max": [r.diagonal_is_row_max for r, _ in kept],
        "layer 1 OV: tokens whose own logit is top": [r.ov_top1_diagonal for r, _ in kept],
    }
    fig, ax = plots.subplots(figsize=(10, 6.5))
    shade_closest_strategy(ax, x, [m for _, m in kept])
    styles = ["-", "-", "--", "-.", ":"]
    for (label, values), colour, style in zip(curves.items(), sns.color_palette("dark", len(curves)), styles):
        ax.plot(x, values, color=colour, ls=style, marker="o", ms=4, lw=2, label=label)
    ax.axhline(1 / k, color="grey", ls="--", lw=1, label=f"chance for the two shares (1/k = {1 / k:.2f})")
    sequences_axis(ax, x)
    ax.set_ylim(-0.03, 1.1)
    ax.set_ylabel("agreement with Prop. 2.1 (1 = construction)")
    ax.set_title(f"{title}: how close to Proposition 2.1 over training")
    plots.legend_outside(ax, below=True, ncol=2, sections={"shading": plots.phase_handles([m for _, m in kept])})
    return plots.save(fig, path)


def plot_minimal_parameters(
    models_by_step: dict, captions: dict[int, str], title: str, directory: Path, name: str
) -> list[Path]:
    """The minimal model's v (bars over distance, odd distances red) and W (heatmaps with colour bars),
    each at the given steps. v_1 dwarfs the rest, so the y-axis is scaled to the other distances and v_1's
    bar is cut and labelled with its value: the odd/even asymmetry stays visible."""
    theme()
    steps = list(models_by_step)
    vs = {step: models_by_step[step].v.detach()[:12].numpy() for step in steps}
    rest = np.concatenate([np.delete(v, 1) for v in vs.values()])
    low, high = min(rest.min(), 0), max(rest.max(), 0)
    pad = 0.15 * (high - low or 1)
    fig, axes = plots.subplots(1, len(steps), figsize=(4.8 * len(steps), 4.2), sharey=True, squeeze=False)
    for ax, step in zip(axes[0], steps):
        v = vs[step]
        ax.bar(range(len(v)), v, color=["tab:red" if d % 2 else "tab:blue" for d in range(len(v))])
        ax.axhline(0, color="black", lw=0.8)
        ax.text(
            1.5,
            high + 0.5 * pad,
            f"← v₁ = {v[1]:.2f}, cut" if v[1] > high + pad else f"← v₁ = {v[1]:.2f}",
            ha="left",
            va="center",
            fontsize=10,
            bbox={"facecolor": "white", "edgecolor": "tab:red", "pad": 2},
        )
        ax.set_ylim(low - pad, high + 1.2 * pad)
        ax.set_title(captions[step], fontsize=11)
        ax.set_xlabel("distance d (positions; red: odd)")
    axes[0][0].set_ylabel("v_d (attention logit)")
    fig.suptitle(f"{title}: first-layer positional weights v, cut above the other distances")
    paths = [plots.save(fig, directory / figure_name(name, "v", steps))]

    theme("white")
    fig, axes = plots.subplots(1, len(steps), figsize=(4.8 * len(steps), 4.2), squeeze=False)
    for ax, step in zip(axes[0], steps):
        annotated_heatmap(
            ax,
            models_by_step[step].W.detach().numpy(),
            captions[step],
            "key's previous token b",
            "query token a",
            "W_ab",
        )
    fig.suptitle(f"{title}: second-layer matrix W turning diagonal")
    paths.append(plots.save(fig, directory / figure_name(name, "W", steps)))
    return paths


def plot_gaussian_training(metrics: list[dict], title: str, path: Path) -> Path:
    """A Gaussian-task run's error on its evaluation set over training, with the error of predicting the
    mean (1) as its baseline."""
    theme()
    kept = [m for m in metrics if m["sequences_seen"] > 0]
    x = [m["sequences_seen"] for m in kept]
    fig, ax = plots.subplots(figsize=(8, 4.6))
    ax.plot(x, [m["relative_mse"] for m in kept], color="black", lw=2, label="MSE / target variance (evaluation set)")
    ax.axhline(1.0, color="grey", ls=":", lw=1.2, label="predicting the mean (1)")
    log_limits(ax, [m["relative_mse"] for m in kept] + [1.0])
    ax.set_ylabel("MSE / target variance (log scale)")
    sequences_axis(ax, x)
    plots.legend_outside(ax, below=True, ncol=2)
    ax.set_title(f"{title}: error over training")
    return plots.save(fig, path)
