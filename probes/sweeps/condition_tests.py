"""Tests and intervals for comparing conditions of a sweep, from per-seed values.

- **Paired** (the conditions share their seed list, so seed s of A and seed s of B see the same data and the
  same initialisation draw): the difference B − A per seed; paired t-test (scipy ``ttest_rel``) with the
  Student-t 95 % interval of the mean difference, and the Wilcoxon signed-rank test beside it, exact at every
  n (:func:`signed_rank_p`).
- **Unpaired** (different seed lists): Welch's t-test (``ttest_ind(equal_var=False)``) with the Welch-
  Satterthwaite 95 % interval of the difference of means, and the Mann-Whitney U test beside it.
- **Bounded scores** (probe scores in [0, 1]): intervals of a mean, and of a difference of means, are
  percentile bootstraps of the mean (:data:`BOOTSTRAP` resamples of the seeds with a fixed generator seed,
  paired resampling for paired conditions). A bootstrap mean lies between the smallest and largest value,
  so the interval of a score stays in [0, 1] and that of a difference in [−1, 1]; the p-values are still the
  t and rank tests'. With five seeds a percentile bootstrap is narrower than a t interval: it is a
  statement about these seeds, not a calibrated 95 % interval. Below :data:`MIN_BOOTSTRAP_SEEDS` seeds it is
  not used: with two seeds it is the range of the two values, which can exclude 0 beside a t-test's p of 0.15.
  There the interval is the t test's own (paired t, or Welch), clipped to the score's bounds, so that the
  interval and the p-value cannot disagree.
- **Kinds of solution**: the values of a measure split into two groups where, sorted, the largest gap between
  neighbours is wider than half their range (each group is then tighter than the gap), with at least
  :data:`MIN_GROUP` seeds on each side, and the gap is at least :data:`MIN_GAP_SCORE` for a score in [0, 1]
  or :data:`MIN_GAP_SHARE` of the median's size for other measures (so that a spread of 0.001 is no split).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import mannwhitneyu, t, ttest_ind, ttest_rel

BOOTSTRAP = 10_000
MIN_BOOTSTRAP_SEEDS = 5  # fewer seeds: a bounded score's interval is the t test's, clipped to its bounds
BOOTSTRAP_SEED = 0
MIN_GROUP = 2
MIN_GAP_SCORE = 0.1
MIN_GAP_SHARE = 0.25


def finite_or_none(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def t_half_width(sd: float, n: int, df: float) -> float:
    return float(t.ppf(0.975, df)) * sd / math.sqrt(n)


def bootstrap_interval(groups: list[np.ndarray], paired: bool) -> tuple[float, float]:
    """95 % percentile bootstrap of the mean (one group) or of mean(B) − mean(A) (two groups)."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    if len(groups) == 1 or paired:
        values = groups[0] if len(groups) == 1 else groups[1] - groups[0]
        index = rng.integers(len(values), size=(BOOTSTRAP, len(values)))
        means = values[index].mean(1)
    else:
        a, b = groups
        means = b[rng.integers(len(b), size=(BOOTSTRAP, len(b)))].mean(1) - a[
            rng.integers(len(a), size=(BOOTSTRAP, len(a)))
        ].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def bounded_interval(values: list[float]) -> dict:
    """Mean of scores in [0, 1] with its percentile-bootstrap 95 % interval (inside [min, max] of the values);
    below :data:`MIN_BOOTSTRAP_SEEDS` seeds the Student-t interval clipped to [0, 1]."""
    n = len(values)
    if n < MIN_BOOTSTRAP_SEEDS:
        result = interval(values) | {"method": "t"}
        if result["low"] is not None:
            result["low"], result["high"] = clipped(float(result["low"]), float(result["high"]), 0.0)
        return result
    mean = float(np.mean(values))
    low, high = bootstrap_interval([np.asarray(values, float)], False)
    return {"mean": mean, "low": low, "high": high, "n": n, "method": "percentile bootstrap"}


def clipped(low: float, high: float, lowest: float | None) -> tuple[float, float]:
    """An interval kept inside a score's bounds: [lowest, 1] (a score in [0, 1], or a difference of two in
    [−1, 1]); as it is where ``lowest`` is None."""
    return (low, high) if lowest is None else (max(lowest, low), min(1.0, high))


