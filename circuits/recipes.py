"""Training recipes: one config class per kind of run, each holding its task and owning its defaults,
checks, help text, model and optimiser.

- :class:`MarkovRecipe` — the attention-only transformer on ICL-MC (Edelman et al. 2024), with its
  architecture (layers, heads per layer, positions, masks, MLP, LayerNorm) open to change.
- :class:`MinimalRecipe` — Edelman et al.'s minimal model (eq. 6) on ICL-MC, trained by SGD.
- :class:`GaussianRecipe` — the two-layer model on Wang et al.'s Gaussian induction task.
- :class:`ToyRecipe` — Wang et al.'s six-parameter toy model (§5), full-batch gradient descent.

Like the tasks, these classes import torch only inside their methods, so that the command line builds
its options from them without loading torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from induction_probes.circuits.clamps import CLAMP_LAYERS
from induction_probes.circuits.config import Config, nested, option
from induction_probes.circuits.tasks import GaussianTask, MarkovTask, TaskConfig, task_from_json
from induction_probes.circuits.limits import MAX_CHECKPOINTS, MAX_LAYERS, MAX_STEPS, require_at_most, require_seed, require_sequences
from induction_probes.circuits.validation import require_int, require_positive

SCHEDULES = ("cosine", "constant")
POSITIONALS = ("relative", "alibi", "none", "standard")


def int_tuple(text: str) -> tuple[int, ...]:
    """'2,1' → (2, 1), for per-layer counts on the command line."""
    try:
        return tuple(int(item) for item in text.split(","))
    except ValueError:
        raise ValueError(f"expected integers separated by commas, e.g. 2,1; got {text!r}") from None


def name_tuple(text: str) -> tuple[str, ...]:
    """'previous-token,induction' → ('previous-token', 'induction')."""
    return tuple(item.strip() for item in text.split(","))


def one_or_per_layer(text: str) -> str | tuple[str, ...]:
    """'relative' (every layer) or 'relative,none' (one per layer)."""
    items = tuple(item.strip() for item in text.split(","))
    return items[0] if len(items) == 1 else items


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
    model_seed: int = option(0, "initial weights and dropout")
    data_seed: int = option(1, "training sequences")
    eval_seed: int = option(2, "the fixed evaluation set")
    eval_seqs: int = option(2000, "evaluation sequences")
    n_checkpoints: int = option(150, "checkpoints on the schedule")

    name: ClassVar[str]

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "eval_seqs", "n_checkpoints"):
            require_int(name, getattr(self, name), 1)
        for name in ("model_seed", "data_seed", "eval_seed"):
            require_seed(name, getattr(self, name))
        require_positive("lr", self.lr)
        if self.lr_schedule not in SCHEDULES:
            raise ValueError(f"lr_schedule must be cosine or constant, got {self.lr_schedule!r}")
        require_at_most("steps", self.steps, MAX_STEPS)
        require_at_most("n_checkpoints", self.n_checkpoints, MAX_CHECKPOINTS)
        model = self.model_config()  # the architecture's own checks and sizes, before anything is written
        per_sequence = max(self.task.numbers_per_sequence(), model.numbers_per_sequence())
        for name in ("batch_size", "eval_seqs"):
            require_sequences(name, getattr(self, name), per_sequence)

    def lr_factor(self, step: int) -> float:
        """Each group's rate for the update after ``step`` steps, as a fraction of its base rate:
        constant, or a cosine down to 0, which lets the loss settle at the end instead of hovering at
        the noise level of a constant rate."""
        if self.lr_schedule == "constant":
            return 1.0
        return 0.5 * (1.0 + math.cos(math.pi * step / self.steps))

    def model_config(self) -> Any:
        raise NotImplementedError

    def training_hooks(self, inputs, step: int) -> list:
        """Forward hooks of every training and evaluation pass after ``step`` steps (none by default)."""
        return []

    def make_optimizer(self, model) -> tuple[Any, list[float]]:
        """The optimiser and the base rate of each of its parameter groups, in order."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class MarkovRecipe(Recipe):
    """The ICL-MC transformer. Defaults: the paper's model (2 layers, 1 head each, learned relative
    positions, width 16, no MLP, AdamW β = (0.9, 0.95), weight decay 0.1 on the linear maps, batch 64,
    T = 100); pre-LayerNorm, lr 1e-3 with cosine decay and no dropout were measured to show the phases
    best on a 2-core CPU (README, "Training on ICL-MC")."""

    task: MarkovTask = nested(MarkovTask)
    n_layers: int = option(2, "attention layers")
    heads: tuple[int, ...] | None = option(
        None, "heads per layer, e.g. 2,1 (default: n-1 in the first layer, one in each later layer)", type=int_tuple
    )
    d_head: int = option(16, "width of each head")
    d_model: int | None = option(None, "residual width (default: d_head times the largest head count)")
    positional: str | tuple[str, ...] = option(
        "relative", "relative, alibi, none (one, or one per layer as relative,none) or standard (absolute)",
        type=one_or_per_layer,
    )
    mask: str | tuple[str, ...] = option("causal", "causal (j <= i) or strict (j < i), one or one per layer", type=one_or_per_layer)
    d_mlp: int | None = option(None, "MLP width (default: attention-only)")
    layer_norm: bool = option(True, "pre-LayerNorm in every block and before the unembedding")
    dropout: float = option(0.0, "dropout probability")
    weight_decay: float = option(0.1, "AdamW weight decay on the linear maps")
    clamp: tuple[str, ...] | None = option(
        None, "attention fixed to the ideal circuit's while training: previous-token (layer 0), induction "
        "(layer 1) or previous-token,induction", type=name_tuple)
    clamp_from: int = option(0, "the step from which the clamp applies")

    name: ClassVar[str] = "markov"

    def __post_init__(self) -> None:
        if not math.isfinite(self.weight_decay) or self.weight_decay < 0:
            raise ValueError(f"weight_decay must be a finite number >= 0, got {self.weight_decay}")
        super().__post_init__()
        self.check_clamp()

    def check_clamp(self) -> None:
        require_int("clamp_from", self.clamp_from, 0)
        if not self.clamp:
            if self.clamp_from:
                raise ValueError("clamp_from needs a clamp")
            return
        for name in self.clamp:
            if name not in CLAMP_LAYERS:
                raise ValueError(f"clamp must be previous-token, induction or both, got {name!r}")
            layer = CLAMP_LAYERS[name]
            if layer >= self.n_layers or self.model_config().layer_mask(layer) != "causal":
                raise ValueError(f"the {name} clamp needs a layer {layer} with the causal mask")
        if "induction" in self.clamp and self.task.n != 2:
            raise ValueError(f"the induction clamp is the bigram circuit's: it needs n = 2, not {self.task.n}")
        if len(set(self.clamp)) < len(self.clamp) or self.clamp_from >= self.steps:
            raise ValueError("clamp names must not repeat, and clamp_from must be below steps")

    def training_hooks(self, inputs, step: int) -> list:
        if not self.clamp or step < self.clamp_from:
            return []
        from induction_probes.circuits.clamps import clamp_hooks

        return clamp_hooks(self.clamp, inputs)

    def layer_heads(self) -> tuple[int, ...]:
        require_int("n_layers", self.n_layers, 1)
        require_at_most("n_layers", self.n_layers, MAX_LAYERS)  # before a tuple of n_layers head counts is made
        if self.heads is not None:
            if not isinstance(self.heads, tuple) or not all(type(h) is int for h in self.heads):
                raise ValueError(f"heads must be integers, one per layer (in a spec: heads = [2, 1]), "
                                 f"got {self.heads!r}")
            return self.heads
        return (max(self.task.n - 1, 1),) + (1,) * (self.n_layers - 1)  # one first-layer head per look-back

    def model_config(self):
        from induction_probes.circuits.model import HookedTransformerConfig

        heads = self.layer_heads()
        return HookedTransformerConfig(
            n_layers=self.n_layers,
            d_model=self.d_head * max(heads) if self.d_model is None else self.d_model,
            d_head=self.d_head,
            n_ctx=self.task.seq_len,
            d_vocab=self.task.k,
            layer_heads=heads,
            positional=self.positional,
            mask=self.mask,
            normalization="LN" if self.layer_norm else None,
            dropout=self.dropout,
            d_mlp=self.d_mlp,
            seed=self.model_seed,
        )

    def make_optimizer(self, model):
        """AdamW with weight decay on the linear maps only, as the authors' minGPT trainer does (not on
        embeddings, relative positions, slopes, LayerNorm gains or biases)."""
        import torch

        decayed = ("W_Q", "W_K", "W_V", "W_O", "W_U", "W_in", "W_out")
        groups: dict[bool, list] = {True: [], False: []}
        for name, param in model.named_parameters():
            groups[name.rsplit(".", 1)[-1] in decayed].append(param)
        parameter_groups = [
            {"params": groups[True], "weight_decay": self.weight_decay},
            {"params": groups[False], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(parameter_groups, lr=self.lr, betas=(0.9, 0.95)), [self.lr, self.lr]


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
            raise ValueError("the minimal model is for bigram chains: n must be 2")
        super().__post_init__()

    def model_config(self):
        from induction_probes.circuits.minimal import MinimalConfig

        return MinimalConfig(d_vocab=self.task.k, n_ctx=self.task.seq_len, first_layer=self.first_layer)

    def make_optimizer(self, model):
        import torch

        groups = [{"params": [model.W], "lr": self.lr}, {"params": [model.v], "lr": self.lr_v}]
        return torch.optim.SGD(groups), [self.lr, self.lr_v]


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
            raise ValueError(f"optimizer must be adam or sgd, got {self.optimizer!r}")
        super().__post_init__()

    def model_config(self):
        from induction_probes.circuits.model import HookedTransformerConfig

        return HookedTransformerConfig(
            n_layers=2, d_model=self.d_model, d_head=self.d_model, layer_heads=(self.heads, 1),
            n_ctx=self.task.seq_len, d_vocab=self.task.d, input_type="vectors", positional=("alibi", "none"),
            mask="strict", skip_first_keys=(0, self.task.order - 1), seed=self.model_seed,
        )

    def make_optimizer(self, model):
        import torch

        slopes = [p for name, p in model.named_parameters() if name.endswith("alibi_slope")]
        rest = [p for name, p in model.named_parameters() if not name.endswith("alibi_slope")]
        groups = [{"params": rest, "lr": self.lr}, {"params": slopes, "lr": self.slope_lr}]
        optimizer = torch.optim.Adam(groups) if self.optimizer == "adam" else torch.optim.SGD(groups)
        return optimizer, [self.lr, self.slope_lr]


@dataclass(frozen=True, kw_only=True)
class ToyRecipe(Config):
    """Wang et al.'s toy model (§5) and its training; several choices are reconstructions (README).

    Scalar tokens x_1..x_L (standard Gaussian, or ±1), target α*·x_{L−2} + IH_2 with W* = w*. The four
    weights start at σ, the two slopes at ``slope_init``. Full-batch gradient descent on a fixed set of
    ``n_seqs`` sequences approximates gradient flow on the population loss ½E[(f − y)²].
    """

    seq_len: int = option(20, "L, tokens per sequence (>= 4)")
    sigma: float = option(1e-2, "initial scale of the four weights")
    slope_init: float = option(1.0, "initial ALiBi slopes (from 0 the 4-gram signal fades as 1/L)")
    alpha_star: float = option(2.0, "α*, the weight of the 4-gram term in the target")
    w_star: float = option(1.0, "w*, the induction head's weight in the target")
    boolean: bool = option(False, "uniform ±1 tokens instead of Gaussian ones")
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
        require_seed("data_seed", self.data_seed)
        require_at_most("steps", self.steps, MAX_STEPS)
        require_at_most("records (steps / log_every)", self.steps // self.log_every, MAX_STEPS // 1000)
        require_sequences("n_seqs", self.n_seqs, self.seq_len**2)  # the sequences, and the ALiBi weights over them
        if self.optimizer not in ("gd", "adam"):
            raise ValueError(f"optimizer must be gd or adam, got {self.optimizer!r}")
        self.task  # L >= 4 and the target's own checks

    def model_config(self):
        from induction_probes.circuits.toy import ToyConfig

        return ToyConfig(self.sigma, self.slope_init)

    @property
    def task(self) -> GaussianTask:
        return GaussianTask(target="mixed", d=1, seq_len=self.seq_len, w_star=self.w_star,
                            alpha_star=self.alpha_star, boolean=self.boolean)


RECIPES: dict[str, type] = {recipe.name: recipe for recipe in (MarkovRecipe, MinimalRecipe, GaussianRecipe, ToyRecipe)}


def recipe_from_json(recipe: Any, task: Any):
    """The recipe of a run from its ``config.json`` entries ``recipe`` and ``task``."""
    if not isinstance(recipe, dict) or recipe.get("name") not in RECIPES:
        raise ValueError(f"not a known recipe (recipes: {', '.join(RECIPES)}): {recipe!r}")
    values = {key: value for key, value in recipe.items() if key != "name"}
    recipe_class = RECIPES[recipe["name"]]
    if any(f.name == "task" for f in fields(recipe_class)):
        values["task"] = task_from_json(task)
    return recipe_class.from_dict(values)
