"""Figures, written as PNG files with matplotlib's Agg backend (no display needed).

Training curves use sequences seen (thousands) on the x-axis, as Edelman et al. do, and shade the
background by the strategy the model is closest to, so the uniform → unigram → bigram phases read at a
glance.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402

from circuits.tasks.markov import closest_strategy  # noqa: E402

STRATEGY_COLOURS = {"uniform": "tab:blue", "unigram": "tab:orange", "bigram": "tab:green", "trigram": "tab:red"}


def strategy_colour(name: str) -> str:
    return STRATEGY_COLOURS.get(name, "tab:purple")


def shade_closest_strategy(ax: plt.Axes, x: list[float], metrics: list[dict]) -> None:
    """Background bands coloured by the closest strategy, each band from one checkpoint to the next."""
    closest = [closest_strategy(m["last_token_kl"]) for m in metrics]
    start = 0
    for i in range(1, len(x) + 1):
        if i == len(x) or closest[i] != closest[start]:
            ax.axvspan(x[start], x[min(i, len(x) - 1)], color=strategy_colour(closest[start]), alpha=0.15, lw=0)
            start = i


def plot_distance_to_strategies(metrics: list[dict], strategies: list[str], title: str, path: Path) -> Path:
    """KL(strategy ‖ model) at the last token against sequences seen (Edelman et al., Figure 1)."""
    sns.set_theme(style="ticks")
    x = [m["sequences_seen"] / 1000 for m in metrics]
    fig, ax = plt.subplots(figsize=(7, 4))
    shade_closest_strategy(ax, x, metrics)
    for name in strategies:
        ax.plot(x, [m["last_token_kl"][name] for m in metrics], color=strategy_colour(name), label=name, lw=2)
    ax.set_yscale("log")
    lowest = min(m["last_token_kl"][name] for m in metrics for name in strategies)
    ax.set_ylim(bottom=max(lowest, 1e-3))  # an untrained model is uniform to ~1e-6: keep the phases readable
    ax.set_xlabel("training sequences seen (thousands)")
    ax.set_ylabel("KL(strategy ‖ model), last token")
    ax.set_title(f"{title}: distance to each strategy (shading: closest)")
    ax.legend(title="strategy")
    return save(fig, path)


def plot_loss_against_baselines(
    metrics: list[dict], baselines: dict[str, float], title: str, path: Path
) -> Path:
    """KL(true ‖ model) at the last token, with each strategy's KL(true ‖ strategy) as a dashed line."""
    sns.set_theme(style="ticks")
    x = [m["sequences_seen"] / 1000 for m in metrics]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(x, [m["last_token_kl"]["true"] for m in metrics], color="black", lw=2, label="model")
    for name, value in baselines.items():
        ax.axhline(value, color=strategy_colour(name), ls="--", lw=1.5, label=f"{name} strategy ({value:.3f})")
    ax.set_xlabel("training sequences seen (thousands)")
    ax.set_ylabel("KL(true ‖ model), last token")
    ax.set_ylim(0, None)
    ax.set_title(f"{title}: test loss against the strategy baselines")
    ax.legend(loc="best")
    return save(fig, path)


