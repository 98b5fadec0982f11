"""Shipped results that bear on a claim of Edelman et al. without being one of their experiments (Singh et
al.'s clamps), and two that neither paper measures (markov-k3's local learning coefficient, whole and per
head)."""

from __future__ import annotations

from pathlib import Path

from induction_probes.probes.figures.plots_llc import plot_llc, plot_per_head_llc
from induction_probes.probes.llc.chain_intervals import RANGE_FLAGS, restated
from induction_probes.probes.llc.resolution import SERIES
from induction_probes.probes.paper.edelman_sweeps import PAPER, k_seqs, redraw
from induction_probes.probes.paper.entries import EXTRA, PARTLY, Entry, judged
from induction_probes.probes.paper.shipped_files import open_run, read_json, source


def clamps_entry(directory: Path) -> Entry:
    result, figures = redraw("clamps", directory)
    conditions = result["conditions"]
    free = conditions["free"]["transition"]["mean"]
    clamped = {name: c["transition"] for name, c in conditions.items() if name != "free"}
    together = all(stat["mean"] < free / 3 for stat in clamped.values())
    ours = (
        f"5 seeds each, transition {k_seqs(conditions['free']['transition'])} sequences free, "
        + ", ".join(f"{k_seqs(stat)} with {name}" for name, stat in clamped.items())
        + " (Singh et al.'s clamps: the layer's attention set to its ideal pattern from the first step)"
    )
    return judged(
        PAPER,
        "§3 (the layers click together)",
        "Neither layer has much signal until the other forms: the plateau ends when the two layers click together.",
        ours,
        together,
        PARTLY,
        "one clamp leaves most of the plateau",
        figures,
        source("clamps"),
    )


def calibration_said(result: dict) -> str:
    """The calibration's verdict at the result's own settings, as the entry shows it (files written before the
    gate have none: said so)."""
    verdict = (result.get("calibration") or {}).get("gate")
    if verdict is None:
        return "calibration at these settings not gated (written before the gate)"
    return verdict["mark"] or f"calibration holds at these settings ({verdict['cases']} cases)"


def llc_entry(directory: Path) -> Entry:
    result = read_json("markov-k3-llc", "llc.json")
    estimates = result["checkpoints"]
    run = open_run("markov-k3")
    failing = ((result.get("calibration") or {}).get("gate") or {}).get("mark", "")
    figure = plot_llc(
        estimates,
        run.metrics(),
        result["construction"]["best_scales"],
        "markov-k3",
        directory / "markov-k3_llc.png",
        failing=failing,
    )

    def said(entry: dict) -> str:
        if entry["llc"] is None:
            return f"step {entry['step']} ({entry['closest']}): refused ({entry['problems'][0]})"
        check = (entry.get("diagnostics") or {}).get("localization_check") or {}
        quarter = f", {check['estimate']:.2f} at γ/4" if check.get("estimate") is not None else ""
        return f"step {entry['step']} ({entry['closest']}): {entry['llc']:.2f} ± {entry['llc_std']:.2f}{quarter}"

    series = (estimates[0].get("resolution") or {}).get("rule") == SERIES
    return Entry(
        "beyond the papers",
        "local learning coefficient",
        "Neither paper estimates it; shipped with devinterp's SGLD sampler and its diagnostics.",
        "; ".join(said(entry) for entry in estimates)
        + ("; one γ for every step" if series else "; γ by the rule at each step")
        + f"; {calibration_said(result)}",
        EXTRA,
        "the papers do not measure it",
        [figure],
        ["experiments/results/markov-k3-llc/llc.json"],
    )


def per_head_llc_entry(directory: Path) -> Entry:
    """Each head's refined LLC over markov-k3's training (``llc --per-head``), beside the progress measures'
    first crossings: which block's coefficient moves, and when, at the series' γ and at γ/4."""
    result = read_json("markov-k3-llc-heads", "llc_heads.json")
    rows = [restated(row) for row in result["rows"]]  # the interval by the current rule, from the stored chains
    run = open_run("markov-k3")
    figure = plot_per_head_llc(
        rows,
        run.metrics(),
        result["progress_thresholds"],
        "markov-k3",
        directory / "markov-k3_llc_per_head.png",
        failing=((result.get("calibration") or {}).get("gate") or {}).get("mark", ""),
    )
    blocks = dict.fromkeys(row["block"] for row in rows)
    per_block = [
        f"{block} ({next(b['n_params'] for b in result['blocks'] if b['name'] == block)} parameters): "
        + ", ".join(row_said(row) for row in rows if row["block"] == block)
        for block in blocks
    ]
    crossings = result["progress_thresholds"]
    chains = len(next((row["per_chain"] for row in rows if row["per_chain"]), []))
    ours = (
        f"refined LLC per block on {result['n_seqs']} sequences (95 % intervals over {chains} "
        "chains, not clipped to [0, d/2]); "
        + "; ".join(per_block)
        + "; previous-token match crosses its threshold at step "
        f"{crossings['previous_token_match']['first_step']}, K-composition match at "
        f"{crossings['k_composition_match']['first_step']}"
        + "".join(f"; {line}" for line in changes_said(result.get("changes", [])))
        + f"; {calibration_said(result)}"
    )
    return Entry(
        "beyond the papers",
        "per-head learning coefficient",
        "Neither paper estimates it: each head's, the embedding's and the unembedding's own (weight-refined) LLC.",
        ours,
        EXTRA,
        "the papers do not measure it",
        [figure],
        ["experiments/results/markov-k3-llc-heads/llc_heads.json"],
    )


def row_said(row: dict) -> str:
    if row["llc"] is None:
        return f"step {row['step']}: refused ({row['problems'][0].split(':')[0]})"
    low, high = row["interval"]
    beyond = [flag.split(":")[0] for flag in row["flags"] if flag.startswith(RANGE_FLAGS)]
    quarter = row.get("quarter") or {}
    at_quarter = f" ({quarter['llc']:.1f} at γ/4)" if quarter.get("llc") is not None else ""
    return (
        f"step {row['step']}: {row['llc']:.1f} [{low:.1f}, {high:.1f}]"
        + "".join(f" ({b})" for b in beyond)
        + at_quarter
    )


def changes_said(changes: list[dict]) -> list[str]:
    """Each block's change from the first step, said real where it holds at what it rests on (γ, and γ/4 where
    the calibration holds there; files written before γ/4 was gated rested on both)."""
    return [
        f"{c['block']} {c['from']} -> {c['to']}: {c['at_gamma']['change']:+.1f} at γ, "
        + (f"{c['at_quarter_gamma']['change']:+.1f} at γ/4" if c["at_quarter_gamma"] else "no γ/4 check")
        + (f": a change, resting on {c.get('rests_on', 'γ and γ/4')}" if c["real"] else ": not shown to change")
        for c in changes
        if c["at_gamma"] is not None
    ]
