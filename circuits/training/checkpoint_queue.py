"""Checkpoints evaluated and written on a spare core while training goes on.

An evaluation of the default ICL-MC run (2,000 sequences of 100 tokens) costs about nine training steps, so a run of
400 steps with 40 checkpoints, evaluated in turn, took 1.76 times as long as one with 2 (bench/bench_eval_cost.py).
Training one of our small models keeps one core busy (:mod:`~induction_probes.circuits.threads`); where the machine
has another, the trainer takes each checkpoint as a copy of the weights and of the resume state and hands it to one
worker thread, which evaluates and writes the checkpoints in order while the next steps train. Torch releases
Python's lock inside its operations, so the two threads compute at once. The run's files are the same bytes either
way: the worker runs the same operations on the same numbers, on one thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")

# Bytes of copies that may wait for the worker. The log-spaced early checkpoints come every few steps, faster than
# evaluations finish (the default ICL-MC run takes 13 in its first 20 steps, each evaluation about nine steps long):
# they wait, and the worker catches up over the evenly spaced ones. A default run's copy is 14 KiB; beyond this
# bound the trainer waits, so that a larger model's copies never pile up in memory.
WAITING_BYTES = 256 << 20


class CheckpointQueue(Generic[Item]):
    """Items written in the order they were put, by one worker thread, with ``write``. A write that fails stops every
    later one (as a failed checkpoint stops training), and its error is raised in the trainer's thread at the next
    :meth:`put` or at :meth:`finish`."""

    def __init__(self, write: Callable[[Item], dict[str, Any]], max_waiting: int):
        self._write, self._max_waiting = write, max_waiting
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoints")
        self._pending: deque[Future[dict[str, Any] | None]] = deque()
        self._failed = False
        self.latest: dict[str, Any] | None = None  # the metrics of the last checkpoint written

    def put(self, item: Item) -> dict[str, Any] | None:
        """Queue ``item``, first waiting while ``max_waiting`` items wait; the last written item's metrics."""
        while self._pending and (self._pending[0].done() or len(self._pending) >= self._max_waiting):
            self._collect()
        self._pending.append(self._worker.submit(self._write_unless_failed, item))
        return self.latest

    def finish(self) -> dict[str, Any] | None:
        """Wait until every queued item is written and stop the worker; the last metrics. Interrupted (a second
        Ctrl-C), it drops the items not yet begun; the one being written finishes, by a rename, before the process
        exits."""
        try:
            while self._pending:
                self._collect()
        except BaseException:
            self._worker.shutdown(wait=False, cancel_futures=True)
            raise
        self._worker.shutdown(wait=True)
        return self.latest

    def _collect(self) -> None:
        metrics = self._pending.popleft().result()  # the worker's error, raised here
        if metrics is not None:
            self.latest = metrics

    def _write_unless_failed(self, item: Item) -> dict[str, Any] | None:
        if self._failed:
            return None
        try:
            return self._write(item)
        except BaseException:
            self._failed = True
            raise
