"""Argument checks shared by the API and the CLI.

Every check raises ``ValueError`` with one readable sentence; the CLI prints that sentence on one
line and exits with status 2, so the API and the command line always say the same thing.
"""

from __future__ import annotations

import math
import numbers
import re

from induction_probes.circuits.errors import BadInput

QUOTE_LIMIT = 200  # characters of a value that one error message quotes


class IncompleteResult(RuntimeError):
    """A request that ran but could not do all it was asked, through no fault of its input (a sweep's failed
    cells): the command line says it in one line, with status 1."""


# C0 controls but newline and tab, DEL, C1 controls, and the bidirectional overrides and isolates
UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` as a terminal may show it: every control character that could move the cursor, clear the screen,
    set the title or write the clipboard (ESC, CSI, OSC, ...) and every bidirectional override written as its
    ``\\uXXXX`` escape, which is also a valid escape inside JSON strings. Newlines and tabs stay. Everything the
    command line prints, on stdout and stderr, goes through here: a stranger's config or tensor name may hold
    such bytes."""
    return UNPRINTABLE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def shortened(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` as a message may quote it: whole up to ``limit`` characters, else its start and its length."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` as a message may quote it (:func:`shortened`): how every refusal quotes a value that
    came from a stranger's file or from an argument."""
    if isinstance(value, str) and len(value) > limit:  # not the repr of all 30 MB, only of what is shown
        return f"{repr(value[:limit])[:limit]}... ({len(value):,} characters)"
    try:
        return shortened(repr(value), limit)
    except ValueError:  # an integer with more digits than Python turns into text
        return f"an integer of {value.bit_length():,} bits" if isinstance(value, int) else "a value too long to show"
    except RecursionError:
        return f"a {type(value).__name__} nested too deeply to show"


def require_int(name: str, value: object, minimum: int) -> int:
    """``value`` as an int, if it is an integer (not a bool, not 2.5) and at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise BadInput(f"{name} must be an integer, got {quoted(value)}")
    if value < minimum:
        raise BadInput(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def require_positive(name: str, value: object) -> float:
    """``value`` as a float, if it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise BadInput(f"{name} must be a number, got {quoted(value)}")
    if not math.isfinite(value) or value <= 0:
        raise BadInput(f"{name} must be a finite number > 0, got {value}")
    return float(value)
