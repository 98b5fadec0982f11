"""The prior schedule of ICL-MC (``curriculum = "PRIOR:N"``): which prior each training sequence comes from,
that the schedule's streams are the plain streams of the same seed, cut at the switch, and resume exactly."""

import pytest
import torch

from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask

K, T, SEED, SWITCH, BATCH = 3, 12, 4, 70, 32


def is_doubly_stochastic(transitions: torch.Tensor) -> list[bool]:
    """Per sequence: do the columns of its table sum to 1? Doubly stochastic tables do to rounding; a Dir(1) or
    unigram table's columns sum to 1 with probability 0 (1e-9 is far above float64 rounding of a k = 3 sum)."""
    return ((transitions.sum(-2) - 1.0).abs() < 1e-9).all(-1).tolist()


def test_a_batch_straddling_the_switch_takes_its_first_rows_from_the_curriculum_prior():
    task = MarkovTask(K, seq_len=T, curriculum=f"doubly-stochastic:{SWITCH}")
    stream = task.stream(SEED)
    batches = [stream.take(BATCH) for _ in range(3)]  # 0-31, 32-63, 64-95: the third straddles index 70
    states = torch.cat([b.states for b in batches])
    # by hand: indices 0..69 are the doubly stochastic stream's 0..69, indices 70..95 the Dir(1) stream's 0..25
    expected_priors = [True] * SWITCH + [False] * (3 * BATCH - SWITCH)
    assert is_doubly_stochastic(torch.cat([b.transitions for b in batches])) == expected_priors
    assert is_doubly_stochastic(batches[2].transitions) == [True] * 6 + [False] * 26
    pure_ds = MarkovTask(K, seq_len=T, prior="doubly-stochastic").stream(SEED).take(SWITCH).states
    pure_task = MarkovTask(K, seq_len=T).stream(SEED).take(3 * BATCH - SWITCH).states
    assert torch.equal(states, torch.cat([pure_ds, pure_task]))
    # after the switch the sequences are a function of the seed: another seed, other sequences
    other = MarkovTask(K, seq_len=T, curriculum=f"doubly-stochastic:{SWITCH}").stream(SEED + 1).take(96).states
    assert not torch.equal(other[SWITCH:], states[SWITCH:])


@pytest.mark.parametrize("prior,stop", [("dirichlet", 2), ("dirichlet", 3), ("unigram", 2), ("mixture", 3)])
def test_a_stream_stopped_before_or_after_the_switch_resumes_to_the_same_sequences(prior, stop):
    """Stopped after 64 sequences (before the switch at 70) or 96 (after it), continued from the saved state in a
    new stream: the same sequences as one uninterrupted stream (a generator's state, or counts, under the hood).
    Both take batches of 32: a Dir(1) stream's and a mixture's sequences depend on the batching, as without one."""
    extra = {"p": 0.5} if prior == "mixture" else {}
    task = MarkovTask(K, seq_len=T, prior=prior, curriculum=f"doubly-stochastic:{SWITCH}", **extra)
    uninterrupted = task.stream(SEED)
    whole = torch.cat([uninterrupted.take(BATCH).states for _ in range(6)])
    first = task.stream(SEED)
    parts = [first.take(BATCH).states for _ in range(stop)]
    resumed = task.stream(SEED)
    resumed.set_state(first.get_state().clone())
    parts += [resumed.take(BATCH).states for _ in range(6 - stop)]
    assert torch.equal(torch.cat(parts), whole)


