"""Hand-made weights, as pure functions that return a config and a state dict for our HookedTransformer.

Each construction is loaded with ``load_state_dict`` into the same model class that training uses, so
every probe applies to it unchanged. Blocks are written in the row-vector convention of the papers and
of TransformerLens (x @ W).
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from circuits.model import HookedTransformer, HookedTransformerConfig
from circuits.tasks.markov import matching_keys
from circuits.validation import require_int, require_positive


def prop21(k: int, c: float, n_ctx: int, dtype: str = "float64") -> tuple[HookedTransformerConfig, dict[str, Tensor]]:
    """Edelman et al.'s Proposition 2.1, as corrected in their rebuttal: a two-layer attention-only
    transformer whose output at position i tends, as c → ∞, to the in-context bigram statistics.

    d_model = 3k in three blocks of k: [current token | previous token | output]. No LayerNorm.
    Layer 0 (the paper's layer 1): W_Q = [[cI,0,0],0,0], W_K = 0, relative r_1 = 1 (all ones), r_d = 0
    otherwise, so A_ij = c·[j = i − 1]/√(3k); W_V copies block 1 into block 2: a previous-token head.
    Layer 1: W_Q = [[cI,0,0],0,0], W_K = [0,[cI,0,0],0], no positional term, so A_ij = c²·[x_{j−1} = x_i]/√(3k);
    W_V copies block 1 into block 3. W_O = I in both layers; the unembedding reads block 3.

    Position 0 can only attend to itself, so its "previous token" is x_0: as a key in layer 1 it matches
    every query with x_i = x_0, which pure bigram counts would not include (see :func:`prop21_limit`).
    """
    require_int("k", k, 2)
    require_positive("c", c)
    require_int("n_ctx", n_ctx, 2)
    d = 3 * k
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=d, d_head=d, n_heads=1, n_ctx=n_ctx, d_vocab=k,
        positional=("relative", "none"), mask="causal", dtype=dtype,
    )
    blocks = [slice(0, k), slice(k, 2 * k), slice(2 * k, 3 * k)]

    def block_matrix(*entries: tuple[int, int, float]) -> Tensor:
        """d × d matrix with scale·I in each (row block, column block, scale)."""
        matrix = torch.zeros(d, d, dtype=torch.float64)
        for row, col, scale in entries:
            matrix[blocks[row], blocks[col]] = scale * torch.eye(k, dtype=torch.float64)
        return matrix

    relative = torch.zeros(1, n_ctx, d, dtype=torch.float64)
    relative[0, 1] = 1.0  # r at distance 1
    weights = {
        "embed.W_E": block_matrix((0, 0, 1.0))[:k],
        "blocks.0.attn.W_Q": block_matrix((0, 0, c))[None],
        "blocks.0.attn.W_K": block_matrix()[None],
        "blocks.0.attn.W_V": block_matrix((0, 1, 1.0))[None],
        "blocks.0.attn.W_O": torch.eye(d, dtype=torch.float64)[None],
        "blocks.0.attn.W_rel": relative,
        "blocks.1.attn.W_Q": block_matrix((0, 0, c))[None],
        "blocks.1.attn.W_K": block_matrix((1, 0, c))[None],
        "blocks.1.attn.W_V": block_matrix((0, 2, 1.0))[None],
        "blocks.1.attn.W_O": torch.eye(d, dtype=torch.float64)[None],
        "unembed.W_U": block_matrix((2, 2, 1.0))[:, blocks[2]],
    }
    return cfg, {name: w.to(cfg.torch_dtype) for name, w in weights.items()}


def load_construction(cfg: HookedTransformerConfig, weights: dict[str, Tensor]) -> HookedTransformer:
    model = HookedTransformer(cfg)
    model.load_state_dict(weights)
    return model.eval()


def prop21_limit(tokens: Int[Tensor, "batch pos"], k: int) -> Float[Tensor, "batch pos k"]:
    """The c → ∞ output of :func:`prop21`: at position i, the mean of e_{x_j} over keys j ≤ i whose
    layer-0 "previous token" equals x_i, where position 0's previous token is x_0 itself; when no key
    matches, layer 1's scores are all equal and the output is the mean over all j ≤ i."""
    previous = torch.cat([tokens[:, :1], tokens[:, :-1]], dim=1)
    n_pos = tokens.shape[1]
    causal = torch.ones(n_pos, n_pos, dtype=torch.bool).tril()
    match = (previous[:, None, :] == tokens[:, :, None]) & causal
    keys = torch.where(match.any(-1, keepdim=True), match, causal).double()
    weights = keys / keys.sum(-1, keepdim=True)
    return weights @ torch.nn.functional.one_hot(tokens, k).double()


def empirical_bigram(tokens: Int[Tensor, "batch pos"], k: int) -> Float[Tensor, "batch pos k"]:
    """Pure in-context bigram frequencies c(x_i → b) / c(x_i → ·) over pairs inside x_0..x_i, without
    pseudo-counts; NaN where x_i has not been followed by anything yet."""
    counts = matching_keys(tokens).double() @ torch.nn.functional.one_hot(tokens, k).double()
    return counts / counts.sum(-1, keepdim=True)


def wang_ih2(d: int, beta: float, W_star: Tensor, n_ctx: int, dtype: str = "float64") -> tuple[HookedTransformerConfig, dict[str, Tensor]]:
    """Wang et al.'s Theorem 4.1: two layers, one head each, whose last-position output tends to
    IH_2 = Σ_{s=2}^{L−1} softmax_s(x_Lᵀ W* x_{s−1}) x_s as the ALiBi slope β grows.

    Residual blocks of d: [x_s | h_s | output]. Layer 0: no content scores (W_Q = W_K = 0), ALiBi
    slope β under the strict mask, so position s averages x_{s−j} with weights ∝ e^{−β(j−1)}, j ≥ 1,
    and writes h_s ≈ x_{s−1} into block 2. Layer 1: no positional term, keys s = 2..L−1 only (strict
    mask and skip_first_keys = 1: not key 1, whose h is empty, and not itself), score x_Lᵀ W* h_s, value x_s
    written into block 3, which the unembedding reads. The paper uses D = 2d and reads the attention
    output directly; our readout sees the whole residual stream, so the output gets its own block.
    """
    require_int("d", d, 1)
    require_positive("beta", beta)
    require_int("n_ctx", n_ctx, 4)
    if tuple(W_star.shape) != (d, d):
        raise ValueError(f"W* must be {d} x {d}, got {tuple(W_star.shape)}")
    D = 3 * d
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=D, d_head=D, n_heads=1, n_ctx=n_ctx, d_vocab=d, input_type="vectors",
        positional=("alibi", "none"), mask="strict", skip_first_keys=(0, 1), dtype=dtype,
    )
    blocks = [slice(0, d), slice(d, 2 * d), slice(2 * d, 3 * d)]
    eye = torch.eye(d, dtype=torch.float64)

    def matrix(*entries: tuple[int, int, Tensor]) -> Tensor:
        """D × D with the given d × d matrices at (row block, column block)."""
        out = torch.zeros(D, D, dtype=torch.float64)
        for row, col, value in entries:
            out[blocks[row], blocks[col]] = value
        return out

    sqrt_d_head = D**0.5  # the model divides q·k by sqrt(d_head); the query carries it back
    weights = {
        "embed.W_E": matrix((0, 0, eye))[:d],
        "blocks.0.attn.W_Q": matrix()[None],
        "blocks.0.attn.W_K": matrix()[None],
        "blocks.0.attn.W_V": matrix((0, 1, eye))[None],
        "blocks.0.attn.W_O": torch.eye(D, dtype=torch.float64)[None],
        "blocks.0.attn.alibi_slope": torch.tensor([beta], dtype=torch.float64),
        "blocks.1.attn.W_Q": matrix((0, 0, sqrt_d_head * eye))[None],
        "blocks.1.attn.W_K": matrix((1, 0, W_star.double().T))[None],
        "blocks.1.attn.W_V": matrix((0, 2, eye))[None],
        "blocks.1.attn.W_O": torch.eye(D, dtype=torch.float64)[None],
        "unembed.W_U": matrix((2, 2, eye))[:, blocks[2]],
    }
    return cfg, {name: w.to(cfg.torch_dtype) for name, w in weights.items()}
