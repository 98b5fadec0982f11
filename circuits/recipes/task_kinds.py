"""One registration per task: a :class:`TaskKind` holds a task's config class and the recipes that train on it,
registered in :data:`TASK_KINDS` under the task's ``name`` (the ``task.name`` of a run's ``config.json``).

The task and recipe classes are the objects themselves. How a task's runs are probed and what the commands show
for them is the probe layer's, which this layer may not import: its ``TASK_PROBES`` and ``TASK_VIEWS``, keyed by
the same name. The face's ``register_task(kind, probe=, view=)`` writes all three; a kind without a probe or a
view of its own gets the generic ones, the registered attention probes and the task's own metrics.

Recipe names are one namespace across kinds (a run's ``recipe.name``): a kind whose recipe another kind holds is
refused, and so is a second kind for a task name already taken. A recipe that trains one of the package's tasks
comes with a task of its own name (a subclass), since the package's kinds are not replaced.

The readers of a run's ``config.json`` (:func:`task_from_json`, :func:`recipe_from_json`) live here, beside the
registry they read."""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from induction_probes.circuits.config import Config
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.plugins import PLUGINS_VARIABLE
from induction_probes.circuits.recipes.gaussian_recipes import GaussianRecipe, ToyRecipe
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe, MinimalRecipe
from induction_probes.circuits.recipes.text_recipe import TextRecipe
from induction_probes.circuits.registry import Expects, Registry, UnknownName, resolve, top_level_reference
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.tasks.task_config import TaskConfig
from induction_probes.circuits.tasks.text_task import TextTask
from induction_probes.circuits.validation import quoted


@dataclass(frozen=True)
class RecipeEntry:
    """A recipe of a task kind: its config class, a one-line help, and whether it is a ``train`` sub-command
    trained by ``train_run`` (``command``; otherwise only a sweep may name it, as the toy model, which the
    ``toy`` command trains)."""

    recipe: type
    help: str
    command: bool = True

    def __post_init__(self) -> None:
        if not (isinstance(self.recipe, type) and issubclass(self.recipe, Config) and is_dataclass(self.recipe)):
            raise BadInput(f"a recipe is a config class (a dataclass and a Config), got {quoted(self.recipe)}")


@dataclass(frozen=True)
class TaskKind:
    """A task and the recipes that train on it. How its runs are probed and shown is the probe layer's, given
    beside it to the face's ``register_task``."""

    task: type
    recipes: tuple[RecipeEntry, ...]

    def __post_init__(self) -> None:
        if not (isinstance(self.task, type) and issubclass(self.task, TaskConfig)):
            raise BadInput(f"a task kind's task is a task config class (a TaskConfig), got {quoted(self.task)}")
        object.__setattr__(self, "recipes", tuple(self.recipes))
        for entry in self.recipes:
            trains = task_of(entry.recipe)
            if trains is not None and trains is not self.task:
                raise BadInput(
                    f"recipe {entry.recipe.name} trains the task {trains.name}, not {self.task.name}: "
                    "register it with that task's kind"
                )

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def defined_in(self) -> str:
        """The module that defines the task (whether this kind is one of the package's own)."""
        return self.task.__module__

    def reference(self) -> dict[str, Any]:
        """This kind as plain data another process (a sweep's worker) rebuilds with :meth:`from_reference`."""
        return {
            "task": top_level_reference(self.task, self.task.__qualname__),
            "recipes": [
                {"recipe": top_level_reference(e.recipe, e.recipe.__qualname__), "help": e.help, "command": e.command}
                for e in self.recipes
            ],
        }

    @classmethod
    def from_reference(cls, data: dict[str, Any]) -> TaskKind:
        recipes = [RecipeEntry(resolve(e["recipe"]), e["help"], e["command"]) for e in data["recipes"]]
        return cls(resolve(data["task"]), tuple(recipes))


def task_of(recipe: type) -> type | None:
    """The task config class a recipe class trains on (its ``task`` field, declared with ``nested``), or
    ``None`` for a recipe without a task (the toy model)."""
    task_field = next((f for f in fields(recipe) if f.name == "task"), None)
    if task_field is None:
        return None
    config = task_field.metadata.get("config")
    if config is None:
        raise BadInput(f"recipe {recipe.__name__} declares no task class: give it `task: T = nested(T)`")
    return config


TASK_KINDS = Registry(
    "task",
    __name__,
    Expects("a TaskKind", lambda entry: isinstance(entry, TaskKind)),
    rebuild=TaskKind.from_reference,
)


