"""Stopping a training run cleanly: Ctrl-C ends it after the step in progress, with everything saved."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during training, raised once the run is saved at the last finished step."""

    def __init__(self, step: int, out: Path):
        super().__init__(
            f"interrupted at step {step}; the run in {out} is saved up to there: continue it with --resume"
        )
        self.step, self.out = step, out


@contextmanager
def interrupts_between_steps():
    """While training, Ctrl-C (SIGINT) only raises a flag that the loop reads after each finished step, so
    that the run stops with its resume state saved instead of losing the work since the last checkpoint.
    A second Ctrl-C interrupts at once (every file on disk is still whole: each is written by a rename).
    Signals reach the main thread only: elsewhere (a sweep's worker thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    interrupted = []
    previous = signal.getsignal(signal.SIGINT)
    previous = signal.default_int_handler if previous is None else previous

    def note(signum, frame) -> None:
        interrupted.append(signum)
        signal.signal(signal.SIGINT, previous)

    signal.signal(signal.SIGINT, note)
    try:
        yield lambda: bool(interrupted)
    finally:
        signal.signal(signal.SIGINT, previous)
