"""The protocol for induction heads in language models: repeated random tokens (Olsson et al. 2022), with
the two guards a positional head would otherwise slip past.

- :func:`repeated_random_tokens` — sequences [BOS] + F + R + R. R holds L tokens drawn uniformly (with
  replacement) from the model's vocabulary without its special tokens, and **L is drawn per sequence** from
  a range, so that no fixed offset lines up with the repeat: a head that looks L − 1 tokens back by position
  alone scores only on the sequences whose L happens to match. F is a filler of fresh random tokens, 2 × (L_max
  − L) long, so that every sequence has the same length and ends with its repeat.
- **The control**: the same sequence with the second R replaced by fresh random tokens R'. Its attention at the
  induction offset (query i, key i − L + 1) is what a head gives that offset by position or by chance; the
  *content-based* score is the repeat's minus the control's, paired sequence by sequence.
- :class:`InductionLoss` — per sequence, the mean loss on the tokens R[1:] of the first copy and of the second
  (the *induction loss*), their gap, and the ICL score: the loss at token R[L // 2] of the second copy minus
  the loss at the same token of the first.
- Olsson et al.'s ICL score on a text, the loss at token 500 minus the loss at token 50
  (:data:`TEXT_EARLY`, :data:`TEXT_LATE`), lives beside the model's pass in :mod:`.measure`.

"The loss at token t" is −log p(x_t | x_<t): the prediction made at position t − 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from induction_probes.circuits.defaults import LM_PROBE_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import require_numbers, require_seed
from induction_probes.probes.ablation.head_ablation import is_index
from induction_probes.probes.intervals import Estimate, mean_interval

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

TEXT_EARLY, TEXT_LATE = 50, 500  # Olsson et al.'s ICL score: loss at token 500 minus loss at token 50
# each loss as the JSON and the long tables name it -> its name in InductionLoss
LOSSES = {"first_half_loss": "first_half", "induction_loss": "repeated_half", "gap": "gap", "icl_score": "icl"}
DEFAULT_LENGTHS = (10, 50)  # |R| drawn from 10..50 per sequence: TransformerLens's and ARENA's 50 at the top


@dataclass(frozen=True)
class RepeatedTokens:
    """``tokens[s]`` = ``prefix`` tokens (a BOS, or none), a filler, then R + R with R of ``lengths[s]`` tokens
    starting at ``starts[s]``; every sequence ends with its repeat. ``control[s]`` is the same sequence with
    its second R replaced by other tokens (None where none could be made: one sequence of plain tokens).
    ``bounds``: the protocol's |R| range (default: the shortest and longest here), which :meth:`rows` keeps, so
    that every chunk of one protocol measures the same distances."""

    tokens: Int[Tensor, "batch pos"]
    lengths: Int[Tensor, " batch"]
    prefix: int = 0
    control: Int[Tensor, "batch pos"] | None = None
    bounds: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.bounds is None and self.lengths.numel():  # none: refused below, with the reason
            object.__setattr__(self, "bounds", (int(self.lengths.min()), int(self.lengths.max())))
        check_repeated(self)

    def rows(self, part: slice) -> RepeatedTokens:
        """The sequences ``part`` (a chunk), with their controls and the protocol's |R| range."""
        control = None if self.control is None else self.control[part]
        return RepeatedTokens(self.tokens[part], self.lengths[part], self.prefix, control, self.bounds)

    @property
    def starts(self) -> Int[Tensor, " batch"]:
        """Where each sequence's first R begins."""
        return self.tokens.shape[1] - 2 * self.lengths

    @property
    def length_range(self) -> tuple[int, int]:
        """The protocol's shortest and longest |R| (a chunk's own lengths lie within them)."""
        assert self.bounds is not None  # set at construction from the lengths, which are refused if there are none
        return self.bounds

    def scored(self) -> Bool[Tensor, "batch pos_1"]:
        """The per-token loss entries :func:`induction_loss` reads (entry t: the loss at token t + 1): the tokens
        R[1:] of each copy, the rest of a sequence (its prefix, filler and each R[0]) unread."""
        positions, valid = self.second_copy()
        counted = valid.clone()
        counted[:, 0] = False
        rows = torch.arange(len(positions))[:, None].expand_as(positions)[counted]
        mask = torch.zeros(self.tokens.shape[0], self.tokens.shape[1] - 1, dtype=torch.bool)
        for where in (positions, positions - self.lengths[:, None]):
            mask[rows, where[counted] - 1] = True
        return mask

    def second_copy(self) -> tuple[Int[Tensor, "batch query_pos"], Bool[Tensor, "batch query_pos"]]:
        """The positions of each sequence's second R, padded to the longest: [batch, L_max] positions and the
        mask of those that are real (a sequence with a shorter R has fewer queries)."""
        longest = int(self.lengths.max())
        offsets = torch.arange(longest)
        valid = offsets[None] < self.lengths[:, None]
        first_query = self.tokens.shape[1] - self.lengths  # the second R's first position
        positions = (first_query[:, None] + offsets[None]).clamp_max(self.tokens.shape[1] - 1)
        return positions, valid


