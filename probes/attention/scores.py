"""The package's attention probes (registered in :mod:`~induction_probes.probes.attention.probe_registry`) as
functions of one chunk of probe sequences, how the chunks' values combine into a checkpoint's, and each value's
interval over sequences.

A probe that returns its per-sequence parts (:class:`Score`'s ``per_sequence``: each sequence's sum and count)
gets a percentile-bootstrap interval that resamples the probe sequences; the built-in probes do. One that
returns only chunk means has none (NaN bounds)."""

from __future__ import annotations

import math
import operator
from functools import reduce
from typing import NamedTuple

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.attention_masks import matching_keys
from induction_probes.probes.attention.patterns import (
    bigram_matching_sums,
    previous_token_per_sequence,
    previous_token_scores,
)
from induction_probes.probes.intervals import bootstrap_ratio_intervals


class Score(NamedTuple):
    """A probe's per-layer values on a chunk and the weight of their mean (its count of scored sequences), and
    optionally their per-sequence parts: per layer each sequence's sum [batch, head], and each sequence's
    count [batch], whose ratio of totals is the value (what the interval over sequences resamples)."""

    values: list[Tensor]
    weight: float
    per_sequence: tuple[list[Tensor], Tensor] | None = None


Patterns = list[Float[Tensor, "batch head query_pos key_pos"]]  # one per layer


def previous_token(patterns: Patterns, tokens: Int[Tensor, "batch pos"]) -> Score:
    """Attention on the previous token, over queries t ≥ 1."""
    per_sequence = [previous_token_per_sequence(p) for p in patterns]
    return Score(previous_token_scores(patterns), float(len(tokens)), (per_sequence, torch.ones(len(tokens))))


_matching: tuple | None = None  # (patterns, tokens, each layer's bigram_matching_sums) while a chunk is scored


def matching_of(patterns: Patterns, tokens: Int[Tensor, "batch pos"]) -> list[tuple[Tensor, Tensor, Tensor]]:
    """:func:`~induction_probes.probes.attention.patterns.bigram_matching_sums` of each layer of a chunk, computed
    once for
    both probes that read it (a second pass cost a fifth of ``probe_model``'s time on markov-k3)."""
    global _matching
    if _matching is None or _matching[0] is not patterns or _matching[1] is not tokens:
        match = matching_keys(tokens)
        _matching = (patterns, tokens, [bigram_matching_sums(p, tokens, match=match) for p in patterns])
    return _matching[2]


def forget_matching() -> None:
    """Drop the chunk's bigram-matching sums once its probes are done: its patterns are not kept past it."""
    global _matching
    _matching = None


def matching_score(patterns: Patterns, tokens: Int[Tensor, "batch pos"], part: int) -> Score:
    """Part 0 (mass) or 1 (ideal) of the bigram-matching sums as a Score over the queries that have a match."""
    sums = matching_of(patterns, tokens)
    count = sums[0][2]
    if count.sum() == 0:
        raise BadInput("no query has a matching key: sequences are too short or never repeat a token")
    values = [layer[part].sum(0) / count.sum() for layer in sums]
    return Score(values, count.sum().item() / tokens.shape[1], ([layer[part] for layer in sums], count))


def bigram_matching(patterns: Patterns, tokens: Int[Tensor, "batch pos"]) -> Score:
    """Attention mass on the keys whose previous token matches the query's, over the queries that have one."""
    return matching_score(patterns, tokens, 0)


def bigram_matching_ideal(patterns: Patterns, tokens: Int[Tensor, "batch pos"]) -> Score:
    """1 − TV of each attention row to uniform attention over the matching keys, same queries."""
    return matching_score(patterns, tokens, 1)


def combine(chunks: list[dict[str, Score]]) -> dict[str, Score]:
    """The chunks' scores as one: per probe, the weighted mean of each layer's values, the summed weight and the
    chunks' per-sequence parts side by side."""
    if len(chunks) == 1:  # the values as they are (w·v / w may differ from v in the last bit)
        return dict(chunks[0])
    combined = {}
    for name in chunks[0]:
        parts = [chunk[name] for chunk in chunks]
        total = sum(part.weight for part in parts)
        n_layers = len(parts[0].values)
        values = [
            reduce(operator.add, (part.weight * part.values[layer] for part in parts)) / total
            for layer in range(n_layers)
        ]
        combined[name] = Score(values, total, joined_per_sequence([part.per_sequence for part in parts]))
    return combined


def joined_per_sequence(parts: list) -> tuple[list[Tensor], Tensor] | None:
    if any(part is None for part in parts):
        return None
    layers = [torch.cat([sums[layer] for sums, _ in parts]) for layer in range(len(parts[0][0]))]
    return layers, torch.cat([count for _, count in parts])


def score_intervals(score: Score) -> list[tuple[Float[Tensor, " head"], Float[Tensor, " head"]]]:
    """Each layer's (low, high) over sequences, from the score's per-sequence parts (NaN without them)."""
    if score.per_sequence is None:
        return [(nan := torch.full_like(v, math.nan, dtype=torch.float64), nan) for v in score.values]
    sums, count = score.per_sequence
    return [bootstrap_ratio_intervals(layer, count)[1:] for layer in sums]
