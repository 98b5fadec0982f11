"""Priors over ICL-MC chains (Edelman et al. 2024, §A and their code's datasets), and the streams of
training sequences drawn from them.

- ``dirichlet``: every row of the transition table an independent Dir(α) draw (the paper's main task).
- ``doubly-stochastic``: uniform over the Birkhoff polytope (rows and columns sum to 1, so the
  stationary distribution is uniform and the unigram strategy is no better than uniform). Drawn by
  rejection for k ≤ 4: the top-left (k−1)×(k−1) block i.i.d. U[0, 1], the last row and column completing
  the sums, rejected unless every entry is positive. The acceptance rate is 1/8 at k = 3, about 1e-3 at
  k = 4 and below 5e-7 at k = 5 (measured), so from k = 5 on, as in the authors' code, a Dir(1) matrix is
  Sinkhorn-balanced instead: doubly stochastic, but not uniform on the polytope.
- ``unigram``: one r ~ Dir(α) for every row, so the chain's tokens are i.i.d. r (π = r) and the unigram
  strategy is Bayes-optimal.
- ``spectrum`` (k = 2, the paper's Figure 4 family): a ~ U(0, 1), b = clip(a + p(1 − 2a) + U(−0.2, 0.2), 0, 1),
  rows (a, 1 − a) and (b, 1 − b), swapped with probability 1/2. p = 0 makes the rows nearly equal
  (unigram nearly optimal), p = 1 nearly doubly stochastic.
- ``mixture``: each batch holds round(p·B) sequences of a first prior and the rest of a second.

Each is registered, with what the task's checks read of it, in
:mod:`~induction_probes.circuits.tasks.markov.prior_registry`; a prior from outside registers its draw there.

Streams: a plain Dir(α) run draws its sequences from one ``torch.Generator`` (the stream of every run
before priors existed, which the shipped runs reproduce). Every other prior draws sequence i of a
component from block i // BLOCK, whose generator is seeded by (seed, prior, block): the sequences do not
depend on how they are batched, so a doubly-stochastic-only run and a 75 / 25 mixture with the same seed
see the same doubly stochastic sequences, in the same order (Edelman et al.'s mixture experiment).
"""

from __future__ import annotations

import hashlib

import torch
from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.tasks.draws import sample_dirichlet

BLOCK = 64  # sequences per seeded block of a counted stream
REJECTION_MAX_K = 4
EXPECTED_CANDIDATES = {2: 1, 3: 8, 4: 1032}  # 1 / acceptance rate of the rejection sampler (measured)
SPECTRUM_NOISE = 0.2


def draw_doubly_stochastic(n_seqs: int, k: int, generator: torch.Generator) -> Float[Tensor, "batch k k"]:
    """Doubly stochastic k×k matrices: uniform on the Birkhoff polytope by rejection for k ≤ 4,
    Sinkhorn-balanced Dir(1) matrices above (see the module docstring)."""
    if k > REJECTION_MAX_K:
        return sinkhorn(sample_dirichlet((n_seqs, k), k, 1.0, generator))
    accepted: list[Tensor] = []
    n_accepted, draws = 0, 2 * n_seqs * EXPECTED_CANDIDATES[k]
    while n_accepted < n_seqs:
        block = torch.rand(draws, k - 1, k - 1, generator=generator, dtype=torch.float64)
        top = torch.cat([block, 1.0 - block.sum(-1, keepdim=True)], dim=-1)  # rows of the first k − 1 states
        full = torch.cat([top, 1.0 - top.sum(-2, keepdim=True)], dim=-2)  # the last row completes each column
        good = full[(full > 0).flatten(1).all(-1)]
        accepted.append(good)
        n_accepted += len(good)
    return torch.cat(accepted)[:n_seqs]


def sinkhorn(
    matrices: Float[Tensor, "batch k k"], tolerance: float = 1e-12, max_rounds: int = 10_000
) -> Float[Tensor, "batch k k"]:
    """Alternately normalise rows and columns until both sum to 1 within ``tolerance``."""
    for _ in range(max_rounds):
        matrices = matrices / matrices.sum(-2, keepdim=True)
        matrices = matrices / matrices.sum(-1, keepdim=True)
        if (matrices.sum(-2) - 1.0).abs().max() < tolerance:
            return matrices
    raise ArithmeticError(f"Sinkhorn balancing did not converge in {max_rounds} rounds")


def draw_spectrum(n_seqs: int, p: float, generator: torch.Generator) -> Float[Tensor, "batch 2 2"]:
    """Edelman et al.'s k = 2 family with parameter p (module docstring)."""
    a = torch.rand(n_seqs, generator=generator, dtype=torch.float64)
    noise = (2.0 * torch.rand(n_seqs, generator=generator, dtype=torch.float64) - 1.0) * SPECTRUM_NOISE
    b = (a + p * (1.0 - 2.0 * a) + noise).clamp(0.0, 1.0)
    rows = torch.stack([torch.stack([a, 1.0 - a], -1), torch.stack([b, 1.0 - b], -1)], dim=1)
    swap = torch.rand(n_seqs, generator=generator, dtype=torch.float64) < 0.5
    return torch.where(swap[:, None, None], rows.flip(1), rows)


def draw_dirichlet(n_seqs: int, k: int, order: int, alpha: float, p, generator) -> Float[Tensor, "batch contexts k"]:
    return sample_dirichlet((n_seqs, k**order), k, alpha, generator)


def draw_unigram(n_seqs: int, k: int, order: int, alpha: float, p, generator) -> Float[Tensor, "batch contexts k"]:
    return sample_dirichlet((n_seqs, 1), k, alpha, generator).expand(-1, k**order, -1).contiguous()


def draw_doubly_stochastic_tables(
    n_seqs: int, k: int, order: int, alpha: float, p, generator
) -> Float[Tensor, "batch contexts k"]:
    return draw_doubly_stochastic(n_seqs, k, generator)


def draw_spectrum_tables(
    n_seqs: int, k: int, order: int, alpha: float, p, generator
) -> Float[Tensor, "batch contexts k"]:
    return draw_spectrum(n_seqs, p, generator)


def draw_mixture_tables(
    n_seqs: int, k: int, order: int, alpha: float, p, generator
) -> Float[Tensor, "batch contexts k"]:
    """The mixture's draw: none. Its batches mix the sequences of two priors, drawn by its stream
    (:class:`~induction_probes.circuits.tasks.markov.markov_streams.MixtureStream`), not tables of its own."""
    raise BadInput("the mixture prior mixes sequences of two priors: it draws no tables of its own")


def block_seed(seed: int, prior: str, block: int, purpose: str = "train") -> int:
    """A 63-bit seed for block ``block`` of the ``prior`` stream of ``seed``, the same on every machine.
    Evaluation streams (``purpose="eval"``) are apart from training ones, so that the evaluation set of
    seed S is not the training data of another run whose data seed happens to be S."""
    tag = f"{seed}/{prior}/{block}" if purpose == "train" else f"{seed}/{prior}/{block}/{purpose}"
    digest = hashlib.blake2b(f"induction-probes/{tag}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1
