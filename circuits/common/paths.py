"""How a path is written into a file that may be shipped: never as this machine's absolute path."""

from __future__ import annotations

import os
from pathlib import Path


def portable(path: str | os.PathLike) -> str:
    """``path`` relative to the working directory where it lies inside it, else its last component (a run's
    or a sweep's name): what a JSON answer records instead of an absolute path of this machine."""
    path = Path(path)
    resolved, here = path.resolve(), Path.cwd().resolve()
    return resolved.relative_to(here).as_posix() if resolved.is_relative_to(here) else path.name