def save(fig: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def three_steps(results: list) -> list:
    """First, middle and last of a run's probe results (all of them when there are fewer)."""
    picks = sorted({0, len(results) // 2, len(results) - 1})
    return [results[i] for i in picks]


def plot_positional_profiles(results: list, title: str, path: Path) -> Path:
    """Layer 0's effective positional encoding (softmax over distance) at up to three steps."""
    sns.set_theme(style="ticks")
    shown = [r for r in three_steps(results) if r.positional_profile is not None]
    fig, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 3.2), sharey=True, squeeze=False)
    for ax, result in zip(axes[0], shown):
        profile = result.positional_profile[0, :20].numpy()
        ax.bar(range(len(profile)), profile, color="tab:purple")
        ax.set_title(f"step {result.step}")
        ax.set_xlabel("distance i − j")
    axes[0][0].set_ylabel("softmax_d(q·r_d), layer 0")
    fig.suptitle(f"{title}: layer 0 positional profile")
    return save(fig, path)


def plot_scores_over_training(results: list, title: str, path: Path) -> Path:
    """Layer 0 previous-token and last-layer bigram-matching scores against step, shaded by phase."""
    sns.set_theme(style="ticks")
    steps = [r.step for r in results]
    fig, ax = plt.subplots(figsize=(7, 4))
    shade_closest_strategy(ax, steps, [{"last_token_kl": r.behaviour.last_token_kl} for r in results])
    ax.plot(steps, [r.previous_token[0].max().item() for r in results], lw=2, label="layer 0 previous-token")
    ax.plot(steps, [r.bigram_matching[-1].max().item() for r in results], lw=2, label="layer 1 bigram-matching")
    ax.set_xlabel("training step")
    ax.set_ylabel("score (best head)")
    ax.set_ylim(0, 1)
    ax.set_title(f"{title}: circuit scores (shading: closest strategy)")
    ax.legend(loc="center right")
    return save(fig, path)


def plot_ablation_bars(baseline, results: list, title: str, path: Path) -> Path:
    """Last-token KL(true ‖ model) with each head set ablated, against the clean model."""
    sns.set_theme(style="ticks")
    labels = ["none"] + [",".join(f"{l}.{h}" for l, h in r.heads) for r in results]
    values = [baseline.last_token_kl["true"]] + [r.behaviour.last_token_kl["true"] for r in results]
    colours = [strategy_colour(baseline.closest_strategy)] + [strategy_colour(r.behaviour.closest_strategy) for r in results]
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(labels)), 3.6))
    ax.bar(labels, values, color=colours)
    ax.set_xlabel("ablated heads (colour: closest strategy)")
    ax.set_ylabel("KL(true ‖ model), last token")
    ax.set_title(f"{title}: {results[0].mode} ablation" if results else title)
    return save(fig, path)


def plot_gaussian_scores(results: list, title: str, path: Path) -> Path:
    """A Gaussian-task run's error and circuit scores at the probed checkpoints (one, or every one)."""
    sns.set_theme(style="ticks")
    steps = [r.step for r in results]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, [max(r.previous_token[0]) for r in results], "o-", lw=2, label="layer 0 previous-token (best head)")
    ax.plot(steps, [max(r.induction) for r in results], "o-", lw=2, label="layer 1 induction, 1 − TV (best head)")
    ax.set(xlabel="training step", ylabel="score", ylim=(0, 1.05))
    error = ax.twinx()
    error.plot(steps, [r.relative_mse for r in results], "s--", color="black", label="MSE / target variance")
    error.set(yscale="log", ylabel="MSE / target variance (log)")
    lines = ax.get_legend_handles_labels(), error.get_legend_handles_labels()
    ax.legend(lines[0][0] + lines[1][0], lines[0][1] + lines[1][1], loc="center right", fontsize=8)
    ax.set_title(f"{title}: circuit scores and error on fresh sequences")
    return save(fig, path)


def plot_error_bars(rows: list[list], title: str, path: Path) -> Path:
    """MSE over the target's variance with each head set ablated ("none": the clean model)."""
    sns.set_theme(style="ticks")
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(rows)), 3.6))
    bars = ax.bar([str(label) for label, _ in rows], [value for _, value in rows], color="tab:gray")
    ax.bar_label(bars, labels=[f"{value:.3g}" for _, value in rows], fontsize=9)
    ax.set(xlabel="ablated heads", ylabel="MSE / target variance", title=title)
    return save(fig, path)


def plot_attention_heatmaps(patterns_by_step: dict[int, list], title: str, path: Path, n_pos: int = 30) -> Path:
    """Attention of sequence 0, every layer (rows) at each step (columns), upper triangle masked."""
    sns.set_theme(style="white")
    steps = list(patterns_by_step)
    n_layers = len(patterns_by_step[steps[0]])
    fig, axes = plt.subplots(n_layers, len(steps), figsize=(max(3.6 * len(steps), 7), 3.2 * n_layers), squeeze=False)
    mask = np.triu(np.ones((n_pos, n_pos), dtype=bool), k=1)
    for col, step in enumerate(steps):
        for layer, pattern in enumerate(patterns_by_step[step]):
            ax = axes[layer][col]
            sns.heatmap(pattern[0, 0, :n_pos, :n_pos].numpy(), mask=mask, cmap="viridis", vmin=0, vmax=1,
                        square=True, cbar=col == len(steps) - 1, xticklabels=False, yticklabels=False, ax=ax)
            ax.set_title(f"layer {layer}, step {step}")
            ax.set_xlabel("key")
            ax.set_ylabel("query")
    fig.suptitle(f"{title}: attention on one sequence (first {n_pos} positions)")
    return save(fig, path)


