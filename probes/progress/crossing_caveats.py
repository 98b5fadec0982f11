"""When a measure's threshold crossing means little: it starts at or past its threshold, or it takes so
few values that one token's flip crosses it.

- A measure at or past its threshold at initialisation "crosses" at step 0 whatever training does
  (``ov_copying_score`` at k = 2, for one: markov-k2 starts at 1.0, its threshold 0.5).
- ``ov_copying_accuracy``, ``diagonal_is_row_max`` and ``ov_top1_diagonal`` count tokens out of k, so
  they take only the k + 1 values 0, 1/k, ..., 1: at k = 4 they move in quarters, and a crossing is
  one token's argmax changing. A measure with at most ``FEW_VALUES`` possible values is flagged; so is
  ``ov_copying_score`` at k = 2, which is then the sign of a single eigenvalue (−1 or 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from induction_probes.probes.progress.progress_measures import (
    config_calibration,
    progress_measures,
    unmeasurable_reason,
)

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel, WeightedModel
    from induction_probes.circuits.models.model import HookedTransformer

FEW_VALUES = 11  # at most 11 values (steps of 1/10 or coarser): one token moves the measure by ≥ 0.1
COUNTED_OUT_OF_K = ("ov_copying_accuracy", "diagonal_is_row_max", "ov_top1_diagonal")


def coarse_warnings(k: int, measures=COUNTED_OUT_OF_K) -> list[str]:
    """One line per measure of ``measures`` that counts tokens out of k, if k + 1 ≤ FEW_VALUES."""
    if k + 1 > FEW_VALUES:
        return []
    return [
        f"{name} takes only {k + 1} values (multiples of 1/{k}): one token's argmax moves it by {1 / k:.3g}, "
        "so its crossing is one token flipping"
        for name in measures
    ]


def initial_warnings(cfg, initial) -> list[str]:
    """One line per calibrated progress measure that ``initial`` (the measures at initialisation) has at or
    past its threshold."""
    lines = []
    for name, measure in config_calibration(cfg).items():
        value = initial.value(name)
        if value >= measure.threshold:
            lines.append(
                f"{name} is {value:.3f} at initialisation, at or past its threshold {measure.threshold:.3f}: "
                "its first crossing says nothing about training"
            )
    return lines


def progress_warnings(model: HookedModel, initial_model: WeightedModel) -> list[str]:
    """The caveats of ``model``'s progress measures, ``initial_model`` being the same architecture at
    initialisation (a run's step 0, or the config's seed rebuilt); none where the measures do not apply."""
    if unmeasurable_reason(model):
        return []
    initial = initial_warnings(model.cfg, progress_measures(initial_model))
    k = model.cfg.d_vocab
    sign_only = (
        [
            "ov_copying_score takes only the values -1 and 1 at k = 2: on the k - 1 = 1 direction that "
            "changes a softmax its one eigenvalue is a sign"
        ]
        if k == 2
        else []
    )
    return initial + coarse_warnings(k, ("ov_copying_accuracy",)) + sign_only


def initial_model_of(model: HookedTransformer) -> HookedTransformer:
    """The model's architecture at initialisation: its weights are drawn from ``cfg.seed`` alone, so this is
    the trained model's step 0 when it was trained from that config."""
    return type(model)(model.cfg).eval()
