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

**The driver's death.** A worker stops (SIGTERM) when the driver that started it dies, however it dies: a thread
waits on the pipe multiprocessing keeps open from the driver to each worker, which the kernel closes with the
driver. So a killed sweep leaves no worker training on and holding its cell's lock: the next run resumes the cell
instead of finding it busy.

**Starting fast.** Workers are forked from a fork server that has imported torch and TransformerLens once
(:func:`worker_context`): a worker then starts in milliseconds, where a spawned one spends seconds importing them.
Only third-party modules are preloaded; ours are imported in each worker, after the steps above. The server
reads its environment once, when it starts (torch reads its CPU settings at import), so it is started afresh
whenever the environment differs from the one it started in: a worker computes as a spawned one would.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, cast


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


PRELOADED = ["torch", "transformer_lens"]  # what every cell imports, seconds of it; none of ours
UNREAD = {"PYTEST_CURRENT_TEST"}  # rewritten by pytest at every test phase; no worker reads it
_server_environment: dict[str, str] | None = None  # the environment the running fork server started in


def read_environment() -> dict[str, str]:
    """The environment a worker may read: all of it but :data:`UNREAD`."""
    return {name: value for name, value in os.environ.items() if name not in UNREAD}


def worker_context():
    """The pools' multiprocessing context: the fork server, preloaded with :data:`PRELOADED`, stopped first
    if it started in another environment than this one (plugins, ``PYTHONPATH``, torch's settings) or was
    started by someone else. Call it in :func:`safe_children`'s block: the server starts with the workers."""
    global _server_environment
    if _server_environment != read_environment():
        stop_fork_server()
    _server_environment = read_environment()
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOADED)
    return context


class ForkServerState(Protocol):
    """The private names of CPython's ``multiprocessing.forkserver.ForkServer`` that :func:`stop_fork_server` reads."""

    _forkserver_pid: int | None

    def _stop(self) -> None: ...


def stop_fork_server() -> None:
    """Stop this process's fork server where one runs. multiprocessing has no public way to restart it, so this is
    the one place that reads CPython's private names (``multiprocessing.forkserver._forkserver``, its
    ``_forkserver_pid`` and ``_stop``); tests/unit/test_fork_server.py fails, naming them, if a Python renames them."""
    server = cast("ForkServerState", multiprocessing.forkserver._forkserver)  # typeshed leaves out private names
    if server._forkserver_pid is not None:
        server._stop()


def start_worker() -> None:
    """A local worker's first act (its pool's initializer): no current folder on its path, and its death
    with the driver."""
    drop_current_folder()
    die_with_driver()


def die_with_driver() -> None:
    """SIGTERM to this worker once the driver is gone: a daemon thread waits on multiprocessing's pipe from
    the driver, which is closed when the driver dies (already closed if it died first)."""
    driver = multiprocessing.parent_process()
    if driver is None:  # not a child of multiprocessing: no driver to outlive
        return

    def wait_then_stop() -> None:
        driver.join()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait_then_stop, name="die-with-driver", daemon=True).start()
