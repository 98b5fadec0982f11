"""Edelman et al.'s Proposition 2.1 (as corrected in their rebuttal): a two-layer attention-only construction
of the in-context bigram statistic, as a config and state dict for our HookedTransformer, and what it tends
to as its scale c grows.

Blocks are named residual spaces (:mod:`.residual`), in the row-vector convention of the papers and of
TransformerLens (x @ W).
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.constructions.residual import ResidualLayout
from induction_probes.circuits.models.attention_masks import causal_mask, matching_keys, previous_tokens
from induction_probes.circuits.models.model import HookedTransformerConfig
from induction_probes.circuits.validation import require_int, require_positive


def prop21(k: int, c: float, n_ctx: int, dtype: str = "float64") -> tuple[HookedTransformerConfig, dict[str, Tensor]]:
    """Edelman et al.'s Proposition 2.1, as corrected in their rebuttal: a two-layer attention-only
    transformer whose output at position i tends, as c → ∞, to the in-context bigram statistics.

    d_model = 3k in three named blocks of k: [current | previous | output]. No LayerNorm.
    Layer 0 (the paper's layer 1): W_Q = c·I from current to current, W_K = 0, relative r_1 = 1 (all ones),
    r_d = 0 otherwise, so A_ij = c·[j = i − 1]/√(3k); W_V copies current into previous: a previous-token head.
    Layer 1: W_Q = c·I on current, W_K = c·I from previous to current, no positional term, so
    A_ij = c²·[x_{j−1} = x_i]/√(3k); W_V copies current into output. W_O = I in both layers; the
    unembedding reads output.

    Position 0 can only attend to itself, so its "previous token" is x_0: as a key in layer 1 it matches
    every query with x_i = x_0, which pure bigram counts would not include (see :func:`prop21_limit`).
    """
    require_int("k", k, 2)
    require_positive("c", c)
    require_int("n_ctx", n_ctx, 2)
    layout = ResidualLayout(("current", "previous", "output"), width=k)
    d = layout.d_model
    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=d,
        d_head=d,
        n_heads=1,
        n_ctx=n_ctx,
        d_vocab=k,
        positional=("relative", "none"),
        mask="causal",
        dtype=dtype,
    )
    relative = torch.zeros(1, n_ctx, d, dtype=torch.float64)
    relative[0, 1] = 1.0  # r at distance 1
    weights = {
        "embed.W_E": layout.embedding("current"),
        "blocks.0.attn.W_Q": layout.map(("current", "current", c))[None],
        "blocks.0.attn.W_K": layout.map()[None],
        "blocks.0.attn.W_V": layout.map(("current", "previous", 1.0))[None],
        "blocks.0.attn.W_O": torch.eye(d, dtype=torch.float64)[None],
        "blocks.0.attn.W_rel": relative,
        "blocks.1.attn.W_Q": layout.map(("current", "current", c))[None],
        "blocks.1.attn.W_K": layout.map(("previous", "current", c))[None],
        "blocks.1.attn.W_V": layout.map(("current", "output", 1.0))[None],
        "blocks.1.attn.W_O": torch.eye(d, dtype=torch.float64)[None],
        "unembed.W_U": layout.readout("output"),
    }
    return cfg, {name: w.to(cfg.torch_dtype) for name, w in weights.items()}


def prop21_limit(tokens: Int[Tensor, "batch pos"], k: int) -> Float[Tensor, "batch pos k"]:
    """The c → ∞ output of :func:`prop21`: at position i, the mean of e_{x_j} over keys j ≤ i whose
    layer-0 "previous token" equals x_i, where position 0's previous token is x_0 itself; when no key
    matches, layer 1's scores are all equal and the output is the mean over all j ≤ i."""
    match = matching_keys(tokens, previous_tokens(tokens, first_is_self=True))
    keys = torch.where(match.any(-1, keepdim=True), match, causal_mask(tokens.shape[1])).double()
    weights = keys / keys.sum(-1, keepdim=True)
    return weights @ torch.nn.functional.one_hot(tokens, k).double()


def empirical_bigram(tokens: Int[Tensor, "batch pos"], k: int) -> Float[Tensor, "batch pos k"]:
    """Pure in-context bigram frequencies c(x_i → b) / c(x_i → ·) over pairs inside x_0..x_i, without
    pseudo-counts; NaN where x_i has not been followed by anything yet."""
    counts = matching_keys(tokens).double() @ torch.nn.functional.one_hot(tokens, k).double()
    return counts / counts.sum(-1, keepdim=True)
