"""Intervals over evaluation sequences, and the windowed ICL score, against hand computations."""

import math

import pytest
import torch

from induction_probes.circuits.metrics import token_cross_entropy
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.probes.behaviour.icl_behaviour import behaviour, icl_score, icl_scores, single_position_icl_score
from induction_probes.probes.intervals import mean_interval


def test_the_interval_is_mean_plus_minus_t_s_over_root_n():
    estimate = mean_interval(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    # by hand: mean 2.5, s = sqrt(5/3) = 1.2910, t(0.975, 3) = 3.18245 (printed t tables), s/√4 = 0.6455
    assert estimate.value == pytest.approx(2.5, abs=1e-12) and estimate.n == 4
    assert estimate.half_width == pytest.approx(3.18245 * math.sqrt(5 / 3) / 2, rel=1e-5)  # the table's 6 digits
    assert mean_interval(torch.tensor([7.0])).low is None  # one sequence has no interval
    with pytest.raises(ValueError, match="level"):
        mean_interval(torch.ones(3), level=1.0)


def test_95_percent_intervals_cover_the_true_mean_about_95_percent_of_the_time():
    draws = torch.randn(4000, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64) + 3.0
    covered = sum(e.low <= 3.0 <= e.high for e in map(mean_interval, draws)) / 4000
    assert abs(covered - 0.95) < 0.015  # 4.4 binomial standard errors of 4000 trials (0.0034 each)


def test_windowed_and_single_position_icl_scores_by_hand():
    loss = torch.arange(20, dtype=torch.float64) ** 2  # positions 0..19
    # window 3 ending at 5 (positions 3, 4, 5) and ending at 19 (17, 18, 19)
    assert icl_score(loss, early=5, late=-1, window=3) == pytest.approx((17**2 + 18**2 + 19**2 - 9 - 16 - 25) / 3)
    assert single_position_icl_score(loss, early=5, late=12) == 144 - 25
    rows = torch.stack([loss, 2 * loss])
    scale = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert torch.allclose(icl_scores(rows, 5, -1, 3), scale * icl_score(loss, 5, -1, 3))
    with pytest.raises(ValueError, match="starts before 0"):
        icl_score(loss, early=5, window=7)
    with pytest.raises(ValueError, match="positive integer"):
        icl_score(loss, window=0)


def test_every_behavioural_score_carries_its_interval_over_sequences():
    eval_set = MarkovTask(k=3, seq_len=30).eval_set(200, seed=5)
    logits = eval_set.strategies["unigram"].log()
    result = behaviour(logits, eval_set)
    per_sequence_loss = token_cross_entropy(torch.log_softmax(logits.double(), -1), eval_set.sample.targets)  # by hand
    for name, values in {
        "loss": per_sequence_loss.mean(-1),
        "icl_score": per_sequence_loss[:, 20:].mean(-1) - per_sequence_loss[:, 1:11].mean(-1),
        "icl_score_single_position": per_sequence_loss[:, -1] - per_sequence_loss[:, 10],
    }.items():
        expected = mean_interval(values)
        assert result.intervals[name].value == pytest.approx(expected.value, rel=1e-12)
        assert result.intervals[name].low == pytest.approx(expected.low, rel=1e-12)
    assert set(result.intervals) >= {f"last_token_kl.{s}" for s in ("true", "uniform", "unigram", "bigram")}
    kl = result.intervals["last_token_kl.true"]
    assert kl.value == pytest.approx(result.last_token_kl["true"]) and kl.low < kl.value < kl.high


def test_the_bootstrap_interval_is_the_quantiles_of_resampled_means_computed_one_by_one():
    from induction_probes.probes.intervals import bootstrap_mean_interval, resampling_weights

    values = torch.rand(30, 2, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    mean, low, high = bootstrap_mean_interval(values)
    weights = resampling_weights(30)
    assert torch.allclose(weights.sum(1), torch.ones(2000, dtype=torch.float64))  # each resample: 30 draws of 1/30
    by_hand = torch.stack([(w[:, None, None] * values).sum(0) for w in weights])  # each resample's mean, one by one
    expected = torch.quantile(by_hand, torch.tensor([0.025, 0.975], dtype=torch.float64), dim=0)
    assert torch.allclose(low, expected[0], atol=1e-12) and torch.allclose(high, expected[1], atol=1e-12)
    assert torch.allclose(mean, values.mean(0)) and (low <= mean).all() and (mean <= high).all()
    assert (low >= values.min(0).values).all() and (high <= values.max(0).values).all()  # inside the values' range
    assert bootstrap_mean_interval(torch.ones(1, 2))[1].isnan().all()  # one sequence: no interval


def test_bootstrap_intervals_of_a_bounded_score_cover_its_mean_near_95_percent_and_stay_in_bounds():
    from induction_probes.probes.intervals import bootstrap_mean_interval

    # 1000 experiments of 60 Bernoulli(0.2) sequences, one column each: the percentile bootstrap of a mean is
    # slightly anti-conservative at this n (its known coverage is 93-95 %); 0.03 is 4.5 binomial errors of 1000
    draws = (torch.rand(60, 1000, generator=torch.Generator().manual_seed(2)) < 0.2).double()
    _, low, high = bootstrap_mean_interval(draws)
    covered = ((low <= 0.2) & (0.2 <= high)).double().mean().item()
    assert abs(covered - 0.95) < 0.03 and (low >= 0).all() and (high <= 1).all()


def test_the_ratio_interval_resamples_numerator_and_denominator_together():
    from induction_probes.probes.intervals import bootstrap_ratio_interval, resampling_weights

    generator = torch.Generator().manual_seed(3)
    den = 1 + torch.rand(40, generator=generator, dtype=torch.float64)
    num = 0.5 * den + 0.05 * torch.randn(40, generator=generator, dtype=torch.float64)  # a share near 0.5
    estimate = bootstrap_ratio_interval(num, den)
    assert estimate.value == pytest.approx((num.mean() / den.mean()).item(), rel=1e-12)
    weights = resampling_weights(40)
    ratios = torch.tensor([(w @ num) / (w @ den) for w in weights], dtype=torch.float64)  # one resample at a time
    assert estimate.low == pytest.approx(torch.quantile(ratios, 0.025).item(), abs=1e-12)
    assert estimate.low < 0.5 < estimate.high < estimate.low + 0.1  # paired resampling keeps it tight
    assert bootstrap_ratio_interval(num, -den).low is None  # a share of a negative gap has no interval


def test_the_vectorised_ratio_intervals_are_the_one_column_intervals_side_by_side():
    from induction_probes.probes.intervals import bootstrap_ratio_interval, bootstrap_ratio_intervals

    generator = torch.Generator().manual_seed(4)
    den = torch.randint(0, 5, (50,), generator=generator).double()  # queries with a match; some sequences none
    share = torch.rand(50, 2, 3, generator=generator, dtype=torch.float64)
    num = share * den[:, None, None]  # attention summed over those queries: each ratio a share in [0, 1]
    value, low, high = bootstrap_ratio_intervals(num, den)
    for i in range(2):
        for j in range(3):
            one = bootstrap_ratio_interval(num[:, i, j], den)
            assert value[i, j].item() == pytest.approx(one.value, rel=1e-12)
            assert (low[i, j].item(), high[i, j].item()) == pytest.approx((one.low, one.high), abs=1e-12)
    assert (low >= 0).all() and (high <= 1).all() and (low <= value).all() and (value <= high).all()
    assert bootstrap_ratio_intervals(num[:1], den[:1])[1].isnan().all()  # one sequence: no interval
    assert bootstrap_ratio_intervals(num, torch.zeros(50))[2].isnan().all()  # a share of nothing: none
