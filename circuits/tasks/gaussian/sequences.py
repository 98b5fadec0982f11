"""The Gaussian induction task (Wang et al., "How Transformers Implement Induction Heads").

Sequences x_1..x_L in R^d, standard Gaussian or Boolean ±1, and targets for the last position,
computed exactly and vectorised (1-indexed in the formulas, as in the paper; 0-indexed in the code):

    IH_2   = Σ_{s=2}^{L−1} softmax_s(x_Lᵀ W* x_{s−1}) x_s                        (eq. 4, as corrected)
    IH_n   = Σ_{s=n}^{L−1} softmax_s(X_{L−n+2:L}ᵀ W* X_{s−n+1:s−1}) x_s,  X_{a:b} = (x_a; …; x_b)   (eq. 6)
    GIH_n  = the same with a general similarity g(query window, key window) in place of the bilinear form
    4-gram = x_{L−2}
    mixed  = α*·x_{L−2} + IH_2                                                      (the toy model's target)

IH_2 is IH_n at n = 2. A key window X_{s−n+1:s−1} is the n − 1 tokens before x_s; the query window is
the last n − 1 tokens. The paper states the summation limits for n = 2 only; IH_n takes eq. 4's by analogy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import require_sequences
from induction_probes.circuits.metrics import mse_over_variance
from induction_probes.circuits.validation import require_int, require_positive

Similarity = Callable[[Tensor, Tensor], Tensor]  # (query [batch, w], keys [batch, n_keys, w]) -> [batch, n_keys]


def sample_sequences(
    n_seqs: int, seq_len: int, d: int, *, generator: torch.Generator, boolean: bool = False
) -> Float[Tensor, "batch pos d"]:
    """i.i.d. standard Gaussian tokens, or uniform ±1 tokens with ``boolean``."""
    require_int("n_seqs", n_seqs, 1)
    require_int("seq_len", seq_len, 2)
    require_int("d", d, 1)
    require_sequences("n_seqs", n_seqs, seq_len * d + seq_len**2)  # the tokens, and one attention pattern each
    if boolean:
        return torch.randint(0, 2, (n_seqs, seq_len, d), generator=generator).double() * 2 - 1
    return torch.randn(n_seqs, seq_len, d, generator=generator, dtype=torch.float64)


def windows(x: Float[Tensor, "batch pos d"], n: int) -> tuple[Tensor, Tensor, Tensor]:
    """(query window [batch, (n−1)d], key windows [batch, L−n, (n−1)d], values [batch, L−n, d]).

    Key window i (0-indexed) is x[i .. i+n−2], the n − 1 tokens before the value x[i+n−1]; values run
    over x[n−1 .. L−2] (1-indexed s = n .. L−1); the query window is x[L−n+1 .. L−1].
    """
    batch, seq_len, d = x.shape
    require_int("n", n, 2)
    if n > seq_len - 1:
        raise BadInput(f"n must be <= L - 1 = {seq_len - 1} so that some key exists, got n={n}")
    all_windows = x.unfold(1, n - 1, 1).transpose(-1, -2).reshape(batch, seq_len - n + 2, (n - 1) * d)
    return all_windows[:, -1], all_windows[:, : seq_len - n], x[:, n - 1 : seq_len - 1]


def generalized_induction_head(
    x: Float[Tensor, "batch pos d"], n: int, similarity: Similarity
) -> Float[Tensor, "batch d"]:
    """GIH_n: softmax over s of g(query window, key window s), weighting x_s."""
    query, keys, values = windows(x, n)
    scores = similarity(query, keys)
    if scores.shape != keys.shape[:2]:
        raise BadInput(
            f"the similarity must return [batch, n_keys] = {tuple(keys.shape[:2])}, got {tuple(scores.shape)}"
        )
    return torch.einsum("bs,bsd->bd", torch.softmax(scores, dim=-1), values)


def bilinear(W_star: Tensor) -> Similarity:
    """g(u, v) = uᵀ W* v, the similarity of IH_n."""

    def similarity(query: Tensor, keys: Tensor) -> Tensor:
        return torch.einsum("bu,uv,bsv->bs", query, W_star.to(query.dtype), keys)

    return similarity


def induction_head(x: Float[Tensor, "batch pos d"], n: int, W_star: Tensor) -> Float[Tensor, "batch d"]:
    """IH_n with W* of shape [(n−1)d, (n−1)d]; n = 2 is the vanilla induction head IH_2."""
    width = (n - 1) * x.shape[-1]
    if tuple(W_star.shape) != (width, width):
        raise BadInput(f"W* must be {width} x {width} for n={n}, d={x.shape[-1]}; got {tuple(W_star.shape)}")
    return generalized_induction_head(x, n, bilinear(W_star))


def four_gram(x: Float[Tensor, "batch pos d"]) -> Float[Tensor, "batch d"]:
    """x_{L−2}: a function of the last tokens that the model cannot read from the residual stream directly."""
    if x.shape[1] < 4:
        raise BadInput(f"the 4-gram target needs L >= 4, got L={x.shape[1]}")
    return x[:, -3]


def mixed_target(x: Float[Tensor, "batch pos d"], alpha_star: float, W_star: Tensor) -> Float[Tensor, "batch d"]:
    """α*·x_{L−2} + IH_2: the target of the toy model's four-phase dynamics."""
    require_positive("alpha_star", alpha_star)
    return alpha_star * four_gram(x) + induction_head(x, 2, W_star)


@dataclass(frozen=True)
class GaussianEvalSet:
    """Fixed sequences (float64) and their targets at the last position."""

    x: Float[Tensor, "batch pos d"]
    targets: Float[Tensor, "batch d"]

    @property
    def inputs(self) -> Float[Tensor, "batch pos d"]:
        return self.x.float()

    def metrics(self, outputs: Float[Tensor, "batch pos d"]) -> dict[str, Any]:
        """MSE at the last position against the float32 targets the model trains on, and the same over
        the target's variance (1 = predicting the mean)."""
        targets = self.targets.float()
        mse = F.mse_loss(outputs[:, -1].double(), targets.double()).item()
        return {"eval_loss": mse, "relative_mse": mse_over_variance(outputs[:, -1], targets)}
