"""Shipped results that bear on a claim of Edelman et al. without being one of their experiments (Singh et
al.'s clamps), and one that neither paper measures (the local learning coefficient of markov-k3)."""

from __future__ import annotations

from pathlib import Path

from induction_probes.probes.paper.edelman_sweeps import PAPER, k_seqs, redraw
from induction_probes.probes.paper.entries import EXTRA, PARTLY, Entry, judged
from induction_probes.probes.paper.shipped import open_run, read_json, source


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


def llc_entry(directory: Path) -> Entry:
    from induction_probes.probes.figures.plots_llc import plot_llc

    result = read_json("markov-k3-llc", "llc.json")
    estimates = result["checkpoints"]
    run = open_run("markov-k3")
    figure = plot_llc(
        estimates, run.metrics(), result["construction"]["best_scales"], "markov-k3", directory / "markov-k3_llc.png"
    )

    def said(entry: dict) -> str:
        if entry["llc"] is None:
            return f"step {entry['step']} ({entry['closest']}): refused ({entry['problems'][0]})"
        return f"step {entry['step']} ({entry['closest']}): {entry['llc']:.2f} ± {entry['llc_std']:.2f}"

    return Entry(
        "beyond the papers",
        "local learning coefficient",
        "Neither paper estimates it; shipped with devinterp's SGLD sampler and its diagnostics.",
        "; ".join(said(entry) for entry in estimates),
        EXTRA,
        "the papers do not measure it",
        [figure],
        ["experiments/results/markov-k3-llc/llc.json"],
    )