def signed_rank_p(differences) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test of ``differences`` against 0, exact: the null
    distribution of the rank sum of the positive differences over all 2^m sign flips, counted by a dynamic
    programme over rank sums (O(m³) for m differences, so milliseconds at a sweep's seed counts).

    The convention is scipy's default (``zero_method="wilcox"``): zeros are dropped, tied absolute values get
    their average rank. Doubled, every average rank is an integer, so the sums are counted on integers. Where
    scipy's ``wilcoxon`` is exact (no ties or zeros and n ≤ 50; ties or zeros and n ≤ 13, by enumerating the
    sign flips) the p-values are the same; beyond, scipy falls back to a normal approximation and this stays
    exact. scipy's enumeration with ties takes about a tenth of a second a call, this a tenth of a millisecond."""
    d = np.asarray(differences, float)
    d = d[d != 0]
    if len(d) == 0:
        return math.nan  # no signed difference: the test is undefined, as in scipy
    _, group, counts = np.unique(np.abs(d), return_inverse=True, return_counts=True)
    doubled = (2 * (np.cumsum(counts) - counts) + counts + 1)[group]  # twice the average rank of each tie group
    weights = doubled // np.gcd.reduce(doubled)  # the same order of sums on a shorter axis
    observed = int(weights[d > 0].sum())
    # null[s]: the probability that the positive ranks sum to s; each difference's sign is a fair coin. Every
    # entry is a multiple of 2^-m, so below m = 53 the sums are exact and equal scipy's to the last bit.
    null = np.zeros(int(weights.sum()) + 1)
    null[0], top = 1.0, 0
    for weight in weights:
        flipped = null[: top + 1] * 0.5
        null[: top + 1] *= 0.5
        null[weight : weight + top + 1] += flipped
        top += int(weight)
    return float(min(1.0, 2 * min(null[: observed + 1].sum(), null[observed:].sum())))


def paired_comparison(a: list[float], b: list[float], bounded: bool) -> dict:
    """B − A over seeds paired by position: paired t and Wilcoxon signed-rank."""
    x, y = np.asarray(a, float), np.asarray(b, float)
    d = y - x
    n = len(d)
    result = {
        "test": "paired t",
        "rank_test": "Wilcoxon signed-rank",
        "n": n,
        "p_value": None,
        "rank_p_value": None,
        "difference": {"mean": float(d.mean()) if n else None, "low": None, "high": None},
    }
    if n < 2:
        return result
    sd = float(d.std(ddof=1))
    bootstrap = bounded and n >= MIN_BOOTSTRAP_SEEDS
    if bootstrap:
        low, high = bootstrap_interval([x, y], True)
    else:
        half = t_half_width(sd, n, n - 1)
        low, high = clipped(float(d.mean()) - half, float(d.mean()) + half, -1.0 if bounded else None)
    result["difference"] |= {"low": low, "high": high, "method": "percentile bootstrap" if bootstrap else "t"}
    if sd > 0:
        result["p_value"] = finite_or_none(ttest_rel(y, x).pvalue)
    if np.any(d != 0):
        result["rank_p_value"] = finite_or_none(signed_rank_p(d))
    return result


def one_sample_comparison(values: list[float]) -> dict:
    """The mean of ``values`` against 0: :func:`paired_comparison` of 0 with each value, which is the one-sample
    t-test (``ttest_rel`` against zeros is ``ttest_1samp``) and the one-sample signed-rank test."""
    return paired_comparison([0.0] * len(values), values, False) | {"test": "one-sample t"}


