"""The comparison statistics against hand computation, scipy and their formulas, and the shipped summaries'
comparisons recomputed from their own per-seed values."""

import itertools
import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from induction_probes.cli import main
from induction_probes.probes.report.sweeps import even_odd_lines
from induction_probes.probes.sweeps.condition_tests import (
    bounded_interval,
    interval,
    nonnegative_interval,
    paired_comparison,
    signed_rank_p,
    split_into_kinds,
    welch_comparison,
)
from induction_probes.probes.sweeps.summary_statistics import (
    BOUNDED,
    EVEN_ODD,
    MEASURES,
    SummaryError,
    add_statistics,
    recompute_summary,
)

RESULTS = Path(__file__).resolve().parents[2] / "experiments" / "results"
# The strategy summaries (ICL-MC sweeps): the toy and task sweeps' own statistics are checked in
# test_shipped_summaries.py
KINDS_CHECKED_ELSEWHERE = ("toy", "task")
SUMMARIES = [
    p
    for p in sorted(RESULTS.glob("*/summary.json"))
    if json.loads(p.read_text()).get("summary") not in KINDS_CHECKED_ELSEWHERE
]


def test_paired_t_by_hand():
    """d = b − a = [1, 2, 2, 3]: mean 2, sd √(2/3), t = 2 / (√(2/3) / 2) = √24 on 3 degrees of freedom."""
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 5.0, 7.0]
    result = paired_comparison(a, b, bounded=False)
    t = math.sqrt(24)
    assert result["p_value"] == pytest.approx(2 * stats.t.sf(t, 3), rel=1e-12)
    assert result["p_value"] == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-12)
    half = stats.t.ppf(0.975, 3) * math.sqrt(2 / 3) / 2
    assert result["difference"] == pytest.approx({"mean": 2.0, "low": 2 - half, "high": 2 + half, "method": "t"})
    assert result["n"] == 4 and result["test"] == "paired t"


def test_wilcoxon_signed_rank_exact_by_counting():
    """d = [0.5, −1, 2, 3, 4]: ranks 1..5, the negative one has rank 2, so W− = 2. Of the 2⁵ sign patterns,
    W− ≤ 2 for {}, {1}, {2}: the two-sided exact p is 2 · 3/32."""
    a = [0.0] * 5
    b = [0.5, -1.0, 2.0, 3.0, 4.0]
    assert paired_comparison(a, b, bounded=False)["rank_p_value"] == pytest.approx(6 / 32, rel=1e-12)


def signed_rank_p_by_brute_force(differences) -> Fraction:
    """Every one of the 2^n sign flips of ``differences`` (zeros included, as scipy's permutation test does),
    the rank sum of the positive ones with zeros dropped and ties at their average rank, counted as fractions."""
    d = np.asarray(differences, float)
    ranks = stats.rankdata(np.abs(d[d != 0]))
    magnitudes = np.abs(d[d != 0])

    def positive_sum(signs) -> Fraction:
        return sum((Fraction(r) for r, s in zip(ranks, signs) if s > 0), Fraction(0))

    observed = positive_sum(np.sign(d[d != 0]))
    sums = [positive_sum(signs) for signs in itertools.product((-1, 1), repeat=len(magnitudes))]
    sums = sums * 2 ** int(np.sum(d == 0))  # a zero's two signs give the same sum
    below = Fraction(sum(s <= observed for s in sums), len(sums))
    above = Fraction(sum(s >= observed for s in sums), len(sums))
    return min(Fraction(1), 2 * min(below, above))


