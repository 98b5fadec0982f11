"""Induction heads in language models: any Hugging Face model TransformerLens's bridge can boot, read from
disk only (a model directory, a directory of ``step_N/`` checkpoints, or a name in the local Hugging Face
cache). The measurements live in :mod:`induction_probes.probes.lm`; this is their face.

>>> from induction_probes import lm
>>> result = lm.probe(lm.as_hooked("path/to/model"))  # doctest: +SKIP
>>> result.induction_heads, result.scores.content.at(1, 0)  # doctest: +SKIP
"""

from induction_probes.circuits.interop.language_models import as_hooked, find_source, load_bridge  # noqa: F401
from induction_probes.probes.ablation.head_ablation import single_heads  # noqa: F401 (the same function as induction_probes')
from induction_probes.probes.lm.ablation import HeadAblation, ablate  # noqa: F401
from induction_probes.probes.lm.markov import MarkovProbe, probe_markov, probe_markov_series  # noqa: F401
from induction_probes.probes.lm.measure import HeadScores, evaluate, head_scores, text_icl_score  # noqa: F401
from induction_probes.probes.lm.protocols import (  # noqa: F401
    InductionLoss,
    RepeatedTokens,
    repeated_random_tokens,
    vocabulary,
)
from induction_probes.probes.lm.roles import head_roles  # noqa: F401
from induction_probes.probes.lm.series import StepProbes, probe, probe_series, probe_tokens  # noqa: F401
from induction_probes.probes.report.lm import ablate_language_model, probe_language_model  # noqa: F401 (the views)
from induction_probes.probes.report.lm_markov import markov_lm_report  # noqa: F401 (the view of probe --task markov)
