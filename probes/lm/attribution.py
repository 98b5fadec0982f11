"""A screen of every head's ablation effect, AtP* (Kramár et al. 2024, "AtP*: An efficient and scalable method for
localizing LLM behaviour to components"), where exact ablation of a large model's heads takes a pass per head.

The quantity is the one :mod:`.ablate_heads` measures exactly: the rise of the loss on the repeated copy R[1:] when a
head's output z (``hook_z``) is replaced by z' (zero, or the head's mean over reference sequences). Per sequence:

- attribution patching (Nanda 2023; Syed et al. 2023), to first order: rise ≈ Σ (z' − z) · ∂L/∂z, the gradient
  taken on the clean pass with every attention pattern held fixed, so that it covers the paths through values,
  MLPs and the logits;
- AtP*'s QK fix for the paths into later heads' queries and keys: where a softmax is saturated its gradient
  vanishes, and a previous-token head that an induction head reads through its keys gets an estimate of 0 whatever
  its exact effect. Instead, for each later layer G, the head's output change Δo = (z' − z) W_O is added to the
  residual stream entering G, G's patterns A' are recomputed exactly by the model, and Σ (A' − A) · ∂L/∂A is added.

- AtP*'s GradDrop for cancellation: a head's paths to the loss can cancel to first order (its direct effect on the
  logits against its effect through a later MLP, say) where their exact effects do not. For each layer ℓ the
  estimate above is taken again with the gradient through layer ℓ's writes to the residual stream (its attention's
  output and its MLP's) set to 0, ĉ_ℓ; GradDrop's score is (1 / (L − 1)) Σ_ℓ |mean ĉ_ℓ|. Every head's own layer
  gives 0, so a head whose effect takes the direct path scores |AtP*|; one whose paths cancel scores what each path
  alone would. But a path through k layers counts in only L − k of the L terms: the score undercounts it by
  (L − k) / (L − 1), and in a two-layer model a previous-token head's path through the induction head scores 0.
  So the screen ranks by the head's size, the larger of |AtP*| and GradDrop's score: either one finding a head
  is enough to check it.

Left as they are: the QK fix takes the direct path into G only (a path through an intermediate head's value or an
MLP into G's keys stays first-order), and where the loss itself saturates (a model that predicts the repeat with a
loss near 0) every gradient vanishes, the QK fix's and GradDrop's included. So the screen's top heads are checked by
exact ablation (:func:`screen_heads`), and its agreement with exact ablation is a rank correlation over the checked
heads, with an interval.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from induction_probes.circuits.defaults import PROBE_SEED
from induction_probes.circuits.devices import model_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.language_models import as_hooked
from induction_probes.circuits.interop.resume import resid_pre_hook, resumes_at_layer, run_from_layer
from induction_probes.circuits.threads import thread_policy
from induction_probes.probes.ablation.head_ablation import is_index, reference_z, z_hook
from induction_probes.probes.attention.patterns import activation_at, pattern_hook
from induction_probes.probes.lm.ablate_heads import ablate
from induction_probes.probes.lm.graddrop import GradientGates, head_sizes
from induction_probes.probes.lm.losses import per_token_loss
from induction_probes.probes.lm.measure import HeadEstimate, chunk_size
from induction_probes.probes.lm.protocols import InductionLoss, RepeatedTokens, induction_loss
from induction_probes.probes.lm.weights import stacked_outputs

if TYPE_CHECKING:
    from jaxtyping import Float

    from induction_probes.circuits.interop.language_models import ModelLike
    from induction_probes.circuits.models.hooked_model import HookedModel
    from induction_probes.probes.lm.weights import StackedOutputs

QK_VARIANT_NUMBERS = 1 << 24  # numbers of the patterns one QK-fix pass holds (64 MiB of float32)
SCREEN_MODES = ("zero", "mean")  # resample replaces z by another sequence's: no one gradient step describes it
MIN_RANK_PAIRS = 10  # Fieller, Hartley and Pearson's interval of a rank correlation holds from about 10 pairs


def chunk_attributions(
    model: HookedModel,
    repeated: RepeatedTokens,
    targets: dict[int, Tensor] | None,
    qk_fix: bool = True,
    graddrop: bool = False,
) -> Float[Tensor, "batch variant layer head"]:
    """Per sequence of ``repeated`` (one chunk), each head's estimated rise (module docstring), as variant 0; with
    ``graddrop``, variant 1 + ℓ is the estimate with the gradient through layer ℓ's writes dropped. ``targets``: per
    layer the z' each head's output is replaced by ([head, d_head], broadcast), None for zero. ``qk_fix``: the
    paths into later heads' queries and keys are taken through their exact softmax (:func:`qk_fixed_rises`)."""
    n_layers = model.cfg.n_layers
    captured: dict[str, Tensor] = {}
    gates = GradientGates()

    def start_graph(resid: Tensor, hook) -> Tensor:  # gradients flow from here on, to no parameter
        return resid.detach().requires_grad_(True)

    def keep(name: str, leaf: bool = False):
        def hook(activation: Tensor, hook) -> Tensor:  # under the name asked for: a bridge names its own
            # returned, so the pass goes on from it; a leaf cuts the path back through the softmax to q and k
            activation = activation.detach().requires_grad_(True) if leaf else activation.clone()
            captured[name] = activation
            return activation

        return hook

    hooks = [("blocks.0.hook_resid_pre", start_graph)]
    hooks += [(z_hook(layer), keep(z_hook(layer))) for layer in range(n_layers)]
    if qk_fix:
        hooks += [(pattern_hook(layer), keep(pattern_hook(layer), leaf=True)) for layer in range(1, n_layers)]
        hooks += [(resid_pre_hook(layer), keep(resid_pre_hook(layer))) for layer in range(1, n_layers)]
    hooks += gates.hooks(model) if graddrop else []
    variants: list[int | None] = [None, *range(n_layers)] if graddrop else [None]
    tokens = repeated.tokens.to(model_device(model))
    with torch.enable_grad():
        logits = model.run_with_hooks(tokens, fwd_hooks=hooks)
        loss = induction_loss(per_token_loss(logits, tokens), repeated).repeated_half_per_sequence.sum()
        zs = [captured[z_hook(layer)] for layer in range(n_layers)]
        patterns = [captured[pattern_hook(layer)] for layer in range(1, n_layers)] if qk_fix else []
        gradients = [gates.gradients(loss, zs + patterns, dropped) for dropped in variants]
    changes = [replaced(z.detach(), None if targets is None else targets[layer]) for layer, z in enumerate(zs)]
    rises = torch.stack(
        [
            torch.stack([linear_rise(change, grads[layer]) for layer, change in enumerate(changes)], dim=1)
            for grads in gradients
        ],
        dim=1,
    )
    if not qk_fix:
        return rises
    weights = stacked_outputs(model, "AtP*'s QK fix")  # it moves each head's output by its W_O
    return rises + qk_terms(weights, tokens, captured, changes, gradients, variants)


