"""Progress of long language-model work on stderr: which checkpoint, which head, and the time left.

A bar shows only where someone watches: it is off with ``enabled=False`` (the command line's ``--quiet``) and
when stderr is neither a terminal nor a notebook's (a log, a pipe, a test), so that logs stay as they were;
stdout, where ``--json`` goes, never carries one.
Bars count sequences through a pass, heads ablated or checkpoints probed; inner bars close when done."""

from __future__ import annotations

import sys

from tqdm.auto import tqdm


def progress_bar(
    total: int | None, description: str, enabled: bool = True, unit: str = "seq", leave: bool = False
) -> tqdm:
    """A tqdm bar on stderr, shown only when ``enabled`` and stderr is a terminal or a notebook's; ``total``: the
    count it reaches (None where it is not known, as for a generator of checkpoints)."""
    shown = enabled and (sys.stderr.isatty() or in_notebook())
    return tqdm(total=total, desc=description, unit=unit, leave=leave, disable=not shown, file=sys.stderr)


def in_notebook() -> bool:
    """Whether this process is a running notebook kernel (a program may import IPython's kernel without being one)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return shell is not None and hasattr(shell, "kernel")
