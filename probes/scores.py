"""The registered attention probes (:mod:`~induction_probes.probes.registry`) as functions of one chunk of probe
sequences, and how the chunks' values combine into a checkpoint's."""

from __future__ import annotations

from typing import NamedTuple

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.probes.attention import (
    bigram_matching_scores,
    pattern_hook,
    previous_token_scores,
    run_with_captures,
)
from induction_probes.probes.registry import PROBES


class Score(NamedTuple):
    """A probe's per-layer values on a chunk and the weight of their mean (its count of scored sequences)."""

    values: list[Tensor]
    weight: float


Patterns = list[Float[Tensor, "batch head query_pos key_pos"]]  # one per layer


def previous_token(patterns: Patterns, tokens: Int[Tensor, "batch pos"]) -> list[Float[Tensor, " head"]]:
    return previous_token_scores(patterns)


_matching: tuple | None = None  # (patterns, tokens, their BigramMatching) while chunk_scores runs


def matching_of(patterns: Patterns, tokens: Int[Tensor, "batch pos"]):
    """:func:`~induction_probes.probes.attention.bigram_matching_scores` of a chunk, computed once for both probes
    that read it (a second pass cost a fifth of ``probe_model``'s time on markov-k3)."""
    global _matching
    if _matching is None or _matching[0] is not patterns or _matching[1] is not tokens:
        _matching = (patterns, tokens, bigram_matching_scores(patterns, tokens))
    return _matching[2]


def bigram_matching(patterns: Patterns, tokens: Int[Tensor, "batch pos"]) -> Score:
    """Attention mass on the keys whose previous token matches the query's, over the queries that have one."""
    matching = matching_of(patterns, tokens)
    return Score(matching.mass, len(tokens) * matching.fraction_with_match)


def bigram_matching_ideal(patterns: Patterns, tokens: Int[Tensor, "batch pos"]) -> Score:
    """1 − TV of each attention row to uniform attention over the matching keys, same queries."""
    matching = matching_of(patterns, tokens)
    return Score(matching.ideal, len(tokens) * matching.fraction_with_match)


def chunk_scores(patterns: list[Tensor], tokens: Tensor) -> dict[str, Score]:
    """Every registered probe on one chunk, each with its weight."""
    global _matching
    scores = {}
    try:
        for name, probe in PROBES.items():
            value = probe(patterns, tokens)
            scores[name] = value if isinstance(value, Score) else Score(list(value), float(len(tokens)))
    finally:
        _matching = None  # the chunk's patterns are not kept past it
    return scores


def combine(chunks: list[dict[str, Score]]) -> dict[str, Score]:
    """The chunks' scores as one: per probe, the weighted mean of each layer's values and the summed weight."""
    if len(chunks) == 1:  # the values as they are (w·v / w may differ from v in the last bit)
        return dict(chunks[0])
    combined = {}
    for name in chunks[0]:
        parts = [chunk[name] for chunk in chunks]
        total = sum(part.weight for part in parts)
        n_layers = len(parts[0].values)
        values = [sum(part.weight * part.values[layer] for part in parts) / total for layer in range(n_layers)]
        combined[name] = Score(values, total)
    return combined


def attention_probes(model, inputs: Tensor, chunk: int = 100, also: list[str] = ()):
    """The model's outputs on ``inputs``, every registered probe's :class:`~induction_probes.probes.scores.Score`,
    and the activations at the hook names ``also``, one per chunk of ``chunk`` sequences."""
    pattern_names = [pattern_hook(layer) for layer in range(model.cfg.n_layers)]
    outputs, chunks, captured = [], [], {name: [] for name in also}
    for start in range(0, inputs.shape[0], chunk):
        tokens = inputs[start : start + chunk]
        output, activations = run_with_captures(model, tokens, pattern_names + list(also))
        outputs.append(output)
        chunks.append(chunk_scores([activations[name] for name in pattern_names], tokens))
        for name in also:
            captured[name].append(activations[name])
    return torch.cat(outputs), combine(chunks), captured
