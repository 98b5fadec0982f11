"""The learning coefficient's figures: the whole model's over training (the ``llc`` command) and each block's
(``llc --per-head``), both below the strategies' KL on a shared log axis of sequences seen."""

from __future__ import annotations

import textwrap
from pathlib import Path

from matplotlib.patches import Rectangle

from induction_probes.probes.figures.plots import head_colour, legend_outside, save, strategies_above

BAND = 0.08  # the top share of a panel that holds the refusals, above every value
CIRCUIT_MEASURES = {"previous_token_match": "--", "k_composition_match": ":"}  # progress measure: line style


def plot_llc(
    estimates: list[dict], metrics: list[dict], construction: dict, title: str, path: Path, failing: str = ""
) -> Path:
    """Above: KL(strategy ‖ model) over training, shaded by the closest strategy. Below: the LLC estimates
    (``llc`` command's JSON records) at the sampled checkpoints (bars: standard deviation over chains), refused
    ones on a band at the top (:func:`refusal_band`); the construction's (at its best scales) and, where step 0
    was sampled, the initial model's as horizontal lines (step 0 has seen no sequences: no place on a log axis)."""
    fig, top, bottom, x, kept = strategies_above(metrics, height=6.5, width=10, outside=True)
    trained = [e for e in estimates if e["sequences_seen"] > 0]
    accepted = [e for e in trained if e["llc"] is not None]
    bottom.errorbar(
        [e["sequences_seen"] for e in accepted],
        [e["llc"] for e in accepted],
        yerr=[e["llc_std"] for e in accepted],
        color="black",
        marker="o",
        capsize=3,
        lw=1.5,
        label=f"LLC at {resolution_said(estimates)} (± sd over chains)",
    )
    checked = [e for e in accepted if (e["diagnostics"].get("localization_check") or {}).get("estimate") is not None]
    if checked:
        bottom.plot(
            [e["sequences_seen"] for e in checked],
            [e["diagnostics"]["localization_check"]["estimate"] for e in checked],
            ls=":",
            marker="d",
            color="grey",
            label=f"the same at γ/4{quarter_said(checked[0].get('at_quarter_gamma'))}",
        )
    for e in estimates:
        if e["sequences_seen"] == 0 and e["llc"] is not None:
            bottom.axhline(
                e["llc"], color="tab:blue", ls=":", lw=1.5, label=f"at initialisation, step 0 ({e['llc']:.2f})"
            )
    if construction["llc"] is not None and not construction["flags"]:  # a flagged estimate is no reference
        bottom.axhline(
            construction["llc"],
            color="tab:purple",
            ls="--",
            lw=1.5,
            label=f"Prop. 2.1 construction ({construction['llc']:.1f})",
        )
    else:
        verdict = "refused" if construction["llc"] is None else "flagged"
        bottom.plot([], [], " ", label=f"Prop. 2.1 construction: {verdict} by the diagnostics, not drawn")
    bottom.axhline(0, color="grey", lw=0.8)
    refusal_band(bottom, {"tab:red": [e["sequences_seen"] for e in trained if e["llc"] is None]})  # values drawn
    bottom.set_ylabel("local learning coefficient")
    legend_outside(bottom)
    top.set_title(f"{title}: the learning coefficient over training")
    mark_failing(fig, failing)
    return save(fig, path)


