"""The recipe of the natural-text task (Wang et al., Figure 3): a standard transformer, with absolute positions,
an MLP in every block and two heads per layer, on the bytes of a text file.

Wang et al. give none of the run's settings (width, optimiser, rate, context). The defaults here are ours: two
layers of two heads of width 32 (d_model 64), an MLP of width 256, contexts of 128 bytes, batch 32, AdamW at
lr 1e-3 with cosine decay, the optimiser and LayerNorm of the ICL-MC recipe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from induction_probes.circuits.config import nested, option
from induction_probes.circuits.recipes.recipe import int_tuple, one_or_per_layer
from induction_probes.circuits.recipes.transformer import TransformerRecipe
from induction_probes.circuits.tasks.text_task import BYTES, TextTask


@dataclass(frozen=True, kw_only=True)
class TextRecipe(TransformerRecipe):
    """A standard two-layer, two-head transformer with MLPs on next-byte prediction."""

    task: TextTask = nested(TextTask)
    steps: int = option(3000, "optimiser steps")
    batch_size: int = option(32, "sequences per step")
    eval_seqs: int = option(200, "evaluation sequences (held-out windows)")
    n_checkpoints: int = option(100, "checkpoints on the schedule")
    heads: tuple[int, ...] | None = option(
        None, "heads per layer, e.g. 2,1 (default: two in every layer)", type=int_tuple
    )
    d_head: int = option(32, "width of each head")
    positional: str | tuple[str, ...] = option(
        "standard",
        "standard (absolute, the default), or relative, alibi, none (one, or one per layer)",
        type=one_or_per_layer,
    )
    d_mlp: int | None = option(256, "MLP width")

    name: ClassVar[str] = "text"

    def vocabulary(self) -> int:
        return BYTES

    def default_heads(self) -> tuple[int, ...]:
        return (2,) * self.n_layers
