"""The shipped runs (``markov-k3`` and the others in the repository's ``checkpoints/``), installed as the data of
``induction_probes.checkpoints``, and the lookup that lets a run be named by them.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from induction_probes.circuits.untrusted import CheckpointError
from induction_probes.circuits.validation import quoted


def shipped_runs_dir() -> Path | None:
    """Where the shipped runs are installed: ``induction_probes.checkpoints``, data with no code (the
    repository's ``checkpoints/``, mapped there by pyproject's ``package-dir``); None without them."""
    try:
        return Path(str(resources.files("induction_probes.checkpoints")))
    except ModuleNotFoundError:
        return None


def shipped_run_names() -> list[str]:
    directory = shipped_runs_dir()
    if directory is None:  # an install without the shipped runs
        return []
    return sorted(p.name for p in directory.iterdir() if (p / "manifest.json").is_file())


def resolve_run(run: str | os.PathLike) -> Path:
    """A run directory from a path, or from the name of a shipped run such as ``markov-k3``."""
    if not isinstance(run, (str, os.PathLike)):
        raise CheckpointError(f"a run is a folder or a shipped run's name, got {quoted(run)}")
    if os.fspath(run) == "":  # Path("") would be the current folder
        raise CheckpointError("an empty path names no place: give a run folder or a shipped run's name")
    path = Path(run)
    if path.is_dir():
        return path
    directory = shipped_runs_dir()
    if directory is not None and os.sep not in str(run) and str(run) in shipped_run_names():
        # the folder where its files lie: an editable install (make's) links each of them from the repository's
        # checkpoints/, and a run's files are read as its own, never through a link
        return (directory / str(run) / "manifest.json").resolve().parent
    shipped = ", ".join(shipped_run_names()) or "none"
    raise CheckpointError(f"no run directory or shipped run named {quoted(str(run))} (shipped runs: {shipped})")