def welch_comparison(a: list[float], b: list[float], bounded: bool) -> dict:
    """mean(B) − mean(A), unpaired: Welch's t and Mann-Whitney U."""
    x, y = np.asarray(a, float), np.asarray(b, float)
    result = {
        "test": "Welch t",
        "rank_test": "Mann-Whitney U",
        "n": [len(x), len(y)],
        "p_value": None,
        "rank_p_value": None,
        "difference": {"mean": None, "low": None, "high": None},
    }
    if len(x) == 0 or len(y) == 0:
        return result
    result["difference"]["mean"] = float(y.mean() - x.mean())
    if len(x) < 2 or len(y) < 2:
        return result
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    bootstrap = bounded and min(len(x), len(y)) >= MIN_BOOTSTRAP_SEEDS
    if bootstrap:
        low, high = bootstrap_interval([x, y], False)
    elif va + vb > 0:
        df = (va + vb) ** 2 / (va**2 / (len(x) - 1) + vb**2 / (len(y) - 1))
        half = t_half_width(math.sqrt(va + vb), 1, df)
        mean = float(y.mean() - x.mean())
        low, high = clipped(mean - half, mean + half, -1.0 if bounded else None)
    else:
        low = high = float(y.mean() - x.mean())
    result["difference"] |= {"low": low, "high": high, "method": "percentile bootstrap" if bootstrap else "Welch t"}
    if va + vb > 0:
        result["p_value"] = finite_or_none(ttest_ind(y, x, equal_var=False)[1])  # (statistic, p-value)
    result["rank_p_value"] = finite_or_none(mannwhitneyu(y, x, alternative="two-sided").pvalue)
    return result


def split_into_kinds(values: list[float], bounded: bool) -> dict[str, Any] | None:
    """The two groups of the module docstring's rule, or None where the values do not split."""
    ordered = sorted(v for v in values if v is not None)
    if len(ordered) < 2 * MIN_GROUP:
        return None
    spread = ordered[-1] - ordered[0]
    gaps = [ordered[i + 1] - ordered[i] for i in range(len(ordered) - 1)]
    at = max(range(len(gaps)), key=gaps.__getitem__)
    smallest = MIN_GAP_SCORE if bounded else MIN_GAP_SHARE * abs(float(np.median(ordered)))
    below, above = ordered[: at + 1], ordered[at + 1 :]
    if gaps[at] > spread / 2 and gaps[at] >= smallest and min(len(below), len(above)) >= MIN_GROUP:
        return {"gap": gaps[at], "low_group": below, "high_group": above}
    return None


def interval(values: list[float]) -> dict:
    """Mean and Student-t 95 % interval of the mean; low and high are None below two values."""
    n = len(values)
    if n == 0:
        return {"mean": None, "low": None, "high": None, "n": 0}
    mean = sum(values) / n
    if n == 1:
        return {"mean": mean, "low": None, "high": None, "n": 1}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": n}


def nonnegative_interval(values: list[float]) -> dict:
    """:func:`interval` for a quantity that cannot be negative (a length, a KL): the Student-t interval, or
    where its low end falls below 0 (seeds split between 0 and more, say) the percentile bootstrap, which
    stays inside [min, max] of the values, and then says so in ``method``; below :data:`MIN_BOOTSTRAP_SEEDS`
    seeds, where a bootstrap is the values' range, the t interval with its low end cut at 0."""
    result = interval(values)
    if result["low"] is None or result["low"] >= 0:
        return result
    if len(values) < MIN_BOOTSTRAP_SEEDS:  # two seeds' bootstrap is their range: the t interval, cut at 0
        return result | {"low": 0.0, "method": "t, clipped at 0"}
    low, high = bootstrap_interval([np.asarray(values, float)], False)
    return result | {"low": low, "high": high, "method": "percentile bootstrap"}


def seed_values(condition: dict, measure: str, measure_of) -> dict[int, float]:
    """Each seed's value of ``measure`` in a condition's per-seed ``runs``, read by ``measure_of(record, measure)``
    (seeds without one left out)."""
    values = {r["seed"]: measure_of(r, measure) for r in condition["runs"]}
    return {seed: value for seed, value in values.items() if value is not None}


def compare_conditions(
    name_a: str, a: dict, name_b: str, b: dict, measure: str, measure_of, bounded: bool
) -> dict | None:
    """B − A on ``measure``: paired on the seeds both have where the two conditions share their seed list (a
    seed's data and initialisation are then the same), Welch's otherwise; None where neither has the measure."""
    va, vb = seed_values(a, measure, measure_of), seed_values(b, measure, measure_of)
    if not va and not vb:
        return None
    if list(a["seeds"]) == list(b["seeds"]):
        common = [s for s in a["seeds"] if s in va and s in vb]
        result = paired_comparison([va[s] for s in common], [vb[s] for s in common], bounded) | {"seeds": common}
    else:
        result = welch_comparison(list(va.values()), list(vb.values()), bounded)
    return {"a": name_a, "b": name_b, "measure": measure} | result
