"""Induction heads in language models: any Hugging Face model TransformerLens's bridge can boot, read from
disk only (a model directory, a directory of ``step_N/`` checkpoints, or a name in the local Hugging Face
cache). The measurements live in :mod:`induction_probes.probes.lm`; this is their face.

>>> from induction_probes import lm
>>> result = lm.probe(lm.as_hooked("path/to/model"))  # doctest: +SKIP
>>> result.induction_heads, result.scores.content.at(1, 0)  # doctest: +SKIP
"""

from induction_probes.circuits.interop.language_models import as_hooked, load_bridge
from induction_probes.circuits.interop.model_sources import find_source
from induction_probes.probes.ablation.head_ablation import single_heads
from induction_probes.probes.circuit.lm_patching import CircuitSettings, checkpoint_edges, series_edges
from induction_probes.probes.lm.ablate_heads import HeadAblation, ablate
from induction_probes.probes.lm.ablate_series import SeriesAblation, ablate_series
from induction_probes.probes.lm.attribution import Screen, attribution_rises, screen_heads
from induction_probes.probes.lm.markov.markov_probe import MarkovProbe, probe_markov, probe_markov_series
from induction_probes.probes.lm.markov.markov_protocol import markov_draws
from induction_probes.probes.lm.measure import HeadScores, evaluate, head_scores, text_icl_score
from induction_probes.probes.lm.protocols import (
    InductionLoss,
    RepeatedTokens,
    repeated_random_tokens,
    vocabulary,
)
from induction_probes.probes.lm.roles import head_roles
from induction_probes.probes.lm.series import SeriesProbes, StepProbes, probe, probe_series, probe_tokens
from induction_probes.probes.report.lm_ablation import ablate_language_model
from induction_probes.probes.report.lm_circuit_views import circuit_language_model
from induction_probes.probes.report.lm_info import language_model_info
from induction_probes.probes.report.lm_markov import markov_lm_report
from induction_probes.probes.report.lm_views import probe_language_model  # the views

# the language-model face: what a notebook imports from here; everything else is internal
__all__ = [
    "CircuitSettings",
    "HeadAblation",
    "HeadScores",
    "InductionLoss",
    "MarkovProbe",
    "RepeatedTokens",
    "Screen",
    "SeriesAblation",
    "SeriesProbes",
    "StepProbes",
    "ablate",
    "ablate_language_model",
    "ablate_series",
    "as_hooked",
    "attribution_rises",
    "checkpoint_edges",
    "circuit_language_model",
    "evaluate",
    "find_source",
    "head_roles",
    "head_scores",
    "language_model_info",
    "load_bridge",
    "markov_draws",
    "markov_lm_report",
    "probe",
    "probe_language_model",
    "probe_markov",
    "probe_markov_series",
    "probe_series",
    "probe_tokens",
    "repeated_random_tokens",
    "series_edges",
    "screen_heads",
    "single_heads",
    "text_icl_score",
    "vocabulary",
]
