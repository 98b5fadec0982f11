"""Wang et al.'s constructions (Theorems 4.1 and 4.2): the induction heads IH_2 and IH_n on the Gaussian task,
as configs and state dicts for our HookedTransformer.

Blocks are written in the row-vector convention of the papers and of TransformerLens (x @ W).
"""

from __future__ import annotations

import torch
from torch import Tensor

from induction_probes.circuits.constructions.residual import ResidualLayout
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.model import HookedTransformerConfig
from induction_probes.circuits.models.model_config import transformer_config
from induction_probes.circuits.validation import require_int, require_positive


def wang_ih2(
    d: int, beta: float, W_star: Tensor, n_ctx: int, dtype: str = "float64"
) -> tuple[HookedTransformerConfig, dict[str, Tensor]]:
    """Wang et al.'s Theorem 4.1: two layers, one head each, whose last-position output tends to
    IH_2 = Σ_{s=2}^{L−1} softmax_s(x_Lᵀ W* x_{s−1}) x_s as the ALiBi slope β grows.

    Named residual blocks of d: [current (x_s) | previous (h_s) | output]. Layer 0: no content scores
    (W_Q = W_K = 0), ALiBi slope β under the strict mask, so position s averages x_{s−j} with weights
    ∝ e^{−β(j−1)}, j ≥ 1, and writes h_s ≈ x_{s−1} into previous. Layer 1: no positional term, keys
    s = 2..L−1 only (strict mask and skip_first_keys = 1: not key 1, whose h is empty, and not itself),
    score x_Lᵀ W* h_s, value x_s written into output, which the unembedding reads. The paper uses D = 2d and
    reads the attention output directly; our readout sees the whole residual stream, so the output gets its own block.
    """
    require_int("d", d, 1)
    require_positive("beta", beta)
    require_int("n_ctx", n_ctx, 4)
    if tuple(W_star.shape) != (d, d):
        raise BadInput(f"W* must be {d} x {d}, got {tuple(W_star.shape)}")
    layout = ResidualLayout(("current", "previous", "output"), width=d)
    D = layout.d_model
    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=D,
        d_head=D,
        n_heads=1,
        n_ctx=n_ctx,
        d_vocab=d,
        input_type="vectors",
        positional=("alibi", "none"),
        mask="strict",
        skip_first_keys=(0, 1),
        dtype=dtype,
    )
    sqrt_d_head = D**0.5  # the model divides q·k by sqrt(d_head); the query carries it back
    weights = {
        "embed.W_E": layout.embedding("current"),
        "blocks.0.attn.W_Q": layout.map()[None],
        "blocks.0.attn.W_K": layout.map()[None],
        "blocks.0.attn.W_V": layout.map(("current", "previous", 1.0))[None],
        "blocks.0.attn.W_O": torch.eye(D, dtype=torch.float64)[None],
        "blocks.0.attn.alibi_slope": torch.tensor([beta], dtype=torch.float64),
        "blocks.1.attn.W_Q": layout.map(("current", "current", sqrt_d_head))[None],
        "blocks.1.attn.W_K": layout.map(("previous", "current", W_star.double().T))[None],
        "blocks.1.attn.W_V": layout.map(("current", "output", 1.0))[None],
        "blocks.1.attn.W_O": torch.eye(D, dtype=torch.float64)[None],
        "unembed.W_U": layout.readout("output"),
    }
    return cfg, {name: w.to(cfg.torch_dtype) for name, w in weights.items()}


def distance_indicator_fit(distance: int, n_heads: int) -> tuple[Tensor, Tensor]:
    """Weights α and decays z = e^{−β} of ``n_heads`` exponentials with Σ_h α_h z_h^{j−1} = 1[j = distance]
    exactly for j = 1..n_heads, the sum-of-exponentials behind Wang et al.'s Theorem 4.3.

    The decays are z_h = h / (m (m + 1)) for m = n_heads: they shrink as heads are added, so both the
    tail (j > m) and the softmax-normalisation mismatch at early positions vanish as m grows.
    """
    if n_heads < distance:
        raise BadInput(f"a group needs at least {distance} heads to single out distance {distance}")
    m = n_heads
    z = torch.arange(1, m + 1, dtype=torch.float64) / (m * (m + 1))
    vandermonde = z[None, :] ** torch.arange(m, dtype=torch.float64)[:, None]  # [j − 1, h]
    target = torch.zeros(m, dtype=torch.float64)
    target[distance - 1] = 1.0
    return torch.linalg.solve(vandermonde, target), z


def back(distance: int) -> str:
    """Theorem 4.3's residual block that holds ≈ x_{s−distance}."""
    return f"back {distance}"


