"""Evaluating a model by prior: its loss and KL on one prior's fresh chains, checked against the cross-entropy
and the KL computed by hand on the same chains, and a mixture's loss against its components'."""

import pytest
import torch

from induction_probes.circuits.models.model_classes import build_model
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.probes.behaviour.by_prior import evaluate_on_prior, model_logits, prior_names, prior_task
from induction_probes.probes.behaviour.icl_behaviour import behaviour

TASK = MarkovTask(3, seq_len=12)


@pytest.fixture(scope="module")
def model():
    """A tiny untrained transformer: its random weights give a prediction far from every strategy's."""
    recipe = MarkovRecipe(task=TASK, d_head=4, model_seed=3)
    return build_model(recipe.model_config()).eval()


@pytest.mark.parametrize("prior", ["doubly-stochastic", "unigram", "dirichlet"])
def test_the_loss_and_kl_by_prior_are_the_cross_entropy_and_kl_computed_by_hand(model, prior):
    result = evaluate_on_prior(model, TASK, prior, n_seqs=40, seed=5)
    sample = MarkovTask(3, seq_len=12, prior=prior).eval_set(40, 5).sample  # the same chains, drawn again
    with torch.no_grad():
        log_q = torch.log_softmax(model(sample.inputs).double(), -1)
    total, kl = 0.0, 0.0
    for b in range(40):  # by hand, one sequence and one position at a time
        for t in range(12):
            total -= log_q[b, t, sample.targets[b, t]].item()
        p = sample.transitions[b, sample.inputs[b, -1]]  # the chain's row of the last input token (bigram chains)
        kl += sum(p[j].item() * (p[j].log().item() - log_q[b, -1, j].item()) for j in range(3))
    # both in float64 from the same float32 logits: only the order of the sums differs
    assert result["loss"] == pytest.approx(total / (40 * 12), rel=1e-12)
    assert result["kl"] == pytest.approx(kl / 40, rel=1e-9)
    assert result["prior"] == prior and result["n_seqs"] == 40


@pytest.mark.parametrize("n_seqs", [40, 41])
def test_a_mixture_s_loss_is_the_weighted_mean_of_its_components_losses_on_their_chains(model, n_seqs):
    """A 70/30 mixture's evaluation set of n chains is the first round(0.7 n) doubly stochastic chains and the first
    n − round(0.7 n) unigram ones (n = 41: 29 and 12, p̂ = 29/41, not 0.7)."""
    mixture = MarkovTask(3, seq_len=12, prior="mixture", p=0.7)
    eval_set = mixture.eval_set(n_seqs, 5)
    whole = behaviour(model_logits(model, eval_set.inputs), eval_set).loss
    n_ds = round(0.7 * n_seqs)
    ds = evaluate_on_prior(model, TASK, "doubly-stochastic", n_ds, seed=5)["loss"]
    unigram = evaluate_on_prior(model, TASK, "unigram", n_seqs - n_ds, seed=5)["loss"]
    assert whole == pytest.approx((n_ds * ds + (n_seqs - n_ds) * unigram) / n_seqs, rel=1e-12)
    assert ds != pytest.approx(unigram, rel=1e-3)  # the test could fail: the two parts differ


def test_chunks_do_not_change_the_logits(model):
    inputs = TASK.eval_set(25, 1).inputs
    assert torch.allclose(model_logits(model, inputs, chunk=7), model_logits(model, inputs, chunk=25), atol=1e-6)


@pytest.mark.parametrize(
    "names,message",
    [
        ("mixture", "evaluated by prior on dirichlet, doubly-stochastic, unigram"),
        ("unigram,unigram", "different priors"),
        ("", "evaluated by prior on"),
        ("nonsense", "got 'nonsense'"),
    ],
)
def test_bad_prior_names_are_one_value_error(names, message):
    with pytest.raises(ValueError, match=message):
        prior_names(names)


def test_a_prior_that_does_not_suit_the_chains_is_refused():
    with pytest.raises(ValueError, match="bigram chains"):
        prior_task(MarkovTask(3, n=3, seq_len=12), "doubly-stochastic")
