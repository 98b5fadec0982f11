"""Path patching edge by edge (Wang et al. 2022, §3.1; Goldowsky-Dill et al. 2023) in a model of ours or a
TransformerLens ``TransformerBridge`` around a Hugging Face model: which head reads which, through which input, and
how much of in-context learning each edge carries.

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

Under grouped-query attention (Llama's, where heads share keys and values) a key or value input belongs to a group
of heads: its receiver is named ``L1KV0`` (layer 1's key-value group 0) and a query's ``L1H0``.

An MLP is a sender but not (yet) a receiver: its input is never patched, so in a model with MLPs every path through
an MLP stays clean when the edges outside a circuit are patched, and the faithfulness of such a model's circuit is
an upper bound. The attention-only models of ICL-MC have no MLP.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.names import head_label
from induction_probes.probes.ablation.head_ablation import heads_in_layer, z_hook

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

VIAS = ("q", "k", "v")
EMBEDDING_HOOKS = ("hook_embed", "hook_pos_embed")  # what a model adds into the stream before block 0 (those it has)


@dataclass(frozen=True)
class Edge:
    """``sender`` ("embed", "L0H0", "MLP0") → ``receiver`` ("L1H0", "L1KV0", "logits") through ``via`` (q, k, v,
    direct)."""

    sender: str
    receiver: str
    via: str

    @property
    def name(self) -> str:
        return f"{self.sender} -> {self.receiver}" + ("" if self.via == "direct" else f".{self.via}")


def attention(model: HookedModel, layer: int) -> Any:
    return model.blocks[layer].attn  # type: ignore[attr-defined]  # weight-reading: both model families have blocks


def heads_in(model: HookedModel, layer: int, via: str = "q") -> int:
    """Layer ``layer``'s query heads, or for ``via`` k or v its key-value heads (fewer under grouped-query
    attention); layers of ours may differ in their head counts."""
    queries = heads_in_layer(model.cfg, layer)
    if via == "q" or getattr(model.cfg, "ungroup_grouped_query_attention", False):  # each head its own copy
        return queries
    return getattr(model.cfg, "n_key_value_heads", None) or queries


def receiver_label(model: HookedModel, layer: int, index: int, via: str) -> str:
    """The name of input ``index`` of layer ``layer``'s ``via`` (module docstring: a key-value group's own name)."""
    return f"L{layer}KV{index}" if via != "q" and grouped(model, layer) else head_label(layer, index)


def grouped(model: HookedModel, layer: int) -> bool:
    """Whether layer ``layer``'s heads share keys and values (grouped-query attention)."""
    return heads_in(model, layer, "k") < heads_in(model, layer, "q")


def receivers_in(model: HookedModel, layer: int) -> list[tuple[str, tuple[str, ...]]]:
    """Layer ``layer``'s receivers with the inputs each has: every head its q, k and v, or under grouped-query
    attention each head its q and each key-value group its k and v."""
    if not grouped(model, layer):
        return [(head_label(layer, h), VIAS) for h in range(heads_in(model, layer))]
    queries: list[tuple[str, tuple[str, ...]]] = [(head_label(layer, h), ("q",)) for h in range(heads_in(model, layer))]
    return queries + [(receiver_label(model, layer, g, "k"), ("k", "v")) for g in range(heads_in(model, layer, "k"))]


def has_hook(model: HookedModel, name: str) -> bool:
    return name in model.hook_dict


def senders_before(model: HookedModel, layer: int) -> list[str]:
    """The writers to the stream entering ``layer``: the embedding, then each earlier layer's heads and MLP."""
    names = ["embed"]
    for earlier in range(layer):
        names += [head_label(earlier, h) for h in range(heads_in(model, earlier))]
        if has_hook(model, mlp_hook(earlier)):
            names.append(f"MLP{earlier}")
    return names


def mlp_hook(layer: int) -> str:
    return f"blocks.{layer}.hook_mlp_out"


def input_hook(layer: int, via: str) -> str:
    return f"blocks.{layer}.attn.hook_{via}_input"


def logits_input_hook(model: HookedModel) -> str:
    """Where the logits' input is the whole stream: after the last block, before the final norm."""
    return f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"


def model_edges(model: HookedModel) -> list[Edge]:
    """Every edge of ``model``: each sender to each later head's q, k and v, and each sender to the logits."""
    edges = []
    for layer in range(model.cfg.n_layers):
        senders = senders_before(model, layer)
        for receiver, vias in receivers_in(model, layer):
            edges += [Edge(s, receiver, via) for s in senders for via in vias]
    return edges + [Edge(s, "logits", "direct") for s in senders_before(model, model.cfg.n_layers)]


