"""The report's plain-text pieces: tables, the rows a summary shows, the JSON every answer about a run starts
with. Torch-free, so the command line shares them while it builds its options."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.names import heads_label
from induction_probes.circuits.paths import portable

if TYPE_CHECKING:
    from induction_probes.circuits.runs.reader import Run


def json_text(value: object) -> str:
    """Strict JSON (no NaN or infinity, which strict parsers reject): a number that could not be computed
    is refused in one line, never printed."""
    try:
        return json.dumps(value, indent=2, allow_nan=False)
    except ValueError:
        raise BadInput("a result is not a finite number (NaN or infinity); refusing to print it as JSON") from None


def provenance(run: Run, steps: list[int], n_seqs: int, seed: int) -> dict:
    """What every JSON answer about a run starts with: which run, which checkpoints, which sequences."""
    return {"run": portable(run.path), "steps": list(steps), "n_seqs": n_seqs, "seed": seed}


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned first column, right-aligned numbers, 4 decimals."""
    cells = [[f"{c:.4f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        first = values[0].ljust(widths[0])
        return "  ".join([first, *(v.rjust(w) for v, w in zip(values[1:], widths[1:]))])

    return "\n".join([line(list(headers)), line(["-" * w for w in widths]), *map(line, cells)])


def spread_steps(steps: list[int], n_rows: int = 12) -> set[int]:
    """About ``n_rows`` of ``steps``, evenly spread in step value: a readable summary of a run."""
    return {min(steps, key=lambda s: abs(s - steps[-1] * i / (n_rows - 1))) for i in range(n_rows)}


def figure_lines(figures: list[Path]) -> list[str]:
    return [f"figure: {path}" for path in figures]


def with_figures(text: str, figures: list[Path]) -> str:
    """A text followed by one ``figure: PATH`` line per figure written."""
    return "\n".join([text] + figure_lines(figures))


def heads_name(heads) -> str:
    """A head set as every table names it: ``L0H1,L1H0``."""
    return heads_label(heads)


def ablations_json(run: Run, step: int, mode: str, n_seqs: int, seed: int, baseline: dict, ablated: list) -> dict:
    """An ablation study as JSON: the clean model's values, then each head set's (``ablated`` pairs each head
    set with a dict of its values)."""
    rows = [{"heads": heads_name(heads).split(","), "mode": mode} | values for heads, values in ablated]
    return provenance(run, [step], n_seqs, seed) | {"mode": mode, "baseline": baseline, "ablations": rows}
