"""Behaviour probes: per-position loss and KL to the truth and to each strategy, the ICL score, the
closest strategy, and the phases of a run (read from its ``metrics.jsonl`` at no cost)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from circuits.tasks.markov import MarkovEvalSet, closest_strategy


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
    """Every behaviour probe from one forward pass's logits on ``eval_set.sample.inputs``."""
    per_position_loss, per_position_kl = eval_set.per_position(logits)
    last = {name: kl[-1].item() for name, kl in per_position_kl.items()}
    return Behaviour(
        loss=per_position_loss.mean().item(),
        per_position_loss=per_position_loss,
        per_position_kl=per_position_kl,
        last_token_kl=last,
        icl_score=icl_score(per_position_loss, early, late),
        closest_strategy=closest_strategy(last),
    )


# --- the toy model's four phases -------------------------------------------------------------------


@dataclass(frozen=True)
class ToyPhases:
    """Phase boundaries (steps) read from the loss parts of a toy run.

    I ends when the 4-gram loss has lost 95% of its initial value; the plateau (II) lasts until the
    induction loss falls below half its level at that moment (the middle of the abrupt drop); III (the
    emergence of the induction head) ends when it is below 5% of that level; IV is the rest.
    """

    end_of_I: int
    end_of_II: int
    end_of_III: int

    @property
    def plateau(self) -> int:
        return self.end_of_II - self.end_of_I


def toy_phases(history: list[dict]) -> ToyPhases:
    first = history[0]["loss_4gram"]
    end_i = next((h for h in history if h["loss_4gram"] <= 0.05 * first), None)
    if end_i is None:
        raise ValueError("the 4-gram loss never fell by 95%: train longer (phase I did not end)")
    level = end_i["loss_induction"]
    later = [h for h in history if h["step"] >= end_i["step"]]
    end_ii = next((h for h in later if h["loss_induction"] < 0.5 * level), None)
    end_iii = next((h for h in later if h["loss_induction"] < 0.05 * level), None)
    if end_ii is None or end_iii is None:
        raise ValueError("the induction loss never dropped: train longer (the plateau did not end)")
    return ToyPhases(end_i["step"], end_ii["step"], end_iii["step"])


def fit_plateau(rows: list[tuple[int, float, int]]) -> tuple[float, float, float]:
    """Least-squares fit of plateau length ≈ a·L·log(1/σ) + b over (L, σ, plateau) rows: (a, b, R²)."""
    x = torch.tensor([length * math.log(1 / sigma) for length, sigma, _ in rows], dtype=torch.float64)
    y = torch.tensor([plateau for _, _, plateau in rows], dtype=torch.float64)
    slope = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
    intercept = y.mean() - slope * x.mean()
    residual = ((y - slope * x - intercept) ** 2).sum()
    r2 = 1 - residual / ((y - y.mean()) ** 2).sum()
    return slope.item(), intercept.item(), r2.item()
