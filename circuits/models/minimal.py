"""Edelman et al.'s minimal model of a statistical induction head (their eq. 6), with hook points.

    f(E) = mask(E W (A E)ᵀ) E,     E ∈ {0,1}^{T×k} the one-hot tokens, W ∈ R^{k×k}

where A is the first layer's attention, a function of relative position only, from a learned v:

- ``first_layer="linear"`` (eq. 6): A = M, the lower-triangular Toeplitz matrix M_ij = v_{i−j}, j ≤ i.
- ``first_layer="softmax"``: A_ij = softmax over j ≤ i of v_{i−j}, a causally masked attention row.

Row i of A E is what layer 1 wrote at position i (A_{i,i−1} = 1 makes it e_{x_{i−1}}); layer 2 scores
key j ≤ i by e_{x_i}ᵀ W (A E)_j, without a softmax, and sums e_{x_j} with those weights: with A the
previous-token shift and W = I the output is the vector of bigram counts c(x_i → ·). Both layers mask
the future (the authors' released code leaks it into layer 1: its masked_fill is not in place).

Hook names follow TransformerLens, with their meaning: ``hook_pattern`` only where the weights are a
distribution over keys (the softmax first layer's A); the linear first layer's A and the second layer's
unnormalised scores are ``hook_attn_scores``, so a probe that needs a pattern refuses instead of reading
something that is not one. ``hook_z`` is what each layer writes (A E, then the output), [batch, pos, 1, k],
so head ablations run on it as on the transformer.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint

from induction_probes.circuits.config import Config
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import require_numbers
from induction_probes.circuits.models.model import DTYPES
from induction_probes.circuits.models.tl_hooks import CacheRuns
from induction_probes.circuits.models.tl_interface import KnowsItsDevice
from induction_probes.circuits.validation import require_int

FIRST_LAYERS = ("linear", "softmax")


@dataclass(frozen=True)
class MinimalConfig(Config):
    d_vocab: int  # k
    n_ctx: int
    first_layer: str = "softmax"
    v_init: float = 0.0
    w_init: float = 0.01  # every entry of W, as in the authors' code
    dtype: str = "float32"

    device = "cpu"  # where a model's weights are: set on its own copy of the config when it moves
    n_layers = 2  # for probes that read cfg.n_layers / cfg.n_heads, as on a TransformerLens model
    n_heads = 1

    def __post_init__(self) -> None:
        require_int("d_vocab", self.d_vocab, 2)
        require_int("n_ctx", self.n_ctx, 2)
        if self.first_layer not in FIRST_LAYERS:
            raise BadInput(f"first_layer must be linear or softmax, got {self.first_layer!r}")
        require_numbers("W (d_vocab^2)", self.d_vocab**2)
        require_numbers("one attention pattern (n_ctx^2)", self.n_ctx**2)

    def numbers_per_sequence(self) -> int:
        """About how many numbers one sequence costs in a forward pass."""
        return self.n_ctx**2 + self.n_ctx * self.d_vocab

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def heads(self, layer: int) -> int:
        return 1


class MinimalAttention(nn.Module):
    """A layer's hook points under TransformerLens's names: its attention weights (``hook_pattern`` where they are
    a softmax's, ``hook_attn_scores`` otherwise; [batch, 1, q, k]) and what it writes (``hook_z``; [batch, pos, 1,
    k])."""

    def __init__(self, weights_name: str):
        super().__init__()
        self.weights_name = weights_name
        setattr(self, weights_name, HookPoint())
        self.hook_z = HookPoint()

    @property
    def weights_hook(self) -> HookPoint:
        hook = getattr(self, self.weights_name)
        assert isinstance(hook, HookPoint)  # set in __init__
        return hook


class MinimalBlock(nn.Module):
    """A layer, holding its attention's hook points where TransformerLens looks for them (``blocks.L.attn``)."""

    def __init__(self, weights_name: str):
        super().__init__()
        self.attn = MinimalAttention(weights_name)


