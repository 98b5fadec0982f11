"""Every result as a tidy table: one row per (checkpoint, head, measure), in long form.

Columns (``COLUMNS``): ``step``, ``sequences_seen``, ``layer``, ``head``, ``measure``, ``value``, and
``low`` / ``high``, its 95 % interval over the evaluation sequences (:mod:`induction_probes.probes.intervals`;
equal to the value for a measure read from the weights, which other sequences would not change); ``layer``
and ``head`` are empty for a score of the whole model (its loss, its ICL score) and ``sequences_seen`` where
the result does not know it. Ablation rows
add ``ablated`` (the heads, "L0H0,L1H0") and ``mode``. A composition score belongs to a pair of heads: its
row is the layer-1 head's, and its measure names the layer-0 head (``composition_K_from_L0H0``).

``to_records()`` gives the rows as a list of dicts (what the JSON keeps) and ``to_frame()`` the same
rows as a pandas DataFrame, with layer and head as nullable integers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd

from induction_probes.circuits.names import heads_label
from induction_probes.circuits.validation import require_int
from induction_probes.probes.intervals import paired_effect

Step = TypeVar("Step")  # a checkpoint's step: an int, or None for a model outside a series

if TYPE_CHECKING:
    from induction_probes.probes.ablation.ablation_study import AblationResult
    from induction_probes.probes.behaviour.icl_behaviour import Behaviour

COLUMNS = ["step", "sequences_seen", "layer", "head", "measure", "value", "low", "high"]
ABLATION_COLUMNS = COLUMNS + ["ablated", "mode", "effect", "effect_low", "effect_high"]


def checked_seen(seen: object) -> int | None:
    """A row's ``sequences_seen``: None (not known) or a count."""
    return None if seen is None else require_int("sequences_seen", seen, 0)


def row(step, seen, layer, head, measure: str, value, low=None, high=None) -> dict:
    checked_seen(seen)
    return {
        "step": step,
        "sequences_seen": seen,
        "layer": layer,
        "head": head,
        "measure": measure,
        "value": float(value),
        "low": low,
        "high": high,
    }


def frame(records: list[dict[str, Any]], columns: list[str] | None = None) -> pd.DataFrame:
    """The rows as a DataFrame with ``columns`` (every column of the rows, ``COLUMNS`` first, by default)."""
    if columns is None:
        columns = COLUMNS + [name for name in dict.fromkeys(k for r in records for k in r) if name not in COLUMNS]
    table = pd.DataFrame.from_records(records, columns=columns)
    for name in {"step", "sequences_seen", "layer", "head"} & set(columns):
        table[name] = table[name].astype("Int64")  # integers that may be missing, not floats
    for name in {"value", "low", "high", "effect", "effect_low", "effect_high"} & set(columns):
        table[name] = table[name].astype("float64")
    return table


def crossing_step(steps: Sequence[Step], values: Sequence[float], threshold: float) -> Step | None:
    """The first of ``steps`` from which the value stays at or above ``threshold`` to the last checkpoint (None:
    the last is below it): a crossing that persists, read off a measure's rows over checkpoints. A score that
    hovers just below a threshold and touches it once by noise does not cross there (:func:`first_reached`)."""
    crossing = None
    for step, value in zip(steps, values):
        if value >= threshold:
            crossing = step if crossing is None else crossing
        else:
            crossing = None
    return crossing


def first_reached(steps: Sequence[Step], values: Sequence[float], threshold: float) -> Step | None:
    """The first of ``steps`` whose value reaches ``threshold`` at all (None: never). Earlier than
    :func:`crossing_step` where the value reached it and fell back: a transient excursion."""
    return next((step for step, value in zip(steps, values) if value >= threshold), None)