def plot_per_head_llc(
    rows: list[dict], metrics: list[dict], crossings: dict, title: str, path: Path, failing: str = ""
) -> Path:
    """Above: KL(strategy ‖ model). Below: each block's refined LLC (``llc --per-head``'s JSON rows) at the
    sampled checkpoints, bars its 95 % interval over chains, hollow where flagged, crosses on a band at the top
    where refused; a line where the previous-token and K-composition measures first reach their thresholds."""
    fig, top, bottom, x, kept = strategies_above(metrics, height=8, width=10, outside=True)
    names = list(dict.fromkeys(r["block"] for r in rows))
    colours = {name: head_colour(name) for name in names}  # as in every other figure of the model
    for name in names:
        mine = [r for r in rows if r["block"] == name and r["sequences_seen"] and r["llc"] is not None]
        errors = [[r["llc"] - r["interval"][0] for r in mine], [r["interval"][1] - r["llc"] for r in mine]]
        xs, ys = [r["sequences_seen"] for r in mine], [r["llc"] for r in mine]
        bottom.errorbar(xs, ys, yerr=errors, color=colours[name], marker="o", capsize=3, lw=1.5, label=name)
        flagged = [r for r in mine if r["flags"]]
        bottom.plot(
            [r["sequences_seen"] for r in flagged],
            [r["llc"] for r in flagged],
            "o",
            ms=9,
            mfc="white",
            mec=colours[name],
            zorder=3,
        )
        quarter_gamma(bottom, mine, colours[name])
    bottom.plot([], [], "o", mfc="white", mec="grey", label="flagged (see the JSON's flags)")
    quarter = next((r["quarter"] for r in rows if r.get("quarter")), None)
    bottom.plot([], [], ls=":", marker="d", color="grey", label=f"the same at γ/4{quarter_said(quarter)}")
    for name, style in CIRCUIT_MEASURES.items():  # the two pieces whose order the question is about
        crossing = crossings.get(name) or {}
        if crossing.get("first_sequences"):
            bottom.axvline(crossing["first_sequences"], color="grey", ls=style, lw=1.2)
            bottom.plot([], [], color="grey", ls=style, lw=1.2, label=f"{name.replace('_', ' ')} crosses its threshold")
    bottom.axhline(0, color="grey", lw=0.8)
    refusal_band(
        bottom,
        {
            colours[name]: [
                r["sequences_seen"] for r in rows if r["block"] == name and r["sequences_seen"] and r["llc"] is None
            ]
            for name in names
        },
    )
    bottom.set_ylabel("refined LLC of the block")
    legend_outside(bottom)
    top.set_title(f"{title}: each head's learning coefficient over training")
    mark_failing(fig, failing)
    return save(fig, path)


def resolution_said(records: list[dict]) -> str:
    """Which γ the records were sampled at, as a key says it (the rule's name is probes/llc/resolution.py's
    SERIES, spelled out: figures sit below the estimator in the layers and do not import it)."""
    rules = {(r.get("resolution") or {}).get("rule") for r in records}
    return "one γ for every step" if rules == {"one for the series"} else "each step's own γ"


def quarter_gamma(bottom, rows: list[dict], colour) -> None:
    """A block's estimates at γ/4 (the localization check), dotted beside the series' γ: the second resolution
    a change must hold at."""
    kept = [r for r in rows if r.get("quarter") and r["quarter"]["llc"] is not None]
    if kept:
        xs, ys = [r["sequences_seen"] for r in kept], [r["quarter"]["llc"] for r in kept]
        bottom.plot(xs, ys, ls=":", marker="d", ms=5, color=colour, alpha=0.7)


def quarter_said(quarter: dict | None) -> str:
    """ " (uncalibrated)" where the calibration misses at γ/4 (a record's ``calibration`` label)."""
    return " (uncalibrated)" if (quarter or {}).get("calibration", "").startswith("uncalibrated") else ""


def refusal_band(axis, refused: dict[str, list]) -> None:
    """Refused estimates as crosses (one colour per block) on a grey band along the top of ``axis``, in the
    axis's own coordinates: a refusal has no value, so it is never drawn at one."""
    if not any(refused.values()):
        return
    low, high = axis.get_ylim()
    axis.set_ylim(low, low + (high - low) / (1 - BAND))  # the values keep below the band
    band = axis.get_xaxis_transform()  # x in data (sequences seen), y in the axis's fraction
    axis.add_patch(Rectangle((0, 1 - BAND), 1, BAND, transform=axis.transAxes, color="0.9", zorder=0, lw=0))
    for colour, xs in refused.items():
        axis.plot(xs, [1 - BAND / 2] * len(xs), "x", color=colour, ms=8, transform=band, clip_on=False)
    axis.plot([], [], "x", color="grey", label="refused by the diagnostics (grey band: no value)")


def mark_failing(fig, failing: str) -> None:
    """The failing calibration's mark, in red across the top of the figure, so no reader takes the estimates
    below it as calibrated."""
    if failing:  # a suptitle, which the constrained layout makes room for above the panels
        fig.suptitle(textwrap.fill(failing, 110), color="tab:red", fontsize=8)
