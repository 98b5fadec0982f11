"""The recipes on ICL-MC (Edelman et al. 2024): the attention-only transformer with its architecture open to
change (:class:`MarkovRecipe`), and the minimal model of eq. 6 trained by SGD (:class:`MinimalRecipe`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

import induction_probes.circuits.models.minimal as minimal
from induction_probes.circuits.config import nested, option
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.recipes.clamps import CLAMP_LAYERS, clamp_hooks
from induction_probes.circuits.recipes.recipe import SCHEDULES, Recipe, int_tuple, name_tuple
from induction_probes.circuits.recipes.transformer import TransformerRecipe
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.validation import quoted, require_int, require_positive

if TYPE_CHECKING:
    from torch import Tensor, nn

    from induction_probes.circuits.models.tl_hooks import HookSpec


def check_schedule(task: MarkovTask, sequences: int) -> None:
    """A curriculum that ends before the run's ``sequences`` do: else the run never sees the task's own prior."""
    if task.schedule is not None and task.schedule[1] >= sequences:
        raise BadInput(
            f"the curriculum's {task.schedule[1]} sequences must be fewer than the run's "
            f"steps x batch_size = {sequences}"
        )


@dataclass(frozen=True, kw_only=True)
class MarkovRecipe(TransformerRecipe):
    """The ICL-MC transformer. Defaults: the paper's model (2 layers, 1 head each, learned relative
    positions, width 16, no MLP, AdamW β = (0.9, 0.95), weight decay 0.1 on the linear maps, batch 64,
    T = 100); pre-LayerNorm, lr 1e-3 with cosine decay and no dropout were measured to show the phases
    best on a 2-core CPU (README, "Training on ICL-MC")."""

    task: MarkovTask = nested(MarkovTask)
    heads: tuple[int, ...] | None = option(
        None, "heads per layer, e.g. 2,1 (default: n-1 in the first layer, one in each later layer)", type=int_tuple
    )
    clamp: tuple[str, ...] | None = option(
        None,
        "attention fixed to the ideal circuit's while training: previous-token (layer 0), induction "
        "(layer 1) or previous-token,induction",
        type=name_tuple,
    )
    clamp_from: int = option(0, "the step from which the clamp applies")

    name: ClassVar[str] = "markov"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_clamp()
        check_schedule(self.task, self.steps * self.batch_size)

    def vocabulary(self) -> int:
        return self.task.k

    def default_heads(self) -> tuple[int, ...]:
        return (max(self.task.n - 1, 1),) + (1,) * (self.n_layers - 1)  # one first-layer head per look-back

    def check_clamp(self) -> None:
        require_int("clamp_from", self.clamp_from, 0)
        if not self.clamp:
            if self.clamp_from:
                raise BadInput("clamp_from needs a clamp")
            return
        for name in self.clamp:
            if name not in CLAMP_LAYERS:
                raise BadInput(f"clamp must be previous-token, induction or both, got {quoted(name)}")
            layer = CLAMP_LAYERS[name]
            if layer >= self.n_layers or self.model_config().layer_mask(layer) != "causal":
                raise BadInput(f"the {name} clamp needs a layer {layer} with the causal mask")
        if "induction" in self.clamp and self.task.n != 2:
            raise BadInput(f"the induction clamp is the bigram circuit's: it needs n = 2, not {self.task.n}")
        if len(set(self.clamp)) < len(self.clamp) or self.clamp_from >= self.steps:
            raise BadInput("clamp names must not repeat, and clamp_from must be below steps")

    def training_hooks(self, inputs: Tensor, step: int) -> list[HookSpec]:
        if not self.clamp or step < self.clamp_from:
            return []

        return clamp_hooks(self.clamp, inputs)


@dataclass(frozen=True, kw_only=True)
class MinimalRecipe(Recipe):
    """Edelman et al.'s minimal model (eq. 6) on bigram chains, by plain SGD with its own rate for the
    positional vector v, as in the authors' code (W 1e-2, v 1.0)."""

    task: MarkovTask = nested(MarkovTask)
    first_layer: str = option("softmax", "softmax over v, or linear (eq. 6 as written)", choices=("softmax", "linear"))
    steps: int = option(1000, "SGD steps")
    batch_size: int = option(128, "sequences per step")
    lr: float = option(0.01, "SGD rate of W")
    lr_v: float = option(1.0, "SGD rate of v")
    lr_schedule: str = option("constant", "cosine decay to 0 or constant", choices=SCHEDULES)

    name: ClassVar[str] = "minimal"

    def __post_init__(self) -> None:
        require_positive("lr_v", self.lr_v)
        if self.task.n != 2:
            raise BadInput("the minimal model is for bigram chains: n must be 2")
        super().__post_init__()
        check_schedule(self.task, self.steps * self.batch_size)

    def model_config(self) -> minimal.MinimalConfig:
        return minimal.MinimalConfig(d_vocab=self.task.k, n_ctx=self.task.seq_len, first_layer=self.first_layer)

    def make_optimizer(self, model: nn.Module) -> tuple[torch.optim.Optimizer, list[float]]:
        groups = [{"params": [model.W], "lr": self.lr}, {"params": [model.v], "lr": self.lr_v}]
        return torch.optim.SGD(groups), [self.lr, self.lr_v]
