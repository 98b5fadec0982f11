"""The one writer of a run: ``<run>/lock``, held with ``flock`` while a trainer writes the run.

The kernel releases a ``flock`` when its process dies, however it dies, so a killed trainer leaves no lock that
keeps the next one out: the next trainer takes it and resumes. So that it can say so, the holder writes its
process id into the file and empties it when it stops on its own (finished, interrupted, failed); a process id
found there by the next holder is a trainer that was killed while it held the run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from induction_probes.circuits.runs.layout import LOCK_FILE
from induction_probes.circuits.untrusted import CheckpointError, lock_or_refuse, open_for_writing

HOLDER_BYTES = 32  # a process id and a newline; a longer content is not ours and is not read


class RunLocked(CheckpointError):
    """Another process holds the run's lock: it is training that run now."""


@contextmanager
def only_writer(out: Path) -> Iterator[None]:
    """Hold ``out/lock`` while training, so that a second trainer on the same directory stops at once
    instead of interleaving its files with ours. The lock dies with its process (module docstring); taking
    over a killed trainer's says so on stderr."""
    out.mkdir(parents=True, exist_ok=True)
    # a link planted at the lock's name is refused, not locked through; a pipe or folder there, not waited on
    descriptor = open_for_writing(out / LOCK_FILE, os.O_RDWR | os.O_CREAT)
    with os.fdopen(descriptor, "r+b") as handle:
        lock_or_refuse(
            handle, RunLocked(f"another trainer is writing {out}; wait for it to finish or choose another --out")
        )
        holder = handle.read(HOLDER_BYTES).strip()
        if holder.isdigit():
            print(f"note: {out}: {takeover_note(int(holder))}; taking over its lock", file=sys.stderr)
        record(handle, f"{os.getpid()}\n".encode())
        try:
            yield
        finally:
            record(handle, b"")  # stopped on its own: nothing for the next holder to report


def takeover_note(pid: int) -> str:
    """What a process id left in the lock says: a trainer that was killed, unless that process is alive, in which
    case it does not hold the lock (we do) and is no trainer of this run (a reused id, or a number written by
    hand)."""
    try:
        os.kill(pid, 0)  # signal 0: only whether the process exists
    except ProcessLookupError:
        return f"its last trainer (process {pid}) was killed"
    except (PermissionError, OverflowError, ValueError):  # alive but another user's, or no possible process id
        pass
    return f"its lock names process {pid}, which holds no lock on it: a stale or hand-written entry"


def record(handle, content: bytes) -> None:
    """``content`` in place of the lock file's, flushed at once: a kill right after must find it there."""
    handle.seek(0)
    handle.truncate()
    handle.write(content)
    handle.flush()
