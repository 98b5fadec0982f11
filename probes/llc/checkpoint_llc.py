"""The local learning coefficient of an ICL-MC checkpoint and of Proposition 2.1's construction, by the
calibrated estimator of :mod:`induction_probes.probes.llc.estimator` (Lau et al. 2023; over training,
Hoogland et al. 2024, "The Developmental Landscape of In-Context Learning").

The loss is the next-token cross-entropy on sequences of the run's own task, averaged over the positions of a
sequence: a sample is one sequence, so n is the number of sequences. The estimator's defaults follow its
documented rule (nβ = n / ln n, γ and the step from the Hessian's largest eigenvalue); every number it uses
is in the estimate's ``settings``.

Proposition 2.1's construction is not a minimum of this loss: its logits are the in-context bigram frequencies
themselves (numbers in [0, 1], not their logarithms), so scaling the unembedding changes the loss, and so do
the embedding and the attention weights. :func:`construction_at_best_scales` fits the construction's free
scales (the attention scale c and the unembedding scale) and the estimator is asked at that point; its
diagnostics then decide whether it is a minimum of the full parameter space.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float
from torch import Tensor
from torch.func import functional_call

from induction_probes.circuits.constructions.edelman import prop21
from induction_probes.circuits.constructions.loading import load_construction
from induction_probes.probes.llc.estimator import estimate_llc

if TYPE_CHECKING:
    from torch import nn

SCALED = {"c": ("blocks.0.attn.W_Q", "blocks.1.attn.W_Q", "blocks.1.attn.W_K"), "unembed": ("unembed.W_U",)}


def next_token_loss(model: nn.Module, batch: tuple[Tensor]) -> Float[Tensor, ""]:
    """Mean next-token cross-entropy of a batch of sequences [batch, pos], from the logits, so that any model
    of tokens is sampled the same way (the minimal model returns logits only)."""
    tokens = batch[0]
    logits = model(tokens)
    return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())


def checkpoint_llc(model: nn.Module, tokens: Tensor, **settings):
    """The estimator on ``tokens`` [n_seqs, seq_len] with the next-token loss; ``settings`` override its
    defaults."""
    return estimate_llc(model, next_token_loss, (tokens,), **settings)


def construction_at_best_scales(k: int, seq_len: int, tokens: Tensor, c: float = 100.0) -> tuple:
    """Proposition 2.1's construction with its attention scale c and unembedding scale fitted (L-BFGS on their
    logarithms) to ``tokens``: (model, {"c", "unembed", "loss_before", "loss_after"})."""

    model = load_construction(*prop21(k, c, seq_len, "float32"), device=tokens.device)
    base = {name: p.detach().clone() for name, p in model.named_parameters()}
    logs = torch.zeros(2, device=tokens.device, requires_grad=True)  # log of the factors on c and on the unembedding

    def scaled(values: Tensor) -> dict:
        factors = {"c": values[0].exp(), "unembed": values[1].exp()}
        return {
            name: w * next((factors[s] for s, names in SCALED.items() if name in names), 1.0)
            for name, w in base.items()
        }

    def loss() -> Tensor:
        return functional_call(model, scaled(logs), (tokens,), {"return_type": "loss"})

    before = float(loss().detach())
    optimiser = torch.optim.LBFGS([logs], max_iter=100, tolerance_grad=1e-7, line_search_fn="strong_wolfe")

    def closure():
        optimiser.zero_grad()
        value = loss()
        value.backward()
        return value

    optimiser.step(closure)
    model.load_state_dict({name: w.detach() for name, w in scaled(logs).items()})
    after = float(loss().detach())
    fitted = logs.detach()  # float() of a tensor that requires grad makes torch warn
    scales = {
        "c": c * math.exp(float(fitted[0])),
        "unembed": math.exp(float(fitted[1])),
        "loss_before": before,
        "loss_after": after,
    }
    return model, scales


def construction_estimates(k: int, seq_len: int, tokens: Tensor, **settings) -> dict:
    """The estimator at the construction as written (c = 100) and at its best scales. The fit of the scales is
    a descent direction the estimator's local test cannot see where λ_max, and so γ, is huge: the point as
    written is refused where the fit lowers the loss by more than 10 % of the sampled rise."""

    written = load_construction(*prop21(k, 100.0, seq_len, "float32"), device=tokens.device)
    as_written = checkpoint_llc(written, tokens, **settings).to_json()
    model, scales = construction_at_best_scales(k, seq_len, tokens)
    descent = scales["loss_before"] - scales["loss_after"]
    if as_written["loss_rise"] is not None and descent > 0.1 * abs(as_written["loss_rise"]):
        as_written["problems"].append(
            f"not a minimum: fitting the construction's scales lowers the loss by "
            f"{descent:.3g}, more than 10 % of the sampled rise {as_written['loss_rise']:.3g}"
        )
        as_written |= {"llc": None, "llc_std": None, "llc_stderr": None}
    best = checkpoint_llc(model, tokens, **settings)
    return {"as_written": as_written, "best_scales": scales | best.to_json()}
