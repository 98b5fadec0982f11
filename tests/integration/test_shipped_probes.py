"""The circuit the shipped markov-k3 run forms, as the probes see it (issue acceptance figures)."""

import pytest
import torch

from induction_probes.circuits.runs.reader import Run
from induction_probes.probes.ablation.ablation_study import ablation_study
from induction_probes.probes.attention.patterns import bigram_matching_score, previous_token_score
from induction_probes.probes.run_level.all_probes import probe_eval_set
from induction_probes.probes.run_level.checkpoint_probes import probe_model


@pytest.fixture(scope="module")
def run():
    return Run.open("markov-k3")


@pytest.fixture(scope="module")
def probe_set(run):
    return probe_eval_set(run, 1000, 12345)


def test_final_step_has_a_previous_token_head_and_a_bigram_matching_head(run, probe_set):
    final = probe_model(run.load(), probe_set)
    assert final.previous_token[0][0] >= 0.6
    assert final.bigram_matching[1][0] >= 0.75
    assert final.positional_profile[0].argmax().item() == 1


def test_at_initialisation_the_scores_are_near_chance(run, probe_set):
    start = probe_model(run.load(step=0), probe_set)
    tokens = probe_set.sample.inputs
    n_pos = tokens.shape[1]
    uniform = torch.ones(n_pos, n_pos).tril()
    uniform = (uniform / uniform.sum(-1, keepdim=True)).expand(len(tokens), 1, n_pos, n_pos)
    chance_previous = previous_token_score(uniform).item()  # mean of 1/(t+1)
    chance_matching = bigram_matching_score(uniform, tokens)[0].item()  # share of keys that match
    assert abs(start.previous_token[0][0] - chance_previous) < 0.02
    assert abs(start.bigram_matching[1][0] - chance_matching) < 0.02


def test_zero_ablating_layer_0_falls_back_to_the_unigram_strategy(run, probe_set):
    model = run.load()
    reference = probe_eval_set(run, 1000, 12346).sample.inputs
    baseline, (ablated,) = ablation_study(model, probe_set, [[(0, 0)]], "zero", reference)
    kl = ablated.behaviour.last_token_kl
    assert kl["unigram"] < kl["bigram"]
    gap = probe_set.strategy_kl()["unigram"].mean() - probe_set.strategy_kl()["bigram"].mean()
    assert kl["true"] - baseline.last_token_kl["true"] >= gap / 2


def test_markov_k3_has_the_signatures_of_proposition_2_1(run, probe_set):
    from induction_probes.probes.comparison.trained_vs_prop21 import compare_with_prop21

    result = compare_with_prop21(run.load(), probe_set.sample.inputs[:300], 3)
    assert int(result.positional_profile.argmax()) == 1
    assert result.diagonal_is_row_max == 1.0
    assert result.ov_top1_diagonal == 1.0 and (result.ov_eigenvalues.real > 0).all()
    assert result.matches and result.failures == []


def test_on_the_plateau_the_argmax_signatures_hold_but_the_thresholds_do_not(run, probe_set):
    """At step 364 every argmax signature already holds, layer 0's on a nearly flat profile; the progress
    thresholds say which pieces are still short of halfway from chance to the construction."""
    from induction_probes.probes.comparison.trained_vs_prop21 import compare_with_prop21

    result = compare_with_prop21(run.load(step=364), probe_set.sample.inputs[:300], 3)
    assert int(result.positional_profile.argmax()) == 1 and result.positional_profile[1] < 0.011
    assert result.diagonal_is_row_max == 1.0 and result.ov_top1_diagonal == 1.0
    assert set(result.below_threshold) == {"previous_token_match", "k_composition_match"}
    assert len(result.failures) == 2


def test_a_summary_record_holds_layer_0s_profile_on_the_plateau_at_the_transition_and_at_the_end(run):
    from induction_probes.circuits.defaults import PROBE_SEED
    from induction_probes.probes.attention.patterns import positional_profiles
    from induction_probes.probes.behaviour.icl_behaviour import strategy_phases
    from induction_probes.probes.sweeps.summary import PROFILE_DISTANCES, summarize_run

    record = summarize_run(run, None, 40)
    steps = record["positional_layer0"]["steps"]
    unigram, bigram = strategy_phases(run.metrics())[1:]  # markov-k3: uniform → unigram → bigram
    assert unigram.strategy == "unigram" and unigram.first_step < steps["plateau"] <= unigram.last_step
    assert steps["transition"] == record["transition_step"] == bigram.first_step and steps["end"] == run.steps[-1]
    tokens = run.task.eval_set(40, PROBE_SEED).inputs  # the summary's probe set
    for point, step in steps.items():  # its own forward pass: the record is the model's profile, not a copy of one
        expected = positional_profiles(run.load(step=step), tokens, 0)[0, :PROFILE_DISTANCES]
        assert record["positional_layer0"]["profiles"][point] == pytest.approx(expected.tolist(), abs=1e-7)
