"""Behaviour probes: per-position loss and KL to the truth and to each strategy, the ICL score, the
closest strategy, and the phases of a run (read from its ``metrics.jsonl`` at no cost)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import Tensor

from induction_probes.circuits.tasks.markov import MarkovEvalSet, closest_strategy


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


def plateau_step(phases: list[Phase], steps: list[int]) -> int:
    """The step of ``steps`` nearest the middle of the plateau: the phase the model leaves at its last
    transition (the only phase when there was none). There the circuit is half built, so a figure of
    step 0, this step and the last shows it forming, where a middle index can land after the transition."""
    plateau = phases[-2] if len(phases) > 1 else phases[0]
    middle = (plateau.first_step + plateau.last_step) / 2
    return min(steps, key=lambda step: abs(step - middle))


def illustrative_steps(phases: list[Phase], steps: list[int]) -> list[int]:
    """First, plateau and last of ``steps`` (fewer when they coincide), for figures at a few checkpoints."""
    return sorted({steps[0], plateau_step(phases, steps), steps[-1]})


def log_spread_steps(sequences_by_step: dict[int, int], n: int = 12) -> set[int]:
    """About ``n`` steps evenly spread in log sequences seen, the first and last included (one: the last;
    step 0 has seen none and is left out)."""
    seen = {step: n_seen for step, n_seen in sequences_by_step.items() if n_seen > 0}
    if not seen or n < 1:
        return set()
    low, high = math.log(min(seen.values())), math.log(max(seen.values()))
    grid = [low + (high - low) * i / (n - 1) for i in range(n)] if n > 1 else [high]
    return {min(seen, key=lambda step: abs(math.log(seen[step]) - point)) for point in grid}


# --- behaviour of one model on an evaluation set -------------------------------------------------

ICL_EARLY, ICL_LATE = 10, -1  # input positions (0-indexed) compared by the ICL score


@dataclass(frozen=True)
class Behaviour:
    """How a model predicts on an ICL-MC evaluation set, position by position.

    ``per_position_kl[s][t]`` is KL(s ‖ model) at input position t, averaged over sequences, for s =
    "true" (the sequence's own chain) and each strategy. ``icl_score`` is the loss at position
    ``late`` minus the loss at ``early`` (Olsson et al.'s in-context learning score; negative when the
    model uses its context). Use ``last_token_kl["true"]`` to compare with the paper's test loss and
    ``closest_strategy`` to place a model in a phase.
    """

    loss: float
    per_position_loss: Tensor
    per_position_kl: dict[str, Tensor]
    last_token_kl: dict[str, float]
    icl_score: float
    closest_strategy: str


def icl_score(per_position_loss: Tensor, early: int = ICL_EARLY, late: int = ICL_LATE) -> float:
    """Loss at position ``late`` minus loss at position ``early`` (0-indexed input positions)."""
    n_pos = per_position_loss.shape[0]
    for name, position in (("early", early), ("late", late)):
        if not -n_pos <= position < n_pos:
            raise ValueError(f"ICL {name} position {position} is outside 0..{n_pos - 1}")
    return (per_position_loss[late] - per_position_loss[early]).item()


def behaviour(logits: Tensor, eval_set: MarkovEvalSet, early: int = ICL_EARLY, late: int = ICL_LATE) -> Behaviour:
    """Every behaviour probe from one forward pass's logits on ``eval_set.sample.inputs``. On sequences
    too short for the early position, the ICL score compares the middle position instead (on 8 tokens:
    position 3), so that a short run is probed, not refused."""
    per_position_loss, per_position_kl = eval_set.per_position(logits)
    early = min(early, per_position_loss.shape[0] // 2) if early >= 0 else early
    last = {name: kl[-1].item() for name, kl in per_position_kl.items()}
    return Behaviour(
        loss=per_position_loss.mean().item(),
        per_position_loss=per_position_loss,
        per_position_kl=per_position_kl,
        last_token_kl=last,
        icl_score=icl_score(per_position_loss, early, late),
        closest_strategy=closest_strategy(last),
    )
