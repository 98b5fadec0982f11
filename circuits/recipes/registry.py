"""The recipe registry: every kind of run, by the name its ``config.json`` writes (``recipe.name``). A
registration is the recipe's config class, whose ``name`` is the registered name, with what the command line
and sweeps read from it:

- ``command``: a ``train`` sub-command and a sweep ``recipe`` (a minibatch recipe trained by ``train_run``);
- ``help``: that sub-command's one-line help.

Imports nothing heavy: the entries are resolved on first use."""

from __future__ import annotations

from induction_probes.circuits.common.registry import Registry

RECIPES = Registry("recipe", __name__)
RECIPES.register(
    "markov",
    "induction_probes.circuits.recipes.markov:MarkovRecipe",
    command=True,
    help="ICL-MC: the attention-only transformer (architecture options below)",
)
RECIPES.register(
    "minimal",
    "induction_probes.circuits.recipes.markov:MinimalRecipe",
    command=True,
    help="ICL-MC: Edelman et al.'s minimal model (eq. 6), SGD",
)
RECIPES.register(
    "gaussian",
    "induction_probes.circuits.recipes.gaussian:GaussianRecipe",
    command=True,
    help="Wang et al.'s Gaussian induction task, MSE",
)
RECIPES.register(
    "toy",
    "induction_probes.circuits.recipes.gaussian:ToyRecipe",
    command=False,
    help="Wang et al.'s six-parameter toy model (the toy command)",
)

TRAINED = RECIPES.where(command=True)  # the train sub-commands and the recipes a sweep may name
