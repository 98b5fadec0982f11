"""What every minibatch recipe has (:class:`Recipe`: a task, a schedule, seeds, an evaluation set), and the
command-line parsers of its per-layer options.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from induction_probes.circuits.config import Config, option, option_names
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import (
    MAX_CHECKPOINTS,
    MAX_STEPS,
    require_at_most,
    require_seed,
    require_sequences,
)
from induction_probes.circuits.tasks.task_config import TaskConfig
from induction_probes.circuits.validation import quoted, require_int, require_positive

if TYPE_CHECKING:
    from torch import Tensor, nn

    from induction_probes.circuits.models.tl_hooks import HookSpec

SCHEDULES = ("cosine", "constant")


POSITIONALS = ("relative", "alibi", "none", "standard")


def int_tuple(text: str) -> tuple[int, ...]:
    """'2,1' → (2, 1), for per-layer counts on the command line."""
    try:
        return tuple(int(item) for item in text.split(","))
    except ValueError:
        raise BadInput(f"expected integers separated by commas, e.g. 2,1; got {quoted(text)}") from None


def name_tuple(text: str) -> tuple[str, ...]:
    """'previous-token,induction' → ('previous-token', 'induction')."""
    return tuple(item.strip() for item in text.split(","))


def one_or_per_layer(text: str) -> str | tuple[str, ...]:
    """'relative' (every layer) or 'relative,none' (one per layer)."""
    items = tuple(item.strip() for item in text.split(","))
    return items[0] if len(items) == 1 else items


SEED_FIELDS = ("model_seed", "data_seed", "eval_seed")  # what one seed S sets, to S, S+1, S+2


def seeds_from(seed: int, recipe_class: type) -> dict[str, int]:
    """The seed fields of ``recipe_class`` set from one seed S (``train --seed S``, a sweep's seed S): S, S+1,
    S+2 in the order of :data:`SEED_FIELDS`, those it has (the toy model has no eval seed)."""
    names = option_names(recipe_class)
    return {name: seed + offset for offset, name in enumerate(SEED_FIELDS) if name in names}


@dataclass(frozen=True, kw_only=True)
class Recipe(Config):
    """What every minibatch recipe has: a task, a schedule, three seeds and a fixed evaluation set.

    Three seeds are kept apart: ``model_seed`` (initial weights and dropout), ``data_seed`` (training
    sequences) and ``eval_seed`` (the evaluation set). Same recipe ⇒ byte-identical run files.
    """

    task: TaskConfig
    steps: int = option(4000, "optimiser steps")
    batch_size: int = option(64, "sequences per step")
    lr: float = option(1e-3, "learning rate")
    lr_schedule: str = option("cosine", "cosine decay to 0 or constant", choices=SCHEDULES)
    schedule_steps: int | None = option(
        None,
        "steps the cosine decay spans, at least steps (default: steps); a shorter run keeps a longer one's rates",
        unwritten_when_none=True,
    )
    model_seed: int = option(0, "initial weights and dropout")
    data_seed: int = option(1, "training sequences")
    eval_seed: int = option(2, "the fixed evaluation set")
    eval_seqs: int = option(2000, "evaluation sequences")
    n_checkpoints: int = option(150, "checkpoints on the schedule")

    name: ClassVar[str]

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_seqs", "n_checkpoints"):
            require_int(name, getattr(self, name), 1)
        for name in SEED_FIELDS:
            require_seed(name, getattr(self, name))
        require_positive("lr", self.lr)
        if self.lr_schedule not in SCHEDULES:
            raise BadInput(f"lr_schedule must be cosine or constant, got {quoted(self.lr_schedule)}")
        require_at_most("steps", self.steps, MAX_STEPS)
        self.check_schedule_steps()
        require_at_most("n_checkpoints", self.n_checkpoints, MAX_CHECKPOINTS)
        model = self.model_config()  # the architecture's own checks and sizes, before anything is written
        per_sequence = max(self.task.numbers_per_sequence(), model.numbers_per_sequence())
        for name in ("batch_size", "eval_seqs"):
            require_sequences(name, getattr(self, name), per_sequence)

    def check_schedule_steps(self) -> None:
        """``schedule_steps`` spans the cosine decay: set, it is at least ``steps`` (shorter, the rate would
        reach 0 and the run train on at 0) and only with the cosine schedule (a constant rate has no span)."""
        if self.schedule_steps is None:
            return
        require_int("schedule_steps", self.schedule_steps, 1)
        require_at_most("schedule_steps", self.schedule_steps, MAX_STEPS)
        if self.lr_schedule != "cosine":
            raise BadInput(f"schedule_steps spans a cosine decay: lr_schedule is {quoted(self.lr_schedule)}")
        if self.schedule_steps < self.steps:
            raise BadInput(
                f"schedule_steps {self.schedule_steps} is less than steps {self.steps}: the rate would reach 0 at "
                f"step {self.schedule_steps} and the run train on at 0"
            )

    def lr_factor(self, step: int) -> float:
        """Each group's rate for the update after ``step`` steps, as a fraction of its base rate:
        constant, or a cosine down to 0 over ``schedule_steps`` (``steps`` unless set), which lets the loss
        settle at the end instead of hovering at the noise level of a constant rate."""
        if self.lr_schedule == "constant":
            return 1.0
        return 0.5 * (1.0 + math.cos(math.pi * step / (self.schedule_steps or self.steps)))

    def model_config(self) -> Any:
        raise NotImplementedError

    def training_hooks(self, inputs: Tensor, step: int) -> list[HookSpec]:
        """Forward hooks of every training and evaluation pass after ``step`` steps (none by default)."""
        return []

    def make_optimizer(self, model: nn.Module) -> tuple[Any, list[float]]:
        """The optimiser and the base rate of each of its parameter groups, in order."""
        raise NotImplementedError
