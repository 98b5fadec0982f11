"""Argument checks shared by the API and the CLI.

Every check raises ``ValueError`` with one readable sentence; the CLI prints that sentence on one
line and exits with status 2, so the API and the command line always say the same thing.
"""

from __future__ import annotations

import math
import numbers


def require_int(name: str, value: object, minimum: int) -> int:
    """``value`` as an int, if it is an integer (not a bool, not 2.5) and at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def require_positive(name: str, value: object) -> float:
    """``value`` as a float, if it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return float(value)
