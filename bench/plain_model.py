"""A plain eager PyTorch twin of our attention-only relative-position model, for benchmarks.

Same maths as circuits/models/model.py with one head per layer, no LayerNorm, no biases, no MLP, causal mask:

    q = x W_Q,  k = x W_K,  v = x W_V
    A_ij = (q_i·k_j + q_i·r_{i−j}) / sqrt(d_head)   for j <= i, −inf otherwise
    x <- x + softmax(A) v W_O                       (per layer), logits = x W_U

No HookPoints and no TransformerLens: just matmuls. ``copy_weights`` loads a HookedTransformer's weights so
the two can be checked to give the same logits before they are timed (bench/bench_model.py).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class PlainAttention(nn.Module):
    def __init__(self, d_model: int, d_head: int, n_ctx: int):
        super().__init__()
        self.W_Q, self.W_K, self.W_V = (nn.Parameter(torch.empty(d_model, d_head)) for _ in range(3))
        self.W_O = nn.Parameter(torch.empty(d_head, d_model))
        self.W_rel = nn.Parameter(torch.empty(n_ctx, d_head))  # row d is r_d, d = i − j
        self.scale = 1.0 / math.sqrt(d_head)
        pos = torch.arange(n_ctx)
        distance = pos[:, None] - pos[None, :]
        self.register_buffer("distance", distance.clamp_min(0), persistent=False)
        self.register_buffer("future", distance < 0, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        n_pos = x.shape[1]
        q, k, v = x @ self.W_Q, x @ self.W_K, x @ self.W_V  # [batch, pos, d_head]
        by_distance = q @ self.W_rel[:n_pos].T  # [batch, i, d] = q_i·r_d
        rel = by_distance.gather(-1, self.distance[:n_pos, :n_pos].expand(x.shape[0], -1, -1))
        scores = (q @ k.transpose(1, 2) + rel) * self.scale
        scores = scores.masked_fill(self.future[:n_pos, :n_pos], -torch.inf)
        return torch.softmax(scores, dim=-1) @ v @ self.W_O


class PlainModel(nn.Module):
    def __init__(self, d_vocab: int = 3, d_model: int = 16, n_ctx: int = 100, n_layers: int = 2):
        super().__init__()
        self.W_E = nn.Parameter(torch.empty(d_vocab, d_model))
        self.layers = nn.ModuleList(PlainAttention(d_model, d_model, n_ctx) for _ in range(n_layers))
        self.W_U = nn.Parameter(torch.empty(d_model, d_vocab))

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.W_E[tokens]
        for layer in self.layers:
            x = x + layer(x)
        return x @ self.W_U


def copy_weights(plain: PlainModel, hooked: nn.Module) -> PlainModel:
    """Load head 0 of every layer of a HookedTransformer (TL parameter names) into ``plain``."""
    with torch.no_grad():
        plain.W_E.copy_(hooked.embed.W_E)
        plain.W_U.copy_(hooked.unembed.W_U)
        for layer, block in zip(plain.layers, hooked.blocks):
            for name in ("W_Q", "W_K", "W_V", "W_O", "W_rel"):
                getattr(layer, name).copy_(getattr(block.attn, name)[0])
    return plain


def plain_twin(hooked: nn.Module) -> PlainModel:
    """A PlainModel with the shapes and weights of a one-head-per-layer attention-only HookedTransformer."""
    cfg = hooked.cfg
    assert cfg.n_heads == 1 and cfg.d_mlp is None and cfg.normalization is None and not cfg.use_bias
    assert cfg.positional == "relative" and cfg.mask == "causal" and cfg.layer_heads is None
    plain = PlainModel(cfg.d_vocab, cfg.d_model, cfg.n_ctx, cfg.n_layers).to(cfg.torch_dtype)
    return copy_weights(plain, hooked)
