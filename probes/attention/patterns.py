"""Attention probes per layer and head, read from ``blocks.{l}.attn.hook_pattern``.

They take the attention patterns (``[batch, head, query, key]``) as plain tensors, so they run on any
TransformerLens-style hooked model: :func:`run_with_patterns` captures them with ``run_with_hooks`` and
the hook names alone, never our model class. Nothing is written into the patterns.

Which score to use when:

- :func:`previous_token_scores` — is a head a previous-token head (layer 0 of an induction circuit)?
  The mean attention from query t to key t − 1 over the queries that have one (t ≥ 1).
- :func:`bigram_matching_scores` — is a head a statistical induction head (ICL-MC, layer 1)? For query
  i, the keys j ≤ i whose *previous* token equals the current token, x_{j−1} = x_i, are the ones whose
  token is a sample of "what follows x_i". ``mass`` is the attention on them (the TransformerLens
  ``"mul"`` idea, restricted to queries that have such a key); ``ideal`` is 1 − total variation to the
  uniform distribution over them, which is what the bigram statistic needs: it punishes a head that
  piles onto one matching key as much as one that looks elsewhere.
- :func:`positional_profiles` — where a relative-position head looks, independent of content.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from induction_probes.circuits.devices import model_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.attention_masks import matching_keys
from induction_probes.circuits.tasks.gaussian.sequences import bilinear, windows

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel, WeightedModel


def pattern_hook(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_pattern"


class Captured(Exception):
    """Raised by the last capture of a pass whose output is not wanted: the layers above it need not run."""


def activation_at(forward: Callable[[list], object], name: str) -> Tensor | None:
    """The activation at hook point ``name`` of the pass ``forward(hooks)`` (a forward pass with these extra
    hooks), the pass stopped there; None where it never reached ``name``."""
    found: list[Tensor] = []

    def stop(activation: Tensor, hook) -> None:
        found.append(activation.detach())
        raise Captured

    try:
        forward([(name, stop)])
    except Captured:
        return found[0]
    return None


def run_with_captures(
    model: HookedModel, inputs: Tensor, names: list[str], extra_hooks: Sequence = (), output: bool = True
) -> tuple[Tensor | None, dict[str, Tensor]]:
    """The output on ``inputs`` and the activations at hook points ``names``, captured by temporary
    hooks that are removed even if the forward pass raises. Needs only ``run_with_hooks``. The inputs go
    to the model's device; the output and the activations come back on the CPU, where the scores are.
    ``extra_hooks``: other ``(name, hook)`` pairs for the same pass (an ablation), run before the captures.
    ``output=False``: the pass stops once every name is captured, and the output is None (a language model's
    unembedding alone costs a third of GPT-2 small's pass)."""
    hook_points = getattr(model, "hook_dict", None)
    missing = [name for name in names if hook_points is not None and name not in hook_points]
    if missing:
        raise BadInput(f"{type(model).__name__} has no hook point {missing[0]}: this probe cannot run on it")
    captured: dict[str, Tensor] = {}

    def keep(name: str):
        def hook(activation: Tensor, hook) -> None:  # stored under the name asked for: a TransformerBridge
            captured[name] = activation.detach().cpu()  # reports its own internal name in hook.name
            if not output and len(captured) == len(names):
                raise Captured

        return hook

    with torch.no_grad():
        hooks = [*extra_hooks, *((name, keep(name)) for name in names)]
        try:
            result = model.run_with_hooks(inputs.to(model_device(model)), fwd_hooks=hooks)
        except Captured:
            return None, captured
    return result.cpu(), captured


def run_with_patterns(
    model: HookedModel, inputs: Tensor
) -> tuple[Tensor, list[Float[Tensor, "batch head query_pos key_pos"]]]:
    """The output on ``inputs`` and every layer's attention pattern."""
    names = [pattern_hook(layer) for layer in range(model.cfg.n_layers)]
    output, captured = run_with_captures(model, inputs, names)
    assert output is not None  # asked for: run_with_captures gives it unless told not to
    return output, [captured[name] for name in names]


def check_pattern(pattern: Tensor, tokens: Tensor | None = None) -> None:
    """A pattern the scores can read: [batch, head, q, k] with one key per query position (a non-square
    one has no diagonal to score), and as many positions as ``tokens`` where they are given."""
    if pattern.dim() != 4 or pattern.shape[-1] != pattern.shape[-2]:
        raise BadInput(
            f"an attention pattern is [batch, head, query, key] with as many keys as queries, "
            f"got shape {tuple(pattern.shape)}"
        )
    if tokens is not None and (tokens.dim() != 2 or tuple(tokens.shape) != (pattern.shape[0], pattern.shape[-1])):
        raise BadInput(f"tokens of shape {tuple(tokens.shape)} do not fit a pattern of shape {tuple(pattern.shape)}")


def previous_token_score(pattern: Float[Tensor, "batch head query_pos key_pos"]) -> Float[Tensor, " head"]:
    """Mean over sequences and queries t ≥ 1 of A[t, t − 1].

    TransformerLens ``detect_head(..., "previous_token_head", error_measure="mul")`` divides the same
    sum by all T queries, query 0 included although it has no previous token, so on a causal pattern
    it is this score times (T − 1)/T; the two agree where query 0 attends nowhere (strict mask).
    """
    check_pattern(pattern)
    if pattern.shape[-1] < 2:
        raise BadInput("a previous-token score needs at least 2 positions")
    return torch.diagonal(pattern, offset=-1, dim1=-2, dim2=-1).mean(dim=(0, -1))


def previous_is_heaviest(pattern: Float[Tensor, "batch head query_pos key_pos"]) -> Float[Tensor, " head"]:
    """Share of queries t ≥ 1 (over sequences) whose largest attention goes to key t − 1: the line that
    Edelman et al.'s line plots draw fullest (a tie counts for the first key that reaches the maximum)."""
    check_pattern(pattern)
    n_pos = pattern.shape[-1]
    heaviest = pattern[..., 1:, :].argmax(-1)  # [batch, head, query t = 1..n-1]
    previous = torch.arange(n_pos - 1, device=pattern.device)
    return (heaviest == previous).double().mean(dim=(0, -1))


def last_token_matching_mass(
    pattern: Float[Tensor, "batch head query_pos key_pos"], tokens: Int[Tensor, "batch pos"]
) -> Float[Tensor, " head"]:
    """Mean over sequences whose last token has a matching key (an earlier j with x_{j−1} = x_last) of the
    last query's attention on those keys: the tokens that followed earlier occurrences of the last token."""
    check_pattern(pattern, tokens)
    match = matching_keys(tokens)[:, -1]  # [batch, key]
    has_match = match.any(-1)
    if not has_match.any():
        raise BadInput("no sequence's last token occurs earlier with a successor")
    mass = (pattern[:, :, -1] * match[:, None]).sum(-1)  # [batch, head]
    return mass[has_match].mean(0)


def previous_token_per_sequence(pattern: Float[Tensor, "batch head query_pos key_pos"]) -> Float[Tensor, "batch head"]:
    """Per sequence, the mean over queries t ≥ 1 of A[t, t − 1] (:func:`previous_token_score` per sequence)."""
    check_pattern(pattern)
    return torch.diagonal(pattern, offset=-1, dim1=-2, dim2=-1).mean(-1)


def previous_token_scores(patterns: list[Tensor]) -> list[Float[Tensor, " head"]]:
    """Each layer's previous-token scores, one per head (layers may have different head counts)."""
    return [previous_token_score(p) for p in patterns]


@dataclass(frozen=True)
class BigramMatching:
    """Bigram-matching scores of every head: per layer, one per head."""

    mass: list[Tensor]  # per layer [head]: attention on matching keys, mean over queries that have one
    ideal: list[Tensor]  # per layer [head]: 1 − TV(attention row, uniform over matching keys), same queries
    fraction_with_match: float  # share of (sequence, query) pairs that have a matching key


def bigram_matching_score(
    pattern: Float[Tensor, "batch head query_pos key_pos"],
    tokens: Int[Tensor, "batch pos"],
    skip_first_key: bool = False,
    match: Bool[Tensor, "batch query_pos key_pos"] | None = None,
) -> tuple[Tensor, Tensor, float]:
    """(mass [head], ideal [head], fraction of queries with a match) for one layer.

    With ``skip_first_key`` every row is renormalised over keys j ≥ 1 first, which discounts attention
    that position-0 artefacts (a self-key, a sink) draw onto key 0; key 0 can never match anyway.
    """
    mass, ideal, count = bigram_matching_sums(pattern, tokens, skip_first_key, match)
    total = count.sum()
    if total == 0:
        raise BadInput("no query has a matching key: sequences are too short or never repeat a token")
    return mass.sum(0) / total, ideal.sum(0) / total, (total / count.numel() / tokens.shape[1]).item()


def bigram_matching_sums(
    pattern: Float[Tensor, "batch head query_pos key_pos"],
    tokens: Int[Tensor, "batch pos"],
    skip_first_key: bool = False,
    match: Bool[Tensor, "batch query_pos key_pos"] | None = None,
) -> tuple[Float[Tensor, "batch head"], Float[Tensor, "batch head"], Float[Tensor, " batch"]]:
    """Per sequence, the sums over its queries that have a matching key of the attention mass on matching keys
    and of 1 − TV to uniform over them, and the count of those queries: the scores of
    :func:`bigram_matching_score` are the sums over sequences divided by the count's, and a sequence's own
    score is its sums divided by its count (what an interval over sequences resamples)."""
    check_pattern(pattern, tokens)
    match = matching_keys(tokens) if match is None else match  # [batch, q, k]; computed once per layer set
    if skip_first_key:
        rest = pattern[..., 1:]
        pattern = torch.cat(
            [torch.zeros_like(pattern[..., :1]), rest / rest.sum(-1, keepdim=True).clamp_min(1e-30)], -1
        )
    n_match = match.sum(-1)  # [batch, q]
    on_match = pattern * match[:, None]  # [batch, head, q, k]: attention on matching keys only
    mass = on_match.sum(-1)
    # Both the row and the uniform target over the n matching keys are distributions, so
    # 1 − TV = Σ_j min(A_j, target_j) = Σ_{j matching} min(A_j, 1/n): one clamp, no second [q, k] pass.
    ideal = torch.minimum(on_match, 1.0 / n_match.clamp_min(1)[:, None, :, None].to(pattern.dtype)).sum(-1)
    weights = (n_match > 0)[:, None].to(pattern.dtype)  # [batch, 1, q]
    return (mass * weights).sum(-1), (ideal * weights).sum(-1), weights[:, 0].sum(-1)


def bigram_matching_scores(
    patterns: list[Tensor], tokens: Int[Tensor, "batch pos"], skip_first_key: bool = False
) -> BigramMatching:
    match = matching_keys(tokens)
    scores = [bigram_matching_score(p, tokens, skip_first_key, match) for p in patterns]
    return BigramMatching(
        mass=[s[0] for s in scores],
        ideal=[s[1] for s in scores],
        fraction_with_match=scores[0][2],
    )


def chance_scores(tokens: Int[Tensor, "batch pos"]) -> dict[str, float]:
    """The scores of attention spread evenly over the keys j ≤ i, on ``tokens``: the level a head reaches
    without looking at content or position (what a trained head's score is measured against)."""
    n_pos = tokens.shape[1]
    uniform = torch.tril(torch.ones(n_pos, n_pos, dtype=torch.float64))
    uniform = (uniform / uniform.sum(-1, keepdim=True))[None, None]  # [1, 1, q, k]
    mass, ideal, _ = bigram_matching_score(uniform.expand(tokens.shape[0], 1, n_pos, n_pos), tokens)
    return {
        "previous_token": previous_token_score(uniform).item(),
        "bigram_matching": mass.item(),
        "bigram_matching_ideal": ideal.item(),
    }


def positional_profile(
    q: Float[Tensor, "batch pos head d_head"], W_rel: Float[Tensor, "head distance d_head"]
) -> Float[Tensor, "head distance"]:
    """Effective positional encoding of a relative-position head: softmax over distance d of
    q·r_d / sqrt(d_head), averaged over every query in ``q`` (Edelman et al.'s profile, but with the
    query, as the forward pass uses it; their code dots r with the key). All n_ctx distances enter the
    softmax, as in theirs, so the profile is a property of the weights, not of one query position."""
    return positional_profile_per_sequence(q, W_rel).mean(0)


def positional_profile_per_sequence(
    q: Float[Tensor, "batch pos head d_head"], W_rel: Float[Tensor, "head distance d_head"]
) -> Float[Tensor, "batch head distance"]:
    """:func:`positional_profile` of each sequence: its queries' softmaxes averaged over its positions."""
    scores = torch.einsum("bqhe,hde->bqhd", q, W_rel.detach().to(q.device)) / W_rel.shape[-1] ** 0.5
    return torch.softmax(scores, dim=-1).mean(dim=1)


# The odd distances the even/odd measures read (Edelman et al. Fig. 3 middle, ICML Fig. 11), each against its even
# neighbours: distance 1, the previous token, is left out, since it dominates once the head forms and would hide
# the alternation; the measures read distances 2..20
ODD = range(3, 20, 2)
NEAR, FAR = range(3, 10, 2), range(11, 20, 2)


def odd_even_excess(profile, odd: range = ODD) -> float:
    """How far a positional profile's weights at the ``odd`` distances (by default 3..19) stand above their even
    neighbours: the mean over odd d of w_d − (w_{d−1} + w_{d+1}) / 2. Against the neighbours on both sides, so a
    profile that merely rises or falls with distance (a linear trend) gives 0, where odd against the next even
    distance would read its slope as an alternation."""
    return sum(profile[d] - (profile[d - 1] + profile[d + 1]) / 2 for d in odd) / len(odd)


def alternation_fading(profile) -> float:
    """How much the odd-over-even excess fades with distance: the excess at odd distances 3..9 minus that at
    11..19 (positive where the alternation is stronger near the query)."""
    return odd_even_excess(profile, NEAR) - odd_even_excess(profile, FAR)


def positional_profiles(model: WeightedModel, inputs: Tensor, layer: int) -> Float[Tensor, "head distance"]:
    """:func:`positional_profile` of layer ``layer`` on the queries that ``inputs`` produce."""
    attn = model.blocks[layer].attn
    if not hasattr(attn, "W_rel"):
        raise BadInput(f"layer {layer} has no relative positions: no positional profile")
    name = f"blocks.{layer}.attn.hook_q"
    _, captured = run_with_captures(model, inputs, [name], output=False)
    return positional_profile(captured[name], attn.W_rel)


def induction_score(
    pattern: Float[Tensor, "batch head query_pos key_pos"], x: Float[Tensor, "batch pos d"], W_star: Tensor, n: int = 2
) -> Float[Tensor, " head"]:
    """For continuous inputs (Wang et al.): 1 − TV between the last query's attention and the target's
    own attention softmax_s(X_{L−n+2:L}ᵀ W* X_{s−n+1:s−1}) over keys s = n..L−1, averaged over sequences.
    1 means the head weighs the keys exactly as IH_n does."""
    query, keys, _ = windows(x.double(), n)
    target = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float64)
    target[:, n - 1 : x.shape[1] - 1] = torch.softmax(bilinear(W_star.double())(query, keys), -1)
    row = pattern[:, :, -1].double()  # [batch, head, key]
    return (1.0 - 0.5 * (row - target[:, None]).abs().sum(-1)).mean(0)
