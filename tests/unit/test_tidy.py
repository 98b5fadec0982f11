"""Results in long form, the default ablation reference set, and the caveats of coarse or pre-crossed
measures, each against the result objects' own numbers or a hand computation."""

import pandas as pd
import pytest
import torch

from induction_probes.circuits.models.model_classes import build_model
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.probes.ablation.ablation_study import ablation_study
from induction_probes.probes.ablation.head_ablation import REFERENCE_SEED, reference_inputs_for, run_ablated
from induction_probes.probes.progress.crossing_caveats import coarse_warnings, initial_warnings, progress_warnings
from induction_probes.probes.progress.progress_measures import config_calibration, progress_measures
from induction_probes.probes.run_level.checkpoint_probes import probe_model
from induction_probes.probes.tidy import ABLATION_COLUMNS, COLUMNS, ablation_frame


@pytest.fixture(scope="module")
def setup():
    recipe = MarkovRecipe(task=MarkovTask(k=3, seq_len=20), heads=(2, 1))
    model = build_model(recipe.model_config()).eval()
    return recipe.task, model, recipe.task.eval_set(40, seed=1)


def test_a_checkpoint_in_long_form_holds_every_head_and_score_once(setup):
    task, model, eval_set = setup
    result = probe_model(model, eval_set, step=7)
    table = result.to_frame(sequences_seen=448)
    assert list(table.columns) == COLUMNS and (table.step == 7).all() and (table.sequences_seen == 448).all()
    by_key = table.set_index(["measure", "layer", "head"])
    assert by_key.index.is_unique
    for layer, heads in enumerate(result.previous_token):  # heads (2, 1): three rows per attention probe
        for head, value in enumerate(heads):
            assert by_key.loc[("previous_token", layer, head), "value"] == pytest.approx(value.item(), rel=1e-12)
    loss = table[table.measure == "loss"].iloc[0]
    estimate = result.behaviour.intervals["loss"]
    assert pd.isna(loss["layer"])
    assert (loss["value"], loss["low"], loss["high"]) == pytest.approx((estimate.value, estimate.low, estimate.high))
    composition = table[table.measure.str.startswith("composition_")]
    assert len(composition) == 3 * 2 * 1  # three modes, two layer-0 heads, one layer-1 head
    composition_k = result.progress.composition["K"][1][0]  # layer-0 head 1 against layer-1 head 0
    assert by_key.loc[("composition_K_from_L0H1", 1, 0), "value"] == pytest.approx(composition_k)
    assert by_key.loc[("ov_copying_accuracy", 1, 0), "value"] == result.progress.ov_copying_accuracy[0]
    records = result.to_records(448)  # the JSON form: the same rows, the same columns
    assert all(list(r) == COLUMNS for r in records)
    assert pd.DataFrame.from_records(records)["value"].tolist() == table["value"].tolist()


def test_an_ablation_study_in_long_form(setup):
    task, model, eval_set = setup
    baseline, results = ablation_study(model, eval_set, [[(1, 0)], [(0, 0), (0, 1)]], "zero")
    table = ablation_frame(baseline, results, step=3)
    assert list(table.columns) == ABLATION_COLUMNS
    assert sorted(table.ablated.unique()) == ["", "L0H0,L0H1", "L1H0"]
    single = table[(table.ablated == "L1H0") & (table.measure == "icl_score")].iloc[0]
    assert (single["layer"], single["head"], single["value"]) == (1, 0, pytest.approx(results[0].behaviour.icl_score))
    assert table[table.ablated == "L0H0,L0H1"].layer.isna().all()  # two heads: no single head to name


def test_an_ablations_effect_is_the_paired_difference_on_the_same_sequences(setup):
    from induction_probes.circuits.metrics import token_cross_entropy
    from induction_probes.probes.intervals import mean_interval

    task, model, eval_set = setup
    heads = [(1, 0)]
    baseline, results = ablation_study(model, eval_set, [heads], "zero")
    table = ablation_frame(baseline, results)
    inputs, targets = eval_set.sample.inputs, eval_set.sample.targets
    with torch.no_grad():  # by hand: each sequence's mean loss, clean and ablated, then their difference
        clean = token_cross_entropy(torch.log_softmax(model(inputs).double(), -1), targets).mean(-1)
        logits = run_ablated(model, inputs, heads, "zero")
        ablated = token_cross_entropy(torch.log_softmax(logits.double(), -1), targets).mean(-1)
    expected = mean_interval(ablated - clean)
    row = table[(table.ablated == "L1H0") & (table.measure == "loss")].iloc[0]
    assert row.effect == pytest.approx(expected.value, abs=1e-6)  # float32 logits in both
    assert (row.effect_low, row.effect_high) == pytest.approx((expected.low, expected.high), abs=1e-6)
    # paired: narrower than the two conditions' own intervals side by side would suggest
    own = row.high - row.low
    assert row.effect_high - row.effect_low < own
    assert table[table["mode"] == "none"].effect.isna().all()


def test_mean_ablation_draws_its_default_reference_set_from_the_task(setup):
    task, model, eval_set = setup
    inputs = eval_set.inputs[:5]
    default = run_ablated(model, inputs, [(1, 0)], "mean", task=task)
    by_hand = run_ablated(model, inputs, [(1, 0)], "mean", task.eval_set(1000, REFERENCE_SEED).inputs)
    assert torch.equal(default, by_hand)
    other = run_ablated(model, inputs, [(1, 0)], "mean", reference_inputs_for(task, seed=REFERENCE_SEED + 1))
    assert not torch.equal(default, other)  # the seed chooses the set
    with pytest.raises(ValueError, match="pass reference_inputs, or task=run.task"):
        run_ablated(model, inputs, [(1, 0)], "resample")
    _, results = ablation_study(model, eval_set, [[(1, 0)]], "mean", task=task)
    _, explicit = ablation_study(model, eval_set, [[(1, 0)]], "mean", task.eval_set(1000, REFERENCE_SEED).inputs)
    assert results[0].behaviour.loss == explicit[0].behaviour.loss