def check_repeated(repeated: RepeatedTokens) -> None:
    tokens, lengths = repeated.tokens, repeated.lengths
    if tokens.ndim != 2 or tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
        raise BadInput(f"tokens must be integer ids of shape [batch, pos], got {tuple(tokens.shape)} {tokens.dtype}")
    if tokens.shape[0] == 0:
        raise BadInput("no sequences: repeated tokens need at least one")
    if lengths.shape != (tokens.shape[0],) or lengths.dtype.is_floating_point:
        raise BadInput("lengths must hold one integer |R| per sequence")
    low, high = repeated.length_range
    if not 2 <= low <= int(lengths.min()) <= int(lengths.max()) <= high or 2 * high > tokens.shape[1] - repeated.prefix:
        raise BadInput(
            f"each R needs 2 <= L, within the |R| range {low}..{high}, and {repeated.prefix} + 2 x {high} <= "
            f"{tokens.shape[1]} positions"
        )
    positions, valid = repeated.second_copy()
    first = tokens.gather(1, positions - lengths[:, None])
    if not torch.equal(first[valid], tokens.gather(1, positions)[valid]):
        raise BadInput("the tokens' second half does not repeat their first: the induction score needs R + R")
    control = repeated.control
    if control is not None and (control.shape != tokens.shape or control.dtype != tokens.dtype):
        raise BadInput("the control must have the tokens' shape and dtype")


def from_tokens(tokens: Tensor) -> RepeatedTokens:
    """Plain tokens [batch, 2L] (or [2L]) whose second half repeats the first, with no prefix. The control of
    sequence s takes the second half of sequence s + 1 (an R that does not repeat s's), so it needs two or more
    sequences; with one there is no control."""
    tokens = tokens[None] if tokens.ndim == 1 else tokens
    length = tokens.shape[-1] // 2
    lengths = torch.full((tokens.shape[0],), length, dtype=torch.long)
    control = None
    if tokens.shape[0] >= 2:
        control = torch.cat([tokens[:, :length], tokens.roll(-1, dims=0)[:, length:]], dim=1)
    return RepeatedTokens(tokens, lengths, 0, control)


def special_ids(model: HookedModel) -> set[int]:
    """Token ids the tokenizer or the model's config reserve (BOS, EOS, padding, unknown, added)."""
    tokenizer = getattr(model, "tokenizer", None)
    ids = set(tokenizer.all_special_ids) if tokenizer is not None else set()
    config = getattr(getattr(model, "original_model", None), "config", None)
    for name in ("bos_token_id", "eos_token_id", "pad_token_id", "unk_token_id"):
        value = getattr(config, name, None)
        ids |= set(value) if isinstance(value, (list, tuple)) else {value}
    return {i for i in ids if isinstance(i, int)}


def vocabulary(model: HookedModel) -> Int[Tensor, " token"]:
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
        raise BadInput(f"the model's vocabulary has {len(ids)} ordinary token(s): no random tokens to draw")
    return ids


