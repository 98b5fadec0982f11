"""A screen of every edge before exact path patching: edge attribution patching with integrated gradients (EAP-IG,
Hanna et al. 2024, "Have Faith in Faithfulness"), for models whose edges are too many to patch one pass each.

Patching edge (u → v) adds Δ_u = (u's corrupted output − its clean output) to v's input. To first order that
changes the measure by Δ_u · ∂M/∂x_v, x_v being v's input; EAP (Syed et al. 2023) takes the gradient on the clean
run, where a saturated softmax or a flat loss makes it vanish. EAP-IG averages it instead over ``steps`` runs whose
input embeddings lie on the straight line from the corrupted run's to the clean run's (at k / steps of the way,
k = 1 … steps): every edge's estimate from the same ``steps`` forward and backward passes, whatever the number of
edges. Each receiver's gradient comes from its own copy of the stream (the split q, k and v inputs), so one
backward pass gives every head's three inputs apart.

The estimate is a share of the gap, like the exact effect: mean over sequences of Δ_u · ḡ_v, over the mean gap.
It ranks the edges; only the top ones are patched exactly (:func:`~.edges.edge_effects`), and the text and JSON say
how many.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.devices import model_device
from induction_probes.probes.attention.patterns import activation_at
from induction_probes.probes.circuit.path_patching import (
    VIAS,
    Edge,
    heads_in,
    input_hook,
    logits_input_hook,
    receiver_label,
    sender_outputs,
    senders_before,
    split_inputs,
)

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel
    from induction_probes.probes.circuit.contrasts import Contrast

IG_STEPS = 5  # points on the path from the corrupted input to the clean one (Hanna et al. 2024 use 5)
SCREEN_NUMBERS = 1 << 28  # receiving inputs one chunk of the screen holds: 1 GiB of float32 (8 GPT-2 sequences)
FIRST_RESIDUAL = "blocks.0.hook_resid_pre"  # the input embeddings: the embedding, with absolute positions if any


@dataclass(frozen=True, eq=False)
class EdgeScreen:
    """EAP-IG's estimate of every edge's share of the gap (``estimates``, in ``edges``' order)."""

    edges: list[Edge]
    estimates: Float[Tensor, " edge"]
    steps: int

    @cached_property
    def index(self) -> dict[Edge, int]:
        return {edge: i for i, edge in enumerate(self.edges)}

    def top(self, n: int) -> list[Edge]:
        """The ``n`` edges whose estimates are largest in size, in the order of :attr:`edges`."""
        chosen = set(self.estimates.abs().argsort(descending=True)[:n].tolist())
        return [edge for i, edge in enumerate(self.edges) if i in chosen]

    def estimate(self, edge: Edge) -> float:
        return self.estimates[self.index[edge]].item()

    def describe(self, checked: int) -> str:
        return (
            f"EAP-IG ({self.steps} steps) screened all {len(self.edges):,} edges; the {min(checked, len(self.edges))} "
            "it ranks highest were patched exactly"
        )


def screen_edges(
    model: HookedModel,
    contrast: Contrast,
    edges: list[Edge],
    gap: float,
    steps: int = IG_STEPS,
) -> EdgeScreen:
    """EAP-IG's estimate of every edge of ``edges`` as a share of ``gap`` (the mean gap; module docstring), a few
    sequences at a time (each receiving input's gradient is a copy of the stream per head: GPT-2 small's hold 130 MB
    a sequence)."""
    n = len(contrast.clean)
    rows = max(1, SCREEN_NUMBERS // max(1, split_inputs_size(model, contrast.clean.shape[1])))
    sums: dict[tuple[int, str], Tensor] = {}
    for first in range(0, n, rows):
        for key, total in edge_sums(model, contrast.rows(slice(first, first + rows)), steps).items():
            sums[key] = sums.get(key, 0) + total
    estimates: dict[Edge, float] = {}
    for (layer, via), total in sums.items():
        senders = senders_before(model, layer)
        receivers = (
            ["logits"]
            if layer == model.cfg.n_layers
            else [receiver_label(model, layer, i, via) for i in range(total.shape[1])]
        )
        for r, receiver in enumerate(receivers):
            for s, sender in enumerate(senders):
                estimates[Edge(sender, receiver, via)] = total[s, r].item()
    values = torch.tensor([estimates[edge] for edge in edges], dtype=torch.float64)
    return EdgeScreen(edges, values / n / gap, steps)


def split_inputs_size(model: HookedModel, positions: int) -> int:
    """Numbers one sequence's receiving inputs hold: a copy of the stream per head, input and layer."""
    heads = sum(heads_in(model, layer, via) for layer in range(model.cfg.n_layers) for via in VIAS)
    return heads * positions * int(getattr(model.cfg, "d_model", 1))


def edge_sums(
    model: HookedModel, contrast: Contrast, steps: int
) -> dict[tuple[int, str], Float[Tensor, "sender receiver"]]:
    """Per receiving (layer, via), Σ over these sequences of Δ_sender · ḡ_receiver, [sender, receiver]: each
    point's gradients reduced to their edges' sums at once (Δ · g is linear in g), never kept."""
    clean, corrupted = (sender_outputs(model, tokens) for tokens in (contrast.clean, contrast.corrupted))
    senders = senders_before(model, model.cfg.n_layers)  # every layer's senders are the first ones of these
    changes = torch.stack([corrupted[s] - clean[s] for s in senders])  # [sender, batch, pos, d_model]
    del clean, corrupted
    start, end = (first_residual(model, tokens) for tokens in (contrast.corrupted, contrast.clean))
    sums: dict[tuple[int, str], Tensor] = {}
    for k in range(1, steps + 1):
        for (layer, via), gradient in input_gradients(model, contrast, start + (k / steps) * (end - start)).items():
            before = changes[: len(senders_before(model, layer))].to(gradient)  # a view: the senders of this layer
            total = torch.einsum("sbpd,bprd->sr", before, gradient).double().cpu()
            sums[(layer, via)] = sums.get((layer, via), 0) + total / steps
    return sums


def first_residual(model: HookedModel, tokens: Tensor) -> Float[Tensor, "batch pos d_model"]:
    """The input embeddings of ``tokens`` (the stream entering block 0), the pass stopped there."""
    found = activation_at(lambda hooks: model.run_with_hooks(on_device(model, tokens), fwd_hooks=hooks), FIRST_RESIDUAL)
    if found is None:
        raise RuntimeError(f"the forward pass never reached {FIRST_RESIDUAL}")
    return found


def on_device(model: HookedModel, tokens: Int[Tensor, "batch pos"]) -> Int[Tensor, "batch pos"]:
    return tokens.to(model_device(model))


def from_embeddings(first: Tensor):
    """A hook for :data:`FIRST_RESIDUAL` that replaces the input embeddings by ``first``, where a gradient starts
    (and reaches no parameter)."""

    def start(resid: Tensor, hook) -> Tensor:
        return first.to(resid).detach().requires_grad_(True)

    return start


def input_gradients(
    model: HookedModel, contrast: Contrast, first: Tensor
) -> dict[tuple[int, str], Float[Tensor, "batch pos head d_model"]]:
    """One pass on the clean tokens from the input embeddings ``first``, and the gradient of the summed measure
    with respect to every receiving input: per (layer, via), [batch, pos, receiver, d_model]; the logits' input
    under (n_layers, "direct"), one receiver."""
    captured: dict[tuple[int, str], Tensor] = {}

    def keep(layer: int, via: str):
        def hook(x: Tensor, hook) -> Tensor:
            captured[(layer, via)] = x
            return x

        return hook

    n_layers = model.cfg.n_layers
    hooks = [(FIRST_RESIDUAL, from_embeddings(first)), (logits_input_hook(model), keep(n_layers, "direct"))]
    hooks += [(input_hook(layer, via), keep(layer, via)) for layer in range(n_layers) for via in VIAS]
    with split_inputs(model), torch.enable_grad():
        logits = model.run_with_hooks(on_device(model, contrast.clean), fwd_hooks=hooks)
        keys = list(captured)
        found = torch.autograd.grad(contrast.from_logits(logits).sum(), [captured[k] for k in keys], allow_unused=True)
    gradients = {}
    for key, gradient in zip(keys, found):
        gradient = torch.zeros_like(captured[key]) if gradient is None else gradient.detach()
        gradients[key] = gradient[:, :, None] if key[0] == n_layers else gradient
    return gradients