def previous_token_groups(layout: ResidualLayout, n: int, n_heads: int, width: int) -> tuple[Tensor, Tensor, Tensor]:
    """Theorem 4.3's first layer: W_V, W_O and ALiBi slopes of ``n_heads`` heads in n − 1 groups, group i
    writing ≈ x_{s−i} into residual block ``back i`` (see :func:`wang_ihn`)."""
    d, D, eye = layout.width, layout.d_model, layout.identity()
    extra = n_heads - n * (n - 1) // 2  # beyond each group's minimum, dealt out evenly
    groups = [distance + extra // (n - 1) + (distance - 1 < extra % (n - 1)) for distance in range(1, n)]
    W_V, W_O = torch.zeros(n_heads, D, width, dtype=torch.float64), torch.zeros(n_heads, width, D, dtype=torch.float64)
    slopes = torch.zeros(n_heads, dtype=torch.float64)
    head = 0
    for distance, size in enumerate(groups, start=1):
        alpha, z = distance_indicator_fit(distance, size)
        for a, decay in zip(alpha, z):
            W_V[head, layout["current"], :d] = eye
            W_O[head, :d, layout[back(distance)]] = a / (1 - decay) * eye
            slopes[head] = -torch.log(decay)
            head += 1
    return W_V, W_O, slopes


def window_selections(layout: ResidualLayout, n: int, width: int) -> tuple[Tensor, Tensor]:
    """Theorem 4.3's second layer reads two windows of n − 1 blocks: the query's (x_{L−n+2}, …, x_L) and the
    key's (x_{s−n+1}, …, x_{s−1}), each a d_model × width selection from the residual stream."""
    d, eye = layout.width, layout.identity()
    window = [layout[name] for name in ("current", *(back(i) for i in range(1, n)))]  # x_s, x_{s−1}, …
    select_query = torch.zeros(layout.d_model, width, dtype=torch.float64)
    select_key = torch.zeros(layout.d_model, width, dtype=torch.float64)
    for slot in range(n - 1):
        select_query[window[n - 2 - slot], slot * d : (slot + 1) * d] = eye
        select_key[window[n - 1 - slot], slot * d : (slot + 1) * d] = eye
    return select_query, select_key


def wang_ihn(
    d: int, n: int, n_heads: int, W_star: Tensor, n_ctx: int, dtype: str = "float64"
) -> tuple[HookedTransformerConfig, dict[str, Tensor]]:
    """Wang et al.'s Theorem 4.3: IH_n from a first layer of ``n_heads`` ALiBi heads in n − 1 groups.

    Named residual blocks of d: [current (x_s) | back 1 (≈x_{s−1}) | … | back n−1 | output]. Group i (heads
    split as evenly as possible) writes Σ_h α_h Σ_j z_h^{j−1} x_{s−j} ≈ x_{s−i} into back i: each head averages the
    past with ALiBi weights ∝ z_h^{j−1} (slope β_h = −log z_h, strict mask), and its output is scaled by
    α_h / (1 − z_h) to undo the softmax normaliser of a long past (exact only asymptotically: the
    normaliser at position s sums s terms, the mismatch the reviewers pointed out). Layer 1 matches the
    query window (x_L, …, x_{L−n+2}) with W* against the key window (x_{s−1}, …, x_{s−n+1}) over keys
    s ≥ n, and copies x_s into the output block.
    """
    require_int("d", d, 1)
    require_int("n", n, 2)
    require_int("n_heads", n_heads, n * (n - 1) // 2)  # group i needs i heads to single out distance i
    require_int("n_ctx", n_ctx, n + 2)
    width = (n - 1) * d
    if tuple(W_star.shape) != (width, width):
        raise BadInput(f"W* must be {width} x {width} for n={n}, d={d}; got {tuple(W_star.shape)}")
    layout = ResidualLayout(("current", *(back(i) for i in range(1, n)), "output"), width=d)
    D = layout.d_model
    cfg = transformer_config(
        n_layers=2,
        d_model=D,
        d_head=width,
        layer_heads=(n_heads, 1),
        n_heads=1,
        n_ctx=n_ctx,
        d_vocab=d,
        input_type="vectors",
        positional=("alibi", "none"),
        mask="strict",
        skip_first_keys=(0, n - 1),
        dtype=dtype,
    )
    eye = layout.identity()
    W_V0, W_O0, slopes = previous_token_groups(layout, n, n_heads, width)
    select_query, select_key = window_selections(layout, n, width)
    W_V1, W_O1 = torch.zeros(1, D, width, dtype=torch.float64), torch.zeros(1, width, D, dtype=torch.float64)
    W_V1[0, layout["current"], :d] = eye
    W_O1[0, :d, layout["output"]] = eye
    weights = {
        "embed.W_E": layout.embedding("current"),
        "blocks.0.attn.W_Q": torch.zeros(n_heads, D, width, dtype=torch.float64),
        "blocks.0.attn.W_K": torch.zeros(n_heads, D, width, dtype=torch.float64),
        "blocks.0.attn.W_V": W_V0,
        "blocks.0.attn.W_O": W_O0,
        "blocks.0.attn.alibi_slope": slopes,
        "blocks.1.attn.W_Q": (width**0.5 * select_query)[None],  # the model divides scores by sqrt(d_head)
        "blocks.1.attn.W_K": (select_key @ W_star.double().T)[None],
        "blocks.1.attn.W_V": W_V1,
        "blocks.1.attn.W_O": W_O1,
        "unembed.W_U": layout.readout("output"),
    }
    return cfg, {name: w.to(cfg.torch_dtype) for name, w in weights.items()}
