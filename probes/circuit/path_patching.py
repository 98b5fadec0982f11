"""Path patching edge by edge (Wang et al. 2022, §3.1; Goldowsky-Dill et al. 2023) in a model of ours: which head reads
which, through which input, and how much of in-context learning each edge carries.

The residual stream entering a layer is a sum of what each earlier component wrote: the embedding, each head's
output z_h W_O[h], each MLP's output (and the biases, the same on every run). A *sender* is one of those writers; a
*receiver* is a later head's query, key or value input (each head reads its own copy of the stream: the split
inputs of TransformerLens, ``use_split_qkv_input``), or the logits (the stream after the last layer). The *edge*
(sender, receiver) is patched by replacing, in that receiver's input only, the sender's clean output by its output
on a corrupted run: the receiver's input gains (corrupted − clean), and nothing else changes, so only the direct
path from the sender to that receiver carries the corruption.

Several edges patched at once (the complement of a circuit, for its faithfulness) are patched in one forward pass:
each receiver's input gains, for every patched edge into it, the sender's corrupted output minus its output in that
same pass, which the pass records as it goes (a sender runs before every receiver it writes to). For one edge this
is the clean output, since nothing upstream of the sender changes.

An MLP is a sender but not (yet) a receiver: its input is never patched, so in a model with MLPs every path through
an MLP stays clean when the edges outside a circuit are patched, and the faithfulness of such a model's circuit is
an upper bound. The attention-only models of ICL-MC have no MLP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.names import head_label

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

VIAS = ("q", "k", "v")


@dataclass(frozen=True)
class Edge:
    """``sender`` ("embed", "L0H0", "MLP0") → ``receiver`` ("L1H0", "logits") through ``via`` (q, k, v, direct)."""

    sender: str
    receiver: str
    via: str

    @property
    def name(self) -> str:
        return f"{self.sender} -> {self.receiver}" + ("" if self.via == "direct" else f".{self.via}")


def heads_in(model: HookedModel, layer: int) -> int:
    return int(model.blocks[layer].attn.W_Q.shape[0])  # layers may differ in their head counts


def senders_before(model: HookedModel, layer: int) -> list[str]:
    """The writers to the stream entering ``layer``: the embedding, then each earlier layer's heads and MLP."""
    names = ["embed"]
    for earlier in range(layer):
        names += [head_label(earlier, h) for h in range(heads_in(model, earlier))]
        if model.cfg.d_mlp is not None:
            names.append(f"MLP{earlier}")
    return names


def model_edges(model: HookedModel) -> list[Edge]:
    """Every edge of ``model``: each sender to each later head's q, k and v, and each sender to the logits."""
    edges = []
    for layer in range(model.cfg.n_layers):
        for head in range(heads_in(model, layer)):
            receiver = head_label(layer, head)
            edges += [Edge(s, receiver, via) for s in senders_before(model, layer) for via in VIAS]
    return edges + [Edge(s, "logits", "direct") for s in senders_before(model, model.cfg.n_layers)]


def recording_hooks(model: HookedModel, store: dict[str, Tensor]) -> list[tuple[str, object]]:
    """Hooks that write every sender's output of the pass into ``store`` as the pass produces it."""

    def embed(x: Tensor, hook) -> Tensor:
        store["embed"] = store.get("embed", 0) + x  # the token embedding, then (with absolute positions) W_pos
        return x

    def heads(layer: int):
        def hook(z: Tensor, hook) -> Tensor:
            W_O = model.blocks[layer].attn.W_O  # [head, d_head, d_model]
            for h in range(z.shape[2]):
                store[head_label(layer, h)] = z[:, :, h] @ W_O[h]
            return z

        return hook

    def mlp(layer: int):
        def hook(out: Tensor, hook) -> Tensor:
            store[f"MLP{layer}"] = out
            return out

        return hook

    hooks: list[tuple[str, object]] = [("hook_embed", embed)]
    if model.cfg.positional == "standard":
        hooks.append(("hook_pos_embed", embed))
    for layer in range(model.cfg.n_layers):
        hooks.append((f"blocks.{layer}.attn.hook_z", heads(layer)))
        if model.cfg.d_mlp is not None:
            hooks.append((f"blocks.{layer}.hook_mlp_out", mlp(layer)))
    return hooks


def sender_outputs(model: HookedModel, tokens: Int[Tensor, "batch pos"]) -> dict[str, Tensor]:
    """Every sender's output on ``tokens`` (an unpatched pass)."""
    store: dict[str, Tensor] = {}
    with torch.inference_mode():
        model.run_with_hooks(tokens, fwd_hooks=recording_hooks(model, store))
    return store


def patched_logits(
    model: HookedModel, tokens: Int[Tensor, "batch pos"], edges: list[Edge], corrupted: dict[str, Tensor]
) -> Float[Tensor, "batch pos d_vocab"]:
    """The logits on ``tokens`` with every edge of ``edges`` patched from ``corrupted`` (sender outputs on the
    corrupted run, :func:`sender_outputs`) in one pass (module docstring)."""
    current: dict[str, Tensor] = {}
    into: dict[tuple[str, str], list[str]] = {}
    for edge in edges:
        into.setdefault((edge.receiver, edge.via), []).append(edge.sender)

    def delta(senders: list[str]) -> Tensor:
        return sum((corrupted[s] - current[s] for s in senders), torch.zeros(()))

    def head_input(layer: int, via: str):
        def hook(x: Tensor, hook) -> Tensor:  # [batch, pos, head, d_model]: each head's own copy of the stream
            x = x.clone()
            for head in range(x.shape[2]):
                if senders := into.get((head_label(layer, head), via)):
                    x[:, :, head] = x[:, :, head] + delta(senders)
            return x

        return hook

    def logits_input(resid: Tensor, hook) -> Tensor:
        return resid + delta(into[("logits", "direct")])

    hooks = recording_hooks(model, current)
    for layer in range(model.cfg.n_layers):
        hooks += [(f"blocks.{layer}.attn.hook_{via}_input", head_input(layer, via)) for via in VIAS]
    if ("logits", "direct") in into:
        hooks.append((f"blocks.{model.cfg.n_layers - 1}.hook_resid_post", logits_input))
    with split_inputs(model), torch.inference_mode():
        return model.run_with_hooks(tokens, fwd_hooks=hooks)


class split_inputs:
    """Each head reads its own copy of the stream for the length of the block (TransformerLens's
    ``use_split_qkv_input``), as it was before afterwards."""

    def __init__(self, model: HookedModel):
        self.model, self.before = model, bool(model.cfg.use_split_qkv_input)

    def __enter__(self) -> None:
        self.model.set_use_split_qkv_input(True)

    def __exit__(self, *exc) -> None:
        self.model.set_use_split_qkv_input(self.before)