@pytest.mark.parametrize(
    "differences",
    [
        [0.0, 0.0, 1.0, -1.0, 2.0, 2.0, -2.0, 3.0, 0.5, -0.5],  # zeros, and ties across signs
        [1.5, 1.5, 1.5, 1.5, -1.5, 0.0, 4.0, 4.0, -0.25],  # a tie of five, and half ranks
        [-2.0, -2.0, -2.0, -1.0, -1.0, 0.0],  # every sign negative: the smallest p the ties allow
        [0.0, 0.0, 0.0, 3.0],  # one signed difference: p = 1
        [0.3, -0.1, 0.7, 0.2, -0.4, 0.9, 1.1, -0.6, 0.8, 1.3, 1.2],  # no ties, eleven values
    ],
)
def test_signed_rank_p_is_the_count_over_every_sign_flip(differences):
    assert signed_rank_p(differences) == pytest.approx(float(signed_rank_p_by_brute_force(differences)), abs=1e-15)


def test_signed_rank_p_equals_scipy_where_scipy_is_exact():
    """scipy's wilcoxon enumerates the sign flips with ties or zeros up to n = 13 and uses the exact
    distribution without them up to n = 50 (further with method="exact"): the same p-values to the last bit
    (every probability is a multiple of 2^-n). Beyond, scipy falls back to a normal approximation."""
    rng = np.random.default_rng(0)
    for n in range(1, 14):  # half-integers in [-1.5, 1.5]: zeros and ties in nearly every draw
        d = rng.integers(-3, 4, size=n) * 0.5
        d[0] = 0.5 if not d.any() else d[0]
        assert signed_rank_p(d) == stats.wilcoxon(d).pvalue, d
    for n in (2, 5, 10, 20, 35, 50):
        d = rng.normal(size=n)
        assert signed_rank_p(d) == stats.wilcoxon(d).pvalue, d
    d = rng.normal(size=70) + 0.3
    assert signed_rank_p(d) == pytest.approx(stats.wilcoxon(d, method="exact").pvalue, rel=1e-12)
    assert math.isnan(signed_rank_p([0.0, 0.0]))  # no signed difference: no test


def test_welch_by_its_formula():
    a, b = [1.0, 2.0, 3.0, 4.0], [2.0, 6.0, 9.0]
    va, vb = np.var(a, ddof=1) / 4, np.var(b, ddof=1) / 3
    t = (np.mean(b) - np.mean(a)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)  # Welch-Satterthwaite
    result = welch_comparison(a, b, bounded=False)
    assert result["p_value"] == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-10)
    assert result["p_value"] == pytest.approx(stats.ttest_ind(b, a, equal_var=False).pvalue, rel=1e-10)
    half = stats.t.ppf(0.975, df) * math.sqrt(va + vb)
    assert result["difference"]["low"] == pytest.approx(np.mean(b) - np.mean(a) - half, rel=1e-12)
    assert result["n"] == [4, 3]


def test_mann_whitney_exact_by_counting():
    """Every b above every a: U = 0, and of the C(6, 3) = 20 splits only 2 are as extreme (two-sided)."""
    assert welch_comparison([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], bounded=False)["rank_p_value"] == pytest.approx(0.1)


def test_bounded_intervals_stay_inside_the_bounds_near_one():
    values = [0.99, 0.995, 1.0, 0.98, 0.999]
    mean, sd = np.mean(values), np.std(values, ddof=1)
    assert mean + stats.t.ppf(0.975, 4) * sd / math.sqrt(5) > 1  # the t interval leaves [0, 1] here
    interval = bounded_interval(values)
    assert 0.98 <= interval["low"] <= interval["mean"] <= interval["high"] <= 1.0
    difference = paired_comparison([0.01, 0.0, 0.02, 0.0, 0.03], values, bounded=True)["difference"]
    assert -1 <= difference["low"] <= difference["high"] <= 1


