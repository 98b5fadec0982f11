"""The statistics of a sweep summary, computed from its own per-seed ``runs`` records: bounded intervals of
the probe scores, the kinds of solution a measure splits into, and the ``comparisons`` between conditions
(methods: :mod:`induction_probes.probes.sweeps.condition_tests`). :func:`add_statistics` works on a summary as written
by ``summarize_sweep`` or as shipped, so a shipped ``summary.json`` can be recomputed without its runs.

A ``comparisons`` entry compares condition ``b`` with condition ``a`` on one measure: ``difference`` is
b − a (its mean, and a 95 % interval), ``p_value`` the t-test's (paired where the two conditions share their
seed list, Welch's otherwise), ``rank_p_value`` the rank test's (Wilcoxon signed-rank / Mann-Whitney U),
``n`` the pairs (paired) or the two sample sizes (unpaired) that entered: a run that never reached the
transition has no transition and is left out of that measure's test. A summary made with ``by_prior`` has two
measures more per prior P, ``by_prior.P.loss`` and ``by_prior.P.kl`` (the final checkpoint's loss and last-token
KL(true ‖ model) on fresh chains of P), compared the same way.

A summary whose runs hold ``positional_layer0`` (layer 0's positional profile at the plateau, the transition and
the end) has the even/odd measures too: ``odd_even.P``, how far the profile's weights at odd distances 3..19 stand
above their even neighbours at point P, and ``alternation_fading.transition``, that excess at odd distances 3..9
minus at 11..19 at the transition (:mod:`induction_probes.probes.attention.patterns`). Each condition's ``even_odd``
block
tests Edelman et al.'s claim within it (Fig. 3 middle, ICML Fig. 11): the excess at each point, the paired change
from the plateau to the transition, and the excess and its fading at the transition against 0 (one-sample), each
with the Student-t 95 % interval and the t and signed-rank tests' p-values. The values are of the order of 1e-3,
far inside their bounds (a weight is in [0, 1]), so the t interval needs no bootstrap; the measures are compared
between conditions like the others, and split into no kinds of solution.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.runs.reader import read_json
from induction_probes.probes.attention.patterns import alternation_fading, odd_even_excess
from induction_probes.probes.sweeps.condition_tests import (
    bounded_interval,
    compare_conditions,
    interval,
    one_sample_comparison,
    paired_comparison,
    seed_values,
    split_into_kinds,
)
from induction_probes.probes.sweeps.task_summary import task_comparisons, task_condition_statistics
from induction_probes.probes.sweeps.toy_summary import add_toy_statistics

BOUNDED = ("previous_token_layer0", "bigram_matching_last_layer")  # scores in [0, 1]
MEASURES = ("transition", "transition_kl", "plateau", "final_kl", *BOUNDED)


BY_PRIOR = ("loss", "kl")  # what a by-prior evaluation measures on each prior's chains
POSITIONAL_POINTS = ("plateau", "transition", "end")  # the checkpoints of a run's positional_layer0
EVEN_ODD = (*(f"odd_even.{point}" for point in POSITIONAL_POINTS), "alternation_fading.transition")


def measures_of(summary: dict) -> tuple[str, ...]:
    """The summary's measures: :data:`MEASURES`, and ``by_prior.P.loss`` / ``by_prior.P.kl`` for every prior P its
    runs were evaluated on (in the order of the first run that has them)."""
    priors: list[str] = []
    for condition in summary["conditions"].values():
        for record in condition["runs"]:
            if not isinstance(record, dict):
                raise TypeError("each run record must be a JSON object")
            by_prior = record.get("by_prior")
            if by_prior is None:
                continue
            if not isinstance(by_prior, dict) or not all(isinstance(values, dict) for values in by_prior.values()):
                raise TypeError("by_prior must map each prior to its loss and kl")
            priors += [prior for prior in by_prior if prior not in priors]
    positional = any("positional_layer0" in r for c in summary["conditions"].values() for r in c["runs"])
    return (
        MEASURES
        + tuple(f"by_prior.{prior}.{key}" for prior in priors for key in BY_PRIOR)
        + (EVEN_ODD if positional else ())
    )


def positional_measure(record: dict, measure: str) -> float | None:
    """One seed's even/odd measure (module docstring), from its stored profile; None where it has none."""
    name, point = measure.split(".")
    if "positional_layer0" not in record:
        return None
    profiles = record["positional_layer0"]["profiles"]
    if not isinstance(profiles, dict):
        raise TypeError("positional_layer0 must hold a profile per checkpoint")
    if point not in profiles:
        return None
    profile = profiles[point]
    if not isinstance(profile, list) or not all(is_weight(w) for w in profile):
        raise BadInput(f"the positional profile at the {point} is not a list of weights in [0, 1]")
    return (odd_even_excess if name == "odd_even" else alternation_fading)(profile)


