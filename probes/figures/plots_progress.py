"""The progress measures' figure (``probe --all-steps`` and the paper page): each measure read from the weights,
rescaled between its chance and construction values, below the strategies' KL; every line keyed, the keys beside
the panels. The standard of :mod:`induction_probes.probes.figures.plots`, whose helpers it shares."""

from __future__ import annotations

from pathlib import Path

import seaborn as sns

from induction_probes.probes.figures.plots import legend_outside, save, strategies_above


def rescaled(progress: list, thresholds: dict, keep: list[int]) -> dict[str, list[float]]:
    """Each measure at the checkpoints ``keep``, rescaled so that chance is 0 and the construction 1."""
    return {
        name: [(progress[i].value(name) - row["chance"]) / (row["construction"] - row["chance"]) for i in keep]
        for name, row in thresholds.items()
    }


def measure_label(name: str, row: dict, curve: list[float]) -> str:
    """A measure's key: its name, and where it passes 1, that it ends above the construction's own value (K
    composition does: the construction's is 1/√k, and a trained model's layer-1 QKᵀ can align better)."""
    label = name.replace("_", " ")
    return f"{label}\n(1: the construction's {row['construction']:.2f};\nabove 1: past it)" if max(curve) > 1 else label


def plot_progress_measures(progress: list, metrics: list[dict], thresholds: dict, title: str, path: Path) -> Path:
    """Above: KL(strategy ‖ model) and the model's KL(true ‖ model), last token. Below: each progress measure
    rescaled so that chance is 0 and Proposition 2.1 is 1 (its threshold is 0.5), and a dotted line where it
    first reaches the threshold, each in the key. Shared log x-axis of sequences seen, shaded by the closest
    strategy; every key beside or below the panels, off the curves."""
    fig, top, bottom, x, kept = strategies_above(metrics, height=8, width=8.3, outside=True)
    keep = [i for i, m in enumerate(metrics) if m["sequences_seen"] > 0]  # the checkpoints the x-axis holds
    colours = dict(zip(thresholds, sns.color_palette("dark", len(thresholds))))
    styles = {"ov_copying_accuracy": (0, (4, 2))}  # dashed: it sits on the copying score once both reach 1
    scaled = rescaled(progress, thresholds, keep)
    for name, row in thresholds.items():
        label = measure_label(name, row, scaled[name])
        bottom.plot(x, scaled[name], color=colours[name], lw=2, ls=styles.get(name, "-"), label=label)
        if row["first_sequences"]:
            first = f"↳ first at threshold (step {row['first_step']})"  # just below its measure in the key
            bottom.axvline(row["first_sequences"], color=colours[name], ls=":", lw=1.2, label=first)
    bottom.axhline(0.5, color="grey", lw=1, ls="--", label="threshold (halfway)")
    values = [v for curve in scaled.values() for v in curve]
    bottom.set_ylim(min(-0.1, *values) - 0.05, max(1.0, *values) + 0.1)
    past = " or above" if max(values) > 1 else ""
    bottom.set_ylabel(f"measure, rescaled\n(chance 0, construction 1{past})")
    legend_outside(bottom)
    top.set_title(f"{title}: the circuit's pieces, read from the weights")
    return save(fig, path)
