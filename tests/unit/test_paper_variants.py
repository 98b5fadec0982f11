"""The verdicts of Edelman et al.'s one-setting variants (attention + MLP, batch size, tetragram, the k = 2
spectrum), of Fig. 4 left, of Wang et al.'s Adam toy, and of the even/odd pattern over seeds against their
specs' pass marks, on small summaries whose comparisons the real statistics compute (``add_statistics``):
each mark is made to hold and to fail by one seed's or one interval's worth."""

import numpy as np
import pytest

from induction_probes.probes.paper.edelman_sweeps import even_odd_entry, even_odd_verdict, mixture_verdict
from induction_probes.probes.paper.edelman_variants import (
    batch_claim_verdict,
    batch_verdict,
    final_kl_by_heads,
    mlp_verdict,
    spectrum_verdict,
    tetragram_claim_verdict,
    tetragram_verdict,
)
from induction_probes.probes.paper.entries import AGREE, DIFFER, NOT_YET, PARTLY
from induction_probes.probes.paper.wang_toy_sweeps import adam_verdict
from induction_probes.probes.sweeps.summary_statistics import add_statistics

SEEDS = list(range(10))
NOISE = np.array([-4.5, -3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5])  # mean 0, sd 3.03: t interval ±2.17


def condition(transition, final_kl, *, plateau=None, previous=0.55, matching=0.6, phases=None, peaks=(1,), roll=0):
    """One condition's summary: ten seeds at ``value + NOISE × scale`` per measure (None: no transition), the
    noise rolled by ``roll`` seeds so that two conditions' paired differences have a spread (about ±2.3 × scale
    for a roll of 1)."""
    noise = np.roll(NOISE, roll)
    runs = []
    for i, seed in enumerate(SEEDS):
        runs.append(
            {
                "seed": seed,
                "transition": None if transition is None else transition + 1000 * noise[i],
                "plateau": None if plateau is None else plateau + 1000 * noise[i],
                "final_kl": final_kl + 0.001 * noise[i],
                "phases": phases[i] if phases else ["uniform", "unigram", "bigram"],
                "probes": {
                    "previous_token": [[previous + 0.001 * noise[i]]],
                    "bigram_matching": [[matching + 0.001 * noise[i]]],
                    "positional_peaks_layer0": list(peaks),
                },
            }
        )

    def stat(key):
        values = [r[key] for r in runs if r[key] is not None]
        return {"mean": float(np.mean(values)) if values else None, "n": len(values)}

    transition_stat = stat("transition") | {"n_reached": stat("transition")["n"]}
    return {
        "n_seeds": len(SEEDS),
        "seeds": SEEDS,
        "runs": runs,
        "transition": transition_stat,
        "plateau": stat("plateau"),
        "final_kl": stat("final_kl"),
    }


def summary(**conditions):
    return add_statistics({"conditions": conditions})


def test_mlp_agrees_when_all_four_marks_hold():
    result = summary(**{"attention-only": condition(40_000, 0.043), "attention-mlp": condition(30_000, 0.040, roll=1)})
    assert mlp_verdict(result) == (AGREE, "")


def test_mlp_is_partly_when_only_the_phases_and_the_speed_hold():
    result = summary(**{"attention-only": condition(40_000, 0.040), "attention-mlp": condition(30_000, 0.043, roll=1)})
    verdict, reason = mlp_verdict(result)
    assert verdict == PARTLY and reason == "not shown: a lower final KL"


def test_mlp_patterns_differing_by_more_than_the_margin_fail_their_mark():
    # previous-token scores 0.55 against 0.70: difference 0.15, outside ±0.1
    attention, mlp = condition(40_000, 0.043), condition(30_000, 0.040, previous=0.70, roll=1)
    verdict, reason = mlp_verdict(summary(**{"attention-only": attention, "attention-mlp": mlp}))
    assert verdict == PARTLY and reason == "not shown: similar attention scores"


def test_mlp_differs_when_a_seed_skips_the_unigram_phase_and_nothing_else_holds():
    phases = [["uniform", "bigram"]] + [["uniform", "unigram", "bigram"]] * 9
    mlp = condition(50_000, 0.050, phases=phases, roll=1)
    verdict, reason = mlp_verdict(summary(**{"attention-only": condition(40_000, 0.043), "attention-mlp": mlp}))
    assert verdict == DIFFER
    assert reason == "not shown: the same phases, a lower final KL, an earlier transition"


