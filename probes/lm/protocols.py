"""The standard protocols for induction heads in language models (Olsson et al. 2022).

- :func:`repeated_random_tokens` — sequences [BOS] + R + R, R of L tokens drawn uniformly (with
  replacement) from the model's vocabulary without its special tokens. A model can predict the second
  R only by copying from the first: an induction head at query i attends to key i − L + 1.
- :class:`InductionLoss` — on those sequences, the mean loss on the tokens R[1:] of the first copy and
  of the second (the *induction loss*), and the ICL score: the loss at one token of the second copy minus
  the loss at the same token in the first. Use the repeated half's loss, or the gap between the halves,
  to ask whether ablating a head removes induction.
- :func:`text_icl_score` — Olsson et al.'s in-context learning score on a text: the loss at token 500
  minus the loss at token 50, averaged over consecutive windows of the text.

"The loss at token t" is −log p(x_t | x_<t): the prediction made at position t − 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.common.limits import require_numbers
from induction_probes.probes.behaviour import single_position_icl_score

TEXT_EARLY, TEXT_LATE = 50, 500  # Olsson et al.'s ICL score: loss at token 500 minus loss at token 50


@dataclass(frozen=True)
class RepeatedTokens:
    """``tokens`` = ``prefix`` tokens (a BOS, or none) + R + R, with R of ``length`` tokens."""

    tokens: Int[Tensor, "batch pos"]
    length: int
    prefix: int = 0

    def __post_init__(self) -> None:
        check_repeated(self.tokens, self.length, self.prefix)


def check_repeated(tokens: Tensor, length: int, prefix: int) -> None:
    if tokens.ndim != 2 or tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
        raise ValueError(f"tokens must be integer ids of shape [batch, pos], got {tuple(tokens.shape)} {tokens.dtype}")
    if length < 2 or tokens.shape[1] != prefix + 2 * length:
        raise ValueError(f"repeated tokens need {prefix} + 2 x L positions with L >= 2, got {tokens.shape[1]}")
    first, second = tokens[:, prefix : prefix + length], tokens[:, prefix + length :]
    if not torch.equal(first, second):
        raise ValueError("the tokens' second half does not repeat their first: the induction score needs R + R")


def from_tokens(tokens: Tensor) -> RepeatedTokens:
    """Plain tokens [batch, 2L] (or [2L]) whose second half repeats the first, with no prefix."""
    tokens = tokens[None] if tokens.ndim == 1 else tokens
    return RepeatedTokens(tokens, tokens.shape[-1] // 2, 0)


def special_ids(model) -> set[int]:
    """Token ids the tokenizer or the model's config reserve (BOS, EOS, padding, unknown, added)."""
    tokenizer = getattr(model, "tokenizer", None)
    ids = set(tokenizer.all_special_ids) if tokenizer is not None else set()
    config = getattr(getattr(model, "original_model", None), "config", None)
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        value = getattr(config, name, None)
        ids |= set(value) if isinstance(value, (list, tuple)) else {value}
    return {i for i in ids if isinstance(i, int)}


def vocabulary(model) -> Int[Tensor, " token"]:
    """The ids random tokens are drawn from: those the embedding and the tokenizer both have (a padded
    embedding's extra rows were never trained), without the special tokens."""
    size = model.cfg.d_vocab
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None and tokenizer.vocab_size > 0:
        size = min(size, len(tokenizer))
    keep = torch.ones(size, dtype=torch.bool)
    keep[[i for i in special_ids(model) if 0 <= i < size]] = False
    ids = keep.nonzero().squeeze(1)
    if len(ids) < 2:
        raise ValueError(f"the model's vocabulary has {len(ids)} ordinary token(s): no random tokens to draw")
    return ids


def bos_id(model) -> int | None:
    """The model's beginning-of-sequence token, if it has one inside its vocabulary."""
    tokenizer = getattr(model, "tokenizer", None)
    config = getattr(getattr(model, "original_model", None), "config", None)
    value = getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else getattr(config, "bos_token_id", None)
    return value if isinstance(value, int) and 0 <= value < model.cfg.d_vocab else None


