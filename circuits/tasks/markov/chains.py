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

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import require_sequences
from induction_probes.circuits.tasks.draws import sample_categorical
from induction_probes.circuits.tasks.markov.parameters import (
    check_chains,
    check_prior,
    check_sizes,
    numbers_per_sequence,
)
from induction_probes.circuits.tasks.markov.prior_registry import draw_table
from induction_probes.circuits.validation import require_int


def lift_transitions(table: Float[Tensor, "batch contexts k"], k: int) -> Float[Tensor, "batch state state"]:
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


def stationary_distribution(transitions: Float[Tensor, "batch state state"]) -> Float[Tensor, "batch state"]:
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


def stationary_from_uniform_start(
    transitions: Float[Tensor, "batch state state"], squarings: int = 64
) -> Float[Tensor, "batch state"]:
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

    states: Int[Tensor, "batch pos_plus_one"]
    transitions: Float[Tensor, "batch contexts k"]  # row = context of the last n − 1 tokens
    stationary: Float[Tensor, "batch contexts"]  # π of the lifted chain, for the first n − 1 tokens
    k: int
    n: int

    @property
    def inputs(self) -> Int[Tensor, "batch pos"]:
        return self.states[:, :-1]

    @property
    def targets(self) -> Int[Tensor, "batch pos"]:
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
        raise BadInput(f"transitions must have shape {expected}, got {tuple(table.shape)}")
    table = table.double()
    rows_sum_to_one = torch.allclose(table.sum(-1), torch.ones((), dtype=torch.float64))
    if not torch.isfinite(table).all() or (table < 0).any() or not rows_sum_to_one:
        raise BadInput("every row of transitions must be a probability distribution")
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
    check_chains(k, seq_len, n, alpha)  # what MarkovTask(k, seq_len, n, alpha, prior=prior, p=p) refuses
    check_prior(k, n, prior, p)
    check_sizes(k, seq_len, n)
    require_sequences("n_seqs", n_seqs, numbers_per_sequence(k, seq_len, n))
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


def true_next_token_probs(sample: MarkovSample) -> Float[Tensor, "batch pos k"]:
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