def plot_prop21(result, path: Path) -> Path:
    """Proposition 2.1: error against c, and KL from the Bayes bigram predictor by position."""
    sns.set_theme(style="ticks")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    cs = [c for c, _, _ in result.error_by_c]
    left.plot(cs, [max(worst, 1e-17) for _, worst, _ in result.error_by_c], "o-", label="max |error|")
    left.plot(cs, [max(mean, 1e-17) for _, _, mean in result.error_by_c], "s-", label="mean |error|")
    left.set(xscale="log", yscale="log", xlabel="c", ylabel="|logits − exact limit|",
             title=f"k={result.k}: error against the c → ∞ limit")
    left.legend()
    right.plot(result.kl_bigram_by_position.numpy(), color="tab:green")
    right.set(xlabel="position", ylabel="KL(Bayes bigram ‖ softmax(logits))",
              title=f"c={result.c:g}: statistics, not calibrated logits")
    return save(fig, path)


def plot_prop21_comparison(result, title: str, path: Path) -> Path:
    """Trained against analytic, side by side: layer 1's token matching and OV circuit (k × k each)."""
    sns.set_theme(style="white")
    panels = [
        (result.token_matching, "trained: token matching"),
        (result.token_matching_analytic, "Prop. 2.1: token matching (c²/√d · I)"),
        (result.ov_circuit, "trained: layer 1 OV circuit (a → logit b)"),
        (result.ov_circuit_analytic, "Prop. 2.1: OV circuit (I)"),
    ]
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    for ax, (matrix, label) in zip(axes, panels):
        values = matrix.numpy()
        limit = abs(values).max()
        sns.heatmap(values, ax=ax, cmap="RdBu_r", vmin=-limit, vmax=limit, annot=values.shape[0] <= 5, fmt=".2g", square=True)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("b")
        ax.set_ylabel("a")
    fig.suptitle(f"{title} against Proposition 2.1")
    return save(fig, path)


def plot_minimal_parameters(models_by_step: dict, title: str, directory: Path, name: str) -> list[Path]:
    """The minimal model's v (bars over distance, odd distances darker) and W (heatmaps), each at
    the given steps: the odd/even asymmetry of v and W turning diagonal."""
    sns.set_theme(style="ticks")
    steps = list(models_by_step)
    fig, axes = plt.subplots(1, len(steps), figsize=(4 * len(steps), 3.2), sharey=True, squeeze=False)
    for ax, step in zip(axes[0], steps):
        v = models_by_step[step].v.detach()[:12].numpy()
        colours = ["tab:red" if d % 2 else "tab:blue" for d in range(len(v))]
        ax.bar(range(len(v)), v, color=colours)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_title(f"step {step}")
        ax.set_xlabel("distance d (red: odd)")
    axes[0][0].set_ylabel("v_d")
    fig.suptitle(f"{title}: first-layer positional weights v")
    paths = [save(fig, directory / f"{name}_v.png")]

    sns.set_theme(style="white")
    fig, axes = plt.subplots(1, len(steps), figsize=(3.6 * len(steps), 3.2), squeeze=False)
    for ax, step in zip(axes[0], steps):
        W = models_by_step[step].W.detach().numpy()
        sns.heatmap(W, ax=ax, cmap="RdBu_r", center=0, annot=True, fmt=".2f", square=True, cbar=False)
        ax.set_title(f"W at step {step}")
    fig.suptitle(f"{title}: second-layer matrix W")
    paths.append(save(fig, directory / f"{name}_W.png"))
    return paths


def plot_toy(history: list[dict], phases, title: str, path: Path) -> Path:
    """The toy run's loss parts (log scale) with phases I–IV shaded (if they all appeared), and its six
    parameters."""
    from circuits.toy import PARAMETERS as TOY_PARAMETERS

    sns.set_theme(style="ticks")
    steps = [h["step"] for h in history]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    bounds = [0, phases.end_of_I, phases.end_of_II, phases.end_of_III, steps[-1]] if phases else [0]
    for ax in (top, bottom):
        for index, (start, end) in enumerate(zip(bounds, bounds[1:])):
            ax.axvspan(start, end, color=["tab:blue", "tab:orange", "tab:red", "tab:green"][index], alpha=0.08, lw=0)
    for (start, end), label in zip(zip(bounds, bounds[1:]), ["I", "II", "III", "IV"]):
        top.text((start + end) / 2, 1.02, label, transform=top.get_xaxis_transform(), ha="center", fontsize=11)
    for key, label in (("loss", "total"), ("loss_4gram", "4-gram part"), ("loss_induction", "induction part")):
        top.plot(steps, [max(h[key], 1e-12) for h in history], lw=2, label=label)
    top.set(yscale="log", ylabel="loss (½ MSE)")
    top.legend(loc="upper right")
    for name in TOY_PARAMETERS:
        bottom.plot(steps, [h[name] for h in history], lw=1.8, label=name)
    bottom.set(xlabel="gradient step", ylabel="parameter")
    bottom.legend(ncol=3, fontsize=8)
    fig.suptitle(title)
    return save(fig, path)


