"""The Python entry points refuse what the command line refuses (issue 40): steps that are no list of saved
steps, counts that are no counts, heads that are no pairs of integers, each a ValueError in one line before any
work; and a folder given as a str is a folder, as a Path is."""

import pytest

from induction_probes import Run, ablation_report, ablation_study, probe_eval_set, probe_report, probe_run

RUN = Run.open("markov-k2")
FIRST, LAST = RUN.steps[0], RUN.steps[-1]


@pytest.fixture(scope="module")
def eval_set():
    return probe_eval_set(RUN, n_seqs=20, seed=0)


@pytest.mark.parametrize(
    "steps, message",
    [
        ([], "at least one step"),
        ("10", "a list of saved steps"),
        ("every", "a list of saved steps"),  # probe_report's one word for every checkpoint is "all"
        (b"10", "a list of saved steps"),
        ({10: 1}, "a list of saved steps"),
        (10, "a list of saved steps"),
        ([LAST, LAST], "increasing order"),  # the rows twice over
        ([LAST, FIRST], "increasing order"),
        ([1.5], "must be an integer"),
        ([True], "must be an integer"),
        ([LAST + 1], "is not saved"),
    ],
)
def test_steps_that_are_not_a_list_of_saved_steps_are_refused(steps, message, eval_set):
    with pytest.raises(ValueError, match=message):
        probe_run(RUN, eval_set, steps=steps)
    with pytest.raises(ValueError, match=message):
        probe_report(RUN, steps, n_seqs=20)


def test_saved_steps_in_a_tuple_or_a_range_are_steps(eval_set):
    assert probe_run(RUN, eval_set, steps=(FIRST, LAST)).steps == [FIRST, LAST]
    assert probe_run(RUN, eval_set, steps=range(FIRST, FIRST + 1)).steps == [FIRST]


@pytest.mark.parametrize("seen", ["x", -5, 2.5, True])
def test_sequences_seen_that_is_not_a_count_is_refused(seen, eval_set):
    probes = probe_run(RUN, eval_set, steps=[LAST])
    for checkpoint in (probes, probes[0]):
        with pytest.raises(ValueError, match="sequences_seen must be an integer"):
            checkpoint.to_frame(sequences_seen=seen)
    assert set(probes[0].to_frame(sequences_seen=7).sequences_seen) == {7}


def test_a_plot_folder_given_as_a_str_is_a_folder(tmp_path):
    text = probe_report(RUN, [LAST], n_seqs=20, plot=str(tmp_path / "figures"))
    assert "figure: " in text and any((tmp_path / "figures").iterdir())
    with pytest.raises(ValueError, match="an empty path names no place"):
        probe_report(RUN, [LAST], n_seqs=20, plot="")
    with pytest.raises(ValueError, match="plot must be a folder"):
        probe_report(RUN, [LAST], n_seqs=20, plot=3)


@pytest.mark.parametrize("heads", [[(0.5, 0)], [(True, 0)], [(0, "1")], [(0,)]])
def test_heads_that_are_not_pairs_of_integers_are_refused_by_both_ablation_entry_points(heads, eval_set):
    with pytest.raises(ValueError, match="a head is a pair of integers"):
        ablation_report(RUN, [heads], n_seqs=20)
    with pytest.raises(ValueError, match="a head is a pair of integers"):
        ablation_study(RUN.load(), eval_set, [heads], "zero", eval_set.sample.inputs)


@pytest.mark.parametrize("name", ["", None, 3])
def test_a_run_named_by_nothing_is_no_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "" was the current folder
    with pytest.raises(ValueError, match="an empty path names no place|a run is a folder"):
        Run.open(name)


@pytest.mark.parametrize("probe_seqs", [0, -3, "500", 2.5])
def test_a_summary_on_no_probe_sequences_is_refused_by_the_parameters_name(probe_seqs, tmp_path):
    from induction_probes.probes.sweeps.summary import summarize_sweep

    with pytest.raises(ValueError, match="probe_seqs must be an integer"):
        summarize_sweep(tmp_path, probe_seqs=probe_seqs)
