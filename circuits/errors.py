"""The one exception class for bad input: what a user gave (an argument, a spec, a file in a folder) that cannot
be used as it is. The command line turns it, and only it (with its subclasses), into one line and status 2; any
other exception is a bug of ours, status 1, with its traceback kept (induction_probes.cli). A ValueError, so
that callers of the Python API that catch ValueError keep working."""

from __future__ import annotations

import json
import tempfile
import tomllib
import traceback


class BadInput(ValueError):
    """Input that cannot be used as it is; the message says what and why, in one line."""


# What the command line reports as bad input: the project's class, and the decoders' errors on a file the user
# named (JSON, TOML, UTF-8), which carry the file's own fault
BAD_INPUT = (BadInput, json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeError)


def bug_report(error: BaseException) -> str:
    """A bug's one line: its type and first line, and the file its whole traceback was written to."""
    with tempfile.NamedTemporaryFile("w", prefix="induction-probes-", suffix=".traceback", delete=False) as log:
        traceback.print_exception(error, file=log)
    first = (str(error).splitlines() or [""])[0][:300]
    return f"{type(error).__name__}: {first}; the traceback is in {log.name}"
