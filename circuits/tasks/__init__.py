"""The tasks: what a model is trained and probed on, one folder per task (``markov/``: ICL-MC, Edelman et al. 2024;
``gaussian/``: Wang et al.'s Gaussian induction task), each a config beside the maths it calls.

A task draws training batches from a ``torch.Generator`` (a
:class:`~induction_probes.circuits.tasks.task_config.Stream`),
computes the training loss, and draws a fixed evaluation set (with a seed of its own) that scores a model's outputs;
probes draw their inputs the same way, with another seed. ``to_json`` describes the task in a run's ``config.json``,
and ``task_from_json`` reads it back through the registry of task kinds
(:mod:`~induction_probes.circuits.recipes.task_kinds`), where a task from outside the package registers too.
"""
