"""Head scores and losses of a language model on the protocols' tokens, a chunk of sequences at a time.

Any hooked model with ``blocks.{l}.attn.hook_pattern`` works: a ``TransformerBridge`` (what a path, a
cache name or a Hugging Face model becomes, :func:`~induction_probes.circuits.interop.language_models.as_hooked`)
or one of our own models. Every score is an exact mean over sequences, whatever the chunking.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.common.devices import model_device
from induction_probes.circuits.interop.language_models import as_hooked
from induction_probes.probes.attention import previous_token_score, repeat_induction_score, run_with_patterns
from induction_probes.probes.lm.protocols import (
    TEXT_EARLY,
    TEXT_LATE,
    InductionLoss,
    RepeatedTokens,
    TextICL,
    bos_id,
    from_tokens,
    induction_loss,
    per_token_loss,
    repeated_random_tokens,
)

CHUNK_NUMBERS = 1 << 25  # numbers one chunk's patterns and logits may hold (128 MiB of float32)


@dataclass(frozen=True)
class HeadScores:
    """Per layer and head (nested lists ``[layer][head]``): ``previous_token``, the mean over queries
    i ≥ 1 of A[i, i − 1]; ``induction``, on R + R, the mean over the second R's queries of A[i, i − L + 1].
    Attention spread evenly over the keys would score about 1 / i at query i on both."""

    previous_token: list[list[float]]
    induction: list[list[float]]

    def ranked(self, score: str = "induction") -> list[tuple[int, int, float]]:
        """(layer, head, score) from the highest score down."""
        values = getattr(self, score)
        heads = [(layer, head, value) for layer, row in enumerate(values) for head, value in enumerate(row)]
        return sorted(heads, key=lambda item: -item[2])

    def above(self, threshold: float, score: str = "induction") -> list[tuple[int, int]]:
        """The heads whose ``score`` reaches ``threshold``, highest first."""
        return [(layer, head) for layer, head, value in self.ranked(score) if value >= threshold]

    def to_json(self) -> dict:
        return {"previous_token": self.previous_token, "induction": self.induction}


def chunk_size(model, n_pos: int) -> int:
    """Sequences per forward pass: one chunk's patterns (every layer) and logits within CHUNK_NUMBERS."""
    per_sequence = model.cfg.n_layers * model.cfg.n_heads * n_pos * n_pos + n_pos * model.cfg.d_vocab
    return max(1, CHUNK_NUMBERS // per_sequence)


def chunked_loss(forward: Callable[[Tensor], Tensor], tokens: Tensor, size: int) -> Float[Tensor, " pos_1"]:
    """The per-token loss averaged over sequences, ``forward`` (tokens → logits) run ``size`` at a time."""
    total = 0.0
    for start in range(0, tokens.shape[0], size):
        part = tokens[start : start + size]
        total = total + per_token_loss(forward(part), part).sum(0)
    return total / tokens.shape[0]


def evaluate(model, repeated: RepeatedTokens) -> tuple[HeadScores, InductionLoss]:
    """Head scores and induction losses on ``repeated``, from one forward pass per chunk."""
    tokens = repeated.tokens.to(model_device(model))
    size = chunk_size(model, tokens.shape[1])
    sums = [[torch.zeros(model.cfg.n_heads, dtype=torch.float64) for _ in range(model.cfg.n_layers)] for _ in range(2)]
    loss = 0.0
    for start in range(0, tokens.shape[0], size):
        part = tokens[start : start + size]
        logits, patterns = run_with_patterns(model, part)
        for layer, pattern in enumerate(patterns):
            sums[0][layer] += len(part) * previous_token_score(pattern.double()).cpu()
            induction = repeat_induction_score(pattern.double(), repeated.length, repeated.prefix)
            sums[1][layer] += len(part) * induction.cpu()
        loss = loss + per_token_loss(logits, part).sum(0)
    n = tokens.shape[0]
    previous, induction = ([(s / n).tolist() for s in layers] for layers in sums)
    return HeadScores(previous, induction), induction_loss((loss / n).cpu(), repeated.length, repeated.prefix)


def head_scores(model, tokens: Int[Tensor, "batch pos"] | RepeatedTokens | None = None) -> HeadScores:
    """Previous-token and induction scores of every head, as nested lists ``[layer][head]``.

    ``model``: a model directory or a name in the local Hugging Face cache, a Hugging Face model, a
    ``TransformerBridge`` or a hooked model. ``tokens``: sequences [batch, 2L] whose second half repeats
    the first (the induction score then reads A[i, i − L + 1] for i ≥ L), a :class:`RepeatedTokens` (which
    may carry a BOS prefix), or None for :func:`~induction_probes.probes.lm.protocols.repeated_random_tokens`'s
    defaults."""
    model = as_hooked(model)
    if tokens is None:
        tokens = repeated_random_tokens(model)
    repeated = tokens if isinstance(tokens, RepeatedTokens) else from_tokens(tokens)
    check_ids(model, repeated.tokens)
    return evaluate(model, repeated)[0]


def check_ids(model, tokens: Tensor) -> None:
    if tokens.shape[1] > model.cfg.n_ctx:
        raise ValueError(f"{tokens.shape[1]} positions exceed the model's context of {model.cfg.n_ctx}")
    if tokens.numel() and not 0 <= int(tokens.min()) <= int(tokens.max()) < model.cfg.d_vocab:
        raise ValueError(f"token ids must lie in 0..{model.cfg.d_vocab - 1}, the model's vocabulary")


def text_windows(model, text: str, late: int) -> Int[Tensor, "batch pos"]:
    """The text's tokens in consecutive windows of ``late + 1`` tokens, each opened by the BOS token when
    the model has one (the remainder of the text is dropped)."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("this model has no tokenizer: the ICL score on a text needs one")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    start = bos_id(model)
    width = late + 1 - (start is not None)
    if late + 1 > model.cfg.n_ctx:
        raise ValueError(f"the ICL score's late token {late} lies beyond the model's context of {model.cfg.n_ctx}")
    n_windows = len(ids) // width
    if n_windows == 0:
        raise ValueError(f"the text has {len(ids)} tokens; the ICL score at token {late} needs {width}")
    windows = torch.tensor(ids[: n_windows * width], dtype=torch.long).view(n_windows, width)
    if start is not None:
        windows = torch.cat([torch.full((n_windows, 1), start, dtype=torch.long), windows], dim=1)
    return windows


def text_icl_score(model, text: str, early: int = TEXT_EARLY, late: int = TEXT_LATE) -> TextICL:
    """Loss at token ``late`` minus loss at token ``early`` (0-based, counting a BOS), averaged over the
    text's windows of ``late + 1`` tokens (Olsson et al.: tokens 500 and 50)."""
    if not 1 <= early < late:
        raise ValueError(f"the ICL score needs 1 <= early < late, got early {early} and late {late}")
    model = as_hooked(model)
    windows = text_windows(model, text, late).to(model_device(model))
    with torch.no_grad():
        mean = chunked_loss(model, windows, chunk_size(model, windows.shape[1])).cpu()
    return TextICL(
        (mean[late - 1] - mean[early - 1]).item(),
        mean[early - 1].item(),
        mean[late - 1].item(),
        windows.shape[0],
        early,
        late,
    )
