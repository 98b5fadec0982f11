"""In-context strategies on ICL-MC sequences (Edelman et al. 2024): the n-gram predictors with Dirichlet(α)
pseudo-counts, q_t(b) = (c(context → b) + α) / (c(context → ·) + kα), the masks they and the constructions
share, a model's evaluation against the truth and every strategy, and the strategies' own baselines.

Shapes: tokens are ``[batch, pos]``; ``predictions[:, t]`` is the distribution of the token at t + 1 given
tokens 0..t.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import MAX_SEQUENCES, require_at_most, require_seed
from induction_probes.circuits.metrics import kl_divergence, last_column_mean, token_cross_entropy
from induction_probes.circuits.tasks.markov.chains import MarkovSample, true_next_token_probs, window_codes
from induction_probes.circuits.validation import require_int

if TYPE_CHECKING:  # a task is passed in; the config is above the maths it calls
    from induction_probes.circuits.tasks.markov.markov_task import MarkovTask

STRATEGY_ORDERS = {"unigram": 1, "bigram": 2, "trigram": 3}


def strategy_name(n: int) -> str:
    """'unigram', 'bigram', 'trigram', then '4-gram', '5-gram', …"""
    names = {order: name for name, order in STRATEGY_ORDERS.items()}
    return names.get(n, f"{n}-gram")


def strategy_order(name: str) -> int:
    """The n of an n-gram strategy name; the inverse of :func:`strategy_name`."""
    if name in STRATEGY_ORDERS:
        return STRATEGY_ORDERS[name]
    if name.endswith("-gram") and name[: -len("-gram")].isdigit():
        return int(name[: -len("-gram")])
    raise BadInput(f"unknown strategy {name!r}: use uniform, unigram, bigram, trigram or N-gram")


def uniform_predictions(tokens: Int[Tensor, "batch pos"], k: int) -> Float[Tensor, "batch pos k"]:
    """q(b) = 1/k everywhere."""
    return torch.full((*tokens.shape, k), 1.0 / k, dtype=torch.float64)


def ngram_predictions(
    tokens: Int[Tensor, "batch pos"], k: int, n: int, alpha: float = 1.0
) -> Float[Tensor, "batch pos k"]:
    """In-context n-gram predictor with Dirichlet(alpha) pseudo-counts, at every position at once.

    At position t (0-indexed), with context c = the last n − 1 tokens x_{t−n+2..t}:
    q_t(b) = (#{j ≤ t : x_{j−n+1..j−1} = c, x_j = b} + α) / (#{j ≤ t : x_{j−n+1..j−1} = c} + kα).
    n = 1 is the unigram predictor (counts of every token so far, x_t included), n = 2 the bigram
    (statistical induction) predictor. Positions whose context is not complete yet (t < n − 2) have no
    counts and predict uniformly. Computed with one cumulative sum over one-hot (context, token) codes.
    """
    batch, seq_len = tokens.shape
    order = n - 1
    counts = torch.zeros(batch, seq_len, k**n, dtype=torch.int32)
    if seq_len > order:
        pairs = window_codes(tokens, n, k)  # pairs[:, i] = (context, token) ending at position i + order
        counts[:, order:].scatter_(-1, pairs.unsqueeze(-1), 1)
    counts = counts.cumsum(1, dtype=torch.int32)

    query = torch.zeros(batch, seq_len, dtype=torch.long)
    start = max(order - 1, 0)
    if order and seq_len > start:
        query[:, start:] = window_codes(tokens, order, k)
    matched = counts.gather(-1, query.unsqueeze(-1) * k + torch.arange(k)).double()
    matched[:, :start] = 0.0
    return (matched + alpha) / (matched.sum(-1, keepdim=True) + k * alpha)


def strategy_predictions(
    name: str, tokens: Int[Tensor, "batch pos"], k: int, alpha: float = 1.0
) -> Float[Tensor, "batch pos k"]:
    """The predictions of a named strategy: 'uniform', 'unigram', 'bigram', 'trigram' or 'N-gram'."""
    if name == "uniform":
        return uniform_predictions(tokens, k)
    return ngram_predictions(tokens, k, strategy_order(name), alpha)


def closest_strategy(kl_to_model: dict[str, float]) -> str:
    """The strategy with the smallest KL(strategy ‖ model); the entry "true" is not a strategy."""
    return min((value, name) for name, value in kl_to_model.items() if name != "true")[1]


def strategy_names(n: int) -> list[str]:
    """The strategies to compare on an n-gram task: uniform and every order up to n."""
    return ["uniform"] + [strategy_name(order) for order in range(1, n + 1)]


@dataclass(frozen=True)
class MarkovEvalSet:
    """A fixed evaluation set with everything a model is compared against, computed once.

    Draw one with :meth:`induction_probes.circuits.tasks.markov.markov_task.MarkovTask.eval_set`, with a seed kept apart
    from the training data's.
    """

    sample: MarkovSample
    alpha: float
    truth: Float[Tensor, "batch pos k"]
    strategies: dict[str, Float[Tensor, "batch pos k"]]

    @classmethod
    def from_sample(cls, sample: MarkovSample, alpha: float) -> MarkovEvalSet:
        inputs, k = sample.inputs, sample.k
        strategies = {name: strategy_predictions(name, inputs, k, alpha) for name in strategy_names(sample.n)}
        return cls(sample=sample, alpha=alpha, truth=true_next_token_probs(sample), strategies=strategies)

    @property
    def inputs(self) -> Int[Tensor, "batch pos"]:
        return self.sample.inputs

    def strategy_kl(self) -> dict[str, Float[Tensor, " batch"]]:
        """Last-token KL(true ‖ strategy) per sequence: how far each strategy is from the truth."""
        last = self.truth[:, -1]
        return {name: kl_divergence(last, q[:, -1].log()) for name, q in self.strategies.items()}

    def strategy_ce(self) -> dict[str, Float[Tensor, " batch"]]:
        """Cross-entropy of the sampled next tokens per sequence, averaged over positions."""
        targets = self.sample.targets
        predictors = {"true": self.truth} | self.strategies
        return {name: token_cross_entropy(q.log(), targets).mean(-1) for name, q in predictors.items()}

    def per_position(
        self, logits: Float[Tensor, "batch pos k"], per_sequence: bool = False
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The model's loss at each input position, and KL(x ‖ model) at each position for x = "true"
        and every strategy, averaged over sequences (``per_sequence``: [batch, seq] each, not averaged)."""
        log_q = torch.log_softmax(logits.double(), dim=-1)
        loss = token_cross_entropy(log_q, self.sample.targets)
        kl = {name: kl_divergence(p, log_q) for name, p in ({"true": self.truth} | self.strategies).items()}
        return (loss, kl) if per_sequence else (loss.mean(0), {name: values.mean(0) for name, values in kl.items()})

    def metrics(self, logits: Float[Tensor, "batch pos k"]) -> dict[str, Any]:
        """:meth:`per_position`'s mean loss and last-token KLs, to the bit, the KLs computed at the last token only."""
        log_q = torch.log_softmax(logits.double(), dim=-1)
        last = {
            name: last_column_mean(kl_divergence(p[:, -1], log_q[:, -1]), log_q.shape[1])
            for name, p in ({"true": self.truth} | self.strategies).items()
        }
        loss = token_cross_entropy(log_q, self.sample.targets).mean(0).mean().item()  # per_position's, then its mean
        return {"eval_loss": loss, "last_token_kl": last}


@dataclass(frozen=True)
class Baselines:
    """How well each strategy does on fresh sequences of a task's evaluation chains.

    ``last_token_kl[s]`` is KL(true next-token distribution ‖ s) at the last input token, averaged over
    sequences (the paper's "test loss"). ``mean_ce[s]`` is the cross-entropy of the sampled next token
    averaged over all positions and sequences: the training loss a predictor using s would reach.
    """

    task: MarkovTask
    n_seqs: int
    seed: int
    last_token_kl: dict[str, float]
    mean_ce: dict[str, float]


def strategy_baselines(task: MarkovTask, *, n_seqs: int = 20_000, seed: int = 0, chunk: int = 2_000) -> Baselines:
    """Last-token KL and mean cross-entropy of every strategy on ``n_seqs`` fresh sequences of the
    task's evaluation prior (its training prior unless ``eval_prior`` says otherwise).

    Works in chunks of ``chunk`` sequences so memory stays flat; the same seed gives the same numbers.
    """
    require_int("n_seqs", n_seqs, 1)
    require_seed("seed", seed)
    require_at_most("n_seqs", n_seqs, MAX_SEQUENCES)  # drawn ``chunk`` at a time
    stream = task.eval_task().stream(seed, purpose="eval")
    kl_sums: dict[str, float] = {}
    ce_sums: dict[str, float] = {}
    for start in range(0, n_seqs, chunk):
        chunk_set = MarkovEvalSet.from_sample(stream.take(min(chunk, n_seqs - start)), task.alpha)
        for sums, values in ((kl_sums, chunk_set.strategy_kl()), (ce_sums, chunk_set.strategy_ce())):
            for name, per_seq in values.items():
                sums[name] = sums.get(name, 0.0) + per_seq.sum().item()
    return Baselines(
        task=task,
        n_seqs=n_seqs,
        seed=seed,
        last_token_kl={name: total / n_seqs for name, total in kl_sums.items()},
        mean_ce={name: total / n_seqs for name, total in ce_sums.items()},
    )
