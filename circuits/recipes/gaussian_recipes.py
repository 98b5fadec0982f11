"""The recipes on Wang et al.'s Gaussian induction task: the two-layer model (:class:`GaussianRecipe`) and the
six-parameter toy model of §5 trained by full-batch gradient descent (:class:`ToyRecipe`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

import induction_probes.circuits.models.model_config as model_configs
import induction_probes.circuits.models.toy_model as toy
from induction_probes.circuits.config import Config, nested, option
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import (
    MAX_PARAMETERS,
    MAX_STEPS,
    require_at_most,
    require_seed,
    require_sequences,
)
from induction_probes.circuits.recipes.recipe import Recipe
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.validation import quoted, require_int, require_positive

if TYPE_CHECKING:
    from torch import nn


@dataclass(frozen=True, kw_only=True)
class GaussianRecipe(Recipe):
    """The Gaussian induction task. Defaults follow a measured prototype: width 8, ALiBi in layer 0
    only, strict masks, layer-1 keys from s = n on (the target's support), Adam with a 10× larger rate
    for the ALiBi slopes, batch 512."""

    task: GaussianTask = nested(GaussianTask, has_default=True)
    heads: int = option(1, "first-layer heads")
    d_model: int = option(8, "residual width")
    optimizer: str = option("adam", "adam or sgd", choices=("adam", "sgd"))
    steps: int = option(600, "optimiser steps")
    batch_size: int = option(512, "sequences per step")
    lr: float = option(1e-2, "learning rate")
    slope_lr: float = option(1e-1, "learning rate of the ALiBi slopes")
    n_checkpoints: int = option(60, "checkpoints on the schedule")

    name: ClassVar[str] = "gaussian"

    def __post_init__(self) -> None:
        require_int("heads", self.heads, 1)
        require_int("d_model", self.d_model, 1)
        require_positive("slope_lr", self.slope_lr)
        if self.optimizer not in ("adam", "sgd"):
            raise BadInput(f"optimizer must be adam or sgd, got {quoted(self.optimizer)}")
        super().__post_init__()

    def model_config(self) -> model_configs.HookedTransformerConfig:
        return model_configs.transformer_config(
            n_layers=2,
            d_model=self.d_model,
            d_head=self.d_model,
            layer_heads=(self.heads, 1),
            n_ctx=self.task.seq_len,
            d_vocab=self.task.d,
            input_type="vectors",
            positional=("alibi", "none"),
            mask="strict",
            skip_first_keys=(0, self.task.order - 1),
            seed=self.model_seed,
        )

    def make_optimizer(self, model: nn.Module) -> tuple[torch.optim.Optimizer, list[float]]:
        slopes = [p for name, p in model.named_parameters() if name.endswith("alibi_slope")]
        rest = [p for name, p in model.named_parameters() if not name.endswith("alibi_slope")]
        groups = [{"params": rest, "lr": self.lr}, {"params": slopes, "lr": self.slope_lr}]
        optimizer = torch.optim.Adam(groups) if self.optimizer == "adam" else torch.optim.SGD(groups)
        return optimizer, [self.lr, self.slope_lr]


@dataclass(frozen=True, kw_only=True)
class ToyRecipe(Config):
    """Wang et al.'s toy model (§5) and its training; several choices are reconstructions (README).

    Scalar tokens x_1..x_L (standard Gaussian, or ±1), target α*·x_{L−2} + IH_2 with W* = w*. The four
    weights start at σ, the two slopes at ``slope_init``. With ``d`` > 1, d-dimensional tokens, W* = w* I and
    d × d weights drawn at scale σ from ``model_seed`` (the high-dimensional toy, circuits/models/toy_model.py).
    Full-batch gradient descent on a fixed set of ``n_seqs`` sequences approximates gradient flow on the
    population loss ½E[(f − y)²].
    """

    seq_len: int = option(20, "L, tokens per sequence (>= 4)")
    sigma: float = option(1e-2, "initial scale of the four weights")
    slope_init: float = option(1.0, "initial ALiBi slopes (from 0 the 4-gram signal fades as 1/L)")
    alpha_star: float = option(2.0, "α*, the weight of the 4-gram term in the target")
    w_star: float = option(1.0, "w*, the induction head's weight in the target")
    boolean: bool = option(False, "uniform ±1 tokens instead of Gaussian ones")
    d: int = option(1, "token dimension: 1 is the six-parameter toy, d > 1 the high-dimensional toy (d x d weights)")
    model_seed: int = option(0, "the random initial matrices of the high-dimensional toy (unused at d = 1)")
    optimizer: str = option("gd", "gd (gradient descent) or adam", choices=("gd", "adam"))
    layerwise_steps: int = option(0, "train layer 1 alone for this many steps, then freeze it (0: joint training)")
    lr: float = option(0.1, "step size")
    steps: int = option(5000, "gradient steps")
    n_seqs: int = option(8192, "sequences in the full batch")
    data_seed: int = option(0, "the fixed training sequences")
    log_every: int = option(20, "steps between logged evaluations")

    name: ClassVar[str] = "toy"

    def __post_init__(self) -> None:
        require_int("seq_len", self.seq_len, 4)
        for name in ("sigma", "alpha_star", "w_star", "lr"):
            require_positive(name, getattr(self, name))
        for name in ("steps", "n_seqs", "log_every"):
            require_int(name, getattr(self, name), 1)
        require_int("layerwise_steps", self.layerwise_steps, 0)
        require_int("d", self.d, 1)
        require_at_most("parameters (2 + 4d²)", 2 + 4 * self.d**2, MAX_PARAMETERS)
        require_seed("data_seed", self.data_seed)
        require_seed("model_seed", self.model_seed)
        require_at_most("steps", self.steps, MAX_STEPS)
        require_at_most("records (steps / log_every)", self.steps // self.log_every, MAX_STEPS // 1000)
        # the sequences, and the ALiBi weights over them
        require_sequences("n_seqs", self.n_seqs, self.seq_len**2 + self.seq_len * self.d)
        if self.optimizer not in ("gd", "adam"):
            raise BadInput(f"optimizer must be gd or adam, got {quoted(self.optimizer)}")
        _ = self.task  # L >= 4 and the target's own checks

    def model_config(self) -> toy.ToyConfig:
        return toy.ToyConfig(self.sigma, self.slope_init, self.d, self.model_seed)

    @property
    def task(self) -> GaussianTask:
        return GaussianTask(
            target="mixed",
            d=self.d,
            seq_len=self.seq_len,
            w_star=self.w_star,
            alpha_star=self.alpha_star,
            boolean=self.boolean,
        )