def register_kind(kind: TaskKind, *, replace: bool = False) -> TaskKind:
    """Register ``kind`` under its task's name. Refused where another kind holds one of its recipe names. The
    face's ``register_task`` calls it, with the kind's probe and view, once it has checked that ``kind`` is one."""
    for entry in kind.recipes:
        held = find_recipe(entry.recipe.name)
        if held is not None and held[0].name != kind.name:
            raise BadInput(f"the recipe {quoted(entry.recipe.name)} is registered already, by the task {held[0].name}")
    TASK_KINDS.register(kind.name, kind, replace=replace)
    return kind


def unregister_kind(kind: TaskKind | str) -> None:
    """Undo :func:`register_kind`: the kind (or the kind registered under that task name) and its recipes."""
    TASK_KINDS.unregister(kind.name if isinstance(kind, TaskKind) else kind)


def find_recipe(name: str) -> tuple[TaskKind, RecipeEntry] | None:
    """The kind that holds the recipe called ``name``, and its entry there; None if no kind does."""
    return next(((kind, e) for _, kind in TASK_KINDS.items() for e in kind.recipes if e.recipe.name == name), None)


def recipe_entry(name: str) -> RecipeEntry:
    """The registered recipe called ``name``; an :class:`UnknownName` otherwise."""
    found = find_recipe(name)
    if found is None:
        raise UnknownName(f"unknown recipe {quoted(name)} (known: {', '.join(recipe_names()) or 'none'})")
    return found[1]


def recipe_entries(*, command: bool | None = None) -> list[RecipeEntry]:
    """Every registered recipe, in registration order; with ``command``, those that are (or are not) ``train``
    sub-commands."""
    entries = [e for _, kind in TASK_KINDS.items() for e in kind.recipes]
    return [e for e in entries if command is None or e.command == command]


def recipe_names(*, command: bool | None = None) -> list[str]:
    """The names of :func:`recipe_entries`."""
    return [e.recipe.name for e in recipe_entries(command=command)]


def task_from_json(values: Any) -> TaskConfig:
    """The task a run's ``config.json`` describes (``{"name": ..., parameters}``)."""
    if not isinstance(values, dict) or not isinstance(values.get("name"), str) or values["name"] not in TASK_KINDS:
        raise BadInput(f"not a known task description (tasks: {', '.join(TASK_KINDS)}): {quoted(values)}")
    parameters = {key: value for key, value in values.items() if key != "name"}
    return TASK_KINDS.get(values["name"]).task.from_dict(parameters)


def plugin_of(recipe) -> str | None:
    """The module outside this package that defined ``recipe``'s task or recipe class (a plugin), if any: a run's
    config records it, so that a reader without the plugin can be told which module to name."""
    modules = [type(recipe.task).__module__ if task_of(type(recipe)) is not None else None, type(recipe).__module__]
    return next((m for m in modules if m and not m.startswith("induction_probes")), None)


def plugin_hint(config: dict) -> str:
    """What a run's config says of the plugin that defined its task: the module to name, and where."""
    plugin = config.get("plugin")
    if not isinstance(plugin, str):
        return ""
    return (
        f"; it was trained with the plugin module {quoted(plugin)}: name it in ${PLUGINS_VARIABLE} (docs/extending.md)"
    )


def recipe_from_json(recipe: Any, task: Any):
    """The recipe of a run from its ``config.json`` entries ``recipe`` and ``task``."""
    names = recipe_names()
    if not isinstance(recipe, dict) or not isinstance(recipe.get("name"), str) or recipe["name"] not in names:
        raise BadInput(f"not a known recipe (recipes: {', '.join(names)}): {quoted(recipe)}")
    values = {key: value for key, value in recipe.items() if key != "name"}
    recipe_class = recipe_entry(recipe["name"]).recipe
    if task_of(recipe_class) is not None:
        values["task"] = task_from_json(task)
    return recipe_class.from_dict(values)


# The package's own tasks; how their runs are probed and shown the probe layer registers under the same names
# (probes/run_level/all_probes.py's TASK_PROBES, probes/report/run_views.py's views), since this layer cannot import
# it.
register_kind(
    TaskKind(
        MarkovTask,
        (
            RecipeEntry(MarkovRecipe, "ICL-MC: the attention-only transformer (architecture options below)"),
            RecipeEntry(MinimalRecipe, "ICL-MC: Edelman et al.'s minimal model (eq. 6), SGD"),
        ),
    )
)
register_kind(
    TaskKind(
        GaussianTask,
        (
            RecipeEntry(GaussianRecipe, "Wang et al.'s Gaussian induction task, MSE"),
            RecipeEntry(ToyRecipe, "Wang et al.'s six-parameter toy model (the toy command)", command=False),
        ),
    )
)
register_kind(
    TaskKind(
        TextTask,
        (
            RecipeEntry(
                TextRecipe, "next-byte prediction on a UTF-8 text file: a standard transformer (Wang et al. Fig 3)"
            ),
        ),
    )
)
