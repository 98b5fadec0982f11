"""The per-token loss of a language model's forward pass: the cross-entropy of each next token from the logits, or,
for a TransformerBridge, from the unembedding's input a few sequences at a time, so that a pass's logits are never
held whole (GPT-2's are 50,257 a position: 16 sequences of 61 tokens hold 49 million).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.probes.attention.patterns import activation_at

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

LOSS_NUMBERS = 1 << 23  # logits one slice of the loss holds (32 MiB of float32; fastest here at 2 GPT-2 rows)
UNEMBED_INPUT = "unembed.hook_in"  # a TransformerBridge's final normalised residual, what the unembedding reads


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
    model: HookedModel,
    final: Float[Tensor, "batch pos d_model"],
    tokens: Int[Tensor, "batch pos"],
    scored: Bool[Tensor, "batch pos_1"] | None = None,
) -> Float[Tensor, "batch pos_1"]:
    """:func:`per_token_loss` of ``model.unembed(final)``, a few sequences at a time, so that at most
    LOSS_NUMBERS logits exist at once (they stay in the processor's cache). ``scored``: the entries wanted; the
    others are NaN, their logits never computed (the unembedding is most of a pass: a GPT-2 position's 50,257
    logits cost five blocks)."""
    wanted = torch.ones(tokens.shape[0], tokens.shape[1] - 1, dtype=torch.bool) if scored is None else scored
    losses = torch.full(wanted.shape, math.nan, dtype=torch.float64)
    rows = max(1, LOSS_NUMBERS // (final.shape[1] * model.cfg.d_vocab))
    with torch.no_grad():
        for first in range(0, len(final), rows):
            part = slice(first, first + rows)
            columns = wanted[part].any(0).nonzero().squeeze(-1)  # the entries any of these sequences needs
            logits = model.unembed(final[part][:, columns.to(final.device)])
            losses[part, columns] = next_token_loss(logits, tokens[part][:, columns + 1]).cpu()
    return losses


def stops_at_unembedding(model: HookedModel) -> bool:
    """Whether a pass's loss can be taken from the unembedding's input (:func:`pass_loss`): the model names the
    hook point, and caps no logits after the unembedding (Gemma 2's soft cap, which ``unembed`` leaves out)."""
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
