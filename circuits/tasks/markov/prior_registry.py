"""The registry of ICL-MC's priors over transition tables (:mod:`~induction_probes.circuits.tasks.markov.priors`
says what each is). A registration is a function ``draw(n_seqs, k, order, alpha, p, generator)`` returning
``[n_seqs, k**order, k]`` row-stochastic tables, with what the task's checks read from it:

- ``simple``: takes no parameter ``p``, so it may be a mixture's component and an ``eval_prior``;
- ``needs_p``: the prior's parameter ``p`` is required (and allowed);
- ``bigram_only``: for chains of order 1 only (n = 2); ``states``: for this many states only;
- ``mixes``: a mixture of two simple priors' sequences (drawn by its stream, not as tables).

Imports nothing heavy: the entries are resolved on first use."""

from __future__ import annotations

from induction_probes.circuits.registry import Expects, Registry

_DRAWS = "induction_probes.circuits.tasks.markov.priors"

PRIORS = Registry("prior", __name__, Expects("a function drawing transition tables", callable))
PRIORS.register("dirichlet", f"{_DRAWS}:draw_dirichlet", simple=True)
PRIORS.register("doubly-stochastic", f"{_DRAWS}:draw_doubly_stochastic_tables", simple=True, bigram_only=True)
PRIORS.register("unigram", f"{_DRAWS}:draw_unigram", simple=True)
PRIORS.register("spectrum", f"{_DRAWS}:draw_spectrum_tables", needs_p=True, bigram_only=True, states=2)
PRIORS.register("mixture", "induction_probes.circuits.tasks.markov.streams:MixtureStream", needs_p=True, mixes=True)

SIMPLE_PRIORS = PRIORS.where(simple=True)  # a mixture's components and the evaluation priors
