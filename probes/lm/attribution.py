"""Attribution patching (Nanda 2023; Syed et al. 2023): a first-order screen of every head's ablation effect in one
forward and one backward pass, where exact ablation of a large model's heads takes one pass per head.

The quantity is the one :mod:`.ablation` measures exactly: the rise of the loss on the repeated copy R[1:] when a
head's output z (``hook_z``) is replaced by z' (zero, or the head's mean over reference sequences). To first
order, per sequence,

    rise ≈ Σ_{positions, d_head} (z' − z) · ∂L/∂z

with L the sequence's loss on its repeated copy and the gradient taken on the clean pass. A head's estimate is the
mean over sequences with its Student-t interval. It is exact for an effect linear in z and drifts where the loss
curves (a large ablation, a saturated softmax), so its top heads are checked by exact ablation
(:func:`screen_heads`), and its agreement with exact ablation is measured as a rank correlation over heads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from induction_probes.circuits.defaults import PROBE_SEED
from induction_probes.circuits.devices import model_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.language_models import as_hooked
from induction_probes.circuits.threads import thread_policy
from induction_probes.probes.ablation.head_ablation import is_index, reference_z, z_hook
from induction_probes.probes.lm.ablate_heads import ablate
from induction_probes.probes.lm.measure import HeadEstimate, chunk_size, per_token_loss
from induction_probes.probes.lm.protocols import InductionLoss, RepeatedTokens, induction_loss

if TYPE_CHECKING:
    from jaxtyping import Float

    from induction_probes.circuits.interop.language_models import ModelLike
    from induction_probes.circuits.models.hooked_model import HookedModel

SCREEN_MODES = ("zero", "mean")  # resample replaces z by another sequence's: no one gradient step describes it


def chunk_attributions(
    model: HookedModel, repeated: RepeatedTokens, targets: dict[int, Tensor] | None
) -> Float[Tensor, "batch layer head"]:
    """Per sequence of ``repeated`` (one chunk), each head's first-order rise (module docstring); ``targets``:
    per layer the z' each head's output is replaced by ([head, d_head], broadcast), None for zero."""
    names = [z_hook(layer) for layer in range(model.cfg.n_layers)]
    captured: dict[str, Tensor] = {}

    def start_graph(resid: Tensor, hook) -> Tensor:  # gradients flow from here on, to no parameter
        return resid.detach().requires_grad_(True)

    def keep(name: str):
        def hook(z: Tensor, hook) -> Tensor:  # under the name asked for: a TransformerBridge names its own
            captured[name] = z = z.clone()  # returned, so the pass goes on from it (a bridge may use its own copy)
            return z

        return hook

    hooks = [("blocks.0.hook_resid_pre", start_graph), *((name, keep(name)) for name in names)]
    tokens = repeated.tokens.to(model_device(model))
    with torch.enable_grad():
        logits = model.run_with_hooks(tokens, fwd_hooks=hooks)
        loss = induction_loss(per_token_loss(logits, tokens), repeated).repeated_half_per_sequence.sum()
        zs = [captured[name] for name in names]
        gradients = torch.autograd.grad(loss, zs)
    per_layer = []
    for layer, (z, gradient) in enumerate(zip(zs, gradients)):
        z = z.detach()
        target = torch.zeros_like(z) if targets is None else targets[layer].to(z).expand_as(z)
        per_layer.append(((target - z) * gradient).sum(dim=(1, 3)).double().cpu())  # [batch, head]
    return torch.stack(per_layer, 1)


def attribution_rises(
    model: ModelLike, repeated: RepeatedTokens, mode: str = "zero", reference: RepeatedTokens | None = None
) -> HeadEstimate:
    """Every head's first-order rise of the repeated copy's loss under ``mode`` ablation ("zero", or "mean" over
    ``reference``'s sequences and positions), [layer, head], each the mean over sequences with its t interval."""
    if mode not in SCREEN_MODES:
        raise BadInput(f"attribution patching screens zero and mean ablation, not {str(mode)[:200]!r}")
    if mode == "mean" and reference is None:
        raise BadInput("mean ablation needs reference sequences")
    model = as_hooked(model)
    targets = None
    if mode == "mean":
        layers = set(range(model.cfg.n_layers))
        targets = {layer: z.mean(dim=(0, 1)) for layer, z in reference_z(model, reference.tokens, layers).items()}
    n, size = repeated.tokens.shape[0], chunk_size(model, repeated.tokens.shape[1])
    parts = [chunk_attributions(model, repeated.rows(slice(i, i + size)), targets) for i in range(0, n, size)]
    return HeadEstimate.student_t(torch.cat(parts))


def rank_correlation(first: Tensor, second: Tensor) -> float:
    """Spearman's rank correlation of two equally long lists of values (ties: ranked in order of appearance,
    which continuous scores such as these do not meet)."""
    ranks = [values.flatten().double().argsort().argsort().double() for values in (first, second)]
    return torch.corrcoef(torch.stack(ranks))[0, 1].item()


@dataclass(frozen=True)
class Screen:
    """Attribution patching of every head (``estimates``), and the exact ablation of the ``checked`` heads it ranks
    highest (:class:`~.ablation.HeadAblation` each)."""

    estimates: HeadEstimate
    checked: list

    @property
    def agreement(self) -> float | None:
        """The rank correlation of estimated and exact rises over the checked heads (None below three)."""
        if len(self.checked) < 3:
            return None
        estimated = torch.tensor([self.estimates.value[r.heads[0]].item() for r in self.checked])
        return rank_correlation(estimated, torch.tensor([r.loss_increase for r in self.checked]))


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
    """Attribution patching of every head, then exact ablation of the ``top`` heads it estimates to raise the
    repeated copy's loss most: the clean loss, and the :class:`Screen`."""
    if not is_index(top) or top < 1:
        raise BadInput(f"the screen checks at least one head exactly, got {top!r}")
    model = as_hooked(model)
    with thread_policy(model, threads):
        estimates = attribution_rises(model, repeated, mode, reference)
    ranked = [(layer, head) for layer, head, _ in sorted(ranked_heads(estimates), key=lambda item: -item[2])]
    head_sets = [[head] for head in ranked[:top]]
    baseline, checked = ablate(model, repeated, head_sets, mode, reference, seed, progress, journal, threads)
    return baseline, Screen(estimates, checked)


def ranked_heads(estimates: HeadEstimate) -> list[tuple[int, int, float]]:
    n_layers, n_heads = estimates.value.shape
    return [(layer, head, estimates.value[layer, head].item()) for layer in range(n_layers) for head in range(n_heads)]