def plot_plateau_sweep(rows: list[tuple[int, float, int]], fit: tuple[float, float, float], path: Path) -> Path:
    """Plateau length against L·log(1/σ), one colour per L, with the fitted line."""
    import math

    sns.set_theme(style="ticks")
    fig, ax = plt.subplots(figsize=(6, 4))
    for length in sorted({r[0] for r in rows}):
        points = [(length * math.log(1 / s), p) for L_, s, p in rows if L_ == length]
        ax.plot(*zip(*points), "o", ms=7, label=f"L = {length}")
    x = [r[0] * math.log(1 / r[1]) for r in rows]
    slope, intercept, r2 = fit
    ax.plot([min(x), max(x)], [slope * min(x) + intercept, slope * max(x) + intercept], "k--",
            label=f"{slope:.1f}·L·log(1/σ) {intercept:+.0f}, R² = {r2:.3f}")
    ax.set(xlabel="L · log(1/σ)", ylabel="plateau length (steps)", title="toy model: plateau (phase II) length")
    ax.legend()
    return save(fig, path)


def plot_capacity_table(rows: list[tuple[str, int, int, float]], path: Path) -> Path:
    """Final MSE / target variance of each IH_4 model, as bars (lower is better)."""
    sns.set_theme(style="ticks")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    labels = [label for label, *_ in rows]
    values = [error for *_, error in rows]
    ax.bar(labels, values, color=["tab:red" if v > 0.3 else "tab:green" for v in values])
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set(ylabel="MSE / target variance", title="IH_4 (d = 2): who can represent it", ylim=(0, 1.1))
    return save(fig, path)


# --- sweeps: means over seeds with 95 % interval bands ---------------------------------------------


def band(ax: plt.Axes, x: list[float], curve: dict, colour: str, label: str) -> None:
    """A mean curve and its 95 % band (no band where the interval is undefined, e.g. one seed)."""
    ax.plot(x, curve["mean"], color=colour, lw=2, label=label)
    if all(value is not None for value in curve["low"]):
        ax.fill_between(x, curve["low"], curve["high"], color=colour, alpha=0.2, lw=0)


