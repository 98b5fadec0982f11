"""The timing measures of task sweeps (half-way steps, the plateau at the bigram level, the tests of what comes
first) on curves small enough to read by eye."""

from __future__ import annotations

import pytest

from induction_probes.probes.sweeps.condition_tests import paired_comparison
from induction_probes.probes.sweeps.task_timing import NEAR, order_tests, plateau, settled_halfway

STEPS = [0, 10, 20, 30, 40, 50]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([0, 1, 2, 3, 4, 5], 30),  # rising: 3 >= 5/2 first at step 30
        ([5, 4, 3, 2, 1, 0], 30),  # falling the same way
        ([0, 0.3, -0.2, -0.1, -0.5, -0.4], 40),  # swings up first: the swing is not half-way down
        ([0, -0.3, -0.1, -0.3, -0.35, -0.4], 30),  # past half-way at 10, back above at 20: settled from 30
        ([1, 1, 1, 1, 1, 1], None),  # no change: no half-way step to time
        ([0, 1, 0.5, 0.2, 0.1, 0.05], None),  # out and back: a net change of 5 % of its range times noise
    ],
)
def test_the_half_way_step_is_where_the_curve_settles_past_half_its_change(values, expected):
    assert settled_halfway(STEPS, values) == expected


def test_the_plateau_runs_from_arriving_at_the_level_to_settling_below_it():
    level = 2.5
    losses = [5.0, 2.6, level + NEAR, 2.5, level - NEAR - 0.01, 2.3]
    assert plateau(STEPS, losses, level) == {"arrival": 20, "escape": 40, "length": 20}
    assert plateau(STEPS, [5.0, 4.0, 3.0, 2.6, 2.52, 2.5], level) == {"arrival": 40, "escape": None, "length": None}
    only_last = [5.0, 4.0, 3.0, 2.6, 2.52, 2.0]  # below the level at the last checkpoint alone: not settled
    assert plateau(STEPS, only_last, level)["escape"] is None


def test_the_order_tests_pair_each_seeds_steps():
    records = [
        {"reached": {"moved.W_pos": p, "moved.W_Q_layer0": q, "moved.W_K_layer1": k}, "plateau": {"escape": e}}
        for p, q, k, e in [(10, 30, 20, 25), (15, 12, 40, 50), (5, 20, 30, 30)]
    ]
    tests = order_tests(records)
    first = tests["attention_minus_positions"]
    assert first["n_positions_first"] == 2  # the second seed moves W_Q first
    assert first["difference"] == paired_comparison([10, 15, 5], [20, 12, 20], False)["difference"]
    escape = tests["escape_minus_last_keys"]
    assert escape["keys"] == "moved.W_K_layer1" and escape["n_escaped"] == 3
    assert escape["difference"]["mean"] == pytest.approx((5 + 10 + 0) / 3)


def test_a_seed_without_a_step_is_left_out_of_that_test_only():
    records = [
        {"reached": {"moved.W_pos": p, "moved.W_K_layer1": k}, "plateau": {"escape": e}}
        for p, k, e in [(10, 20, 25), (None, 40, 50), (5, 30, None), (8, 12, 30)]
    ]
    tests = order_tests(records)
    assert tests["attention_minus_positions"]["n"] == 3  # the seed whose positions never moved is left out
    assert tests["attention_minus_positions"]["difference"]["mean"] == pytest.approx((10 + 25 + 4) / 3)
    assert tests["escape_minus_last_keys"]["n_escaped"] == 3  # and the one that never escaped, here only
