"""What path patching (:mod:`.path_patching`) says about a model: each edge's share of the in-context gap, the
circuit of the edges that pass a threshold, and the circuit's faithfulness, on a contrast of clean and corrupted
runs (:mod:`.contrasts`: ICL-MC's sequences, or a language model's repeated random tokens).

**The effect.** The *gap* is the corrupted run's measure minus the clean run's, per sequence (what the context is
worth); an edge's *effect* is the share of the gap that corrupting that edge alone opens, mean(patched − clean) /
mean(gap) (the signal the edge carries), 0 for nothing and 1 for all of it, with a percentile bootstrap interval
that resamples the sequences for both. Where the gap's interval includes 0 there is no in-context signal to share
out, and every effect is null, with the reason.

**The circuit** is the edges whose effect reaches ``threshold``; its **faithfulness** (Wang et al. 2022, §4) is the
share of the gap the model keeps when every edge outside the circuit is patched at once: mean(corrupted −
faithful) / mean(gap), 1 where the circuit alone carries all of it.

**Many edges.** A model with more edges than :data:`EXACT_EDGES` (GPT-2 small has about 31,000) is screened
first (:mod:`.screen`, EAP-IG): only the edges the screen ranks highest are patched exactly, and the circuit is
chosen among them; its faithfulness still patches every other edge, screened or not.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.devices import model_device
from induction_probes.circuits.errors import BadInput
from induction_probes.probes.circuit.contrasts import Contrast
from induction_probes.probes.circuit.path_patching import (
    VIAS,
    Edge,
    edges_among,
    input_hook,
    model_edges,
    patching_hooks,
    sender_outputs,
    split_inputs,
)
from induction_probes.probes.circuit.screen import EdgeScreen, screen_edges
from induction_probes.probes.intervals import Estimate, bootstrap_ratio_interval, mean_interval, ratio_estimates
from induction_probes.probes.lm.protocols import estimate_json
from induction_probes.probes.tidy import Tidy, row

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

THRESHOLD = 0.1  # an edge is in the circuit where it alone carries at least this share of the gap
EXACT_EDGES = 300  # a model with more edges is screened first: an edge patched exactly costs a forward pass
CHECKED_EDGES = 100  # of a screened model, the edges the screen ranks highest that are patched exactly


@dataclass(frozen=True, eq=False)
class EdgeEffects(Tidy):
    """Every edge's share of the gap at one checkpoint, the circuit and its faithfulness (module docstring).
    ``effects`` and ``faithfulness`` are None where the gap's interval includes 0 (``no_gap`` says so)."""

    step: int | None
    gap: Estimate
    edges: list[Edge]
    effects: list[Estimate] | None
    threshold: float
    faithfulness: Estimate | None
    screen: EdgeScreen | None = None  # where the edges were screened first: only ``edges`` were patched exactly
    marked: tuple[str, ...] | None = None  # where only the edges among these heads were patched (``probe``'s)

    @property
    def no_gap(self) -> str | None:
        if self.gap.low is None:
            return "one sequence gives the gap no interval"
        if self.gap.low <= 0:
            return f"the gap {self.gap.value:.3g} [{self.gap.low:.3g}, {self.gap.high:.3g}] includes 0"
        return None

    @property
    def circuit(self) -> list[Edge]:
        if self.effects is None:
            return []
        return [edge for edge, effect in zip(self.edges, self.effects) if effect.value >= self.threshold]

    @cached_property
    def index(self) -> dict[Edge, int]:
        return {edge: i for i, edge in enumerate(self.edges)}

    def effect(self, sender: str, receiver: str, via: str) -> Estimate | None:
        """The edge's effect; None where there is no gap, or where a screened model's edge was not patched."""
        where = self.index.get(Edge(sender, receiver, via))
        return None if self.effects is None or where is None else self.effects[where]

    def banded(self, edge: Edge) -> Estimate | None:
        """The edge's effect where it has an interval (what a band over training draws); None elsewhere."""
        effect = self.effect(edge.sender, edge.receiver, edge.via)
        return None if effect is None or effect.low is None else effect

    @property
    def method(self) -> str:
        """How the edges were found, in words: every edge patched, or the screen and how many it passed on."""
        if self.effects is None:
            return "no edge patched: there is no gap to share out"
        if self.marked is not None:
            heads = ", ".join(self.marked) or "none"
            among = f"the heads probe marks ({heads}), the embedding, the MLPs and the logits"
            return f"the {len(self.edges)} edges among {among} patched exactly"
        if self.screen is None:
            return f"every edge ({len(self.edges)}) patched exactly"
        return self.screen.describe(len(self.edges))

    def to_json(self) -> dict[str, Any]:
        effects = self.effects or [None] * len(self.edges)
        rows = []
        for edge, effect in zip(self.edges, effects):
            found = {"step": self.step, "sender": edge.sender, "receiver": edge.receiver, "via": edge.via}
            found["effect"] = optional_json(effect)
            rows.append(found | ({} if self.screen is None else {"screened": self.screen.estimate(edge)}))
        return {
            "step": self.step,
            "gap": estimate_json(self.gap),
            "no_gap": self.no_gap,
            "method": self.method,
            "edges": rows,
            "circuit": {
                "step": self.step,
                "threshold": self.threshold,
                "edges": [e.name for e in self.circuit],
                "faithfulness": optional_json(self.faithfulness),
            },
        }

    def to_records(self, sequences_seen: int | None = None) -> list[dict[str, Any]]:
        rows = [row(self.step, sequences_seen, None, None, "gap", self.gap.value, self.gap.low, self.gap.high)]
        for edge, effect in zip(self.edges, self.effects or []):
            rows.append(
                row(self.step, sequences_seen, None, None, "edge_effect", effect.value, effect.low, effect.high)
                | {"sender": edge.sender, "receiver": edge.receiver, "via": edge.via}
            )
        return rows


