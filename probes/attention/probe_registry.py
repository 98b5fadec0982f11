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

Imports nothing heavy: the entries are resolved on first use."""

from __future__ import annotations

from induction_probes.circuits.registry import Registry, python_function

_SCORES = "induction_probes.probes.attention.scores"

PROBES = Registry("probe", __name__, python_function("a probe", "patterns", "tokens"))
PROBES.register("previous_token", f"{_SCORES}:previous_token", calibrated=True)
PROBES.register("bigram_matching", f"{_SCORES}:bigram_matching", calibrated=True)
PROBES.register("bigram_matching_ideal", f"{_SCORES}:bigram_matching_ideal", calibrated=True)
