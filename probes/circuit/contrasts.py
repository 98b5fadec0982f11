"""The clean and corrupted runs path patching compares (:mod:`.edges`), and the measure it reads from each: a
corruption keeps the token statistics and removes the in-context signal, so that the measure's rise from the clean
run to the corrupted one (the *gap*) is what the context is worth.

- **ICL-MC** (:class:`MarkovContrast`): each sequence's context is another evaluation sequence's, drawn from
  another chain, and its last n − 1 tokens are kept (the last token for bigram chains, the last two for trigram
  ones), so the model is asked the same question (what follows these tokens) with another chain's statistics in
  its context. The measure is the paper's: KL(true next-token distribution ‖ model) at the last token, per
  sequence, the true distribution being the clean sequence's chain's row for its last tokens.
- **Repeated random tokens** (:class:`RepeatedContrast`, a language model's protocol, Olsson et al. 2022): the
  first copy of R is redrawn, so that the second copy repeats nothing before it, and the measure is the loss on
  the second copy's tokens R[1:] (its induction loss).

Each measure is lower where the model does better, per sequence, in float64.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.probes.lm.losses import pass_loss, per_token_loss
from induction_probes.probes.lm.protocols import RepeatedTokens, induction_loss, vocabulary

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel
    from induction_probes.circuits.tasks.markov.strategies import MarkovEvalSet

Forward = Callable[[list], Tensor]  # a forward pass with these extra hooks, returning logits


def corrupted_context(tokens: Int[Tensor, "batch pos"], kept: int = 1) -> Int[Tensor, "batch pos"]:
    """Each sequence's context replaced by the previous sequence's (another chain's), its last ``kept`` tokens
    kept: the n − 1 tokens a chain of order n − 1 conditions its next token on, so that the question is the same."""
    if len(tokens) < 2:
        raise BadInput("path patching needs at least 2 sequences: one's context comes from another's chain")
    corrupted = tokens.roll(1, dims=0).clone()
    corrupted[:, -kept:] = tokens[:, -kept:]
    return corrupted


def last_token_kl(logits: Tensor, truth: Float[Tensor, "batch k"]) -> Float[Tensor, " batch"]:
    """KL(truth ‖ softmax(logits)) at the last position, per sequence, in float64."""
    log_q = torch.log_softmax(logits[:, -1].double().cpu(), dim=-1)
    p = truth.double()
    return (p * (p.clamp_min(1e-300).log() - log_q)).sum(-1)


@dataclass(frozen=True)
class MarkovContrast:
    """ICL-MC's clean and corrupted sequences and the truth at each one's last token (module docstring)."""

    clean: Int[Tensor, "batch pos"]
    corrupted: Int[Tensor, "batch pos"]
    truth: Float[Tensor, "batch k"]

    @classmethod
    def of(cls, eval_set: MarkovEvalSet) -> MarkovContrast:
        tokens = eval_set.inputs
        return cls(tokens, corrupted_context(tokens, kept=eval_set.sample.n - 1), eval_set.truth[:, -1])

    def rows(self, part: slice) -> MarkovContrast:
        return MarkovContrast(self.clean[part], self.corrupted[part], self.truth[part])

    def measure(self, model: HookedModel, forward: Forward) -> Float[Tensor, " batch"]:
        return self.from_logits(forward([]))

    def from_logits(self, logits: Tensor) -> Float[Tensor, " batch"]:
        return last_token_kl(logits, self.truth)


@dataclass(frozen=True)
class RepeatedContrast:
    """Repeated random tokens and the same sequences with their first copy of R redrawn (module docstring)."""

    repeated: RepeatedTokens
    corrupted: Int[Tensor, "batch pos"]

    @classmethod
    def of(cls, model: HookedModel, repeated: RepeatedTokens, seed: int) -> RepeatedContrast:
        return cls(repeated, redrawn_first_copy(model, repeated, seed))

    @property
    def clean(self) -> Int[Tensor, "batch pos"]:
        return self.repeated.tokens

    def rows(self, part: slice) -> RepeatedContrast:
        return RepeatedContrast(self.repeated.rows(part), self.corrupted[part])

    def measure(self, model: HookedModel, forward: Forward) -> Float[Tensor, " batch"]:
        """The induction loss of a pass, its logits made only where it reads them (:func:`pass_loss`)."""
        return induction_loss(
            pass_loss(model, self.clean, forward, self.repeated.scored()), self.repeated
        ).repeated_half_per_sequence

    def from_logits(self, logits: Tensor) -> Float[Tensor, " batch"]:
        return induction_loss(per_token_loss(logits, self.clean), self.repeated).repeated_half_per_sequence


def redrawn_first_copy(model: HookedModel, repeated: RepeatedTokens, seed: int) -> Int[Tensor, "batch pos"]:
    """``repeated``'s sequences with their first R replaced by tokens drawn uniformly from the model's ordinary
    vocabulary by a generator seeded by ``seed`` (the second R, and all else, kept)."""
    ids = vocabulary(model)
    generator = torch.Generator().manual_seed(seed)
    tokens = repeated.tokens
    fresh = ids[torch.randint(0, len(ids), tokens.shape, generator=generator)]
    positions = torch.arange(tokens.shape[1])[None]
    starts, lengths = repeated.starts[:, None], repeated.lengths[:, None]
    first_copy = (positions >= starts) & (positions < starts + lengths)
    return torch.where(first_copy, fresh, tokens)


Contrast = MarkovContrast | RepeatedContrast