def plot_sweep_summary(summary: dict, directory: Path) -> list[Path]:
    """Two figures: KL(true ‖ model) of every condition, with its transition interval marked, and one
    panel per condition of the distance to each strategy, all against the same log-scaled x-axis."""
    sns.set_theme(style="ticks")
    conditions = summary["conditions"]
    name = Path(summary["sweep"]).name
    colours = dict(zip(conditions, sns.color_palette("colorblind", len(conditions))))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for condition, values in conditions.items():
        curves = values["curves"]
        x, kl = curves["x"][1:], {key: series[1:] for key, series in curves["kl"]["true"].items()}  # log x: no 0
        band(ax, x, kl, colours[condition], f"{condition} ({values['n_seeds']} seeds)")
        transition = values["transition"]
        if transition["low"] is not None:
            ax.axvspan(transition["low"], transition["high"], color=colours[condition], alpha=0.12, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(summary["x_axis"])
    ax.set_ylabel("KL(true ‖ model), last token")
    ax.set_title(f"{name}: test loss, mean and 95% band over seeds\n(vertical bands: 95% interval of the transition)")
    ax.legend(fontsize=8)
    paths = [save(fig, directory / f"{name}-kl.png")]
    fig, axes = plt.subplots(1, len(conditions), figsize=(max(6.5, 4.2 * len(conditions)), 4.2), squeeze=False, sharey=True)
    for ax, (condition, values) in zip(axes[0], conditions.items()):
        curves = values["curves"]
        for strategy, curve in curves["kl"].items():
            if strategy != "true":
                band(ax, curves["x"][1:], {k: v[1:] for k, v in curve.items()}, strategy_colour(strategy), strategy)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{condition} ({values['n_seeds']} seeds)", fontsize=10)
    fig.supxlabel(summary["x_axis"], fontsize=11)
    axes[0][0].set_ylabel("KL(strategy ‖ model), last token")
    axes[0][0].legend(title="strategy", fontsize=8)
    fig.suptitle(f"{name}: distance to each strategy,\nmean and 95% band over seeds", fontsize=11)
    paths.append(save(fig, directory / f"{name}-strategies.png"))
    return paths


def phase_key(ax: plt.Axes, metrics: list[dict], loc: str = "lower left") -> None:
    """A legend entry for each strategy whose shading appears, so the bands need no caption."""
    from matplotlib.patches import Patch

    shown = dict.fromkeys(closest_strategy(m["last_token_kl"]) for m in metrics)
    handles = [Patch(color=strategy_colour(name), alpha=0.15, label=f"closest: {name}") for name in shown]
    ax.add_artist(ax.legend(handles=handles, loc=loc, fontsize=8, title="shading", title_fontsize=8))


def plot_progress_measures(progress: list, metrics: list[dict], thresholds: dict, title: str, path: Path) -> Path:
    """Above: KL(strategy ‖ model) and the model's KL(true ‖ model), last token. Below: each progress measure
    rescaled so that chance is 0 and Proposition 2.1 is 1 (its threshold is 0.5), with a mark where it first
    reaches the threshold. Shared log x-axis of sequences seen, shaded by the closest strategy."""
    sns.set_theme(style="ticks")
    keep = [i for i, m in enumerate(metrics) if m["sequences_seen"] > 0]  # a log axis has no 0
    x = [metrics[i]["sequences_seen"] for i in keep]
    kept = [metrics[i] for i in keep]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for ax in (top, bottom):
        shade_closest_strategy(ax, x, kept)
    for name in ("uniform", "unigram", "bigram"):
        top.plot(x, [m["last_token_kl"][name] for m in kept], color=strategy_colour(name), lw=2, label=f"to {name}")
    top.plot(x, [m["last_token_kl"]["true"] for m in kept], color="black", lw=1.5, ls="--", label="KL(true ‖ model)")
    top.set_yscale("log")
    top.set_ylabel("KL(· ‖ model), last token")
    top.legend(loc="center left", fontsize=8)
    colours = dict(zip(thresholds, sns.color_palette("dark", len(thresholds))))
    styles = {"ov_copying_accuracy": (0, (4, 2))}  # dashed: it sits on the copying score once both reach 1
    scaled = {name: [(progress[i].value(name) - row["chance"]) / (row["construction"] - row["chance"]) for i in keep]
              for name, row in thresholds.items()}
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
    bottom.set_xscale("log")
    bottom.set_xlabel("training sequences seen (log scale)")
    top.set_title(f"{title}: the circuit's pieces from the weights, against the strategy phases")
    return save(fig, path)


def plot_llc(estimates: list, metrics: list[dict], sequences: list[int], construction, title: str, path: Path) -> Path:
    """Above: KL(strategy ‖ model) over training, shaded by the closest strategy. Below: the LLC estimate at
    the sampled checkpoints (bars: standard deviation over chains), the construction's as a dashed line.
    Shared log x-axis of sequences seen; step 0 (no sequences yet) is drawn at the first checkpoint's x."""
    sns.set_theme(style="ticks")
    kept = [m for m in metrics if m["sequences_seen"] > 0]
    x = [m["sequences_seen"] for m in kept]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for ax in (top, bottom):
        shade_closest_strategy(ax, x, kept)
    for name in ("uniform", "unigram", "bigram"):
        top.plot(x, [m["last_token_kl"][name] for m in kept], color=strategy_colour(name), lw=2, label=f"to {name}")
    top.plot(x, [m["last_token_kl"]["true"] for m in kept], color="black", lw=1.5, ls="--", label="KL(true ‖ model)")
    top.set_yscale("log")
    top.set_ylabel("KL(· ‖ model), last token")
    top.legend(loc="center left", fontsize=8)
    at = [max(n, x[0]) for n in sequences]
    bottom.errorbar(at, [e.llc for e in estimates], yerr=[e.llc_std for e in estimates], color="black", marker="o",
                    capsize=3, lw=1.5, label="LLC (± sd over chains)")
    bottom.axhline(construction.llc, color="tab:purple", ls="--", lw=1.5, label=f"Prop. 2.1 construction ({construction.llc:.1f})")
    bottom.axhline(0, color="grey", lw=0.8)
    bottom.set_ylabel("local learning coefficient")
    bottom.set_xscale("log")
    bottom.set_xlabel("training sequences seen (log scale; step 0 drawn at the first checkpoint)")
    phase_key(bottom, kept, loc="lower right")
    bottom.legend(loc="upper left", fontsize=8)
    top.set_title(f"{title}: the learning coefficient against the strategy phases")
    return save(fig, path)
