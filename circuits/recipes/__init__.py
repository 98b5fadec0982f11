"""Training recipes: one config class per kind of run, each holding its task and owning its defaults,
checks, help text, model and optimiser.

- :class:`~.markov_recipes.MarkovRecipe` — the attention-only transformer on ICL-MC (Edelman et al. 2024), with its
  architecture (layers, heads per layer, positions, masks, MLP, LayerNorm) open to change.
- :class:`~.markov_recipes.MinimalRecipe` — Edelman et al.'s minimal model (eq. 6) on ICL-MC, trained by SGD.
- :class:`~.gaussian_recipes.GaussianRecipe` — the two-layer model on Wang et al.'s Gaussian induction task.
- :class:`~.gaussian_recipes.ToyRecipe` — Wang et al.'s six-parameter toy model (§5), full-batch gradient descent.

A recipe from outside the package registers in
:mod:`~induction_probes.circuits.recipes.task_kinds`, with its task, and is then read back from its runs like
these.
"""
