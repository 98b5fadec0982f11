"""A run's questions answered in one call each, on the shipped runs, against hand computations from
their metrics.jsonl and their probes."""

import pytest

from induction_probes.circuits.runs.reader import Run
from induction_probes.probes.run_level.all_probes import probe_eval_set, probe_run
from induction_probes.probes.run_level.research_questions import align_runs, first_crossings, phases, transition

STEPS = [0, 2, 29, 94, 283, 606, 768, 1010, 4000]  # saved steps of markov-k3 around its pieces forming


@pytest.fixture(scope="module")
def run():
    return Run.open("markov-k3")


@pytest.fixture(scope="module")
def probes(run):
    return probe_run(run, probe_eval_set(run, 100, 12345), steps=STEPS)


def closest_by_hand(entry: dict) -> str:
    kl = {name: value for name, value in entry["last_token_kl"].items() if name != "true"}
    return min(kl, key=kl.get)


def test_the_transition_is_the_first_step_of_the_last_phase(run):
    closest = [(m["step"], m["sequences_seen"], closest_by_hand(m)) for m in run.metrics()]
    changes = [i for i in range(1, len(closest)) if closest[i][2] != closest[i - 1][2]]
    step, seen, after = closest[changes[-1]]
    found = transition(run)
    before = closest[changes[-1] - 1][2]
    assert (found.step, found.sequences_seen, found.after, found.before) == (step, seen, after, before)
    assert (found.step, found.before, found.after) == (606, "unigram", "bigram")  # the docs' figure
    assert [p.strategy for p in phases(run)] == ["uniform", "unigram", "bigram"]
    assert phases(run)[-1].first_step == found.step


def test_first_crossings_are_the_probed_steps_from_which_the_value_stays_at_threshold(run, probes):
    table = first_crossings(probes).set_index(["measure", "layer", "head"])
    threshold = (probes.chance["previous_token"] + 1) / 2  # halfway from uniform attention to 1
    values = [c.previous_token[0][0].item() for c in probes]
    above = [value >= threshold for value in values]
    by_hand = next(step for i, step in enumerate(STEPS) if all(above[i:]))
    row = table.loc[("previous_token", 0, 0)]
    assert row["step"] == by_hand and row["threshold"] == pytest.approx(threshold)
    assert row["sequences_seen"] == run.entry(by_hand)["sequences_seen"]
    assert row["first_reached"] == next(step for step, up in zip(STEPS, above) if up) <= by_hand
    measure = table.loc[("k_composition_match", 1, 0)]
    values = [c.progress.k_composition_match[0] for c in probes]
    above = [v >= measure["threshold"] for v in values]
    assert measure["step"] == next(s for i, s in enumerate(STEPS) if all(above[i:]))
    assert "takes only 4 values" in table.loc[("ov_copying_accuracy", 1, 0), "caveat"]


def test_runs_align_by_transition_and_by_phase(run, probes):
    other = Run.open("markov-k2")
    aligned = align_runs({"k3": run, "k2": other})
    k2 = aligned[(aligned.run == "k2") & (aligned.measure == "eval_loss")]
    assert (k2.steps_from_transition == k2.step - transition(other).step).all()
    assert len(k2) == len(other.metrics())
    by_phase = align_runs({"k3": probes}, by="phase")
    at_283 = by_phase[by_phase.step == 283].iloc[0]
    unigram = phases(run)[1]  # steps 29..566
    assert at_283["phase"] == "unigram"
    by_hand = (283 - unigram.first_step) / (unigram.last_step - unigram.first_step)
    assert at_283["phase_fraction"] == pytest.approx(by_hand)
    with pytest.raises(ValueError, match="align by transition or phase"):
        align_runs({"k3": run}, by="step")


def test_first_crossings_names_each_composition_as_the_tidy_table_does():
    from induction_probes import Run, probe_run
    from induction_probes.probes.run_level.research_questions import first_crossings

    run = Run.open("markov-k3")
    probes = probe_run(run, steps=run.steps[::20])
    crossings = first_crossings(probes)
    tidy = set(probes.to_frame().measure)
    composition = crossings[crossings.measure.str.startswith("composition_")]
    assert set(composition.measure) == {"composition_K_from_L0H0"} <= tidy  # one name in both tables
    assert (composition.layer == 1).all() and (composition["head"] == 0).all()
    assert set(crossings.measure) <= tidy  # every crossing's measure is a row of to_frame()
