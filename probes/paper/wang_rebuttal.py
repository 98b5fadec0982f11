"""Wang et al.'s rebuttal experiments (ICLR 2025 discussion, figure numbers of the rebuttal): Boolean tokens
in the toy (Fig. 4), Adam (Fig. 5), the IH_4 capacity experiment (Fig. 6) and natural text (Fig. 3)."""

from __future__ import annotations

from pathlib import Path

from induction_probes.probes.paper.entries import DIFFER, NOT_YET, Entry, judged, not_yet
from induction_probes.probes.paper.shipped import read_json
from induction_probes.probes.paper.wang import ISSUE, PAPER, draw_toy, phases_text, toy_history

CAPACITY_LINE = 0.3  # MSE / target variance below which plots_toy.plot_capacity_table colours a model as learning IH_4


def boolean_entry(directory: Path) -> Entry:
    _, _, phases, figure = draw_toy("boolean", directory)
    return judged(
        PAPER,
        "rebuttal Fig. 4",
        "With Boolean ±1 tokens the toy shows the same four phases and the same 4-gram → induction transition.",
        f"±1 tokens, one run: {phases_text(phases)}"
        if phases
        else "±1 tokens, one run: the four phases did not all appear",
        phases,
        DIFFER,
        "a phase is missing",
        [figure],
        ["experiments/results/toy/boolean/metrics.jsonl"],
    )


def adam_entry(directory: Path) -> Entry:
    _, _, phases, figure = draw_toy("adam", directory)
    _, _, gd = toy_history("gd")
    today = (
        f"in the six-parameter toy Adam (lr 0.01) removes the plateau: {phases_text(phases)}, against a plateau of "
        f"{gd.plateau} steps with gradient descent"
        if phases
        else "in the six-parameter toy under Adam the four phases did not all appear"
    )
    return Entry(
        PAPER,
        "rebuttal Fig. 5",
        "Under Adam, in a high-dimensional toy, the model still goes lazy → rich, with several plateaus.",
        today,
        NOT_YET,
        f"{ISSUE}: the high-dimensional toy of §5 is not reconstructed yet",
        [figure],
        ["experiments/results/toy/adam/metrics.jsonl"],
    )


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
    return [boolean_entry(directory), adam_entry(directory), capacity_entry(directory), text]
