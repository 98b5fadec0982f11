"""Behaviour over training: which in-context strategy a model is closest to, and when that changes.

Read from a run's ``metrics.jsonl`` (KL(strategy ‖ model) at the last token, one entry per checkpoint),
so it costs nothing to run across a whole training run.
"""

from __future__ import annotations

from dataclasses import dataclass

from circuits.tasks.markov import closest_strategy


@dataclass(frozen=True)
class Phase:
    """A stretch of checkpoints over which the model stays closest to one strategy."""

    strategy: str
    first_step: int
    last_step: int
    first_sequences: int
    last_sequences: int


def strategy_phases(metrics: list[dict]) -> list[Phase]:
    """Consecutive checkpoints grouped by their closest strategy, in training order.

    A new phase starts at every checkpoint whose closest strategy differs from the previous one, so
    the phase-transition steps are ``[p.first_step for p in phases[1:]]``.
    """
    phases: list[Phase] = []
    for entry in metrics:
        strategy = closest_strategy(entry["last_token_kl"])
        step, seen = entry["step"], entry["sequences_seen"]
        if phases and phases[-1].strategy == strategy:
            last = phases[-1]
            phases[-1] = Phase(strategy, last.first_step, step, last.first_sequences, seen)
        else:
            phases.append(Phase(strategy, step, step, seen, seen))
    return phases
