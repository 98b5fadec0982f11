"""Priors over ICL-MC chains: each one's defining property on samples, and streams that do not depend
on how they are batched."""

import pytest
import torch

from induction_probes.circuits.tasks.draws import sample_categorical
from induction_probes.circuits.tasks.markov.chains import sample_markov, stationary_distribution
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.tasks.markov.prior_registry import draw_table
from induction_probes.circuits.tasks.markov.priors import draw_doubly_stochastic, draw_spectrum, sinkhorn
from induction_probes.circuits.tasks.markov.strategies import strategy_baselines


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("k", [2, 3, 4, 6])
def test_doubly_stochastic_chains_have_unit_row_and_column_sums_and_a_uniform_stationary_distribution(k):
    tables = draw_doubly_stochastic(400, k, generator(k))
    assert (tables > 0).all()
    assert torch.allclose(tables.sum(-1), torch.ones(400, k, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(tables.sum(-2), torch.ones(400, k, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(
        stationary_distribution(tables), torch.full((400, k), 1.0 / k, dtype=torch.float64), atol=1e-9
    )
    # the uniform measure on the polytope is symmetric under permutations of rows and of columns:
    # every entry has mean 1/k (within 5 standard errors)
    standard_error = tables.std(0) / 400**0.5
    assert ((tables.mean(0) - 1.0 / k).abs() < 5 * standard_error).all()


def test_sinkhorn_balances_a_matrix_and_says_when_it_cannot():
    balanced = sinkhorn(torch.tensor([[[1.0, 3.0], [2.0, 5.0]]], dtype=torch.float64))
    assert torch.allclose(balanced.sum(-1), torch.ones(1, 2, dtype=torch.float64))
    assert torch.allclose(balanced.sum(-2), torch.ones(1, 2, dtype=torch.float64))
    with pytest.raises(ArithmeticError, match="did not converge"):
        sinkhorn(torch.tensor([[[1.0, 1.0], [0.0, 1.0]]], dtype=torch.float64), max_rounds=50)


def test_unigram_chains_have_identical_rows_and_start_from_them():
    sample = sample_markov(300, 4, 50, prior="unigram", generator=generator(1))
    rows = sample.transitions
    assert torch.equal(rows, rows[:, :1].expand_as(rows))
    assert torch.allclose(sample.stationary, rows[:, 0], atol=1e-12)


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_spectrum_chains_follow_their_formula(p):
    tables = draw_spectrum(2000, p, generator(2))
    assert torch.allclose(tables.sum(-1), torch.ones(2000, 2, dtype=torch.float64))

    # one row is (a, 1 − a) and the other (b, 1 − b) with b = clip(a + p(1 − 2a) + U(−0.2, 0.2), 0, 1)
    def fits(a, b):
        mu = a + p * (1 - 2 * a)
        return (b >= (mu - 0.2).clamp(0, 1) - 1e-12) & (b <= (mu + 0.2).clamp(0, 1) + 1e-12)

    first, second = tables[:, 0, 0], tables[:, 1, 0]
    assert (fits(first, second) | fits(second, first)).all()
    if p == 0.0:  # b − a is the clipped noise alone
        assert ((first - second).abs() <= 0.2 + 1e-12).all()
    elif p == 1.0:  # b − (1 − a) is
        assert ((first + second - 1).abs() <= 0.2 + 1e-12).all()
    else:  # where only one order fits, it is the drawn order half of the time: the swap has probability 1/2
        in_order, swapped = fits(first, second) & ~fits(second, first), fits(second, first) & ~fits(first, second)
        share = in_order.sum() / (in_order.sum() + swapped.sum())
        assert 0.45 < share < 0.55 and in_order.sum() + swapped.sum() > 1000


def test_a_mixture_holds_its_share_of_each_prior_and_the_same_doubly_stochastic_sequences_as_a_pure_run():
    mixture = MarkovTask(4, seq_len=30, prior="mixture", p=0.75)
    pure = MarkovTask(4, seq_len=30, prior="doubly-stochastic")
    assert mixture.sequences_per_batch(64) == {"doubly-stochastic": 48, "unigram": 16}
    mixed_stream, pure_stream = mixture.stream(seed=5), pure.stream(seed=5)
    mixed = [mixed_stream.take(64) for _ in range(4)]
    doubly = torch.cat([batch.states[:48] for batch in mixed])
    assert torch.equal(doubly, torch.cat([pure_stream.take(64).states for _ in range(3)]))
    for batch in mixed:
        tables = batch.transitions
        assert torch.allclose(tables[:48].sum(-2), torch.ones(48, 4, dtype=torch.float64), atol=1e-10)
        assert torch.equal(tables[48:], tables[48:, :1].expand(-1, 4, -1))
    # over many batches of odd size, the share of the first prior stays within one sequence of p
    odd = MarkovTask(3, seq_len=10, prior="mixture", p=0.3, mixture=("dirichlet", "unigram"))
    assert abs(odd.sequences_per_batch(37)["dirichlet"] - 0.3 * 37) <= 0.5


def test_counted_streams_do_not_depend_on_batching_and_resume_from_their_state():
    task = MarkovTask(3, seq_len=20, prior="doubly-stochastic")
    whole = task.stream(seed=9).take(150).states
    stream = task.stream(seed=9)
    parts = [stream.take(n) for n in (1, 63, 10)]
    later = task.stream(seed=9)
    later.set_state(stream.get_state())
    parts.append(later.take(76))
    assert torch.equal(torch.cat([part.states for part in parts]), whole)
    assert not torch.equal(task.stream(seed=10).take(150).states, whole)


def test_the_walk_draws_each_state_by_inverse_cdf_from_its_own_uniform():
    """A per-position loop with the plain inverse-CDF draw gives the very same states."""
    table = draw_table("dirichlet", 7, 3, 2, 1.0, None, generator(3))
    uniforms = torch.rand(7, 12, generator=generator(4), dtype=torch.float64)
    from induction_probes.circuits.tasks.markov.chains import lift_transitions, walk

    sample = walk(table, uniforms, n=3)
    pi = stationary_distribution(lift_transitions(table, 3))
    first = sample_categorical(pi, uniforms[:, 0])
    expected = torch.empty(7, 12, dtype=torch.long)
    expected[:, 0], expected[:, 1] = first // 3, first % 3
    for t in range(2, 12):
        context = expected[:, t - 2] * 3 + expected[:, t - 1]
        expected[:, t] = sample_categorical(table[torch.arange(7), context], uniforms[:, t])
    assert torch.equal(sample.states, expected)


def test_under_doubly_stochastic_chains_the_unigram_strategy_is_no_better_than_uniform():
    result = strategy_baselines(MarkovTask(4, prior="doubly-stochastic"), n_seqs=4000, seed=0)
    kl = result.last_token_kl
    assert kl["unigram"] >= kl["uniform"] - 0.01
    assert kl["bigram"] < 0.5 * kl["uniform"]


def test_evaluation_sequences_are_never_the_training_sequences_of_the_same_seed():
    """Seed S's evaluation set must not be the training data of a run whose data seed is S."""
    task = MarkovTask(3, seq_len=20, prior="doubly-stochastic")
    evaluation = task.eval_set(64, seed=7).inputs
    assert not torch.equal(evaluation, task.stream(7).take(64).inputs)
    assert torch.equal(evaluation, task.eval_set(64, seed=7).inputs)


def test_evaluation_chains_can_come_from_another_prior():
    task = MarkovTask(4, seq_len=20, prior="doubly-stochastic", eval_prior="unigram")
    tables = task.eval_set(50, seed=0).sample.transitions
    assert torch.equal(tables, tables[:, :1].expand_as(tables))


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(prior="spectrum"), "p is for the spectrum and mixture priors only"),
        (dict(prior="dirichlet", p=0.5), "p is for the spectrum and mixture priors only"),
        (dict(prior="mixture", p=1.5), "p must be a number in"),
        (dict(prior="dirichlet", mixture=("unigram", "dirichlet")), "mixture names the components"),
        (dict(prior="mixture", p=0.5, mixture=("spectrum", "unigram")), "a mixture mixes two different priors of"),
        (dict(prior="mixture", p=0.5, mixture=("unigram", "unigram")), "a mixture mixes two different priors of"),
        (dict(prior="doubly-stochastic", n=3), "for bigram chains"),
        (dict(prior="spectrum", p=0.5), "k must be 2"),
        (dict(prior="sideways"), "prior must be one of"),
        (dict(eval_prior="mixture"), "eval_prior must be one of"),
    ],
)
def test_bad_prior_settings_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MarkovTask(3, **kwargs)


def test_each_prior_draws_by_its_registered_function_and_the_mixture_draws_no_tables():
    """The registry holds the draws themselves; a mixture mixes two priors' sequences in its stream."""
    table = draw_table("unigram", 5, 3, 1, 1.0, None, generator(5))
    assert table.shape == (5, 3, 3) and torch.allclose(table.sum(-1), torch.ones(5, 3, dtype=table.dtype))
    assert torch.equal(table[:, 0], table[:, 2])  # unigram: one distribution for every row
    with pytest.raises(ValueError, match="the mixture prior mixes sequences of two priors: it draws no tables"):
        draw_table("mixture", 5, 3, 1, 1.0, 0.5, generator(5))
