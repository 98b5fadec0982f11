"""What a worker process may import and how long it may live: only our code and the user's declared plugins
(``INDUCTION_PROBES_PLUGINS``, ``PYTHONPATH``), never a module that happens to sit in the folder the sweep was
started from, and never longer than the driver that started it.

**The current folder.** A spawned worker starts as ``python -c ...``, and ``-c`` puts the current folder first
on ``sys.path``: a ``pickle.py`` or ``torch.py`` there would run in every worker (and in multiprocessing's
resource tracker) before any of our code. :func:`safe_children` starts them with ``PYTHONSAFEPATH`` set (Python
3.11's ``-P``: no current folder, no empty entry; unlike ``-I`` it keeps ``PYTHONPATH``, which documented
plugins use). Ray adds the driver's folder to its workers' ``sys.path`` unless the job has a working directory:
:func:`empty_working_dir` gives it an empty one. :func:`drop_current_folder` removes what is left before a
worker imports a plugin.

**The driver's death.** A worker asks Linux to send it SIGTERM when the process that spawned it dies
(``PR_SET_PDEATHSIG``), so a killed sweep leaves no worker training on and holding its cell's lock: the next run
resumes the cell instead of finding it busy.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@contextmanager
def safe_children() -> Iterator[None]:
    """Processes started in the block (multiprocessing's spawned workers, its resource tracker) run with
    ``PYTHONSAFEPATH``: the current folder is not on their ``sys.path``. The variable is restored after."""
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = before


@contextmanager
def empty_working_dir() -> Iterator[str]:
    """An empty folder for Ray's ``runtime_env`` working directory, removed after: with one, Ray does not put
    the driver's current folder (or its script's folder) on its workers' ``sys.path``."""
    with tempfile.TemporaryDirectory(prefix="induction-probes-ray-") as folder:
        yield folder


def declared_paths() -> list[str]:
    """The folders ``PYTHONPATH`` names, made absolute: the user's declared place for plugins (``PYTHONPATH=.``
    declares the current folder, and it stays)."""
    return [os.path.abspath(entry) for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]


def drop_current_folder() -> None:
    """Remove the implicit current folder from ``sys.path``: the empty entry, and ``'.'`` or the folder's own
    path unless ``PYTHONPATH`` declares it."""
    here, declared = os.getcwd(), set(declared_paths())
    sys.path[:] = [
        entry
        for entry in sys.path
        if entry != "" and (os.path.abspath(entry) != here or os.path.abspath(entry) in declared)
    ]


def start_worker(parent: int) -> None:
    """A local worker's first act (its pool's initializer): no current folder on its path, and its death
    with ``parent``, the driver's process id."""
    drop_current_folder()
    die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """SIGTERM to this process when its parent dies (Linux; elsewhere the pool's own shutdown has to do). The
    parent may have died before the request: checked after it."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)
