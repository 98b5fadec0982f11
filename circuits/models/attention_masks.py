"""Which keys an attention head may and should look at, from the tokens alone: the causal mask, each position's
previous token, and the keys whose previous token matches the query (what a statistical induction head
averages, Edelman et al. §3). The model, the constructions and the probes share them."""

from __future__ import annotations

import torch
from jaxtyping import Bool, Int
from torch import Tensor


def previous_tokens(tokens: Int[Tensor, "batch pos"], first_is_self: bool = False) -> Int[Tensor, "batch pos"]:
    """x_{j−1} at every position j. Position 0 has no previous token: −1 (matches nothing), or x_0
    itself with ``first_is_self`` (what a causal previous-token head that must attend somewhere reads there)."""
    first = tokens[:, :1] if first_is_self else torch.full_like(tokens[:, :1], -1)
    return torch.cat([first, tokens[:, :-1]], dim=1)


def causal_mask(n_pos: int, device: torch.device | str = "cpu") -> Bool[Tensor, "query_pos key_pos"]:  # j ≤ i
    return torch.ones(n_pos, n_pos, dtype=torch.bool, device=device).tril()


def matching_keys(
    tokens: Int[Tensor, "batch pos"], previous: Int[Tensor, "batch pos"] | None = None
) -> Bool[Tensor, "batch query_pos key_pos"]:
    """[batch, query, key]: the keys j ≤ i whose previous token equals the query's, x_{j−1} = x_i; their
    tokens x_j are the samples of "what follows x_i" that a statistical induction head averages.
    ``previous`` defaults to :func:`previous_tokens` (key 0 never matches)."""
    previous = previous_tokens(tokens) if previous is None else previous
    return (previous[:, None, :] == tokens[:, :, None]) & causal_mask(tokens.shape[1], tokens.device)
