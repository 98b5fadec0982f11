"""The probe registry: the attention probes that ``probe_model`` runs on every checkpoint, whatever its task, and
that the probe output, its tidy table, sweeps' summaries and the report then carry by name.

A probe is a function ``probe(patterns, tokens)`` of one chunk of probe sequences: ``patterns`` the attention of
every layer (a list of ``[batch, head, query_pos, key_pos]`` tensors) and ``tokens`` the ``[batch, pos]`` inputs.
It returns one ``[head]`` tensor per layer, each a mean over the chunk's sequences, or a
:class:`~induction_probes.probes.attention.scores.Score` (those values and the weight they are a mean over, when it is
not the chunk's sequence count, and optionally its per-sequence parts, which give it an interval over the probe
sequences): chunks are combined by the weighted mean. A registration may say:

- ``calibrated``: its chance level on the probe set is in
  :func:`~induction_probes.probes.attention.patterns.chance_scores`, so the run's warnings and thresholds use it.

:func:`attention_probes` runs every registered probe over a model's probe set, chunk by chunk."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from induction_probes.circuits.registry import Registry, python_function
from induction_probes.probes.attention.patterns import pattern_hook, run_with_captures
from induction_probes.probes.attention.scores import (
    Score,
    bigram_matching,
    bigram_matching_ideal,
    combine,
    forget_matching,
    previous_token,
)

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

PROBES = Registry("probe", __name__, python_function("a probe", "patterns", "tokens"))
PROBES.register("previous_token", previous_token, calibrated=True)
PROBES.register("bigram_matching", bigram_matching, calibrated=True)
PROBES.register("bigram_matching_ideal", bigram_matching_ideal, calibrated=True)


def chunk_scores(patterns: list[Tensor], tokens: Tensor) -> dict[str, Score]:
    """Every registered probe on one chunk, each with its weight."""
    scores = {}
    try:
        for name, probe in PROBES.items():
            value = probe(patterns, tokens)
            scores[name] = value if isinstance(value, Score) else Score(list(value), float(len(tokens)))
    finally:
        forget_matching()
    return scores


def attention_probes(model: HookedModel, inputs: Tensor, chunk: int = 100, also: Sequence[str] = ()):
    """The model's outputs on ``inputs``, every registered probe's
    :class:`~induction_probes.probes.attention.scores.Score`,
    and the activations at the hook names ``also``, one per chunk of ``chunk`` sequences."""
    pattern_names = [pattern_hook(layer) for layer in range(model.cfg.n_layers)]
    outputs, chunks, captured = [], [], {name: [] for name in also}
    for start in range(0, inputs.shape[0], chunk):
        tokens = inputs[start : start + chunk]
        output, activations = run_with_captures(model, tokens, pattern_names + list(also))
        outputs.append(output)
        chunks.append(chunk_scores([activations[name] for name in pattern_names], tokens))
        for name in also:
            captured[name].append(activations[name])
    return torch.cat(outputs), combine(chunks), captured
