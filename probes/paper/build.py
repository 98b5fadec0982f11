"""``write_paper(out)``: every entry of both papers, its figures in ``out/figures/``, the page at
``out/index.html``. The output folder is checked before anything is computed: it may not be a link or a file,
and must be writable."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.untrusted import write_atomic
from induction_probes.circuits.validation import shortened
from induction_probes.probes.paper.beyond import clamps_entry, llc_entry, per_head_llc_entry
from induction_probes.probes.paper.edelman_figures import edelman_run_entries
from induction_probes.probes.paper.edelman_sweeps import edelman_sweep_entries
from induction_probes.probes.paper.edelman_variants import variant_entries
from induction_probes.probes.paper.entries import Entry, read_quotes, with_quote
from induction_probes.probes.paper.page import counts_text, page_html
from induction_probes.probes.paper.wang_figures import plateau_entry, theorem_entries, toy_entries, trained_entries
from induction_probes.probes.paper.wang_rebuttal import wang_rebuttal_entries, window_entry
from induction_probes.probes.paper.wang_toy_sweeps import layerwise_entry

FIGURES = "figures"
COMMAND = "induction-probes paper --out DIR"


class OutputError(BadInput):
    """An output folder the page cannot be written into."""


@dataclass(frozen=True)
class Paper:
    page: Path
    entries: list[Entry]
    figures: list[Path]
    seconds: float

    def summary(self) -> str:
        """What ``induction-probes paper`` prints: the page, and what it holds."""
        held = f"{len(self.figures)} figures, {len(self.entries)} entries ({counts_text(self.entries)})"
        return f"page: {self.page}\n{held} in {self.seconds:.0f} s"


def prepare_output(out: Path) -> Path:
    """``out/figures``, made if missing, after checking that ``out`` is no link, no file, and writable (a
    file is written and removed there, which also answers where permissions would not, as for root)."""
    out = Path(out)
    for path in (out, out / FIGURES):
        if path.is_symlink():
            raise OutputError(f"{path} is a symbolic link: give a folder of its own for the paper page")
        if path.exists() and not path.is_dir():
            raise OutputError(f"{path} exists and is not a folder")
    page = out / "index.html"
    if page.is_dir() and not page.is_symlink():  # a file or a link there is replaced; a folder could not be
        raise OutputError(f"{page} is a folder: the page cannot be written there")
    figures = out / FIGURES
    try:
        figures.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=figures, prefix=".writable-"):
            pass
    except OSError as error:
        raise OutputError(f"cannot write into {out}: {error.strerror or error}") from None
    return figures


def all_entries(figures: Path) -> list[Entry]:
    """Both papers' entries in the page's order, their figures drawn into ``figures``."""
    makers = [
        edelman_run_entries,
        clamps_entry,
        edelman_sweep_entries,
        variant_entries,
        theorem_entries,
        trained_entries,
        window_entry,  # rebuttal Fig. 7 beyond IH_2, beside the IH_2 run's roles
        toy_entries,
        layerwise_entry,
        plateau_entry,
        wang_rebuttal_entries,
        llc_entry,
        per_head_llc_entry,
    ]
    entries = []
    for make in makers:
        made = built(make, figures)
        entries += made if isinstance(made, list) else [made]
    quotes = read_quotes()
    return [with_quote(entry, quotes) for entry in entries]


def built(make, figures: Path):
    """``make(figures)``; a shipped file that lacks a field it reads, or holds one of another type (a copy of the
    repository edited by hand), is one line naming the entry, not an internal error."""
    try:
        return make(figures)
    except (KeyError, TypeError, IndexError) as error:
        raise BadInput(
            f"a shipped result does not hold what the page's {make.__name__} reads ({type(error).__name__}: "
            f"{shortened(str(error), 120)}): redraw it with make experiments"
        ) from None


def write_paper(out: str | os.PathLike[str]) -> Paper:
    """Redraw every figure the project reproduces of both papers into ``out/figures/`` and write the page
    ``out/index.html`` (see :mod:`induction_probes.probes.paper`); no training, only shipped files."""
    start = time.perf_counter()
    figures = prepare_output(Path(out))
    entries = all_entries(figures)
    drawn = list(dict.fromkeys(path for entry in entries for path in entry.figures))
    seconds = time.perf_counter() - start
    page = Path(out).resolve() / "index.html"  # the folder was checked: no link; a link planted at the page is replaced
    write_atomic(page, page_html(entries, seconds, COMMAND).encode("utf-8"))
    return Paper(page, entries, drawn, seconds)