def repeated_random_tokens(
    model, length: int = 50, batch: int = 16, seed: int = 0, bos: bool | None = None
) -> RepeatedTokens:
    """``batch`` sequences [BOS] + R + R, R of ``length`` tokens drawn uniformly from :func:`vocabulary`
    with a generator seeded by ``seed`` (the same seed and vocabulary give the same tokens). ``bos``: prepend
    the model's BOS token (default: when it has one), as TransformerLens's ``to_tokens`` does."""
    if length < 2 or batch < 1:
        raise ValueError(f"repeated random tokens need length >= 2 and batch >= 1, got {length} and {batch}")
    start = bos_id(model)
    if bos and start is None:
        raise ValueError("the model has no BOS token in its vocabulary: use bos=False")
    prefix = int(start is not None and bos is not False)
    n_pos = prefix + 2 * length
    if n_pos > model.cfg.n_ctx:
        raise ValueError(f"{prefix} + 2 x {length} tokens exceed the model's context of {model.cfg.n_ctx}")
    require_numbers("the repeated random tokens", batch * n_pos)
    ids = vocabulary(model)
    generator = torch.Generator().manual_seed(seed)
    half = ids[torch.randint(0, len(ids), (batch, length), generator=generator)]
    first = torch.full((batch, prefix), start if prefix else 0, dtype=torch.long)
    return RepeatedTokens(torch.cat([first, half, half], dim=1), length, prefix)


def per_token_loss(
    logits: Float[Tensor, "batch pos d_vocab"], tokens: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch pos_1"]:
    """Cross-entropy of each next token: entry t is the loss at token t + 1."""
    log_probs = torch.log_softmax(logits[:, :-1].double(), dim=-1)
    return -log_probs.gather(-1, tokens[:, 1:, None].to(log_probs.device)).squeeze(-1)


@dataclass(frozen=True)
class InductionLoss:
    """Losses on repeated random tokens, averaged over sequences.

    ``first_half`` and ``repeated_half``: mean loss on the tokens R[1:] of each copy (R[0] of the second
    copy follows R[-1], which nothing before predicts, so it is left out of both). ``icl_score``: the loss
    at token R[L // 2] of the second copy minus the loss at the same token of the first (negative when the
    model uses its context). ``gap`` = first_half − repeated_half: what induction buys.
    """

    first_half: float
    repeated_half: float
    icl_score: float

    @property
    def gap(self) -> float:
        return self.first_half - self.repeated_half

    def to_json(self) -> dict:
        return {
            "first_half_loss": self.first_half,
            "induction_loss": self.repeated_half,
            "gap": self.gap,
            "icl_score": self.icl_score,
        }


def induction_loss(mean_loss: Float[Tensor, " pos_1"], length: int, prefix: int = 0) -> InductionLoss:
    """:class:`InductionLoss` from the per-token loss averaged over sequences (entry t: token t + 1)."""
    first = mean_loss[prefix : prefix + length - 1]  # tokens prefix + 1 .. prefix + L - 1
    second = mean_loss[prefix + length : prefix + 2 * length - 1]  # tokens prefix + L + 1 .. prefix + 2L - 1
    early = prefix + length // 2  # a token of the first copy; the same token L later in the second
    icl = single_position_icl_score(mean_loss, early - 1, early + length - 1)  # Olsson et al.'s: one token each
    return InductionLoss(first.mean().item(), second.mean().item(), icl)


@dataclass(frozen=True)
class TextICL:
    """Olsson et al.'s ICL score on a text: loss at token ``late`` minus loss at token ``early``."""

    icl_score: float
    early_loss: float
    late_loss: float
    windows: int
    early: int
    late: int

    def to_json(self) -> dict:
        return dict(vars(self))
