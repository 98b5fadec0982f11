"""Head ablation in a language model, measured on repeated random tokens: how much of what induction buys
(the gap between the first copy's loss and the repeated copy's) goes when a head's output is removed.

The ablation itself is :func:`~induction_probes.probes.ablation.run_ablated` (``hook_z``; zero, mean or
resample). Mean and resample read the reference sequences chunk by chunk beside the probed ones: the
mean is over a chunk's sequences and positions, and a resampled sequence comes from the same chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch

from induction_probes.circuits.common.devices import model_device
from induction_probes.probes.ablation import check_heads, run_ablated
from induction_probes.probes.lm.measure import chunk_size
from induction_probes.probes.lm.protocols import InductionLoss, RepeatedTokens, induction_loss, per_token_loss


@dataclass(frozen=True)
class HeadAblation:
    """The induction loss with ``heads`` ablated, against the clean model's ``baseline``."""

    heads: list[tuple[int, int]]
    mode: str
    loss: InductionLoss
    baseline: InductionLoss

    @property
    def loss_increase(self) -> float:
        """How much the repeated copy's loss rose."""
        return self.loss.repeated_half - self.baseline.repeated_half

    @property
    def gap_removed(self) -> float:
        """The rise as a share of the clean model's gap: 1 when the repeated copy becomes as hard as the first."""
        return self.loss_increase / self.baseline.gap if self.baseline.gap > 0 else float("nan")

    def to_json(self) -> dict:
        return {
            "heads": [f"{layer}.{head}" for layer, head in self.heads],
            "mode": self.mode,
            **self.loss.to_json(),
            "loss_increase": self.loss_increase,
            "gap_removed": self.gap_removed if self.baseline.gap > 0 else None,
        }


def ablated_loss(
    model, repeated: RepeatedTokens, heads, mode: str, reference: RepeatedTokens | None, seed: int
) -> InductionLoss:
    """:class:`InductionLoss` with ``heads`` ablated together (none: the clean model)."""
    tokens = repeated.tokens.to(model_device(model))
    ref = None if reference is None else reference.tokens.to(tokens.device)
    if ref is not None and ref.shape != tokens.shape:
        raise ValueError("the reference sequences must have the probed sequences' shape")
    size = chunk_size(model, tokens.shape[1])
    total = 0.0
    for start in range(0, tokens.shape[0], size):
        part = tokens[start : start + size]
        if heads:
            reference_part = None if ref is None else ref[start : start + size]
            logits = run_ablated(model, part, heads, mode, reference_part, seed + start)
        else:
            logits = run_clean(model, part)
        total = total + per_token_loss(logits, part).sum(0)
    return induction_loss((total / tokens.shape[0]).cpu(), repeated.length, repeated.prefix)


def run_clean(model, tokens):
    with torch.no_grad():
        return model(tokens)


def ablation_study(
    model,
    repeated: RepeatedTokens,
    head_sets: list[list[tuple[int, int]]],
    mode: str = "zero",
    reference: RepeatedTokens | None = None,
    seed: int = 0,
    progress=None,
) -> tuple[InductionLoss, list[HeadAblation]]:
    """The clean model's :class:`InductionLoss` and each head set's ablation, ranked by how much of the gap
    it removes (largest first). ``reference`` (mean, resample): other repeated random sequences, e.g. the
    same protocol with another seed. ``progress``: wraps the head sets (a tqdm bar)."""
    for heads in head_sets:
        check_heads(heads, model.cfg.n_layers, lambda layer: model.cfg.n_heads)
    if mode != "zero" and reference is None:
        raise ValueError(f"{mode} ablation needs reference sequences")
    measure = partial(ablated_loss, model, repeated, mode=mode, reference=reference, seed=seed)
    baseline = measure(heads=[])
    results = [HeadAblation(heads, mode, measure(heads=heads), baseline) for heads in (progress or list)(head_sets)]
    return baseline, sorted(results, key=lambda r: -r.loss_increase)


def single_heads(model) -> list[list[tuple[int, int]]]:
    return [[(layer, head)] for layer in range(model.cfg.n_layers) for head in range(model.cfg.n_heads)]