def test_mlp_marks_are_read_from_intervals_not_means():
    # final KL 0.0005 lower on average, but the paired differences spread ±0.003 (rolled noise × 3): the
    # interval crosses 0, so "a lower final KL" is not shown
    attention, mlp = condition(40_000, 0.043), condition(30_000, 0.0425, roll=1)
    for run, noise in zip(mlp["runs"], np.roll(NOISE, 1), strict=True):
        run["final_kl"] = 0.0425 + 0.003 * noise
    verdict, reason = mlp_verdict(summary(**{"attention-only": attention, "attention-mlp": mlp}))
    assert (verdict, reason) == (PARTLY, "not shown: a lower final KL")


def test_mlp_without_the_phases_differs_even_when_the_rest_holds():
    phases = [["uniform", "bigram"]] + [["uniform", "unigram", "bigram"]] * 9
    mlp = condition(30_000, 0.040, phases=phases, roll=1)
    verdict, reason = mlp_verdict(summary(**{"attention-only": condition(40_000, 0.043), "attention-mlp": mlp}))
    assert (verdict, reason) == (DIFFER, "not shown: the same phases")


def test_mlp_patterns_need_both_scores():
    attention, mlp = condition(40_000, 0.043), condition(30_000, 0.040, matching=0.75, roll=1)
    verdict, reason = mlp_verdict(summary(**{"attention-only": attention, "attention-mlp": mlp}))
    assert (verdict, reason) == (PARTLY, "not shown: similar attention scores")


def batch_summary(shift_32, shift_128):
    """Batch 64 at transition 40k, plateau 38k, final KL 0.043; the others shifted by a share of each."""

    def shifted(share, roll):
        return condition(40_000 * (1 + share), 0.043 * (1 + share), plateau=38_000 * (1 + share), roll=roll)

    return summary(
        **{"batch-64": shifted(0.0, 0), "batch-32": shifted(shift_32, 1), "batch-128": shifted(shift_128, 2)}
    )


def test_batch_size_agrees_inside_the_band():
    # shifts of 5 %: transition differences 2k ± 2.3k, inside ±8k (plateau and final KL alike)
    assert batch_verdict(batch_summary(0.05, -0.05)) == (AGREE, "")


def test_batch_size_differs_when_an_interval_lies_wholly_outside():
    verdict, reason = batch_verdict(batch_summary(0.05, 0.3))
    assert verdict == DIFFER
    assert reason == (
        "outside ±20 % of batch 64's mean: batch-128 transition, batch-128 plateau, batch-128 final_kl; "
        "inside: batch-32 transition, batch-32 plateau, batch-32 final_kl"
    )


def test_batch_size_is_partly_when_an_interval_straddles_the_band():
    base = condition(40_000, 0.043, plateau=38_000)
    wide = condition(40_000, 0.043, plateau=38_000, roll=1)
    for run, noise in zip(wide["runs"], NOISE, strict=True):  # differences 4.5k × NOISE: mean 0, interval ±9.7k
        run["transition"] = 40_000 + 1000 * noise + 4500 * noise
    verdict, reason = batch_verdict(summary(**{"batch-64": base, "batch-32": wide, "batch-128": base}))
    assert verdict == PARTLY and reason == "not inside ±20 % of batch 64's mean: batch-32 transition"


TETRA = ["uniform", "unigram", "bigram", "trigram", "4-gram"]


@pytest.mark.parametrize(
    ("phases", "peaks", "verdict"),
    [
        ([TETRA] * 10, (1, 2, 3), AGREE),
        ([TETRA] * 10, (3, 2, 1), AGREE),  # heads in any order
        ([["uniform", "unigram", "bigram", "4-gram"]] + [TETRA] * 9, (1, 2, 3), PARTLY),  # one skips trigram
        ([TETRA] * 10, (1, 1, 2), DIFFER),  # the ladder in every seed, the heads in none
        ([["uniform", "unigram", "bigram", "trigram"]] * 10, (1, 2, 3), DIFFER),
        ([["uniform", "unigram", "bigram", "4-gram"]] * 10, (1, 2, 3), DIFFER),  # 4-gram reached, no ladder
    ],
)
def test_tetragram_marks_of_the_rule_written_after_the_data(phases, peaks, verdict):
    """The rule shown beside the spec's (the ladder and the heads as claimed): it decides no verdict."""
    result = summary(base=condition(40_000, 0.1, phases=phases, peaks=peaks))
    assert tetragram_claim_verdict(result)[0] == verdict


