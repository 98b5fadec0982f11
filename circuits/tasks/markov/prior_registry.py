"""The registry of ICL-MC's priors over transition tables (:mod:`~induction_probes.circuits.tasks.markov.priors`
says what each is). A registration is a function ``draw(n_seqs, k, order, alpha, p, generator)`` returning
``[n_seqs, k**order, k]`` row-stochastic tables, with what the task's checks read from it:

- ``simple``: takes no parameter ``p``, so it may be a mixture's component and an ``eval_prior``;
- ``needs_p``: the prior's parameter ``p`` is required (and allowed);
- ``bigram_only``: for chains of order 1 only (n = 2); ``states``: for this many states only;
- ``mixes``: a mixture of two simple priors' sequences (drawn by its stream, not as tables).

The entries are the draws themselves (:mod:`~induction_probes.circuits.tasks.markov.priors`);
:func:`draw_table` draws by name."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.registry import Registry, python_function
from induction_probes.circuits.tasks.markov.priors import (
    draw_dirichlet,
    draw_doubly_stochastic_tables,
    draw_mixture_tables,
    draw_spectrum_tables,
    draw_unigram,
)

# a Python function taking what draw_prior passes: a builtin such as os.system, registered lazily, is refused
PRIORS = Registry(
    "prior",
    __name__,
    python_function("a function drawing transition tables", "n_seqs", "k", "order", "alpha", "p", "generator"),
)
PRIORS.register("dirichlet", draw_dirichlet, simple=True)
PRIORS.register("doubly-stochastic", draw_doubly_stochastic_tables, simple=True, bigram_only=True)
PRIORS.register("unigram", draw_unigram, simple=True)
PRIORS.register("spectrum", draw_spectrum_tables, needs_p=True, bigram_only=True, states=2)
PRIORS.register("mixture", draw_mixture_tables, needs_p=True, mixes=True)

SIMPLE_PRIORS = PRIORS.where(simple=True)  # a mixture's components and the evaluation priors


def draw_table(
    prior: str, n_seqs: int, k: int, order: int, alpha: float, p: float | None, generator: torch.Generator
) -> Float[Tensor, "batch contexts k"]:
    """Transition tables of ``n_seqs`` chains of order ``order`` from a registered prior, by its registered draw
    (the mixture's refuses: it mixes sequences, not tables)."""
    return PRIORS.get(prior)(n_seqs, k, order, alpha, p, generator)