class Tidy:
    """Mixed into a result class, which defines ``to_records(sequences_seen=None)``."""

    def to_records(self, sequences_seen: int | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError(f"{type(self).__name__} mixes in Tidy without its to_records")

    def to_frame(self, sequences_seen: int | None = None) -> pd.DataFrame:
        """The result in long form (module docstring of :mod:`induction_probes.probes.tidy`)."""
        return frame(self.to_records(checked_seen(sequences_seen)))


def per_head(step, seen, measure: str, layers, first_layer: int = 0, intervals=None, exact: bool = False) -> list[dict]:
    """Rows of a per-layer list of per-head values (tensors or lists), from layer ``first_layer`` on, with
    ``intervals`` (per layer, (low, high) of its heads) where given. ``exact``: a value read from the weights,
    which another draw of evaluation sequences would not change, so its interval over them is the value itself."""
    rows = []
    for layer, values in enumerate(layers):
        for head, value in enumerate(list(values)):
            low, high = (value, value) if exact else bounds_of(intervals, layer, head)
            rows.append(row(step, seen, first_layer + layer, head, measure, value, low, high))
    return rows


def bounds_of(intervals, layer: int, head: int) -> tuple[float | None, float | None]:
    """One head's (low, high) from per-layer bounds; None where there are none (NaN: no interval)."""
    if intervals is None:
        return None, None
    low, high = (float(bound[head]) for bound in intervals[layer])
    return (None, None) if math.isnan(low) else (low, high)


def behaviour_records(behaviour, step=None, seen=None) -> list[dict]:
    """Each behavioural score with its interval; the model's closest strategy is read from last_token_kl."""
    return [row(step, seen, None, None, name, e.value, e.low, e.high) for name, e in behaviour.intervals.items()]


def probe_records(probes, seen=None) -> list[dict]:
    """A checkpoint's attention (every registered probe's), positional, behaviour and (where they apply)
    progress rows."""
    step, intervals = probes.step, probes.intervals
    rows = [
        r for name, layers in probes.scores.items() for r in per_head(step, seen, name, layers, 0, intervals.get(name))
    ]
    low, high = bounds_of(intervals.get("fraction_with_match"), 0, 0)
    rows += [row(step, seen, None, None, "fraction_with_match", probes.fraction_with_match, low, high)]
    if probes.positional_profile is not None:
        profile = probes.positional_profile
        for name, values in (
            ("positional_profile_at_1", profile[:, 1]),
            ("positional_profile_peak", profile.argmax(-1)),
        ):
            rows += per_head(step, seen, name, [values], 0, intervals.get(name))
    rows += behaviour_records(probes.behaviour, step, seen)
    return rows + ([] if probes.progress is None else progress_records(probes.progress, seen))


def progress_records(progress, seen=None) -> list[dict]:
    """previous_token_match for layer-0 heads, the other measures for layer-1 heads, composition per pair."""
    step = progress.step
    rows = per_head(step, seen, "previous_token_match", [progress.previous_token_match], exact=True)
    for name in ("k_composition_match", "ov_copying_accuracy", "ov_copying_score"):
        rows += per_head(step, seen, name, [getattr(progress, name)], first_layer=1, exact=True)
    for mode, pairs in progress.composition.items():
        for source, targets in enumerate(pairs):
            measure = f"composition_{mode}_from_L0H{source}"
            rows += per_head(step, seen, measure, [targets], first_layer=1, exact=True)
    return rows


def ablation_records(result, step=None, seen=None) -> list[dict]:
    """The behaviour with ``result.heads`` ablated; a single ablated head is also the row's layer and head."""
    single = result.heads[0] if len(result.heads) == 1 else (None, None)
    ablated = heads_label(result.heads)
    return [
        r | {"layer": single[0], "head": single[1], "ablated": ablated, "mode": result.mode}
        for r in behaviour_records(result.behaviour, step, seen)
    ]


def comparison_records(comparison, step=None, seen=None) -> list[dict]:
    """A trained model against Proposition 2.1: per-layer attention TV and the construction's signatures."""
    rows = [row(step, seen, layer, 0, "attention_tv", value) for layer, value in enumerate(comparison.attention_tv)]
    eigenvalues = comparison.ov_eigenvalues.real
    scalars = {
        "positional_profile_tv": comparison.positional_profile_tv,
        "positional_profile_at_1": comparison.positional_profile[1].item(),
        "diagonal_is_row_max": comparison.diagonal_is_row_max,
        "ov_top1_diagonal": comparison.ov_top1_diagonal,
        "ov_eigenvalue_min_real": eigenvalues.min().item(),
    }
    layers = {"positional_profile_tv": 0, "positional_profile_at_1": 0}
    return rows + [row(step, seen, layers.get(name, 1), 0, name, value) for name, value in scalars.items()]


def gaussian_records(probes, seen=None) -> list[dict]:
    step = probes.step
    return (
        [row(step, seen, None, None, "relative_mse", probes.relative_mse)]
        + per_head(step, seen, "previous_token", probes.previous_token)
        + per_head(step, seen, "induction", [probes.induction], first_layer=1)
        + [row(step, seen, 0, None, f"window_r2_distance{i}", value) for i, value in enumerate(probes.window_r2)]
        + [row(step, seen, 0, None, "target_r2_after_layer0", probes.target_r2_after_layer0)]
    )


def ablation_frame(
    baseline: Behaviour, results: Sequence[AblationResult], step: int | None = None, sequences_seen: int | None = None
) -> pd.DataFrame:
    """An ablation study (``ablation_study``'s baseline and results) as one table: the clean model's rows
    (``ablated`` empty, ``mode`` "none") and each ablation's, with its ``effect``: ablated − clean, paired on the
    same evaluation sequences, and that difference's Student-t interval (``effect_low``, ``effect_high``)."""
    clean = [r | {"ablated": "", "mode": "none"} for r in behaviour_records(baseline, step, sequences_seen)]
    ablated = [
        r | effect_columns(result.behaviour, baseline, r["measure"])
        for result in results
        for r in ablation_records(result, step, sequences_seen)
    ]
    return frame(clean + ablated, ABLATION_COLUMNS)


def effect_columns(ablated, clean, measure: str) -> dict:
    """The paired effect of an ablation on one behavioural measure (empty where per-sequence values are missing)."""
    effect = paired_effect(ablated, clean, measure)
    if effect is None:
        return {"effect": None, "effect_low": None, "effect_high": None}
    return {"effect": effect.value, "effect_low": effect.low, "effect_high": effect.high}
