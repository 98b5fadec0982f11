"""Training recipes: one config class per kind of run, each holding its task and owning its defaults,
checks, help text, model and optimiser.

- :class:`MarkovRecipe` — the attention-only transformer on ICL-MC (Edelman et al. 2024), with its
  architecture (layers, heads per layer, positions, masks, MLP, LayerNorm) open to change.
- :class:`MinimalRecipe` — Edelman et al.'s minimal model (eq. 6) on ICL-MC, trained by SGD.
- :class:`GaussianRecipe` — the two-layer model on Wang et al.'s Gaussian induction task.
- :class:`ToyRecipe` — Wang et al.'s six-parameter toy model (§5), full-batch gradient descent.

Like the tasks, these classes import torch only inside their methods, so that the command line builds
its options from them without loading torch. A recipe from outside the package registers in
:mod:`~induction_probes.circuits.recipes.registry` and is then read back from its runs like these.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from induction_probes.circuits.common.validation import quoted
from induction_probes.circuits.recipes.registry import RECIPES
from induction_probes.circuits.tasks import task_from_json


def recipe_from_json(recipe: Any, task: Any):
    """The recipe of a run from its ``config.json`` entries ``recipe`` and ``task``."""
    if not isinstance(recipe, dict) or not isinstance(recipe.get("name"), str) or recipe["name"] not in RECIPES:
        raise ValueError(f"not a known recipe (recipes: {', '.join(RECIPES)}): {quoted(recipe)}")
    values = {key: value for key, value in recipe.items() if key != "name"}
    recipe_class = RECIPES.get(recipe["name"])
    if any(f.name == "task" for f in fields(recipe_class)):
        values["task"] = task_from_json(task)
    return recipe_class.from_dict(values)
