"""What path patching (:mod:`.path_patching`) says about an ICL-MC model: each edge's share of the in-context gap,
the circuit of the edges that pass a threshold, and the circuit's faithfulness.

**The corruption** keeps the token statistics and removes the in-context signal: each sequence's context is another
evaluation sequence's, drawn from another chain, and its last n − 1 tokens are kept (the last token for bigram
chains, the last two for trigram ones), so the model is asked the same question (what follows these tokens) with
another chain's statistics in its context.

**The measure** is the paper's: KL(true next-token distribution ‖ model) at the last token, per sequence, the true
distribution being the clean sequence's chain's row for its last tokens. The *gap* is the corrupted run's KL minus
the clean run's (what the context is worth); an edge's *effect* is the share of the gap that corrupting that edge
alone opens, mean(KL patched − KL clean) / mean(gap) (the signal the edge carries), 0 for nothing and 1 for all
of it, with a percentile
bootstrap interval that resamples the sequences for both. Where the gap's interval includes 0 there is no
in-context signal to share out, and every effect is null, with the reason.

**The circuit** is the edges whose effect reaches ``threshold``; its **faithfulness** (Wang et al. 2022, §4) is the
share of the gap the model keeps when every edge outside the circuit is patched at once: mean(KL corrupted − KL
faithful) / mean(gap), 1 where the circuit alone carries all of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.probes.circuit.path_patching import Edge, model_edges, patched_logits, sender_outputs
from induction_probes.probes.intervals import Estimate, bootstrap_ratio_interval, mean_interval
from induction_probes.probes.tidy import Tidy, row

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel
    from induction_probes.circuits.tasks.markov.strategies import MarkovEvalSet

THRESHOLD = 0.1  # an edge is in the circuit where it alone carries at least this share of the gap


def corrupted_context(tokens: Int[Tensor, "batch pos"], kept: int = 1) -> Int[Tensor, "batch pos"]:
    """Each sequence's context replaced by the previous sequence's (another chain's), its last ``kept`` tokens
    kept: the n − 1 tokens a chain of order n − 1 conditions its next token on, so that the question is the same."""
    if len(tokens) < 2:
        raise BadInput("path patching needs at least 2 sequences: one's context comes from another's chain")
    corrupted = tokens.roll(1, dims=0).clone()
    corrupted[:, -kept:] = tokens[:, -kept:]
    return corrupted


def last_token_kl(logits: Tensor, truth: Float[Tensor, "batch k"]) -> Float[Tensor, " batch"]:
    """KL(truth ‖ softmax(logits)) at the last position, per sequence, in float64."""
    log_q = torch.log_softmax(logits[:, -1].double().cpu(), dim=-1)
    p = truth.double()
    return (p * (p.clamp_min(1e-300).log() - log_q)).sum(-1)


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

    def effect(self, sender: str, receiver: str, via: str) -> Estimate | None:
        if self.effects is None:
            return None
        return self.effects[self.edges.index(Edge(sender, receiver, via))]

    def to_json(self) -> dict[str, Any]:
        def shown(e: Estimate | None) -> dict[str, Any] | None:
            return None if e is None else {"value": e.value, "low": e.low, "high": e.high}

        effects = self.effects or [None] * len(self.edges)
        return {
            "step": self.step,
            "gap": shown(self.gap),
            "no_gap": self.no_gap,
            "edges": [
                {"step": self.step, "sender": e.sender, "receiver": e.receiver, "via": e.via, "effect": shown(x)}
                for e, x in zip(self.edges, effects)
            ],
            "circuit": {
                "step": self.step,
                "threshold": self.threshold,
                "edges": [e.name for e in self.circuit],
                "faithfulness": shown(self.faithfulness),
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


def edge_effects(
    model: HookedModel, eval_set: MarkovEvalSet, step: int | None = None, threshold: float = THRESHOLD
) -> EdgeEffects:
    """Every edge of ``model`` patched alone on ``eval_set``'s sequences, the circuit at ``threshold`` and its
    faithfulness (module docstring)."""
    tokens = eval_set.inputs
    if len(tokens) < 2:
        raise BadInput("path patching needs --n-seqs of at least 2: one sequence gives no interval")
    truth = eval_set.truth[:, -1]
    corrupted_tokens = corrupted_context(tokens, kept=eval_set.sample.n - 1)
    with torch.inference_mode():
        clean = last_token_kl(model(tokens), truth)
        corrupted = last_token_kl(model(corrupted_tokens), truth)
    gap = corrupted - clean
    found = EdgeEffects(step, mean_interval(gap), model_edges(model), None, threshold, None)
    if found.no_gap is not None:
        return found
    outputs = sender_outputs(model, corrupted_tokens)

    def share(edges: list[Edge]) -> Tensor:
        return last_token_kl(patched_logits(model, tokens, edges, outputs), truth) - clean

    effects = [bootstrap_ratio_interval(share([edge]), gap) for edge in found.edges]
    found = EdgeEffects(step, found.gap, found.edges, effects, threshold, None)
    outside = [edge for edge in found.edges if edge not in found.circuit]
    faithful = bootstrap_ratio_interval(gap - share(outside), gap)  # KL corrupted − KL faithful, over the gap
    return EdgeEffects(step, found.gap, found.edges, effects, threshold, faithful)