def qk_terms(
    model: StackedOutputs,
    tokens: Tensor,
    captured: dict[str, Tensor],
    changes: list[Tensor],
    gradients: list[tuple[Tensor | None, ...]],
    variants: list[int | None],
) -> Float[Tensor, "batch variant layer head"]:
    """:func:`qk_fixed_rises` from one pass's captures and its gradient variants (``variants``: the layer each
    drops, None for none), with every head's terms 0 where its own layer is dropped: no path of it is left."""
    n_layers = model.cfg.n_layers
    pattern_gradients = {layer: [grads[n_layers + layer - 1] for grads in gradients] for layer in range(1, n_layers)}
    residuals = {layer: captured[resid_pre_hook(layer)].detach() for layer in range(1, n_layers)}
    patterns = {layer: captured[pattern_hook(layer)].detach() for layer in range(1, n_layers)}
    qk = qk_fixed_rises(model, tokens, changes, patterns, pattern_gradients, residuals)
    for variant, dropped in enumerate(variants):
        if dropped is not None:
            qk[:, variant, dropped] = 0
    return qk


def replaced(z: Tensor, target: Tensor | None) -> Float[Tensor, "batch pos head d_head"]:
    """z' − z: what ablation changes in every head's output (``target``: its replacement, None for zero)."""
    return (torch.zeros_like(z) if target is None else target.to(z).expand_as(z)) - z


def linear_rise(change: Tensor, gradient: Tensor | None) -> Float[Tensor, "batch head"]:
    """(z' − z) · ∂L/∂z per sequence and head (no gradient: nothing downstream reads z)."""
    return (
        torch.zeros(change.shape[0], change.shape[2], dtype=torch.float64)
        if gradient is None
        else (change * gradient).sum(dim=(1, 3)).double().cpu()
    )