def test_kinds_of_solution_rule():
    split = split_into_kinds([0.5, 0.49, 0.51, 0.97, 0.99], bounded=True)
    assert split == {"gap": pytest.approx(0.46), "low_group": [0.49, 0.5, 0.51], "high_group": [0.97, 0.99]}
    assert split_into_kinds([0.5, 0.52, 0.55, 0.97], bounded=True) is None  # one seed alone on a side
    assert split_into_kinds([0.604, 0.605, 0.608, 0.609], bounded=True) is None  # a gap of 0.003 is no split
    assert split_into_kinds([1.0, 2.0, 3.0, 4.0, 5.0], bounded=False) is None  # no gap wider than half the range


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: p.parent.name)
def test_shipped_summaries_hold_tests_intervals_in_bounds_and_per_seed_values(path):
    summary = json.loads(path.read_text())
    conditions = summary["conditions"]
    for condition in conditions.values():
        assert all(r["seed"] in condition["seeds"] for r in condition["runs"])
        for measure in BOUNDED:
            interval = condition["probes"][measure]
            if interval["n"] >= 2:
                assert 0 <= interval["low"] <= interval["mean"] <= interval["high"] <= 1
            else:  # one seed: its score, and no interval
                assert interval["low"] is None and interval["high"] is None and 0 <= interval["mean"] <= 1
    if len(conditions) >= 2:
        pairs = len(conditions) * (len(conditions) - 1) // 2
        assert len({(c["a"], c["b"]) for c in summary["comparisons"]}) == pairs
        for entry in summary["comparisons"]:
            # the fixed measures, and summarize --by-prior's loss and KL on each prior's chains
            measure = entry["measure"]
            known = measure in MEASURES or measure in EVEN_ODD or measure.split(".")[0] == "by_prior"
            assert known and {"mean", "low", "high"} <= entry["difference"].keys()
            assert entry["p_value"] is None or 0 <= entry["p_value"] <= 1
            if measure in BOUNDED and entry["n"] != 1:
                assert -1 <= entry["difference"]["low"] <= entry["difference"]["high"] <= 1
            elif measure in EVEN_ODD and entry["difference"]["low"] is not None:  # none where a side has no profile
                assert -1 <= entry["difference"]["low"] <= entry["difference"]["high"] <= 1
            elif entry["n"] == 1:  # one pair: a difference, no interval and no test
                assert entry["difference"]["low"] is None and entry["p_value"] is None
    # the shipped statistics are what the per-seed values give (written on another machine: float32 tolerance)
    again = recompute_summary(path)
    for shipped, computed in zip(summary.get("comparisons", []), again.get("comparisons", [])):
        assert (shipped["measure"], shipped["n"]) == (computed["measure"], computed["n"])
        for key in ("p_value", "rank_p_value"):  # None where a test is undefined (no transition reached in a)
            assert (shipped[key] is None) == (computed[key] is None)
            assert shipped[key] is None or shipped[key] == pytest.approx(computed[key], rel=1e-6)


def alternating(lead_near: float, lead_far: float) -> list[float]:
    """A positional profile over distances 0..20 whose odd distances stand above their even neighbours by
    ``lead_near`` at 3..9 and by ``lead_far`` at 11..19 (distance 1, which the measures do not read, carries
    most of the weight)."""
    profile = [0.02] * 21
    for d in range(3, 20, 2):
        profile[d] += lead_near if d < 10 else lead_far
    profile[1] = 0.3
    return profile


def even_odd_condition(plateau_leads, transition_leads) -> dict:
    runs = []
    for seed, (before, during) in enumerate(zip(plateau_leads, transition_leads)):
        profiles = {"transition": alternating(during, during / 2), "end": alternating(0.0, 0.0)}
        if before is not None:  # a run without a unigram plateau has no plateau profile
            profiles["plateau"] = alternating(before, before)
        runs.append({"seed": seed, "positional_layer0": {"steps": {}, "profiles": profiles}})
    return {"seeds": list(range(len(runs))), "runs": runs}


