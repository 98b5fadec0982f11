"""The attention transformer's architecture options and optimiser, shared by the recipes that train it: ICL-MC's
(:class:`~induction_probes.circuits.recipes.markov_recipes.MarkovRecipe`) and the text task's
(:class:`~induction_probes.circuits.recipes.text_recipe.TextRecipe`). A recipe built on it says how many symbols
its task has and how many heads each layer gets by default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

import induction_probes.circuits.models.model_config as model_configs
from induction_probes.circuits.config import option
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import MAX_LAYERS, require_at_most
from induction_probes.circuits.recipes.recipe import Recipe, int_tuple, one_or_per_layer
from induction_probes.circuits.validation import quoted, require_int

if TYPE_CHECKING:
    from torch import nn

DECAYED = ("W_Q", "W_K", "W_V", "W_O", "W_U", "W_in", "W_out")  # the linear maps, which weight decay shrinks


@dataclass(frozen=True, kw_only=True)
class TransformerRecipe(Recipe):
    """A transformer of ``n_layers`` blocks on the task's tokens, trained by AdamW with β = (0.9, 0.95)."""

    n_layers: int = option(2, "attention layers")
    heads: tuple[int, ...] | None = option(None, "heads per layer, e.g. 2,1", type=int_tuple)
    d_head: int = option(16, "width of each head")
    d_model: int | None = option(None, "residual width (default: d_head times the largest head count)")
    positional: str | tuple[str, ...] = option(
        "relative",
        "relative, alibi, none (one, or one per layer as relative,none) or standard (absolute)",
        type=one_or_per_layer,
    )
    mask: str | tuple[str, ...] = option(
        "causal", "causal (j <= i) or strict (j < i), one or one per layer", type=one_or_per_layer
    )
    d_mlp: int | None = option(None, "MLP width (default: attention-only)")
    layer_norm: bool = option(True, "pre-LayerNorm in every block and before the unembedding")
    dropout: float = option(0.0, "dropout probability")
    weight_decay: float = option(0.1, "AdamW weight decay on the linear maps")

    def __post_init__(self) -> None:
        if not math.isfinite(self.weight_decay) or self.weight_decay < 0:
            raise BadInput(f"weight_decay must be a finite number >= 0, got {self.weight_decay}")
        super().__post_init__()

    def vocabulary(self) -> int:
        """How many symbols the task's tokens take."""
        raise NotImplementedError

    def default_heads(self) -> tuple[int, ...]:
        """Each layer's head count where ``heads`` gives none."""
        raise NotImplementedError

    def layer_heads(self) -> tuple[int, ...]:
        require_int("n_layers", self.n_layers, 1)
        require_at_most("n_layers", self.n_layers, MAX_LAYERS)  # before a tuple of n_layers head counts is made
        if self.heads is None:
            return self.default_heads()
        if not isinstance(self.heads, tuple) or not all(type(h) is int for h in self.heads):
            raise BadInput(
                f"heads must be integers, one per layer (in a spec: heads = [2, 1]), got {quoted(self.heads)}"
            )
        return self.heads

    def model_config(self) -> model_configs.HookedTransformerConfig:
        heads = self.layer_heads()
        return model_configs.transformer_config(
            n_layers=self.n_layers,
            d_model=self.d_head * max(heads) if self.d_model is None else self.d_model,
            d_head=self.d_head,
            n_ctx=self.task.seq_len,
            d_vocab=self.vocabulary(),
            layer_heads=heads,
            positional=self.positional,
            mask=self.mask,
            normalization="LN" if self.layer_norm else None,
            dropout=self.dropout,
            d_mlp=self.d_mlp,
            seed=self.model_seed,
        )

    def make_optimizer(self, model: nn.Module) -> tuple[torch.optim.Optimizer, list[float]]:
        """AdamW with weight decay on the linear maps only, as the authors' minGPT trainer does (not on
        embeddings, positions, slopes, LayerNorm gains or biases)."""
        groups: dict[bool, list] = {True: [], False: []}
        for name, param in model.named_parameters():
            groups[name.rsplit(".", 1)[-1] in DECAYED].append(param)
        parameter_groups = [
            {"params": groups[True], "weight_decay": self.weight_decay},
            {"params": groups[False], "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(parameter_groups, lr=self.lr, betas=(0.9, 0.95)), [self.lr, self.lr]
