"""Clamping one piece of the ICL-MC circuit during training (Singh et al. 2024's "artificial optogenetics").

A clamp replaces a layer's attention pattern, through its ``hook_pattern``, with the pattern of the ideal
circuit on the same tokens, at every forward pass of training and evaluation. What the clamped layer's
queries and keys would have computed is thrown away (they get no gradient); everything else trains as
usual. Comparing the transition time with and without a clamp says which piece holds the phase back.

- ``previous-token`` (layer 0): query i attends to key i − 1 alone; query 0, which has no previous
  token, attends to itself (the only key the causal mask leaves it).
- ``induction`` (layer 1): query i attends uniformly to the keys j ≤ i that follow an earlier occurrence
  of its own token (x_{j−1} = x_i), the keys whose tokens are samples of what follows x_i (Edelman et
  al.'s statistical induction head); where there is none, uniformly to every key j ≤ i, as the
  construction of Proposition 2.1 does when no score stands out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

import induction_probes.circuits.models.attention_masks as attention_masks

if TYPE_CHECKING:  # torch is imported where it is used: recipes read the names without loading it
    from jaxtyping import Float
    from torch import Tensor

    from induction_probes.circuits.models.tl_hooks import HookSpec

CLAMP_LAYERS = {"previous-token": 0, "induction": 1}


def previous_token_pattern(tokens: Tensor) -> Float[Tensor, "batch query_pos key_pos"]:
    """[batch, query, key]."""
    n_pos = tokens.shape[1]
    pattern = torch.diag_embed(torch.ones(n_pos - 1, device=tokens.device), offset=-1)
    pattern[0, 0] = 1.0
    return pattern.expand(tokens.shape[0], n_pos, n_pos)


def induction_pattern(tokens: Tensor) -> Float[Tensor, "batch query_pos key_pos"]:
    """[batch, query, key]."""

    match = attention_masks.matching_keys(tokens)
    keys = torch.where(
        match.any(-1, keepdim=True), match, attention_masks.causal_mask(tokens.shape[1], tokens.device)
    ).float()
    return keys / keys.sum(-1, keepdim=True)


TARGETS = {"previous-token": previous_token_pattern, "induction": induction_pattern}


def clamp_hooks(clamps: tuple[str, ...], tokens: Tensor) -> list[HookSpec]:
    """Forward hooks for ``run_with_hooks`` that replace each clamped layer's pattern (every head) with
    its target on ``tokens``."""
    hooks: list[HookSpec] = []
    for name in clamps:
        target = TARGETS[name](tokens)

        def replace(pattern: Tensor, hook, target=target) -> Tensor:
            return target[:, None].to(pattern.dtype).expand_as(pattern)

        hooks.append((f"blocks.{CLAMP_LAYERS[name]}.attn.hook_pattern", replace))
    return hooks