def bos_id(model: HookedModel) -> int | None:
    """The model's beginning-of-sequence token, if it has one inside its vocabulary."""
    tokenizer = getattr(model, "tokenizer", None)
    config = getattr(getattr(model, "original_model", None), "config", None)
    value = getattr(tokenizer, "bos_token_id", None) if tokenizer is not None else getattr(config, "bos_token_id", None)
    return value if isinstance(value, int) and 0 <= value < model.cfg.d_vocab else None


def length_range(length: int | tuple[int, int]) -> tuple[int, int]:
    """``length`` as (shortest, longest) |R|: one length, or an inclusive range."""
    bounds = (length, length) if not isinstance(length, (tuple, list)) else tuple(length)
    if len(bounds) != 2 or not all(is_index(v) for v in bounds) or not 2 <= bounds[0] <= bounds[1]:
        message = f"|R| must be an integer >= 2 or a range (low, high) with 2 <= low <= high, got {length!r}"
        raise BadInput(message[:300])
    return bounds


def prefix_length(model: HookedModel, bos: bool | None) -> int:
    """1 when the sequences open with the model's BOS (default: when it has one), else 0."""
    start = bos_id(model)
    if bos and start is None:
        raise BadInput("the model has no BOS token in its vocabulary: use bos=False")
    return int(start is not None and bos is not False)


def fitting_lengths(
    model: HookedModel, length: int | tuple[int, int] | None, bos: bool | None = None
) -> tuple[int, int]:
    """The |R| range to draw: ``length``, or by default :data:`DEFAULT_LENGTHS` cut to what the model's context
    holds (a given range that does not fit is refused, not cut)."""
    room = (model.cfg.n_ctx - prefix_length(model, bos)) // 2
    if length is not None:
        return length_range(length)
    low, high = DEFAULT_LENGTHS
    if room < 2:
        raise BadInput(f"a context of {model.cfg.n_ctx} tokens holds no R + R with |R| >= 2")
    return min(low, room), min(high, room)


def repeated_random_tokens(
    model: HookedModel,
    length: int | tuple[int, int] | None = None,
    batch: int = LM_PROBE_SEQS,
    seed: int = PROBE_SEED,
    bos: bool | None = None,
) -> RepeatedTokens:
    """``batch`` sequences [BOS] + F + R + R and their controls (module docstring). ``length``: |R|, one value
    or an inclusive range (low, high) drawn uniformly per sequence; by default 10..50 within the context.
    Tokens are drawn uniformly from :func:`vocabulary` with a generator seeded by ``seed`` (the same seed and
    vocabulary give the same tokens). ``bos``: prepend the model's BOS token (default: when it has one), as
    TransformerLens's ``to_tokens`` does."""
    low, high = fitting_lengths(model, length, bos)
    if not is_index(batch) or batch < 1:
        raise BadInput(f"repeated random tokens need a batch of at least one sequence, got {batch!r}")
    require_seed("the seed", seed)
    prefix = prefix_length(model, bos)
    n_pos = prefix + 2 * high
    if n_pos > model.cfg.n_ctx:
        raise BadInput(f"{prefix} + 2 x {high} tokens exceed the model's context of {model.cfg.n_ctx}")
    require_numbers("the repeated random tokens", 2 * batch * n_pos)
    ids = vocabulary(model)
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high + 1, (batch,), generator=generator)
    body = ids[torch.randint(0, len(ids), (batch, 2 * high), generator=generator)]  # filler and first R
    fresh = ids[torch.randint(0, len(ids), (batch, high), generator=generator)]  # the control's second R
    offsets = torch.arange(2 * high)
    second = offsets[None] >= 2 * high - lengths[:, None]  # the last L positions hold the second R
    source = (offsets[None] - lengths[:, None]).clamp_min(0)  # ... a copy of the L positions before them
    tokens = torch.where(second, body.gather(1, source), body)
    control = torch.where(
        second, fresh.gather(1, (offsets[None] - (2 * high - lengths[:, None])).clamp(0, high - 1)), body
    )
    first = bos_id(model)  # a prefix of 1 where the model has one; with a prefix of 0 the fill is never read
    start = torch.full((batch, prefix), 0 if first is None else first, dtype=torch.long)
    tokens, control = torch.cat([start, tokens], dim=1), torch.cat([start, control], dim=1)
    return RepeatedTokens(tokens, lengths, prefix, control, (low, high))