def qk_fixed_rises(
    model: StackedOutputs,
    tokens: Tensor,
    changes: list[Tensor],
    patterns: dict[int, Tensor],
    gradients: dict[int, list[Tensor | None]],
    residuals: dict[int, Tensor],
) -> Float[Tensor, "batch variant layer head"]:
    """Each head's rise through the queries and keys of every later layer's heads, AtP*'s QK fix (Kramár et al.
    2024): the head's output change Δo = (z' − z) W_O is added to the residual stream entering layer G, layer G's
    patterns are recomputed exactly from it (LayerNorm, rotary and all, by the model itself, the pass stopped
    there), and the change of each pattern is weighted by the loss's gradient with respect to it, once per
    gradient variant of ``gradients`` (GradDrop's). Every head below G is one variant of a batched pass."""
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    batch, n_variants = tokens.shape[0], len(next(iter(gradients.values()), [None]))
    rises = torch.zeros(batch, n_variants, n_layers, n_heads, dtype=torch.float64)
    W_O = model.W_O.detach()
    outputs = [torch.einsum("bphd,hdm->hbpm", changes[layer].to(W_O), W_O[layer]) for layer in range(n_layers)]
    for layer in range(1, n_layers):
        pattern, used = patterns[layer], [(v, g) for v, g in enumerate(gradients[layer]) if g is not None]
        if not used:
            continue
        senders = [(low, head) for low in range(layer) for head in range(n_heads)]
        per_pass = max(1, QK_VARIANT_NUMBERS // max(1, pattern.numel()))
        for first in range(0, len(senders), per_pass):
            group = senders[first : first + per_pass]
            shifted = torch.cat([residuals[layer] + outputs[low][head].to(residuals[layer]) for low, head in group])
            changed = pattern_from(model, tokens.repeat(len(group), 1), shifted, layer).to(pattern)
            difference = changed.view(len(group), *pattern.shape) - pattern
            for variant, gradient in used:
                weighted = (difference * gradient).sum(dim=(2, 3, 4)).double().cpu()
                for (low, head), values in zip(group, weighted):
                    rises[:, variant, low, head] += values
    return rises


def pattern_from(
    model: HookedModel, tokens: Tensor, residual: Tensor, layer: int
) -> Float[Tensor, "batch head query_pos key_pos"]:
    """Layer ``layer``'s attention pattern from ``residual`` entering it, the pass stopped there."""
    if not resumes_at_layer(model):
        raise BadInput(f"{type(model).__name__} cannot resume a pass at a layer: the QK fix cannot run on it")
    pattern = activation_at(lambda hooks: run_from_layer(model, tokens, residual, layer, hooks), pattern_hook(layer))
    if pattern is not None:
        return pattern
    raise BadInput(f"{type(model).__name__} never reached layer {layer}'s pattern: the QK fix cannot run on it")


def attribution_rises(
    model: ModelLike,
    repeated: RepeatedTokens,
    mode: str = "zero",
    reference: RepeatedTokens | None = None,
    qk_fix: bool = True,
) -> HeadEstimate:
    """Every head's estimated rise of the repeated copy's loss under ``mode`` ablation ("zero", or "mean" over
    ``reference``'s sequences and positions), [layer, head], each the mean over sequences with its t interval.
    ``qk_fix``: AtP*'s (the default); False: plain attribution patching, the first-order term alone."""
    return HeadEstimate.student_t(per_sequence_attributions(model, repeated, mode, reference, qk_fix)[:, 0])


@dataclass(frozen=True, eq=False)
class Attributions:
    """Every head's AtP* estimates, [layer, head]: ``rise``, the signed estimate of its ablation's rise (a t
    interval over sequences), and ``size``, the larger of |rise| and GradDrop's score (module docstring; a
    percentile-bootstrap interval over sequences), which ranks the screen."""

    rise: HeadEstimate
    size: HeadEstimate


def screen_estimates(
    model: ModelLike, repeated: RepeatedTokens, mode: str = "zero", reference: RepeatedTokens | None = None
) -> Attributions:
    """AtP* of every head: its QK fix, and GradDrop where the model has more than one layer (module docstring)."""
    model = as_hooked(model)
    per_sequence = per_sequence_attributions(model, repeated, mode, reference, graddrop=model.cfg.n_layers > 1)
    return Attributions(HeadEstimate.student_t(per_sequence[:, 0]), head_sizes(per_sequence))


def per_sequence_attributions(
    model: ModelLike,
    repeated: RepeatedTokens,
    mode: str,
    reference: RepeatedTokens | None,
    qk_fix: bool = True,
    graddrop: bool = False,
) -> Float[Tensor, "batch variant layer head"]:
    """Each sequence's estimates (:func:`chunk_attributions`), a chunk at a time; with ``graddrop`` the chunks are
    smaller by the L + 1 gradients of every pattern they hold."""
    if mode not in SCREEN_MODES:
        raise BadInput(f"attribution patching screens zero and mean ablation, not {str(mode)[:200]!r}")
    model = as_hooked(model)
    targets = None
    if mode == "mean":
        if reference is None:
            raise BadInput("mean ablation needs reference sequences")
        layers = set(range(model.cfg.n_layers))
        targets = {layer: z.mean(dim=(0, 1)) for layer, z in reference_z(model, reference.tokens, layers).items()}
    n, size = repeated.tokens.shape[0], chunk_size(model, repeated.tokens.shape[1])
    size = max(1, size // (model.cfg.n_layers + 1)) if graddrop else size
    parts = [
        chunk_attributions(model, repeated.rows(slice(i, i + size)), targets, qk_fix, graddrop)
        for i in range(0, n, size)
    ]
    return torch.cat(parts)


def rank_correlation(first: Tensor, second: Tensor) -> float | None:
    """Spearman's rank correlation of two equally long lists of values, tied values given their mean rank; None
    where either list is all ties (every value equal: no order to agree with)."""
    ranks = [average_ranks(values.flatten().double()) for values in (first, second)]
    if any(bool((r == r[0]).all()) for r in ranks):
        return None
    return torch.corrcoef(torch.stack(ranks))[0, 1].item()


def average_ranks(values: Tensor) -> Float[Tensor, " n"]:
    """Ranks from 0, each tie the mean of the ranks it spans (scipy.stats.rankdata's "average" less one; importing
    scipy.stats would cost a language model's ablate 0.6 s, as probes/intervals.py notes)."""
    order = values.argsort()
    ranks = torch.empty_like(values)
    ranks[order] = torch.arange(len(values), dtype=values.dtype)
    for value in values.unique():
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def rank_interval(correlation: float, n: int) -> tuple[float, float] | None:
    """A 95 % interval of Spearman's correlation over n pairs: Fisher's z with Fieller, Hartley and Pearson's
    standard error 1.06 / sqrt(n − 3) (1957), an approximation made for n of 10 and more; None below that, and for
    a perfect order (z is infinite: the approximation gives no width)."""
    if n < MIN_RANK_PAIRS or abs(correlation) >= 1:
        return None
    z = math.atanh(correlation)
    half = 1.959964 * 1.06 / math.sqrt(n - 3)
    return math.tanh(z - half), math.tanh(z + half)


@dataclass(frozen=True)
class Screen:
    """AtP* of every head (``estimates``: :class:`Attributions`), and the exact ablation of the ``checked`` heads
    it ranks highest (:class:`~.ablate_heads.HeadAblation` each)."""

    estimates: Attributions
    checked: list

    @property
    def agreement(self) -> float | None:
        """The rank correlation of the heads' sizes (:class:`Attributions`) with the sizes of their exact rises over
        the checked heads: None below three heads, or where either side is all ties (not defined)."""
        if len(self.checked) < 3:
            return None
        estimated = torch.tensor([self.estimates.size.value[r.heads[0]].item() for r in self.checked])
        return rank_correlation(estimated, torch.tensor([abs(r.loss_increase) for r in self.checked]))

    @property
    def agreement_interval(self) -> tuple[float, float] | None:
        """The 95 % interval of :attr:`agreement` (None where it is not defined, below 10 heads, or at ±1)."""
        agreement = self.agreement
        return None if agreement is None else rank_interval(agreement, len(self.checked))


def screen_heads(
    model: ModelLike,
    repeated: RepeatedTokens,
    top: int,
    mode: str = "zero",
    reference: RepeatedTokens | None = None,
    seed: int = PROBE_SEED,
    progress: bool = False,
    journal: str | os.PathLike | None = None,
    threads: int | None = None,
) -> tuple[InductionLoss, Screen]:
    """AtP* of every head, then exact ablation of the ``top`` heads it ranks highest (by their size, how much a head
    matters whichever way, :class:`Attributions`): the clean loss, and the :class:`Screen`."""
    if not is_index(top) or top < 1:
        raise BadInput(f"the screen checks at least one head exactly, got {top!r}")
    model = as_hooked(model)
    if top > (heads := model.cfg.n_layers * model.cfg.n_heads):
        raise BadInput(f"the screen would check {top} heads exactly, but the model has {heads}")
    with thread_policy(model, threads):
        estimates = screen_estimates(model, repeated, mode, reference)
    ranked = [(layer, head) for layer, head, _ in sorted(ranked_heads(estimates.size), key=lambda item: -item[2])]
    head_sets = [[head] for head in ranked[:top]]
    baseline, checked = ablate(model, repeated, head_sets, mode, reference, seed, progress, journal, threads)
    return baseline, Screen(estimates, checked)


def ranked_heads(estimates: HeadEstimate) -> list[tuple[int, int, float]]:
    n_layers, n_heads = estimates.value.shape
    return [(layer, head, estimates.value[layer, head].item()) for layer in range(n_layers) for head in range(n_heads)]
