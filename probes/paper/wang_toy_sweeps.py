"""Wang et al.'s toy-model claims over seeds, from the three toy sweeps of ``experiments/`` (their summaries in
``experiments/results/<sweep>/``): Boolean tokens (rebuttal Fig. 4), joint against layerwise training (Fig. 2
and the rebuttal's answer on it), Adam in a high-dimensional toy (rebuttal Fig. 5)."""

from __future__ import annotations

from pathlib import Path

from induction_probes.probes.paper.entries import DIFFER, PARTLY, Entry, interval_text, judged, p_text
from induction_probes.probes.paper.shipped import source, summary
from induction_probes.probes.paper.wang import PAPER

SIGNIFICANT = 0.05  # the sign test's level for "positions first in every seed, beyond chance"


def sweep_figures(name: str, directory: Path) -> tuple[dict, list[Path]]:
    from induction_probes.probes.figures.plots_toy import plot_toy_sweep

    result = summary(name)
    return result, plot_toy_sweep(result, directory)


def steps_text(stat: dict) -> str:
    """A step count's interval, at four figures (steps run to thousands)."""
    return interval_text(stat, digits=4)


def comparison_text(comparison: dict) -> str:
    p, rank = comparison["p_value"], comparison["rank_p_value"]
    return (
        f"{comparison['b']} − {comparison['a']} {steps_text(comparison['difference'])} steps "
        f"({comparison['test']} p = {p_text(p)}, {comparison['rank_test']} p = {p_text(rank)})"
    )


def boolean_sweep_entry(directory: Path) -> Entry:
    result, figures = sweep_figures("toy-boolean", directory)
    gaussian, boolean = result["conditions"]["gaussian"], result["conditions"]["boolean"]
    ours = (
        f"{boolean['n_seeds']} seeds each (L = 20, σ = 0.01, gradient descent): four phases in order in "
        f"{boolean['n_in_order']}/{boolean['n_seeds']} ±1 seeds and {gaussian['n_in_order']}/{gaussian['n_seeds']} "
        f"Gaussian ones; end of the plateau (II) at {steps_text(boolean['transition'])} (±1) against "
        f"{steps_text(gaussian['transition'])} (Gaussian), end of III at {steps_text(boolean['end_of_III'])} "
        f"against {steps_text(gaussian['end_of_III'])}; {comparison_text(result['comparisons'][0])}"
    )
    return judged(
        PAPER,
        "rebuttal Fig. 4",
        "With Boolean ±1 tokens the toy shows the same four phases and the same 4-gram → induction transition.",
        ours,
        boolean["four_phases_in_order"] and gaussian["four_phases_in_order"],
        DIFFER,
        "a ±1 (or Gaussian) seed lacks a phase, or shows them out of order",
        figures,
        source("toy-boolean"),
    )


def layerwise_entry(directory: Path) -> Entry:
    result, figures = sweep_figures("toy-layerwise", directory)
    joint, layerwise = result["conditions"]["joint"], result["conditions"]["layerwise"]
    first, learned = joint["positions_first"], joint["learned"]
    gap = first["w_KQ_minus_positions"]
    ours = (
        f"joint training, {joint['n_seeds']} seeds: half of the total change made at step "
        + ", ".join(f"{steps_text(learned[k])} ({k})" for k in ("p1", "p2", "w_KQ"))
        + f"; w_KQ after both slopes in {first['n_first']}/{first['n']} seeds (sign test p = "
        f"{first['sign_p_value']:.3f}), by {steps_text(gap['difference'])} steps (paired t p = "
        f"{gap['p_value']:.2g}). Layerwise (layer 1 alone for 3,000 steps, then layer 2 for 3,000): p1 half-way "
        f"at {steps_text(layerwise['learned']['p1'])}, four phases in {layerwise['n_in_order']}/"
        f"{layerwise['n_seeds']} seeds by step 6,000, final loss {interval_text(layerwise['final_loss'])} "
        f"against {interval_text(joint['final_loss'])} jointly"
    )
    if joint["transition"]["n"] >= 2 and layerwise["transition"]["n"] >= 2:
        ours += f"; {comparison_text(result['comparisons'][0])}"
    holds = first["n_first"] == first["n"] and first["sign_p_value"] < SIGNIFICANT
    return judged(
        PAPER,
        "Fig. 2 (layerwise training); rebuttal",
        "The paper trains layer 1 first, then layer 2; joint training also learns positions first, then W_K W_Q.",
        ours,
        holds,
        PARTLY,
        "under joint training w_KQ does not come after both slopes in every seed",
        figures,
        source("toy-layerwise"),
    )


def wide_adam_entry(directory: Path) -> Entry:
    result, figures = sweep_figures("toy-wide", directory)
    adam, gd = result["conditions"]["adam"], result["conditions"]["gd"]
    plateaus = [len(run["plateaus"]) for run in adam["runs"]]
    rich = adam["n_lazy_then_rich"] == adam["n_seeds"]
    several = all(count >= 2 for count in plateaus)
    ours = (
        f"d = 8 (258 parameters), {adam['n_seeds']} seeds: under Adam the 4-gram part halves before the induction "
        f"part in {adam['n_lazy_then_rich']}/{adam['n_seeds']} seeds; plateaus of the total loss per seed "
        f"{plateaus} (gradient descent: {[len(run['plateaus']) for run in gd['runs']]}, lazy → rich in "
        f"{gd['n_lazy_then_rich']}/{gd['n_seeds']}); induction part halved at step "
        f"{steps_text(interval_of(adam, 'loss_induction'))} (Adam) and "
        f"{steps_text(interval_of(gd, 'loss_induction'))} (gradient descent), w_KQ half-way at "
        f"{steps_text(adam['learned']['w_KQ'])} under Adam, before both slopes ({steps_text(adam['learned']['p1'])})"
    )
    return judged(
        PAPER,
        "rebuttal Fig. 5",
        "Under Adam, in a high-dimensional toy, the model still goes lazy → rich, with several plateaus.",
        ours,
        rich and several,
        PARTLY if rich or several else DIFFER,
        "lazy → rich in every seed, but not several plateaus"
        if rich
        else "several plateaus, but not lazy → rich in every seed"
        if several
        else "neither lazy → rich in every seed nor several plateaus",
        figures,
        source("toy-wide"),
    )


def interval_of(condition: dict, key: str) -> dict:
    from induction_probes.probes.sweeps.statistics import interval

    return interval([run["halved"][key] for run in condition["runs"] if run["halved"][key] is not None])