@dataclass(frozen=True)
class InductionLoss:
    """Losses on repeated random tokens, one value per sequence (each a mean over that sequence's tokens).

    ``first_half`` and ``repeated_half``: the loss on the tokens R[1:] of each copy (R[0] of the second copy
    follows R[−1], which nothing before predicts, so it is left out of both). ``icl_score``: the loss at token
    R[L // 2] of the second copy minus the loss at the same token of the first (negative when the model uses
    its context). ``gap`` = first_half − repeated_half: what induction buys. The floats are means over
    sequences; :meth:`interval` gives each one's Student-t interval."""

    first_half_per_sequence: Tensor
    repeated_half_per_sequence: Tensor
    icl_per_sequence: Tensor

    @property
    def gap_per_sequence(self) -> Float[Tensor, " batch"]:
        return self.first_half_per_sequence - self.repeated_half_per_sequence

    @property
    def first_half(self) -> float:
        return self.first_half_per_sequence.mean().item()

    @property
    def repeated_half(self) -> float:
        return self.repeated_half_per_sequence.mean().item()

    @property
    def icl_score(self) -> float:
        return self.icl_per_sequence.mean().item()

    @property
    def gap(self) -> float:
        return self.gap_per_sequence.mean().item()

    @property
    def has_gap(self) -> bool:
        """Whether the gap's 95 % interval lies above 0: only then is a share of it a number (with one sequence,
        or a gap whose interval includes 0, "34 % of the gap" would be a share of what may be nothing)."""
        low = self.interval("gap").low
        return low is not None and low > 0

    def interval(self, name: str) -> Estimate:
        """The mean of ``first_half``, ``repeated_half``, ``gap`` or ``icl`` with its interval over sequences."""
        return mean_interval(getattr(self, f"{name}_per_sequence"))

    def to_json(self) -> dict:
        return {key: estimate_json(self.interval(name)) for key, name in LOSSES.items()}


def estimate_json(estimate: Estimate) -> dict:
    return {"value": estimate.value, "low": estimate.low, "high": estimate.high}


def induction_loss(per_token: Tensor, repeated: RepeatedTokens) -> InductionLoss:
    """:class:`InductionLoss` from the per-token loss [batch, pos − 1] (entry t: the loss at token t + 1)."""
    per_token = per_token.double().cpu()
    positions, valid = repeated.second_copy()  # the second R's tokens, at positions p; their first copy at p − L
    lengths = repeated.lengths
    loss_at = lambda where: per_token.gather(1, (where - 1).clamp_min(0))  # noqa: E731 (the loss at token `where`)
    counted = valid.clone()
    counted[:, 0] = False  # R[0] of either copy follows what nothing predicts
    counts = counted.sum(1).double()
    # where, not a product: an entry left out is never read, so that one not computed (NaN, scored()) stays out
    second = torch.where(counted, loss_at(positions), 0.0).sum(1) / counts
    first = torch.where(counted, loss_at(positions - lengths[:, None]), 0.0).sum(1) / counts
    middle = (lengths // 2)[:, None]  # token R[L // 2] of each copy
    repeat_middle = loss_at(positions.gather(1, middle)).squeeze(1)
    first_middle = loss_at(positions.gather(1, middle) - lengths[:, None]).squeeze(1)
    return InductionLoss(first, second, repeat_middle - first_middle)


@dataclass(frozen=True)
class TextICL:
    """Olsson et al.'s ICL score on a text: loss at token ``late`` minus loss at token ``early``, per window
    with its interval over the text's windows."""

    icl_score: float
    early_loss: float
    late_loss: float
    windows: int
    early: int
    late: int
    low: float | None = None
    high: float | None = None

    def to_json(self) -> dict:
        return dict(vars(self))