def is_weight(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1


def run_measure(record: dict, measure: str) -> float | None:
    """One seed's value of a measure (None where it has none: a transition never reached, an old summary)."""
    if measure.startswith("by_prior."):
        prior, key = measure[len("by_prior.") :].rsplit(".", 1)
        return record.get("by_prior", {}).get(prior, {}).get(key)
    if measure in EVEN_ODD:
        return positional_measure(record, measure)
    if measure == "previous_token_layer0":
        return max(record["probes"]["previous_token"][0]) if "probes" in record else None
    if measure == "bigram_matching_last_layer":
        return max(record["probes"]["bigram_matching"][-1]) if "probes" in record else None
    return record.get(measure)


def per_seed(condition: dict, measure: str) -> dict[int, float]:
    return seed_values(condition, measure, run_measure)


def compare(name_a: str, a: dict, name_b: str, b: dict, measure: str) -> dict | None:
    """One ``comparisons`` entry (module docstring), or None where neither condition has the measure."""
    return compare_conditions(name_a, a, name_b, b, measure, run_measure, measure in BOUNDED)


def kinds_of_solution(condition: dict, measures: tuple[str, ...] = MEASURES) -> dict:
    """Per measure, the split into two kinds of solution where there is one (statistics' rule)."""
    kinds = {}
    for measure in (m for m in measures if m not in EVEN_ODD):  # the excesses test one claim: not kinds of solution
        split = split_into_kinds(list(per_seed(condition, measure).values()), measure in BOUNDED)
        if split is not None:
            kinds[measure] = split
    return kinds


def even_odd_statistics(condition: dict) -> dict:
    """The condition's test of the even/odd claim (module docstring), from its runs' positional profiles."""
    values = {measure: per_seed(condition, measure) for measure in EVEN_ODD}
    plateau, transition = values["odd_even.plateau"], values["odd_even.transition"]
    both = [seed for seed in condition["seeds"] if seed in plateau and seed in transition]
    return {
        "excess": {point: interval(list(values[f"odd_even.{point}"].values())) for point in POSITIONAL_POINTS},
        "transition_minus_plateau": paired_comparison([plateau[s] for s in both], [transition[s] for s in both], False)
        | {"seeds": both},
        "excess_at_transition": one_sample_comparison(list(transition.values())),
        "fading_at_transition": one_sample_comparison(list(values["alternation_fading.transition"].values())),
    }


def add_statistics(summary: dict) -> dict:
    """``summary`` with bounded probe intervals, kinds of solution per condition and, with two or more
    conditions, every pair's comparisons (a new dict; the per-seed records are left as they are)."""
    conditions, measures = {}, measures_of(summary)
    for name, condition in summary["conditions"].items():
        condition = dict(condition)
        if "probes" in condition:
            condition["probes"] = {m: bounded_interval(list(per_seed(condition, m).values())) for m in BOUNDED}
        condition["kinds_of_solution"] = kinds_of_solution(condition, measures)
        condition.pop("even_odd", None)  # recomputed from the runs' profiles, never carried over from a file
        if any("positional_layer0" in r for r in condition["runs"]):
            condition["even_odd"] = even_odd_statistics(condition)
        conditions[name] = condition
    out = dict(summary) | {"conditions": conditions}
    if len(conditions) >= 2:
        out["comparisons"] = [
            entry
            for (na, a), (nb, b) in combinations(conditions.items(), 2)
            for measure in measures
            if (entry := compare(na, a, nb, b, measure)) is not None
        ]
    missing = [name for name, c in conditions.items() if any("curve" not in r for r in c["runs"])]
    out["statistics_note"] = (
        "comparisons, bounded intervals and kinds of solution computed from the per-seed runs records "
        "(probes/sweeps/summary_statistics.py)"
        + (
            f"; conditions {', '.join(missing)} have no per-seed curves and no transition_kl: the summary was "
            "recomputed from a file written before they were recorded, without its run directories"
            if missing
            else ""
        )
    )
    return out


class SummaryError(BadInput):
    """A file that is not a sweep summary (one line)."""


def recompute_summary(path) -> dict:
    """A shipped ``summary.json`` with its statistics recomputed by :func:`add_statistics` from its own per-seed
    records (its run directories are not needed, and not read)."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():
        raise SummaryError(f"{path} is not a regular file: a summary is a summary.json written by summarize")
    summary = read_json(path)
    try:
        if not isinstance(summary, dict) or not isinstance(summary["conditions"], dict):
            raise TypeError("conditions")
        if summary.get("summary") == "toy":  # a toy-model sweep's: its own statistics, from its own records
            return add_toy_statistics(summary)
        if summary.get("summary") == "task":  # a task sweep's (the text task, the Gaussian task): likewise
            for condition in summary["conditions"].values():
                condition |= task_condition_statistics(condition["runs"])
            return summary | task_comparisons(summary["conditions"])
        measures = measures_of(summary)
        for condition in summary["conditions"].values():
            for record in condition["runs"]:
                [run_measure(record, m) for m in measures], record["seed"]
            condition["seeds"]
        return add_statistics(summary)
    except (KeyError, TypeError, IndexError, ValueError) as error:
        raise SummaryError(
            f"{path} is not a sweep summary with per-seed runs ({type(error).__name__}: {error})"
        ) from None