def test_tetragram_counts_both_marks_out_of_the_seeds_and_says_the_rule_changed():
    phases = [["uniform", "4-gram"]] * 5 + [TETRA] * 5
    result = summary(base=condition(40_000, 0.1, phases=phases, peaks=(1, 2, 3)))
    assert tetragram_claim_verdict(result) == (
        PARTLY,
        "the ladder in turn in 5/10 seeds, heads at 1, 2, 3 in 10/10 (rule changed after the data were seen)",
    )


@pytest.mark.parametrize(
    ("phases", "peaks", "verdict"),
    [
        ([TETRA] * 10, (1, 2, 3), AGREE),
        ([TETRA] * 10, (3, 2, 1), AGREE),  # heads in any order
        ([["uniform", "unigram", "bigram", "4-gram"]] + [TETRA] * 9, (1, 2, 3), PARTLY),  # one skips trigram
        ([TETRA] * 10, (1, 1, 2), PARTLY),  # the ladder in every seed, the heads in none: 4-gram reached
        ([["uniform", "unigram", "bigram", "trigram"]] * 10, (1, 2, 3), DIFFER),  # no seed reaches 4-gram
        ([["uniform", "unigram", "bigram", "4-gram"]] * 10, (1, 2, 3), PARTLY),  # 4-gram reached, no ladder
        ([["uniform", "4-gram"]] * 10, (1, 1, 2), PARTLY),  # the shipped sweep's picture
        ([["uniform", "4-gram", "trigram"]] * 10, (1, 2, 3), PARTLY),  # reached at a checkpoint, not kept
        ([["uniform", "trigram"]] * 10, (1, 1, 2), DIFFER),
    ],
)
def test_tetragram_is_judged_by_its_specs_marks(phases, peaks, verdict):
    """experiments/tetragram.toml, fixed before the run: agree if the ladder (ending at 4-gram) and the heads at
    1, 2, 3 hold in every seed, differ if no seed reaches 4-gram, partly otherwise."""
    result = summary(base=condition(40_000, 0.1, phases=phases, peaks=peaks))
    assert tetragram_verdict(result)[0] == verdict


def test_tetragram_by_its_specs_marks_counts_the_seeds_that_reach_4_gram():
    phases = [["uniform", "4-gram"]] * 5 + [TETRA] * 5
    result = summary(base=condition(40_000, 0.1, phases=phases, peaks=(1, 2, 3)))
    assert tetragram_verdict(result) == (
        PARTLY,
        "4-gram reached in 10/10 seeds, the ladder in turn in 5/10, heads at 1, 2, 3 in 10/10",
    )


def test_tetragram_final_kls_are_split_by_the_heads_peaks():
    runs = [
        {"final_kl": 0.15, "probes": {"positional_peaks_layer0": [2, 1, 2]}},
        {"final_kl": 0.133, "probes": {"positional_peaks_layer0": [3, 1, 2]}},  # in any order
        {"final_kl": 0.1594, "probes": {"positional_peaks_layer0": [1, 1, 2]}},
    ]
    assert final_kl_by_heads(runs) == "heads at 1, 2, 3: 0.133; other peaks: 0.15, 0.159"
    assert final_kl_by_heads(runs[:1]) == "other peaks: 0.15"


def test_spectrum_agrees_when_p0_seeds_stay_and_every_p1_seed_moves_on():
    result = summary(
        p0=condition(None, 0.01), p05=condition(30_000, 0.02, roll=1), p1=condition(20_000, 0.02, plateau=5_000, roll=2)
    )
    assert spectrum_verdict(result) == (AGREE, "")


def test_spectrum_agrees_on_a_longer_p0_plateau_and_differs_on_a_shorter_one():
    p0 = condition(60_000, 0.01, plateau=50_000)
    p1 = condition(20_000, 0.02, plateau=5_000, roll=1)
    assert spectrum_verdict(summary(p0=p0, p05=p1, p1=p1)) == (AGREE, "")
    assert spectrum_verdict(summary(p0=p1, p05=p1, p1=p0))[0] == DIFFER


