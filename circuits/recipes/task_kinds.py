"""One registration per task: a :class:`TaskKind` holds a task's config class, the recipes that train on it,
how its runs are probed and what the commands show for them, registered in :data:`TASK_KINDS` under the task's
``name`` (the ``task.name`` of a run's ``config.json``).

The task and recipe classes are the objects themselves. How the package's own tasks' runs are probed and shown
is the probe layer's, by task class (``TASK_PROBES``, ``TASK_VIEWS``): this layer may not import it. A kind
registered from outside may give its own, as functions (or, from a module below the probe layer, as
``"module:function"`` references, resolved when asked for); a kind without them gets the generic probes and
views, the registered attention probes and the task's own metrics (``probe_run``, ``view_of``).

Recipe names are one namespace across kinds (a run's ``recipe.name``): a kind whose recipe another kind holds is
refused, and so is a second kind for a task name already taken. A recipe that trains one of the package's tasks
comes with a task of its own name (a subclass), since the package's kinds are not replaced.

The readers of a run's ``config.json`` (:func:`task_from_json`, :func:`recipe_from_json`) live here, beside the
registry they read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

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

if TYPE_CHECKING:  # the signatures' types: a run and a model
    from induction_probes.circuits.devices import Device
    from induction_probes.circuits.models.hooked_model import HookedModel
    from induction_probes.circuits.runs.reader import Run

    Shown = str | dict[str, Any]  # a view's answer: the command's text, or with as_json its JSON-ready dict


class ProbedRun(Protocol):
    """What probing a run gives, as this layer sees it: the probe layer's ``RunProbes`` (which
    :func:`~induction_probes.probes.run_level.all_probes.probe_run` checks it is), a sequence of checkpoints' probes
    in step order with their tidy rows."""

    @property
    def steps(self) -> list[int]: ...

    def to_records(self, sequences_seen: int | None = None) -> list[dict[str, Any]]: ...


class RunProbe(Protocol):
    """How a task's runs are probed: every one of ``steps`` on ``eval_set`` (None: the probe set's default)."""

    def __call__(self, run: Run, eval_set: Any, steps: list[int], device: Device, /) -> ProbedRun: ...


class ProbeView(Protocol):
    """What ``probe`` shows: the probes of ``steps`` on ``n_seqs`` fresh sequences drawn with ``seed``."""

    def __call__(
        self, run: Run, steps: list[int], n_seqs: int, seed: int, /, *, device: Device, plot: Path | None, as_json: bool
    ) -> Shown: ...


class AblateView(Protocol):
    """What ``ablate`` shows: ``model`` (the run's checkpoint at ``step``) with each of ``head_sets`` ablated."""

    def __call__(
        self,
        run: Run,
        model: HookedModel,
        head_sets: Any,
        step: int,
        mode: str,
        n_seqs: int,
        seed: int,
        /,
        *,
        device: Device,
        plot: Path | None,
        as_json: bool,
    ) -> Shown: ...


class ReportView(Protocol):
    """What ``report`` shows: the run over training."""

    def __call__(self, run: Run, /, *, device: Device, plot: Path | None, as_json: bool) -> Shown: ...


class HtmlView(Protocol):
    """``report --html``: the one-page report, written into ``directory``; its path."""

    def __call__(self, run: Run, directory: Path, device: Device, /) -> Path: ...


@dataclass(frozen=True)
class TaskView:
    """What ``probe``, ``ablate`` and ``report`` show for a task's runs: four functions of the signatures above
    (:mod:`~induction_probes.probes.report.run_views` calls them), each the function itself or, from a module that
    cannot import it, its ``"module:function"`` reference."""

    probe: ProbeView | str
    ablate: AblateView | str
    report: ReportView | str
    html: HtmlView | str


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
    """A task, the recipes that train on it, how its runs are probed (``probe``: the function
    ``probe(run, eval_set, steps, device)`` returning a ``RunProbes``, or its ``"module:function"``) and its
    ``view``; ``None``: the generic ones."""

    task: type
    recipes: tuple[RecipeEntry, ...]
    probe: RunProbe | str | None = None
    view: TaskView | None = None

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
            "probe": code_reference(self.probe),
            "view": None if self.view is None else {part: code_reference(f) for part, f in vars(self.view).items()},
        }

    @classmethod
    def from_reference(cls, data: dict[str, Any]) -> TaskKind:
        recipes = [RecipeEntry(resolve(e["recipe"]), e["help"], e["command"]) for e in data["recipes"]]
        view = None if data["view"] is None else TaskView(**data["view"])
        return cls(resolve(data["task"]), tuple(recipes), data["probe"], view)


def code_reference(function: Callable | str | None) -> str | None:
    """A probe's or a view's function as the ``"module:function"`` another process finds it by."""
    if function is None or isinstance(function, str):
        return function
    return top_level_reference(function, getattr(function, "__qualname__", repr(function)))


def code_object(function: Any) -> Any:
    """A probe's or a view's function itself: its ``"module:function"`` resolved, the function as it is."""
    return resolve(function) if isinstance(function, str) else function


def run_probe_of(kind: TaskKind) -> RunProbe | None:
    """The function that probes the kind's runs (``None``: the generic probes)."""
    return code_object(kind.probe)


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


def register_task(kind: TaskKind, *, replace: bool = False) -> TaskKind:
    """Register ``kind`` under its task's name. Refused where another kind holds one of its recipe names."""
    if not isinstance(kind, TaskKind):
        raise BadInput(f"register_task takes a TaskKind, got {quoted(kind)}")
    for entry in kind.recipes:
        held = find_recipe(entry.recipe.name)
        if held is not None and held[0].name != kind.name:
            raise BadInput(f"the recipe {quoted(entry.recipe.name)} is registered already, by the task {held[0].name}")
    TASK_KINDS.register(kind.name, kind, replace=replace)
    return kind


def unregister_task(kind: TaskKind | str) -> None:
    """Undo :func:`register_task`: the kind (or the kind registered under that task name) and its recipes."""
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


# The package's own tasks; how their runs are probed and shown is the probe layer's, by task class
# (probes/run_level/all_probes.py's TASK_PROBES, probes/report/run_views.py's TASK_VIEWS), which this layer cannot
# import.
register_task(
    TaskKind(
        MarkovTask,
        (
            RecipeEntry(MarkovRecipe, "ICL-MC: the attention-only transformer (architecture options below)"),
            RecipeEntry(MinimalRecipe, "ICL-MC: Edelman et al.'s minimal model (eq. 6), SGD"),
        ),
    )
)
register_task(
    TaskKind(
        GaussianTask,
        (
            RecipeEntry(GaussianRecipe, "Wang et al.'s Gaussian induction task, MSE"),
            RecipeEntry(ToyRecipe, "Wang et al.'s six-parameter toy model (the toy command)", command=False),
        ),
    )
)
register_task(
    TaskKind(
        TextTask,
        (
            RecipeEntry(
                TextRecipe, "next-byte prediction on a UTF-8 text file: a standard transformer (Wang et al. Fig 3)"
            ),
        ),
    )
)
