"""The per-token loss of a language model's forward pass: the cross-entropy of each next token from the logits, or,
for a TransformerBridge, from the unembedding's input a few sequences at a time, so that a pass's logits are never
held whole (GPT-2's are 50,257 a position: 16 sequences of 61 tokens hold 49 million).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol, TypeGuard

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.hooked_model import HookedModel
from induction_probes.probes.attention.patterns import activation_at

LOSS_NUMBERS = 1 << 23  # logits one slice of the loss holds (32 MiB of float32; fastest here at 2 GPT-2 rows)
# Positions and logit columns one block of :func:`streamed_loss` holds: 512 × 2,048 float32 logits, 4 MiB, a core's
# L2 cache here. Measured on GPT-2 small's unembedding at 928 positions, 2 threads: 0.27 s, against 0.38 s for whole
# rows of 50,257 logits, two sequences at a time; 464 to 928 rows and 2,048 to 4,096 columns ran alike.
LOSS_ROWS, VOCAB_BLOCK = 512, 2048
UNEMBED_INPUT = "unembed.hook_in"  # a TransformerBridge's final normalised residual, what the unembedding reads


class Unembedded(HookedModel, Protocol):
    """A :class:`HookedModel` whose unembedding is a module of its own, ``unembed`` (a TransformerBridge's: the
    residual stream at its input ``unembed.hook_in`` to logits)."""

    @property
    def unembed(self) -> torch.nn.Module: ...


class Overflow(BadInput):
    """A forward pass whose numbers left float32's range: refused (one line, status 2), with where it began
    where a caller can say (:func:`~induction_probes.probes.lm.series.probe_tokens`)."""


def per_token_loss(
    logits: Float[Tensor, "batch pos d_vocab"], tokens: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch pos_1"]:
    """Cross-entropy of each next token: entry t is the loss at token t + 1 (:func:`next_token_loss`)."""
    return next_token_loss(logits[:, :-1], tokens[:, 1:])


def next_token_loss(
    logits: Float[Tensor, "batch pos d_vocab"], targets: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch pos"]:
    """−log softmax(logits)[target] at every position: logsumexp(logits) − the target's logit, taken in the
    logits' float32 (within about 1e-6 of float64 at GPT-2's 50,257 logits: a sum of exponentials of at most 1
    each) and returned as float64 for the means. A loss that is not finite (a forward pass that overflowed: an
    infinite or NaN logit makes it so) is :class:`Overflow`, never a NaN in a table."""
    chosen = logits.gather(-1, targets[..., None].to(logits.device)).squeeze(-1)
    losses = (torch.logsumexp(logits, -1) - chosen).double()
    if not bool(torch.isfinite(losses).all()):
        raise Overflow("the forward pass overflows: the logits are not finite (weights beyond float32's range?)")
    return losses


def unembedded_loss(
    model: Unembedded,
    final: Float[Tensor, "batch pos d_model"],
    tokens: Int[Tensor, "batch pos"],
    scored: Bool[Tensor, "batch pos_1"] | None = None,
) -> Float[Tensor, "batch pos_1"]:
    """:func:`per_token_loss` of ``model.unembed(final)``, computed only at the ``scored`` entries (NaN elsewhere; the
    unembedding is most of a pass: a GPT-2 position's 50,257 logits cost five blocks). Where the unembedding is the
    linear map its weights say (checked on one position), by :func:`streamed_loss`; otherwise a few positions at a
    time, so that at most LOSS_NUMBERS logits exist at once."""
    wanted = torch.ones(tokens.shape[0], tokens.shape[1] - 1, dtype=torch.bool) if scored is None else scored
    losses = torch.full(wanted.shape, math.nan, dtype=torch.float64)
    rows = final[:, :-1][wanted.to(final.device)]
    targets = tokens[:, 1:][wanted].to(final.device)
    with torch.no_grad():
        weights = linear_unembedding(model, rows[:1])
        if weights is not None:
            losses[wanted] = streamed_loss(rows, targets, *weights).cpu()
            return losses
        at_once = max(1, LOSS_NUMBERS // model.cfg.d_vocab)
        for first in range(0, len(rows), at_once):
            part = slice(first, first + at_once)
            losses[wanted.nonzero()[part].unbind(-1)] = next_token_loss(
                model.unembed(rows[part][None])[0], targets[part]
            ).cpu()
    return losses


def linear_unembedding(
    model: Unembedded, probe: Float[Tensor, "row d_model"]
) -> tuple[Float[Tensor, "d_model d_vocab"], Float[Tensor, " d_vocab"] | None] | None:
    """``(W_U, b_U)`` where ``model.unembed(x)`` is x W_U + b_U, as on ``probe`` to float32 rounding; else None."""
    unembed = model.unembed
    weight, bias = getattr(unembed, "W_U", None), getattr(unembed, "b_U", None)
    if not isinstance(weight, Tensor) or not (bias is None or isinstance(bias, Tensor)) or not len(probe):
        return None
    expected = unembed(probe[None])[0]  # as a pass gives it: [batch, pos, d_model]
    linear = probe @ weight + (0 if bias is None else bias)
    same = expected.shape == linear.shape and torch.allclose(linear, expected, rtol=1e-4, atol=1e-4)
    return (weight, bias) if same else None


def streamed_loss(
    rows: Float[Tensor, "row d_model"],
    targets: Int[Tensor, " row"],
    weight: Float[Tensor, "d_model d_vocab"],
    bias: Float[Tensor, " d_vocab"] | None,
) -> Float[Tensor, " row"]:
    """−log softmax(rows W + b)[target] of each row, as :func:`next_token_loss` takes it, with the log-sum-exp over
    blocks of VOCAB_BLOCK logits and a running maximum (the online softmax, Milakov & Gimelshein 2018): LOSS_ROWS
    rows' block stays in the processor's cache while its maximum and exponentials are taken, where a row's
    50,257 logits would not. The target's logit is taken in float64."""
    chosen = torch.einsum("rd,dr->r", rows.double(), weight[:, targets].double())
    if bias is not None:
        chosen = chosen + bias[targets].double()
    parts = []
    for first in range(0, len(rows), LOSS_ROWS):
        part = rows[first : first + LOSS_ROWS]
        peak = torch.full((len(part),), -math.inf, dtype=part.dtype, device=part.device)
        total = torch.zeros_like(peak)
        for column in range(0, weight.shape[1], VOCAB_BLOCK):
            logits = part @ weight[:, column : column + VOCAB_BLOCK]
            if bias is not None:
                logits += bias[column : column + VOCAB_BLOCK]
            new_peak = torch.maximum(peak, logits.amax(-1))
            total = total * torch.exp(peak - new_peak) + torch.exp(logits - new_peak[:, None]).sum(-1)
            peak = new_peak
        parts.append(peak + total.log())
    losses = torch.cat(parts).double() - chosen
    if not bool(torch.isfinite(losses).all()):
        raise Overflow("the forward pass overflows: the logits are not finite (weights beyond float32's range?)")
    return losses


def stops_at_unembedding(model: HookedModel) -> TypeGuard[Unembedded]:
    """Whether a pass's loss can be taken from the unembedding's input (:func:`pass_loss`): the model names the
    hook point, and caps no logits after the unembedding (Gemma 2's soft cap, which ``unembed`` leaves out). A
    hook point is named by its module's path, so a model that names this one has the module ``unembed``."""
    soft_cap = getattr(model.cfg, "output_logits_soft_cap", None)
    return UNEMBED_INPUT in (getattr(model, "hook_dict", None) or {}) and not (soft_cap is not None and soft_cap > 0)


def pass_loss(
    model: HookedModel,
    tokens: Int[Tensor, "batch pos"],
    forward: Callable[[list], Tensor],
    scored: Bool[Tensor, "batch pos_1"] | None = None,
) -> Float[Tensor, "batch pos_1"]:
    """The per-token loss of one forward pass, ``forward(hooks)`` (the pass on ``tokens`` with these extra hooks,
    returning logits). Where the unembedding is a hook point (a TransformerBridge), the pass stops at its input
    and :func:`unembedded_loss` takes the loss from there: a pass's logits (GPT-2: 50,257 a position) are never
    held whole, a pass need not be cut to fit them, and only the ``scored`` entries are computed (NaN
    elsewhere; every entry where the model's whole logits are read)."""
    if not stops_at_unembedding(model):
        return per_token_loss(forward([]), tokens).cpu()
    final = activation_at(forward, UNEMBED_INPUT)
    if final is not None:
        return unembedded_loss(model, final, tokens, scored)
    raise RuntimeError(f"the forward pass never reached {UNEMBED_INPUT}")