def test_spectrum_is_partly_when_a_p1_seed_never_moves_on():
    p1 = condition(20_000, 0.02, plateau=5_000, roll=1)
    p1["transition"]["n_reached"] = 9
    result = summary(p0=condition(60_000, 0.01, plateau=50_000), p05=p1, p1=p1)
    assert spectrum_verdict(result) == (PARTLY, "not shown: every p = 1 seed moves on")


def test_spectrum_is_partly_when_every_p0_seed_moves_on_and_the_plateaus_do_not_separate():
    p0 = condition(30_000, 0.01, plateau=20_000)
    p1 = condition(30_000, 0.02, plateau=20_000, roll=3)  # the same plateau on average: interval across 0
    verdict, reason = spectrum_verdict(summary(p0=p0, p05=p1, p1=p1))
    assert (verdict, reason) == (PARTLY, "not shown: a longer plateau at p = 0")


def test_spectrum_differs_on_a_shorter_p0_plateau_even_where_some_p0_seeds_stay():
    p0 = condition(20_000, 0.01, plateau=5_000)
    for run in p0["runs"][:3]:
        run["transition"] = run["plateau"] = None
    p0["transition"]["n_reached"] = 7
    p1 = condition(60_000, 0.02, plateau=50_000, roll=1)
    assert spectrum_verdict(summary(p0=p0, p05=p1, p1=p1))[0] == DIFFER


def profile(lead_near: float, lead_far: float) -> list[float]:
    """Distances 0..20 at 0.01, odd ones raised by ``lead_near`` at 3..9 and ``lead_far`` at 11..19: odd − even
    excess (4 lead_near + 5 lead_far) / 9, fading lead_near − lead_far."""
    return [0.01 + (d % 2 == 1 and d > 1) * (lead_near if d < 10 else lead_far) for d in range(21)]


def even_odd_summary(plateau: float | None, near: float, far: float) -> dict:
    """A seed-variance summary with profiles: per seed, leads at ``value + NOISE × 1e-4`` (far ones with the noise
    rolled by a seed, so the fading has a spread); no plateau profile where ``plateau`` is None."""
    runs = []
    for i, seed in enumerate(SEEDS):
        n, m = 1e-4 * NOISE[i], 1e-4 * np.roll(NOISE, 1)[i]
        profiles = {"transition": profile(near + n, far + m), "end": profile(0, 0)}
        if plateau is not None:
            profiles["plateau"] = profile(plateau + n, plateau + n)
        runs.append({"seed": seed, "positional_layer0": {"profiles": profiles}})
    return summary(base={"n_seeds": len(SEEDS), "seeds": SEEDS, "runs": runs})


def even_odd(plateau: float, near: float, far: float) -> dict:
    return even_odd_summary(plateau, near, far)["conditions"]["base"]["even_odd"]


@pytest.mark.parametrize(
    ("plateau", "near", "far", "verdict", "reason"),
    [
        (0.0, 0.004, 0.001, AGREE, ""),
        # the plateau already at the transition's excess (4 · 0.004 + 5 · 0.001) / 9: no rise
        (0.021 / 9, 0.004, 0.001, PARTLY, "not shown: a rise from the plateau"),
        (0.0, 0.002, 0.002, PARTLY, "not shown: fading with distance"),
        # the odd distances behind at the transition, and behind by more near the query
        (
            0.0,
            -0.004,
            -0.001,
            DIFFER,
            "not shown: odd above even at the transition, a rise from the plateau, fading with distance",
        ),
    ],
)
def test_even_odd_marks(plateau, near, far, verdict, reason):
    assert even_odd_verdict(even_odd(plateau, near, far)) == (verdict, reason)


def test_the_even_odd_entry_quotes_the_summarys_tests_and_waits_for_profiles():
    entry = even_odd_entry(even_odd_summary(0.0, 0.004, 0.001), [])
    assert entry.verdict == AGREE
    # the excess at the transition, (4 · 0.004 + 5 · 0.001) / 9 = 0.00233, and its one-sample test
    assert "transition 0.00233 [" in entry.ours and "one-sample t p = " in entry.ours and "n = 10" in entry.ours
    without_plateau = even_odd_entry(even_odd_summary(None, 0.004, 0.001), [])
    assert (
        "plateau in no seed" in without_plateau.ours and "transition − plateau no seed has it" in without_plateau.ours
    )
    assert without_plateau.verdict == PARTLY and without_plateau.reason == "not shown: a rise from the plateau"
    shipped_before = summary(base={"n_seeds": 1, "seeds": [0], "runs": [{"seed": 0}]})  # runs without profiles
    assert even_odd_entry(shipped_before, []).verdict == NOT_YET