def test_a_mixture_after_the_curriculum_goes_on_with_the_chains_the_curriculum_left():
    """Doubly stochastic for 40 sequences, then a 50/50 mixture of doubly stochastic and unigram chains: the
    mixture's doubly stochastic rows continue the doubly stochastic stream at index 40 (no chain seen twice)."""
    task = MarkovTask(K, seq_len=T, prior="mixture", p=0.5, curriculum="doubly-stochastic:40")
    stream = task.stream(SEED)
    first, second = stream.take(64), stream.take(64)
    ds = MarkovTask(K, seq_len=T, prior="doubly-stochastic").stream(SEED).take(84).states
    unigram = MarkovTask(K, seq_len=T, prior="unigram").stream(SEED).take(44).states
    # by hand: batch 1 = ds 0..39, then its remaining 24 split round(0.5 * 24) = 12 ds (40..51) + 12 unigram (0..11);
    # batch 2 = 32 ds (52..83) + 32 unigram (12..43)
    assert torch.equal(first.states, torch.cat([ds[:52], unigram[:12]]))
    assert torch.equal(second.states, torch.cat([ds[52:84], unigram[12:44]]))
    assert task.sequences_of_prior("doubly-stochastic", 128, 64) == 84
    assert task.sequences_of_prior("unigram", 128, 64) == 44
    assert task.sequences_of_prior("doubly-stochastic", 0, 64) == 0


def test_sequences_of_each_prior_at_each_checkpoint_by_hand():
    task = MarkovTask(K, seq_len=T, curriculum="unigram:100")
    # batches of 64: 64 unigram; then 36 unigram + 28 Dir(1); then 64 Dir(1) per batch
    assert [task.sequences_of_prior("unigram", n, 64) for n in (0, 64, 128, 256)] == [0, 64, 100, 100]
    assert [task.sequences_of_prior("dirichlet", n, 64) for n in (0, 64, 128, 256)] == [0, 0, 28, 156]
    plain = MarkovTask(K, seq_len=T, prior="mixture", p=0.75)
    assert plain.sequences_of_prior("doubly-stochastic", 640, 64) == 480  # 48 per batch, 10 batches


def test_evaluation_chains_are_the_task_prior_s_whatever_the_schedule():
    task = MarkovTask(K, seq_len=T, curriculum=f"doubly-stochastic:{SWITCH}")
    assert torch.equal(task.eval_set(50, seed=3).inputs, MarkovTask(K, seq_len=T).eval_set(50, seed=3).inputs)


def test_the_schedule_is_recorded_only_where_there_is_one_and_read_back():
    task = MarkovTask(K, seq_len=T, curriculum="doubly-stochastic:64000")
    assert task.to_json()["curriculum"] == "doubly-stochastic:64000" and task.schedule == ("doubly-stochastic", 64000)
    assert MarkovTask.from_dict({k: v for k, v in task.to_json().items() if k != "name"}) == task
    assert "curriculum" not in MarkovTask(K).to_json()  # config.json of runs without one keep their bytes
    assert "the first 64,000 from doubly-stochastic" in task.describe()


@pytest.mark.parametrize(
    "curriculum,message",
    [
        ("doubly-stochastic", "curriculum must be PRIOR:SEQUENCES"),
        ("doubly-stochastic:", "must be an integer >= 1"),
        ("doubly-stochastic:0", "must be an integer >= 1"),
        ("doubly-stochastic:1e5", "must be an integer >= 1"),
        ("doubly-stochastic:-5", "must be an integer >= 1"),
        ("doubly-stochastic:²", "must be an integer >= 1"),
        ("mixture:100", "the curriculum's prior must be one of"),
        ("dirichlet:100", "must differ from the training prior"),
        ("a:1:2", "curriculum must be PRIOR:SEQUENCES"),
        (64000, "curriculum must be PRIOR:SEQUENCES"),
    ],
)
def test_bad_schedules_are_one_clear_value_error(curriculum, message):
    with pytest.raises(ValueError, match=message):
        MarkovTask(K, curriculum=curriculum)


def test_a_schedule_for_the_wrong_chains_or_longer_than_the_run_is_refused():
    with pytest.raises(ValueError, match="doubly-stochastic prior is for bigram chains"):
        MarkovTask(K, n=3, curriculum="doubly-stochastic:10")
    with pytest.raises(ValueError, match="fewer than the run's steps x batch_size = 640"):
        MarkovRecipe(task=MarkovTask(K, curriculum="doubly-stochastic:640"), steps=10, batch_size=64)
