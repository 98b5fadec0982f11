"""The recipe registry: every kind of run, by the name its ``config.json`` writes (``recipe.name``). A
registration is the recipe's config class, whose ``name`` is the registered name, with what the command line
and sweeps read from it:

- ``command``: a ``train`` sub-command and a sweep ``recipe`` (a minibatch recipe trained by ``train_run``);
- ``help``: that sub-command's one-line help;
- ``sweep``: a sweep ``recipe`` without a train sub-command (the toy model, trained by ``train_toy``).

A new task needs both registrations, its task and the recipe that trains it; :func:`register_task` makes both
from the recipe class alone (the recipe names its task class in its ``task`` field).

Imports nothing heavy: the entries are resolved on first use."""

from __future__ import annotations

from dataclasses import fields, is_dataclass

from induction_probes.circuits.common.config import Config
from induction_probes.circuits.common.registry import Expects, Registry
from induction_probes.circuits.tasks.registry import TASKS


def is_recipe_class(entry: object) -> bool:
    return isinstance(entry, type) and issubclass(entry, Config) and is_dataclass(entry)


RECIPES = Registry("recipe", __name__, Expects("a recipe config class (a dataclass and a Config)", is_recipe_class))
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
    "text",
    "induction_probes.circuits.recipes.text:TextRecipe",
    command=True,
    help="next-byte prediction on a UTF-8 text file: a standard transformer (Wang et al. Fig 3)",
)
RECIPES.register(
    "toy",
    "induction_probes.circuits.recipes.gaussian:ToyRecipe",
    command=False,
    sweep=True,
    help="Wang et al.'s six-parameter toy model (the toy command)",
)

TRAINED = RECIPES.where(command=True)  # the train sub-commands and the recipes a sweep may name
SWEPT_ONLY = RECIPES.where(sweep=True)  # and the other recipes a sweep may name


def task_of(recipe: type) -> type:
    """The task config class a recipe class trains on: its ``task`` field's (declared with ``nested``)."""
    config = next((f.metadata.get("config") for f in fields(recipe) if f.name == "task"), None)
    if config is None:
        raise ValueError(f"recipe {recipe.__name__} declares no task class: give it `task: T = nested(T)`")
    return config


def register_task(recipe: type, *, replace: bool = False, **info):
    """A new task in one call: ``recipe`` (a recipe class, with ``info``: ``command``, ``help``) under its
    ``name``, and the task it trains (:func:`task_of`) under the task's ``name``, unless that very class is
    registered there already (two recipes may train one task)."""
    task = task_of(recipe)
    if replace or task.name not in TASKS or TASKS.get(task.name) is not task:
        TASKS.register(task.name, task, replace=replace)
    return RECIPES.register(recipe.name, recipe, replace=replace, **info)


def unregister_task(recipe: type) -> None:
    """Undo :func:`register_task`: the recipe and its task."""
    RECIPES.unregister(recipe.name)
    TASKS.unregister(task_of(recipe).name)