class MinimalModel(KnowsItsDevice, CacheRuns):
    """The minimal model; parameters ``v`` ([n_ctx], v_d for distance d) and ``W`` ([k, k])."""

    config_class = MinimalConfig  # what the model is built from (circuits/models/model_classes.py)
    # buffers, registered in __init__: key distances i − j (clamped at 0), and which keys each query may attend
    distance: Tensor
    causal: Tensor

    def __init__(self, cfg: MinimalConfig):
        super().__init__()
        cfg = self.cfg = copy.copy(cfg)  # the model's own: its device changes with the model
        self.v = nn.Parameter(torch.full((cfg.n_ctx,), cfg.v_init, dtype=cfg.torch_dtype))
        self.W = nn.Parameter(torch.full((cfg.d_vocab, cfg.d_vocab), cfg.w_init, dtype=cfg.torch_dtype))
        first = "hook_pattern" if cfg.first_layer == "softmax" else "hook_attn_scores"
        self.blocks = nn.ModuleList([MinimalBlock(first), MinimalBlock("hook_attn_scores")])
        position = torch.arange(cfg.n_ctx)
        self.register_buffer("distance", (position[:, None] - position[None, :]).clamp_min(0), persistent=False)
        self.register_buffer("causal", position[:, None] >= position[None, :], persistent=False)
        self.setup()

    def first_layer(self, n_pos: int) -> Float[Tensor, "query_pos key_pos"]:
        logits = self.v[self.distance[:n_pos, :n_pos]]
        causal = self.causal[:n_pos, :n_pos]
        if self.cfg.first_layer == "linear":
            return logits * causal
        return torch.softmax(logits.masked_fill(~causal, -torch.inf), dim=-1)

    def forward(self, tokens: Int[Tensor, "batch pos"], return_type: str = "logits") -> Float[Tensor, "batch pos k"]:
        """The next-token logits; ``return_type`` is TransformerLens's, which tools such as devinterp pass."""
        if return_type != "logits":
            raise BadInput(f"the minimal model returns logits only, not {return_type!r}")
        if tokens.dim() != 2 or not 1 <= tokens.shape[1] <= self.cfg.n_ctx:
            raise BadInput(f"tokens must be [batch, pos] with pos in 1..{self.cfg.n_ctx}")
        if tokens.min() < 0 or tokens.max() >= self.cfg.d_vocab:
            raise BadInput(f"tokens must be integers in 0..{self.cfg.d_vocab - 1}")
        batch, n_pos = tokens.shape
        E = nn.functional.one_hot(tokens.to(self.W.device), self.cfg.d_vocab).to(self.W.dtype)  # where the model is
        first, second = self.attention(0), self.attention(1)
        A = first.weights_hook(self.first_layer(n_pos).expand(batch, 1, n_pos, n_pos))
        written = first.hook_z((A[:, 0] @ E)[:, :, None])[:, :, 0]  # (A E)_j
        scores = (E @ self.W @ written.transpose(1, 2)) * self.causal[:n_pos, :n_pos]
        scores = second.weights_hook(scores[:, None])
        return second.hook_z((scores[:, 0] @ E)[:, :, None])[:, :, 0]

    def attention(self, layer: int) -> MinimalAttention:
        block = self.blocks[layer]
        assert isinstance(block, MinimalBlock)  # the blocks built in __init__
        return block.attn

    def to(self, *args, print_details: bool = True, **kwargs):
        """``nn.Module.to``, accepting TransformerLens's ``print_details``: devinterp passes it to every model
        with a ``cfg.n_heads``, as this one has."""
        return super().to(*args, **kwargs)


def odd_even_gap(v: Tensor) -> float:
    """Mean of v at odd distances 3, 5, 7 minus the mean at even distances 2, 4, 6: positive during
    the transition, as Edelman et al. predict (distance 1, the previous token, is left out: it wins
    anyway)."""
    return (v[[3, 5, 7]].mean() - v[[2, 4, 6]].mean()).item()
