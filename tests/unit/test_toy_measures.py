"""The toy sweep's per-seed measures on curves whose answer is known by hand: the half-way step, the plateau
count and the positions-first sign test."""

import pytest

from induction_probes.circuits.models.toy_model import count_plateaus, reach_step
from induction_probes.circuits.sweeps.sweep_spec import parse_spec
from induction_probes.probes.sweeps.toy_summary import positions_first_test


def curve(values: list[float], every: int = 20) -> list[dict]:
    return [{"step": k * every, "loss": v} for k, v in enumerate(values)]


def test_reach_step_is_the_first_record_past_the_fraction_of_the_total_change():
    history = curve([0.0] * 4)
    # 1 → 5: total change 4, half of it (2) first reached at the value 3.0 (index 2, step 40)
    assert reach_step(history, [1.0, 2.0, 3.0, 5.0]) == 40
    assert reach_step(history, [1.0, 2.0, 3.0, 5.0], 0.25) == 20
    assert reach_step(history, [5.0, 4.5, 1.0, 1.0]) == 40  # a fall counts as a change too


def test_two_plateaus_each_escaped_by_a_tenfold_drop_and_a_flat_tail_that_is_no_plateau():
    # flat at 1.0 over steps 0–200, a drop to 0.1 by 260, flat to 500, a drop to 0.01 by 560, flat to 800
    values = [1.0] * 11 + [0.46, 0.22, 0.1] + [0.1] * 12 + [0.046, 0.022, 0.01] + [0.01] * 13
    assert count_plateaus(curve(values)) == [(0, 200), (260, 500)]


def test_a_slow_fall_is_no_plateau_and_a_short_flat_stretch_is_a_bend():
    slow = [0.9**k for k in range(40)]  # −0.046 decades per record = −0.23 per 100 steps: never flat
    assert count_plateaus(curve(slow)) == []
    bend = [1.0, 1.0, 1.0, 1.0, 0.1, 0.01, 0.001]  # flat for 60 steps (< 100), then steep
    assert count_plateaus(curve(bend)) == []


def test_the_sign_test_of_five_seeds_all_first_is_one_in_32():
    records = [{"learned": {"p1": 60, "p2": 80, "w_KQ": 1000 + 10 * k}, "positions_first": True} for k in range(5)]
    result = positions_first_test(records)
    assert result["n_first"] == 5 and result["sign_p_value"] == pytest.approx(1 / 32, rel=1e-12)
    # step(w_KQ) − max(p1, p2): 920, 930, ..., 960 → mean 940
    assert result["w_KQ_minus_positions"]["difference"]["mean"] == pytest.approx(940.0)
    records[0]["positions_first"] = False
    assert positions_first_test(records)["sign_p_value"] == pytest.approx(6 / 32, rel=1e-12)  # P(X ≥ 4)


def test_a_toy_spec_sets_the_model_and_data_seeds_it_has():
    spec = parse_spec('recipe = "toy"\nseeds = [3]\n[base]\nd = 2\n[conditions.a]\n[conditions.b]\nboolean = true\n')
    cells = spec.cells()
    assert [c.condition for c in cells] == ["a", "b"]
    assert (cells[0].recipe.model_seed, cells[0].recipe.data_seed, cells[1].recipe.d) == (3, 4, 2)


def test_a_run_goes_lazy_then_rich_when_its_4gram_part_halves_first():
    from induction_probes.probes.sweeps.toy_summary import halving_step

    history = [
        {"step": 0, "loss_4gram": 2.0, "loss_induction": 0.05},
        {"step": 20, "loss_4gram": 0.9, "loss_induction": 0.04},  # 4-gram at 0.45 of its start: halved
        {"step": 40, "loss_4gram": 0.1, "loss_induction": 0.025},  # induction at exactly half
    ]
    assert halving_step(history, "loss_4gram") == 20 and halving_step(history, "loss_induction") == 40
    assert halving_step(history[:2], "loss_induction") is None


@pytest.mark.parametrize("name, expected", [("gd", [(340, 1240)]), ("boolean", [(420, 1180)]), ("adam", [])])
def test_the_rule_finds_the_one_plateau_of_the_shipped_gradient_descent_runs_and_none_under_adam(name, expected):
    from induction_probes.circuits.runs.reader import Run
    from induction_probes.probes.paper.shipped_files import result_path

    # docs/results.md quotes these; the records are logged every 20 steps, so the stretches are exact
    assert count_plateaus(Run.open(result_path("toy", name)).metrics()) == expected