def test_coarse_measures_are_flagged_with_their_step():
    (line,) = coarse_warnings(4, ("ov_copying_accuracy",))
    assert "takes only 5 values (multiples of 1/4)" in line and "moves it by 0.25" in line
    assert coarse_warnings(10, ("x",)) and not coarse_warnings(11, ("x",))  # 11 values flagged, 12 not


def test_a_measure_at_its_threshold_at_initialisation_is_flagged():
    recipe = MarkovRecipe(task=MarkovTask(k=2, seq_len=20))
    model = build_model(recipe.model_config()).eval()
    initial = progress_measures(model)
    calibration = config_calibration(model.cfg)
    # by hand: exactly the calibrated measures whose value at initialisation reaches the threshold
    expected = {name for name, m in calibration.items() if initial.value(name) >= m.threshold}
    flagged = {line.split(" ")[0] for line in initial_warnings(model.cfg, initial)}
    assert flagged == expected and "ov_copying_score" in flagged  # k = 2: one eigenvalue, a sign, 1 here
    assert initial.value("ov_copying_score") in (-1.0, 1.0)
    lines = progress_warnings(model, model)
    assert any(line.startswith("ov_copying_score takes only the values -1 and 1") for line in lines)


def test_every_attention_score_carries_its_interval_over_the_probe_sequences(setup):
    from induction_probes.circuits.models.attention_masks import matching_keys
    from induction_probes.probes.attention.patterns import run_with_patterns
    from induction_probes.probes.intervals import bootstrap_mean_interval, bootstrap_ratio_intervals

    _, model, eval_set = setup
    result = probe_model(model, eval_set, step=7, chunk=15)  # three chunks: their parts are joined
    table = result.to_frame().set_index(["measure", "layer", "head"])
    tokens = eval_set.sample.inputs
    _, patterns = run_with_patterns(model, tokens)
    # by hand, one sequence at a time: its previous-token score, and its matching queries' attention sum
    previous = torch.stack([torch.diagonal(patterns[0][s], -1, -2, -1).mean(-1) for s in range(len(tokens))])
    match = matching_keys(tokens)
    has = match.any(-1)
    mass = torch.stack([(patterns[0][s] * match[s]).sum(-1)[:, has[s]].sum(-1) for s in range(len(tokens))])
    expected = {
        "previous_token": bootstrap_mean_interval(previous)[1:],
        "bigram_matching": bootstrap_ratio_intervals(mass, has.sum(-1).double())[1:],
    }
    for name, (low, high) in expected.items():
        for head in range(2):
            entry = table.loc[(name, 0, head)]
            assert entry.low == pytest.approx(low[head].item(), abs=1e-6)  # float32 patterns, summed in two orders
            assert entry.high == pytest.approx(high[head].item(), abs=1e-6)


def test_every_row_of_a_shipped_run_probe_has_finite_bounds_around_its_value():
    from induction_probes import Run, probe_run

    run = Run.open("markov-k3")
    table = probe_run(run, steps=[0, 606, run.steps[-1]]).to_frame()
    assert table[["low", "high"]].notna().all().all()
    assert ((table.low <= table.value + 1e-12) & (table.value <= table.high + 1e-12)).all()
    weights = table[table.measure.str.startswith(("composition_", "ov_", "k_composition", "previous_token_match"))]
    assert len(weights) and (weights.low == weights.value).all()  # read from the weights: exact
    scores = table[table.measure.isin(["previous_token", "bigram_matching"])]
    assert (scores.high > scores.low).all() and (scores.low >= 0).all() and (scores.high <= 1).all()


def test_a_crossing_is_where_the_value_stays_and_an_excursion_is_reported_apart():
    from induction_probes.probes.tidy import crossing_step, first_reached

    steps = [0, 10, 20, 30, 40, 50]
    bump = [0.1, 0.6, 0.2, 0.3, 0.7, 0.8]  # a transient bump at step 10, then the crossing at 40
    assert crossing_step(steps, bump, 0.5) == 40 and first_reached(steps, bump, 0.5) == 10
    assert crossing_step(steps, [0.1, 0.6, 0.7, 0.8, 0.9, 0.4], 0.5) is None  # fell back at the end: no crossing
    assert first_reached(steps, [0.1] * 6, 0.5) is None and crossing_step(steps, [0.5] * 6, 0.5) == 0


def test_a_plateau_just_below_the_threshold_does_not_cross_it_early():
    """Issue 64's simulation: 40 checkpoints 0.01 below the threshold with noise of sd 0.01, then a rise well
    above it. The first value at or above it comes early in most series; where the value stays comes within
    three checkpoints of the rise unless the last three plateau values are all above it (0.4 %)."""
    import numpy as np

    from induction_probes.probes.tidy import crossing_step, first_reached

    rng = np.random.default_rng(0)
    steps, threshold, early_first, late_enough = list(range(60)), 0.5, 0, 0
    for _ in range(200):
        values = [threshold - 0.01 + 0.01 * rng.standard_normal() for _ in range(40)]
        values += [threshold + 0.1 + 0.01 * rng.standard_normal() for _ in range(20)]
        early_first += first_reached(steps, values, threshold) < 37
        late_enough += crossing_step(steps, values, threshold) >= 37
    assert early_first >= 150  # about 199 of 200: 40 draws each above with probability 0.16
    assert late_enough >= 195  # all three of steps 37-39 above: 0.16^3, about 1 in 250