def test_even_odd_statistics_by_hand():
    # odd distances stand c above their neighbours at 3..9 and c/2 at 11..19 at the transition: the excess over
    # the nine odd distances is (4c + 5c/2)/9 = 13c/18 and the alternation fades by c − c/2 = c/2; on the plateau
    # the lead is b at every odd distance
    plateau, transition = [0.0, 0.01, -0.005, None], [0.04, 0.09, 0.05, 0.07]
    condition = add_statistics({"conditions": {"base": even_odd_condition(plateau, transition)}})["conditions"]["base"]
    result = condition["even_odd"]
    excess = [13 * c / 18 for c in transition]
    assert result["excess"]["transition"] == pytest.approx(interval(excess), abs=1e-15)  # the Student-t interval
    assert result["excess"]["plateau"]["mean"] == pytest.approx(np.mean(plateau[:3]), abs=1e-15)
    assert result["excess"]["end"]["mean"] == pytest.approx(0.0, abs=1e-15)
    at_transition = result["excess_at_transition"]
    assert at_transition["test"] == "one-sample t" and at_transition["n"] == 4
    assert at_transition["p_value"] == pytest.approx(stats.ttest_1samp(excess, 0).pvalue, rel=1e-9)
    assert at_transition["rank_p_value"] == pytest.approx(stats.wilcoxon(excess).pvalue, rel=1e-9)
    fading = [c / 2 for c in transition]
    assert result["fading_at_transition"]["difference"]["mean"] == pytest.approx(np.mean(fading), abs=1e-15)
    assert result["fading_at_transition"]["p_value"] == pytest.approx(stats.ttest_1samp(fading, 0).pvalue, rel=1e-9)
    change = result["transition_minus_plateau"]  # the seed without a plateau is left out of the pairs
    assert change["seeds"] == [0, 1, 2] and change["n"] == 3 and change["test"] == "paired t"
    differences = [e - b for e, b in zip(excess, plateau[:3])]
    assert change["difference"]["mean"] == pytest.approx(np.mean(differences), abs=1e-15)
    assert change["p_value"] == pytest.approx(stats.ttest_1samp(differences, 0).pvalue, rel=1e-9)
    half = stats.t.ppf(0.975, 2) * np.std(differences, ddof=1) / math.sqrt(3)
    assert change["difference"]["low"] == pytest.approx(np.mean(differences) - half, abs=1e-15)
    lines = even_odd_lines("base", result)  # what summarize prints
    assert len(lines) == 4 and f"transition {np.mean(excess):.3g} [" in lines[0]
    assert lines[1].startswith(f"base: transition minus plateau {np.mean(differences):.3g} [")


def test_a_summary_whose_run_is_not_a_record_is_refused_in_one_line(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"conditions": {"base": {"seeds": [0], "runs": [[0.1]]}}}))
    with pytest.raises(SummaryError, match="each run record must be a JSON object"):
        recompute_summary(path)


def test_an_even_odd_block_is_recomputed_from_the_profiles_never_carried_over():
    forged = {"seeds": [0], "runs": [{"seed": 0}], "even_odd": {"excess": "anything"}}
    assert "even_odd" not in add_statistics({"conditions": {"base": forged}})["conditions"]["base"]


@pytest.mark.parametrize(
    "profiles",
    [
        {"transition": "0.1"},
        {"transition": [0.1] * 5},
        {"transition": [float("nan")] * 21},
        {"transition": [10**400] * 21},
        {"transition": ["0.05"] * 21},
        {"transition": [2.0] * 21},
        [0.1],
    ],
)
def test_a_summary_with_a_broken_positional_record_is_refused_in_one_line(profiles, tmp_path):
    summary = {"conditions": {"base": even_odd_condition([0.0, 0.01], [0.05, 0.06])}}
    for record in summary["conditions"]["base"]["runs"]:
        record |= {"transition": 1.0, "plateau": 1.0, "final_kl": 0.1}
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary))
    assert recompute_summary(path)["conditions"]["base"]["even_odd"]["excess"]["end"]["n"] == 2  # the intact one
    summary["conditions"]["base"]["runs"][0]["positional_layer0"]["profiles"] = profiles
    path.write_text(json.dumps(summary).replace("NaN", "1e999"))
    with pytest.raises(SummaryError, match="is not a sweep summary"):
        recompute_summary(path)