def edges_among(model: HookedModel, heads: list[str]) -> list[Edge]:
    """The edges whose sender is the embedding, an MLP or one of ``heads`` (labels, ``L1H0``) and whose receiver
    is one of ``heads`` (a key-value group where one of its heads is) or the logits."""
    chosen = set(heads)
    receivers = chosen | {"logits"}
    for layer in range(model.cfg.n_layers):
        if grouped(model, layer):
            size = heads_in(model, layer) // heads_in(model, layer, "k")
            receivers |= {
                receiver_label(model, layer, h // size, "k")
                for h in range(heads_in(model, layer))
                if head_label(layer, h) in chosen
            }
    return [
        e
        for e in model_edges(model)
        if (e.sender == "embed" or e.sender.startswith("MLP") or e.sender in chosen) and e.receiver in receivers
    ]


def recording_hooks(model: HookedModel, store: dict[str, Tensor], wanted: set[str] | None = None) -> list[tuple]:
    """Hooks that write the output of every sender (of those ``wanted``, default all) into ``store`` as the pass
    produces it."""

    def embed(x: Tensor, hook) -> Tensor:
        store["embed"] = store.get("embed", 0) + x  # the token embedding, then (with absolute positions) W_pos
        return x

    def heads(layer: int, labels: list[str]):
        def hook(z: Tensor, hook) -> Tensor:
            W_O = attention(model, layer).W_O  # [head, d_head, d_model]
            for h, label in enumerate(labels):
                if wanted is None or label in wanted:
                    store[label] = z[:, :, h] @ W_O[h]
            return z

        return hook

    def mlp(layer: int):
        def hook(out: Tensor, hook) -> Tensor:
            store[f"MLP{layer}"] = out
            return out

        return hook

    hooks: list[tuple] = []
    if wanted is None or "embed" in wanted:
        hooks += [(name, embed) for name in EMBEDDING_HOOKS if has_hook(model, name)]
    for layer in range(model.cfg.n_layers):
        labels = [head_label(layer, h) for h in range(heads_in(model, layer))]
        if wanted is None or wanted.intersection(labels):
            hooks.append((z_hook(layer), heads(layer, labels)))
        if has_hook(model, mlp_hook(layer)) and (wanted is None or f"MLP{layer}" in wanted):
            hooks.append((mlp_hook(layer), mlp(layer)))
    return hooks


def sender_outputs(model: HookedModel, tokens: Int[Tensor, "batch pos"]) -> dict[str, Tensor]:
    """Every sender's output on ``tokens`` (an unpatched pass)."""
    store: dict[str, Tensor] = {}
    with torch.inference_mode():
        model.run_with_hooks(tokens, fwd_hooks=recording_hooks(model, store))
    return store


def patching_hooks(model: HookedModel, edges: list[Edge], corrupted: dict[str, Tensor]) -> list[tuple]:
    """The hooks that patch every edge of ``edges`` from ``corrupted`` (sender outputs on the corrupted run,
    :func:`sender_outputs`) in one pass (module docstring), to be run under :func:`split_inputs`. Each receiving
    input gains Σ over its patched senders of (corrupted − current): one product of a receivers × senders 0/1
    matrix with the senders' differences, so that the complement of a circuit (every sender into every input)
    costs one matrix product a layer."""
    current: dict[str, Tensor] = {}
    into: dict[tuple[str, str], set[str]] = {}
    for edge in edges:
        into.setdefault((edge.receiver, edge.via), set()).add(edge.sender)

    def gained(senders: list[str], receivers: list[str], via: str) -> Tensor:
        """[receiver, batch, pos, d_model]: what each receiver's input gains."""
        chosen = torch.tensor([[s in into.get((r, via), ()) for s in senders] for r in receivers])
        used = chosen.any(0).nonzero().squeeze(1).tolist()
        differences = torch.stack([corrupted[senders[i]] - current[senders[i]] for i in used])
        return torch.einsum("rs,s...->r...", chosen[:, used].to(differences), differences)

    def head_input(layer: int, via: str):
        receivers = [receiver_label(model, layer, i, via) for i in range(heads_in(model, layer, via))]
        senders = senders_before(model, layer)

        def hook(x: Tensor, hook) -> Tensor:  # [batch, pos, head, d_model]: each head's own copy of the stream
            return x + gained(senders, receivers, via).movedim(0, 2).to(x)

        return hook, any((r, via) in into for r in receivers)

    def logits_input(resid: Tensor, hook) -> Tensor:
        senders = senders_before(model, model.cfg.n_layers)
        return resid + gained(senders, ["logits"], "direct")[0].to(resid)

    hooks = recording_hooks(model, current, {edge.sender for edge in edges})
    for layer in range(model.cfg.n_layers):
        for via in VIAS:
            hook, used = head_input(layer, via)
            hooks += [(input_hook(layer, via), hook)] if used else []
    if ("logits", "direct") in into:
        hooks.append((logits_input_hook(model), logits_input))
    return hooks


def patched_logits(
    model: HookedModel, tokens: Int[Tensor, "batch pos"], edges: list[Edge], corrupted: dict[str, Tensor]
) -> Float[Tensor, "batch pos d_vocab"]:
    """The logits on ``tokens`` with every edge of ``edges`` patched from ``corrupted`` in one pass."""
    with split_inputs(model), torch.inference_mode():
        return model.run_with_hooks(tokens, fwd_hooks=patching_hooks(model, edges, corrupted))


@contextmanager
def split_inputs(model: HookedModel) -> Iterator[None]:
    """Each head reads its own copy of the stream for the length of the block (TransformerLens's
    ``use_split_qkv_input``), as it was before afterwards."""
    before = bool(getattr(model.cfg, "use_split_qkv_input", False))
    model.set_use_split_qkv_input(True)  # type: ignore[attr-defined]  # both model families have the switch
    try:
        yield
    finally:
        model.set_use_split_qkv_input(before)  # type: ignore[attr-defined]  # as above
