"""ICL-MC (Edelman et al. 2024): every sequence comes from its own random Markov chain.

A chain of order m = n − 1 over k symbols has a transition table of k^m rows (one per context of the
last m tokens), by default each row drawn from Dirichlet(α, …, α) (other priors: ``priors.py``). The
first m tokens come from the stationary
distribution of the lifted chain on m-tuples, solved exactly (as the authors state they sample it; their current
code draws the first state uniformly by mistake). n = 2 is the paper's main task; n = 1 gives i.i.d.
tokens from one random distribution (the paper's "unigram" prior, Appendix A).

In-context strategies predict x_{t+1} from x_1..x_t with Dirichlet(α) pseudo-counts:
q_t(b) = (c(context → b) + α) / (c(context → ·) + kα). With α = 1 and n = 2 this is the Bayes posterior
predictive of the Dir(1) row of the current token (up to the information in the first state).

Shapes: tokens are ``[batch, pos]`` with position 0 the first token; ``predictions[:, t]`` is the
distribution of the token at t + 1 given tokens 0..t.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.metrics import kl_divergence, last_column_mean, token_cross_entropy
from induction_probes.circuits.tasks import MarkovTask
from induction_probes.circuits.tasks.draws import sample_categorical
from induction_probes.circuits.tasks.priors import draw_table
from induction_probes.circuits.limits import MAX_SEQUENCES, require_at_most, require_seed, require_sequences
from induction_probes.circuits.validation import require_int

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
    raise ValueError(f"unknown strategy {name!r}: use uniform, unigram, bigram, trigram or N-gram")


# --- chains ---------------------------------------------------------------------------------------


def lift_transitions(table: Float[Tensor, "batch contexts k"], k: int) -> Float[Tensor, "batch s s"]:
    """The order-1 chain on m-tuples: context (a_1..a_m) moves to (a_2..a_m, b) with table[(a_1..a_m), b].

    Contexts are numbered with the oldest token as the most significant base-k digit.
    """
    batch, n_contexts, _ = table.shape
    if n_contexts == 1:  # order 0: the empty context always follows itself
        return table.new_ones(batch, 1, 1)
    lifted = table.new_zeros(batch, n_contexts, n_contexts)
    context = torch.arange(n_contexts)
    successors = (context % (n_contexts // k)).unsqueeze(-1) * k + torch.arange(k)  # [contexts, k]
    lifted.scatter_(-1, successors.expand(batch, -1, -1), table)
    return lifted


def stationary_distribution(transitions: Float[Tensor, "batch s s"]) -> Float[Tensor, "batch s"]:
    """π with π P = π and Σ π = 1: (Pᵀ − I) π = 0 with the last equation replaced by Σ π = 1, exact for an
    irreducible chain. A small Dirichlet α draws exact zeros, so reducible chains with no unique π and a
    singular system: those get the π a uniform start settles into (:func:`stationary_from_uniform_start`)."""
    batch, n_states, _ = transitions.shape
    system = transitions.double().transpose(-1, -2) - torch.eye(n_states, dtype=torch.float64)
    system[:, -1, :] = 1.0
    rhs = torch.zeros(batch, n_states, 1, dtype=torch.float64).index_fill_(1, torch.tensor([n_states - 1]), 1.0)
    solution = torch.linalg.solve_ex(system, rhs)
    pi = solution.result.squeeze(-1)
    unsolved = (solution.info != 0) | ~torch.isfinite(pi).all(-1)
    if unsolved.any():
        pi[unsolved] = stationary_from_uniform_start(transitions[unsolved].double())
    pi = pi.clamp_min(0.0)
    return pi / pi.sum(-1, keepdim=True)


def stationary_from_uniform_start(transitions: Float[Tensor, "batch s s"], squarings: int = 64) -> Float[Tensor, "batch s"]:
    """The limit of a uniform start under the lazy chain (P + I) / 2, which has P's stationary
    distributions and no period: P_lazy^(2^64) by repeated squaring, applied to the uniform vector.
    Defined for every chain, reducible or not; for an irreducible one it is the unique π."""
    n_states = transitions.shape[-1]
    power = (transitions + torch.eye(n_states, dtype=transitions.dtype)) / 2
    for _ in range(squarings):
        power = power @ power
        power = power / power.sum(-1, keepdim=True)  # rows stay distributions despite rounding
    return torch.full((n_states,), 1.0 / n_states, dtype=transitions.dtype) @ power


@dataclass(frozen=True)
class MarkovSample:
    """A batch of ICL-MC sequences with the chains that produced them.

    ``states`` holds seq_len + 1 tokens per sequence: the model reads ``inputs`` (the first seq_len)
    and predicts ``targets`` (the last seq_len).
    """

    states: Int[Tensor, "batch seq_plus_one"]
    transitions: Float[Tensor, "batch contexts k"]  # row = context of the last n − 1 tokens
    stationary: Float[Tensor, "batch contexts"]  # π of the lifted chain, for the first n − 1 tokens
    k: int
    n: int

    @property
    def inputs(self) -> Int[Tensor, "batch seq"]:
        return self.states[:, :-1]

    @property
    def targets(self) -> Int[Tensor, "batch seq"]:
        return self.states[:, 1:]

    @classmethod
    def concat(cls, samples: list[MarkovSample]) -> MarkovSample:
        """One sample of the sequences of several, in order."""
        return cls(
            states=torch.cat([s.states for s in samples]),
            transitions=torch.cat([s.transitions for s in samples]),
            stationary=torch.cat([s.stationary for s in samples]),
            k=samples[0].k,
            n=samples[0].n,
        )

    def __getitem__(self, rows: slice) -> MarkovSample:
        return MarkovSample(self.states[rows], self.transitions[rows], self.stationary[rows], self.k, self.n)


def check_transitions(table: Tensor, n_seqs: int, k: int, order: int) -> Float[Tensor, "batch contexts k"]:
    """Raise ValueError unless ``table`` is [n_seqs, k^order, k] with rows that are distributions."""
    expected = (n_seqs, k**order, k)
    if tuple(table.shape) != expected:
        raise ValueError(f"transitions must have shape {expected}, got {tuple(table.shape)}")
    table = table.double()
    rows_sum_to_one = torch.allclose(table.sum(-1), torch.ones((), dtype=torch.float64))
    if not torch.isfinite(table).all() or (table < 0).any() or not rows_sum_to_one:
        raise ValueError("every row of transitions must be a probability distribution")
    return table


def walk(table: Float[Tensor, "batch contexts k"], uniforms: Float[Tensor, "batch length"], n: int) -> MarkovSample:
    """Run each chain for ``length`` states, by inverse-CDF draws from ``uniforms`` (one per state).

    The first n − 1 states come from the lifted chain's stationary distribution. Every later state is
    the first b with cumsum(row)[b] > u: computed for every context at once, so that the loop over
    positions (which the recurrence needs) only looks up the next state.
    """
    n_seqs, length = uniforms.shape
    k, order, n_contexts = table.shape[-1], n - 1, table.shape[1]
    pi = stationary_distribution(lift_transitions(table, k))
    first_context = sample_categorical(pi, uniforms[:, 0]).numpy()
    later = uniforms[:, None, order:].expand(-1, n_contexts, -1).contiguous()
    successor = torch.searchsorted(table.cumsum(-1), later, right=True).clamp_max_(k - 1)
    successor = successor.transpose(1, 2).numpy()  # [batch, position − order, context]
    states = np.empty((n_seqs, length), dtype=np.int64)
    for i in range(order):  # decode the first m tokens, oldest digit first
        states[:, i] = first_context // k ** (order - 1 - i) % k
    context, rows = first_context, np.arange(n_seqs)
    for t in range(order, length):  # numpy: a small lookup costs a microsecond here, ten in torch
        states[:, t] = successor[rows, t - order, context]
        context = (context * k + states[:, t]) % k**order if order else context
    return MarkovSample(states=torch.from_numpy(states), transitions=table, stationary=pi, k=k, n=n)


def sample_markov(
    n_seqs: int,
    k: int,
    seq_len: int,
    *,
    n: int = 2,
    alpha: float = 1.0,
    generator: torch.Generator,
    transitions: Float[Tensor, "batch contexts k"] | None = None,
    prior: str = "dirichlet",
    p: float | None = None,
) -> MarkovSample:
    """Draw ``n_seqs`` sequences of ``seq_len`` input tokens (seq_len + 1 states), each from a fresh chain.

    The chains' tables are drawn from ``prior`` (Dirichlet(alpha) rows by default) unless
    ``transitions`` gives them (one table of k^(n−1) rows per sequence, e.g. to evaluate on chosen
    chains); then come seq_len + 1 uniforms per sequence for the walk. Vectorised over the batch.
    """
    require_int("n_seqs", n_seqs, 1)
    task = MarkovTask(k, seq_len, n, alpha, prior=prior, p=p)  # checks every parameter
    require_sequences("n_seqs", n_seqs, task.numbers_per_sequence())
    if transitions is None:
        table = draw_table(prior, n_seqs, k, n - 1, alpha, p, generator)
    else:
        table = check_transitions(transitions, n_seqs, k, n - 1)
    uniforms = torch.rand(n_seqs, seq_len + 1, generator=generator, dtype=torch.float64)
    return walk(table, uniforms, n)


def window_codes(tokens: Int[Tensor, "batch pos"], width: int, k: int) -> Int[Tensor, "batch windows"]:
    """Base-k code of every window of ``width`` consecutive tokens; entry i is the window starting at i."""
    n_windows = tokens.shape[1] - width + 1
    codes = torch.zeros(tokens.shape[0], n_windows, dtype=torch.long)
    for i in range(width):
        codes = codes * k + tokens[:, i : i + n_windows]
    return codes


def true_next_token_probs(sample: MarkovSample) -> Float[Tensor, "batch seq k"]:
    """P(x_{t+1} | x_0..x_t) under the sequence's own chain, at every input position t.

    Once t ≥ n − 2 this is the table row of the last n − 1 tokens; before that (only for n ≥ 3) it is
    the conditional of the stationary start distribution.
    """
    k, order, tokens = sample.k, sample.n - 1, sample.inputs
    batch, seq_len = tokens.shape
    if order == 0:
        return sample.transitions[:, 0:1].expand(batch, seq_len, k)
    start = order - 1  # first position with a full context
    context = window_codes(tokens, order, k)
    probs = torch.empty(batch, seq_len, k, dtype=sample.transitions.dtype)
    probs[:, start:] = sample.transitions.gather(1, context.unsqueeze(-1).expand(-1, -1, k))
    for t in range(min(start, seq_len)):  # marginal of the first t + 2 tokens, conditioned on t + 1
        prefix = sample.stationary.reshape(batch, k ** (t + 2), -1).sum(-1).reshape(batch, -1, k)
        row = prefix[torch.arange(batch), window_codes(tokens[:, : t + 1], t + 1, k)[:, 0]]
        probs[:, t] = row / row.sum(-1, keepdim=True)
    return probs


# --- in-context strategies ---------------------------------------------------------------------


def previous_tokens(tokens: Int[Tensor, "batch pos"], first_is_self: bool = False) -> Int[Tensor, "batch pos"]:
    """x_{j−1} at every position j. Position 0 has no previous token: −1 (matches nothing), or x_0
    itself with ``first_is_self`` (what a causal previous-token head that must attend somewhere reads there)."""
    first = tokens[:, :1] if first_is_self else torch.full_like(tokens[:, :1], -1)
    return torch.cat([first, tokens[:, :-1]], dim=1)


def causal_mask(n_pos: int, device: torch.device | str = "cpu") -> torch.BoolTensor:  # [query, key]: j ≤ i
    return torch.ones(n_pos, n_pos, dtype=torch.bool, device=device).tril()


def matching_keys(tokens: Int[Tensor, "batch pos"], previous: Int[Tensor, "batch pos"] | None = None) -> torch.BoolTensor:
    """[batch, query, key]: the keys j ≤ i whose previous token equals the query's, x_{j−1} = x_i; their
    tokens x_j are the samples of "what follows x_i" that a statistical induction head averages.
    ``previous`` defaults to :func:`previous_tokens` (key 0 never matches)."""
    previous = previous_tokens(tokens) if previous is None else previous
    return (previous[:, None, :] == tokens[:, :, None]) & causal_mask(tokens.shape[1], tokens.device)


def uniform_predictions(tokens: Int[Tensor, "batch seq"], k: int) -> Float[Tensor, "batch seq k"]:
    """q(b) = 1/k everywhere."""
    return torch.full((*tokens.shape, k), 1.0 / k, dtype=torch.float64)


def ngram_predictions(
    tokens: Int[Tensor, "batch seq"], k: int, n: int, alpha: float = 1.0
) -> Float[Tensor, "batch seq k"]:
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
    name: str, tokens: Int[Tensor, "batch seq"], k: int, alpha: float = 1.0
) -> Float[Tensor, "batch seq k"]:
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


# --- evaluating a model --------------------------------------------------------------------------


@dataclass(frozen=True)
class MarkovEvalSet:
    """A fixed evaluation set with everything a model is compared against, computed once.

    Draw one with :meth:`induction_probes.circuits.tasks.MarkovTask.eval_set`, with a seed kept apart from the training data's.
    """

    sample: MarkovSample
    alpha: float
    truth: Float[Tensor, "batch seq k"]
    strategies: dict[str, Float[Tensor, "batch seq k"]]

    @classmethod
    def from_sample(cls, sample: MarkovSample, alpha: float) -> MarkovEvalSet:
        inputs, k = sample.inputs, sample.k
        strategies = {name: strategy_predictions(name, inputs, k, alpha) for name in strategy_names(sample.n)}
        return cls(sample=sample, alpha=alpha, truth=true_next_token_probs(sample), strategies=strategies)

    @property
    def inputs(self) -> Int[Tensor, "batch seq"]:
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

    def per_position(self, logits: Float[Tensor, "batch seq k"], per_sequence=False) -> tuple[Tensor, dict[str, Tensor]]:
        """The model's loss at each input position, and KL(x ‖ model) at each position for x = "true"
        and every strategy, averaged over sequences (``per_sequence``: [batch, seq] each, not averaged)."""
        log_q = torch.log_softmax(logits.double(), dim=-1)
        loss = token_cross_entropy(log_q, self.sample.targets)
        kl = {name: kl_divergence(p, log_q) for name, p in ({"true": self.truth} | self.strategies).items()}
        return (loss, kl) if per_sequence else (loss.mean(0), {name: values.mean(0) for name, values in kl.items()})

    def metrics(self, logits: Float[Tensor, "batch seq k"]) -> dict:
        """:meth:`per_position`'s mean loss and last-token KLs, to the bit, the KLs computed at the last token only."""
        log_q = torch.log_softmax(logits.double(), dim=-1)
        last = {name: last_column_mean(kl_divergence(p[:, -1], log_q[:, -1]), log_q.shape[1])
                for name, p in ({"true": self.truth} | self.strategies).items()}
        loss = token_cross_entropy(log_q, self.sample.targets).mean(0).mean().item()  # per_position's, then its mean
        return {"eval_loss": loss, "last_token_kl": last}


# --- baselines ---------------------------------------------------------------------------------


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