def test_doubly_stochastic_comparison_is_paired_and_matches_the_audit():
    """The seeds are paired by the spec (same seeds, same doubly stochastic sequences): paired t p = 0.052 and
    Wilcoxon p = 0.055 in the independent audit (to its three decimals), not Welch's 0.031."""
    summary = json.loads((RESULTS / "ds-mixture" / "summary.json").read_text())
    entry = next(c for c in summary["comparisons"] if c["measure"] == "transition")
    assert entry["test"] == "paired t" and entry["n"] == 10
    assert abs(entry["p_value"] - 0.052) < 1e-3 and abs(entry["rank_p_value"] - 0.055) < 1e-3
    k8 = json.loads((RESULTS / "k8-context" / "summary.json").read_text())["conditions"]["T200"]
    assert len(k8["kinds_of_solution"]["previous_token_layer0"]["high_group"]) == 2


def test_summarize_recomputes_a_summary_file_and_refuses_other_files(tmp_path, capsys):
    assert main(["summarize", str(RESULTS / "k8-context" / "summary.json"), "--json"]) == 0
    assert "comparisons" in json.loads(capsys.readouterr().out)
    (tmp_path / "bad.json").write_text(json.dumps({"conditions": {"a": {"runs": [{}]}}}))
    assert main(["summarize", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a sweep summary" in err


def test_a_nonnegative_quantity_whose_t_interval_crosses_zero_gets_the_bootstrap_inside_its_values():
    # seven seeds with no plateau and three of 2,624 sequences: mean 787.2, sd 1,267, t half-width 906.6,
    # so the t interval would start at -119
    values = [0.0] * 7 + [2624.0] * 3
    assert interval(values)["low"] == pytest.approx(787.2 - 2.2622 * 1267.0 / 10**0.5, abs=1.0)
    result = nonnegative_interval(values)
    assert result["method"] == "percentile bootstrap" and result["mean"] == pytest.approx(787.2)
    assert 0 <= result["low"] < result["mean"] < result["high"] <= 2624
    assert nonnegative_interval([1.0, 2.0, 3.0, 4.0]) == interval([1.0, 2.0, 3.0, 4.0])  # inside: the t interval


@pytest.mark.parametrize("path", SUMMARIES, ids=lambda p: p.parent.name)
def test_no_shipped_length_or_kl_interval_goes_below_zero(path):
    summary = json.loads(path.read_text())  # SUMMARIES holds the strategy summaries only
    for condition in summary["conditions"].values():
        for measure in ("transition", "plateau", "final_kl"):
            low = condition[measure]["low"]
            assert low is None or low >= 0, f"{measure}: {condition[measure]}"


def test_two_task_conditions_are_compared_paired_on_their_shared_seeds():
    from scipy.stats import ttest_rel, wilcoxon

    from induction_probes.probes.sweeps.task_summary import task_comparisons

    def condition(seeds, losses, shares):
        runs = [
            {"seed": s, "final": {"eval_loss": loss}, "plateau": {"length": 10.0 * s}, "probes": {"score": share}}
            for s, loss, share in zip(seeds, losses, shares)
        ]
        return {"seeds": seeds, "runs": runs}

    a = condition([0, 1, 2, 3], [1.0, 1.2, 0.9, 1.1], [0.2, 0.3, 0.25, 0.1])
    b = condition([0, 1, 2, 3], [0.8, 1.1, 0.85, 0.9], [0.4, 0.35, 0.5, 0.3])
    found = {c["measure"]: c for c in task_comparisons({"a": a, "b": b})["comparisons"]}
    assert set(found) == {"final.eval_loss", "plateau.length", "probes.score"}
    loss = found["final.eval_loss"]
    x, y = [1.0, 1.2, 0.9, 1.1], [0.8, 1.1, 0.85, 0.9]
    assert loss["test"] == "paired t" and loss["seeds"] == [0, 1, 2, 3]
    assert loss["difference"]["mean"] == pytest.approx(-0.1375)  # by hand: (-0.2 - 0.1 - 0.05 - 0.2) / 4
    assert loss["p_value"] == pytest.approx(ttest_rel(y, x).pvalue) and loss["rank_p_value"] == wilcoxon(y, x).pvalue
    # a score in [0, 1] over 4 seeds: the t test's own interval (clipped to [-1, 1]), not a bootstrap of 4
    assert found["probes.score"]["difference"]["method"] == "t"
    unpaired = task_comparisons({"a": a, "b": condition([4, 5, 6], [0.8, 1.1, 0.85], [0.4, 0.35, 0.5])})
    assert {c["test"] for c in unpaired["comparisons"]} == {"Welch t"}
    assert task_comparisons({"a": a}) == {}


def test_below_five_seeds_a_bounded_difference_gets_the_interval_of_its_own_test():
    """Two seeds: a percentile bootstrap is the range of the two differences, and once read -0.00374 [-0.00464,
    -0.00284] beside a paired t p of 0.15. The t interval and the t test agree: it excludes 0 exactly when p < 0.05."""
    from induction_probes.probes.sweeps.condition_tests import bounded_interval, paired_comparison, welch_comparison

    a, b = [0.50, 0.60], [0.4963, 0.5962]  # differences -0.0037 and -0.0038: consistent, yet two seeds
    paired = paired_comparison(a, b, bounded=True)
    low, high = paired["difference"]["low"], paired["difference"]["high"]
    assert paired["difference"]["method"] == "t"
    assert (low < 0 < high) == (paired["p_value"] >= 0.05)
    for seeds in ([0.2, 0.9], [0.1, 0.15, 0.9, 0.95]):  # wide: the t interval would leave [-1, 1] and [0, 1]
        for comparison in (paired_comparison, welch_comparison):
            difference = comparison([0.0] * len(seeds), seeds, True)["difference"]
            assert -1 <= difference["low"] <= difference["high"] <= 1, difference
            assert difference["method"] in ("t", "Welch t")
        mean = bounded_interval(seeds)
        assert 0 <= mean["low"] <= mean["high"] <= 1 and mean["method"] == "t"
    five = [0.1, 0.2, 0.3, 0.4, 0.5]
    assert paired_comparison(five, [v + 0.1 for v in five], True)["difference"]["method"] == "percentile bootstrap"


def test_below_five_seeds_a_nonnegative_mean_is_not_the_range_of_its_values():
    """Two seeds of a length, 0 and 5: the t interval reaches below 0, and a percentile bootstrap would be the
    range [0, 5] called 95 %; below five seeds the t interval is kept, cut at 0, and says so."""
    from induction_probes.probes.sweeps.condition_tests import interval, nonnegative_interval

    found = nonnegative_interval([0.0, 5.0])
    assert found["method"] == "t, clipped at 0" and found["low"] == 0.0
    assert found["high"] == pytest.approx(interval([0.0, 5.0])["high"])  # 2.5 + 12.71 x 2.5: far beyond the range
    assert nonnegative_interval([0.0, 0.0, 0.0, 0.0, 5.0])["method"] == "percentile bootstrap"


def test_a_condition_of_one_seed_says_it_has_no_interval_in_words():
    from induction_probes.probes.report.sweeps import one_seed_lines

    summary = {"conditions": {"a": {"n_seeds": 1}, "b": {"n_seeds": 3}, "c": {"seeds": [7]}}}
    assert one_seed_lines(summary) == ["one seed, so no interval (a single value shows no spread between seeds): a, c"]
    assert one_seed_lines({"conditions": {"b": {"n_seeds": 2}}}) == []