def optional_json(estimate: Estimate | None) -> dict[str, Any] | None:
    return None if estimate is None else estimate_json(estimate)


def check_settings(n_seqs: int, threshold: float) -> None:
    """What every call of path patching needs: an interval (two sequences at least) and a threshold that is a share."""
    if n_seqs < 2:
        raise BadInput("--n-seqs must be at least 2: one sequence gives no interval")
    if not 0 < threshold <= 1:
        raise BadInput(f"the threshold is a share of the gap in (0, 1], got {threshold!r}")


def edge_effects(
    model: HookedModel,
    contrast: Contrast,
    step: int | None = None,
    threshold: float = THRESHOLD,
    checked: int = CHECKED_EDGES,
    also: Collection[Edge] = (),
    marked: list[str] | None = None,
) -> EdgeEffects:
    """Every edge of ``model`` patched alone on ``contrast``, or with more than :data:`EXACT_EDGES` edges the
    ``checked`` edges the screen ranks highest and those of ``also`` (another checkpoint's circuit, so that a
    series follows the same edges at every step), or with ``marked`` heads only the edges among them (and the
    embedding, the MLPs and the logits), no screen; the circuit at ``threshold`` and its faithfulness (module
    docstring)."""
    check_settings(len(contrast.clean), threshold)
    if missing := [name for name in (input_hook(0, via) for via in VIAS) if name not in model.hook_dict]:
        raise BadInput(f"{type(model).__name__} has no {missing[0]}: its heads' inputs cannot be patched apart")
    clean = contrast.measure(model, lambda hooks: run(model, contrast.clean, hooks))
    gap = contrast.measure(model, lambda hooks: run(model, contrast.corrupted, hooks)) - clean
    every_edge = model_edges(model)
    found = EdgeEffects(step, mean_interval(gap), every_edge, None, threshold, None)
    if found.no_gap is not None:  # a screened model's edges are too many to list as nulls
        return found if len(every_edge) <= EXACT_EDGES else EdgeEffects(step, found.gap, [], None, threshold, None)
    return patched_effects(model, contrast, clean, gap, step, threshold, checked, also, marked)


def patched_effects(
    model: HookedModel,
    contrast: Contrast,
    clean: Float[Tensor, " batch"],
    gap: Float[Tensor, " batch"],
    step: int | None,
    threshold: float,
    checked: int,
    also: Collection[Edge] = (),
    marked: list[str] | None = None,
) -> EdgeEffects:
    """:func:`edge_effects` once the clean run's measure and the gap are known to have a gap: each edge patched
    alone (after the screen, where the model has too many), the circuit, and its faithfulness."""
    every_edge = model_edges(model)
    outputs = sender_outputs(model, contrast.corrupted)

    def share(edges: list[Edge]) -> Tensor:
        patching = patching_hooks(model, edges, outputs)
        with split_inputs(model):
            return contrast.measure(model, lambda hooks: run(model, contrast.clean, patching + hooks)) - clean

    screened = None
    if marked is not None:
        wanted = set(also) | set(edges_among(model, marked))
    else:
        if len(every_edge) > EXACT_EDGES:
            screened = screen_edges(model, contrast, every_edge, gap.mean().item())
        wanted = set(also) | set(every_edge if screened is None else screened.top(checked))
    edges = [edge for edge in every_edge if edge in wanted]
    effects = ratio_estimates(torch.stack([share([edge]) for edge in edges], dim=1), gap) if edges else []
    chosen = None if marked is None else tuple(marked)
    found = EdgeEffects(step, mean_interval(gap), edges, effects, threshold, None, screened, chosen)
    circuit = set(found.circuit)
    faithful = bootstrap_ratio_interval(gap - share([e for e in every_edge if e not in circuit]), gap)
    return EdgeEffects(step, found.gap, edges, effects, threshold, faithful, screened, chosen)


def run(model: HookedModel, tokens: Int[Tensor, "batch pos"], hooks: list) -> Float[Tensor, "batch pos d_vocab"]:
    with torch.inference_mode():
        return model.run_with_hooks(tokens.to(model_device(model)), fwd_hooks=hooks)
