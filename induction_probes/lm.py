"""Induction heads in language models: any Hugging Face model TransformerLens's bridge can boot, read from
disk only (a model directory, a directory of ``step_N/`` checkpoints, or a name in the local Hugging Face
cache). The measurements live in :mod:`induction_probes.probes.lm`; this is their face.

>>> from induction_probes import lm
>>> scores = lm.head_scores("path/to/model")        # doctest: +SKIP
>>> scores.induction[1][0], scores.ranked("induction")[:3]  # doctest: +SKIP
"""

from induction_probes.circuits.interop.language_models import as_hooked, find_source, load_bridge  # noqa: F401
from induction_probes.probes.lm.ablation import ablation_study, single_heads  # noqa: F401
from induction_probes.probes.lm.measure import HeadScores, evaluate, head_scores, text_icl_score  # noqa: F401
from induction_probes.probes.lm.protocols import (  # noqa: F401
    InductionLoss,
    RepeatedTokens,
    repeated_random_tokens,
    vocabulary,
)
from induction_probes.probes.lm.series import probe_model, probe_series  # noqa: F401