def interval(low, high):
    return {"difference": {"mean": (low + high) / 2, "low": low, "high": high}}


@pytest.mark.parametrize(
    ("transition", "final", "verdict"),
    [
        (interval(1_000, 16_000), interval(-0.03, -0.02), AGREE),
        (interval(-67, 16_624), interval(-0.032, -0.029), PARTLY),  # the shipped Fig. 4 left: paired t p = 0.052
        (interval(1_000, 16_000), interval(-0.01, 0.01), PARTLY),
        (interval(-16_000, -1_000), interval(-0.03, -0.02), DIFFER),  # the mixture faster
        (interval(1_000, 16_000), interval(0.01, 0.02), DIFFER),  # DS alone ends lower
    ],
)
def test_fig_4_left_is_judged_on_the_paired_tests(transition, final, verdict):
    assert mixture_verdict(transition, final)[0] == verdict


def test_fig_4_left_names_the_half_its_test_does_not_show():
    verdict, reason = mixture_verdict(interval(-67, 16_624), interval(-0.032, -0.029))
    assert reason.startswith(
        "not shown by the paired test: DS alone faster (transition difference 8.28k [-0.0670k, 16.6k])"
    )
    assert "rule changed after the data were seen" in reason


def test_the_batch_claim_is_judged_on_the_phases_and_end_point_then_the_scaled_rate():
    """The rebuttal's words ("does not seem to affect our results"): the phases and the final KL at a fixed
    rate decide differ; the timing decides agree or partly only at a learning rate scaled with the batch."""
    fixed_timing_off = batch_summary(0.3, 0.3)  # transitions 30 % later: outside the band, final KL too
    assert batch_claim_verdict(fixed_timing_off, None)[0] == DIFFER
    fixed = batch_summary(0.05, -0.05)
    for run in fixed["conditions"]["batch-128"]["runs"]:
        run["transition"] += 15_000  # the timing moves at a fixed rate; the phases and final KL do not
    fixed = summary(**{name: c for name, c in fixed["conditions"].items()})
    assert batch_verdict(fixed)[0] == DIFFER  # the narrower claim of ours
    verdict, reason = batch_claim_verdict(fixed, None)
    assert verdict == PARTLY and "not decided at these settings" in reason
    assert batch_claim_verdict(fixed, batch_summary(0.05, -0.05)) == (AGREE, "")
    verdict, reason = batch_claim_verdict(fixed, batch_summary(0.05, 0.3))
    assert verdict == PARTLY and "scaled with the batch, outside ±20 %" in reason


def adam_condition(rich: int, plateaus: list[int]) -> dict:
    return {"n_seeds": len(plateaus), "n_lazy_then_rich": rich, "runs": [{"plateaus": [(0, 1)] * n} for n in plateaus]}


def test_the_adam_toy_is_judged_below_the_initialisation_scale():
    """Wang et al.'s rebuttal Fig. 5 at steps 0.003 and 0.001 (below σ = 0.01): lazy → rich in every seed with
    two plateaus or more at both rates agrees, at one is partly, at none differs; unmeasured is not yet."""
    holds, fails = adam_condition(5, [2, 3, 2, 2, 2]), adam_condition(5, [2, 1, 2, 2, 2])
    assert adam_verdict({"adam-lr3e-3": holds, "adam-lr1e-3": holds}) == (AGREE, "")
    verdict, reason = adam_verdict({"adam-lr3e-3": holds, "adam-lr1e-3": fails})
    assert verdict == PARTLY and reason.startswith("adam-lr3e-3: holds; adam-lr1e-3: does not hold")
    assert adam_verdict({"adam-lr3e-3": adam_condition(4, [2] * 5), "adam-lr1e-3": fails})[0] == DIFFER
    assert adam_verdict(None)[0] == NOT_YET
