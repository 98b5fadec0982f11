"""The shipped files the paper page is drawn from, and where they lie: the runs of ``checkpoints/`` (opened
by name) and the results of ``experiments/results/``, read in a clone of the repository (an editable
install, as ``make`` does)."""

from __future__ import annotations

import json
from pathlib import Path

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.runs.reader import Run
from induction_probes.circuits.untrusted import read_text

REPOSITORY = Path(__file__).resolve().parents[2]
RESULTS = REPOSITORY / "experiments" / "results"
SWEEPS = ("seed-variance", "ds-mixture", "layers", "k8-context", "trigram", "clamps")
RUNS = ("markov-k3", "markov-k2", "minimal-k3", "gaussian-ih2")
TOY_RUNS = ("gd", "boolean", "adam")  # experiments/results/toy/<name>: the toy model's run directories


class MissingResults(BadInput):
    """The shipped results are not where a clone keeps them (an install without the repository)."""


def result_path(*parts: str) -> Path:
    """A shipped result's path, refused in one line where the clone lacks it."""
    path = RESULTS.joinpath(*parts)
    if not path.exists():
        raise MissingResults(
            f"{relative(path)} is missing: `paper` reads the shipped results of a clone of the "
            "repository (installed with `make` or `pip install -e .`)"
        )
    return path


def relative(path: Path) -> str:
    """``path`` as the page names it: relative to the repository."""
    return path.relative_to(REPOSITORY).as_posix() if path.is_relative_to(REPOSITORY) else path.name


def read_json(*parts: str) -> dict:
    """A shipped JSON result (a regular file, no link, of bounded size)."""
    return json.loads(read_text(result_path(*parts)))


def summary(sweep: str) -> dict:
    """``experiments/results/<sweep>/summary.json``, as ``summarize --json`` wrote it."""
    return read_json(sweep, "summary.json")


def source(sweep: str) -> list[str]:
    """The sources an entry cites for a sweep: its summary, as the page names it."""
    return [relative(RESULTS / sweep / "summary.json")]


def open_run(name: str):
    """A shipped run of ``checkpoints/`` by name, or a toy run of ``experiments/results/toy/``."""
    return Run.open(name if name in RUNS else result_path("toy", name))
