"""How a path is written into a file that may be shipped: never as this machine's absolute path; and how the API
takes a folder to write into."""

from __future__ import annotations

import os
from pathlib import Path

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.validation import quoted


def portable(path: str | os.PathLike) -> str:
    """``path`` relative to the working directory where it lies inside it, else its last component (a run's
    or a sweep's name): what a JSON answer records instead of an absolute path of this machine."""
    path = Path(path)
    resolved, here = path.resolve(), Path.cwd().resolve()
    return resolved.relative_to(here).as_posix() if resolved.is_relative_to(here) else path.name


def path_argument(name: str, value: object) -> Path:
    """A path argument of the API as a Path: a str is taken as a path, as the command line takes its text. An
    empty one names no place (``Path("")`` would be the current folder, where files would land unasked)."""
    if not isinstance(value, (str, os.PathLike)):
        raise BadInput(f"{name} must be a folder (a str or a Path), got {quoted(value)}")
    if os.fspath(value) == "":
        raise BadInput(f"{name}: an empty path names no place")
    return Path(value)


def plot_folder(plot: object) -> Path | None:
    """The ``plot`` argument of the report's views: None (no figures), or the folder to draw them into."""
    return None if plot is None else path_argument("plot", plot)
