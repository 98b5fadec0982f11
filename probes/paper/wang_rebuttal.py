"""Wang et al.'s rebuttal experiments (ICLR 2025 discussion, figure numbers of the rebuttal): Boolean tokens
in the toy (Fig. 4) and Adam in a high-dimensional toy (Fig. 5), both over seeds (``wang_toy_sweeps``), the IH_4
capacity experiment (Fig. 6) and natural text (Fig. 3)."""

from __future__ import annotations

from pathlib import Path

from induction_probes.probes.paper.entries import DIFFER, Entry, judged, not_yet
from induction_probes.probes.paper.shipped import read_json
from induction_probes.probes.paper.wang import ISSUE, PAPER

CAPACITY_LINE = 0.3  # MSE / target variance below which plots_toy.plot_capacity_table colours a model as learning IH_4


def capacity_entry(directory: Path) -> Entry:
    from induction_probes.probes.figures.plots_toy import plot_capacity_table

    rows = [(r["model"], r["heads"], r["d_model"], r["relative_mse"]) for r in read_json("ih4", "capacity.json")]
    learns = {label: error < CAPACITY_LINE for label, _, _, error in rows}
    expected = {label: heads > 1 and width >= 8 for label, heads, width, _ in rows}  # D = n·d = 8 for n = 4, d = 2
    ours = "IH_4, d = 2, L = 20, one seed each, 10,000 Adam steps: " + ", ".join(
        f"{label} {error:.3f}" for label, _, _, error in rows
    )
    return judged(
        PAPER,
        "rebuttal Fig. 6",
        "A two-layer model with one first-layer head, or with width D = 2d, fails to "
        "represent IH_4; with enough heads and D = n·d it succeeds.",
        ours,
        learns == expected,
        DIFFER,
        "a model fails or succeeds against the claim",
        [plot_capacity_table(rows, directory / "ih4_capacity.png")],
        ["experiments/results/ih4/capacity.json"],
    )


def wang_rebuttal_entries(directory: Path) -> list[Entry]:
    text = not_yet(
        PAPER,
        "rebuttal Fig. 3",
        "A standard two-layer, two-head transformer on natural text: a loss plateau, "
        "positions learned first, ‖W_K‖ and ‖W_Q‖ growing slowly (roughly exponentially) until the loss "
        "escapes.",
        f"{ISSUE}: a character-level text task",
    )
    from induction_probes.probes.paper.wang_toy_sweeps import boolean_sweep_entry, wide_adam_entry

    return [boolean_sweep_entry(directory), wide_adam_entry(directory), capacity_entry(directory), text]
