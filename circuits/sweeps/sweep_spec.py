"""The experiment spec of a sweep (``circuits/sweeps/sweep_runner.py`` runs it): conditions × grid × seeds, each cell a
standard run directory.

A spec is a TOML file::

    recipe = "markov"                  # markov, minimal, gaussian, toy, or a recipe registered with a train command
    seeds = [0, 1, 2]                  # seed S sets the model, data and eval seeds to S, S+1, S+2 (those it has)
    description = "free text"          # optional
    count = "doubly-stochastic"        # optional: summaries count training sequences of this prior only

    [base]                             # recipe and task fields (names as in config.json), for every cell
    k = 4
    steps = 2000

    [conditions.doubly-stochastic]     # optional named sets of overrides; none means one condition "base"
    prior = "doubly-stochastic"
    [conditions.mixture]
    prior = "mixture"
    p = 0.75

    [grid]                             # optional: every combination of these values, in every condition
    lr = [1e-3, 3e-3]

A cell's directory is ``DIR/<condition>[/<key>=<value>...]/seed-<S>``. A sweep writes its spec into
``DIR/spec.toml`` (refusing a directory that holds another spec) and a line per finished cell, with its
wall time, into ``DIR/sweep.jsonl``; the run directories themselves hold nothing that depends on the
machine or the clock, so every backend writes the same bytes.
"""

from __future__ import annotations

import itertools
import math
import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from induction_probes.circuits.config import MissingOption, config_from_options, option_names
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import MAX_CELLS, MAX_NAME, MAX_SPEC_BYTES
from induction_probes.circuits.recipes.recipe import SEED_FIELDS, seeds_from
from induction_probes.circuits.recipes.task_kinds import recipe_entry, recipe_names
from induction_probes.circuits.tasks.markov.prior_registry import PRIORS
from induction_probes.circuits.untrusted import read_text
from induction_probes.circuits.validation import quoted


def sweep_recipes() -> list[str]:
    """The recipes a sweep may name: those with a train sub-command, then the others (the toy)."""
    return [*recipe_names(command=True), *recipe_names(command=False)]


SPEC_KEYS = {"recipe", "seeds", "description", "count", "base", "conditions", "grid"}
SPEC_FILE, LOG_FILE = "spec.toml", "sweep.jsonl"
PATH_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._,=+-]*")  # a condition's directory name: never "..", "/" or empty


class SpecError(BadInput):
    """An experiment spec that cannot be run as written."""


@dataclass(frozen=True)
class Cell:
    """One run of a sweep: its condition (with grid values), seed and recipe."""

    condition: str
    seed: int
    recipe: Any

    @property
    def relative_path(self) -> str:
        return f"{self.condition}/seed-{self.seed}"

    def describe(self) -> str:
        return f"{self.condition} seed {self.seed}"


@dataclass(frozen=True)
class Spec:
    recipe: str
    seeds: tuple[int, ...]
    base: dict[str, Any]
    conditions: dict[str, dict[str, Any]]
    grid: dict[str, list[Any]]
    text: str
    description: str = ""
    count: str | None = None

    def grid_points(self) -> list[dict[str, Any]]:
        return [dict(zip(self.grid, values)) for values in itertools.product(*self.grid.values())]

    def condition_names(self) -> list[str]:
        return [condition_label(name, point) for name in self.conditions for point in self.grid_points()]

    def cells(self) -> list[Cell]:
        """Every cell in a fixed order: condition, then grid point, then seed."""
        recipe_class = recipe_entry(self.recipe).recipe
        cells = []
        for name, overrides in self.conditions.items():
            for point in self.grid_points():
                for seed in self.seeds:
                    options = seeds_from(seed, recipe_class) | self.base | overrides | point
                    label = condition_label(name, point)
                    try:
                        recipe = config_from_options(recipe_class, options)
                    except MissingOption as error:  # named as the spec names it, not as a command-line option
                        raise SpecError(
                            f"condition {label}: the spec sets no {error.name}, which the {self.recipe} recipe "
                            f"requires: add `{error.name} = ...` under [base] (or to each condition)"
                        ) from None
                    except ValueError as error:
                        raise SpecError(f"condition {label}: {error}") from None
                    cells.append(Cell(label, seed, recipe))
        check_distinct(cells)
        return cells


def schedule_notes(cells: list[Cell]) -> list[str]:
    """A line for each condition whose cosine learning-rate decay spans other steps than its recipe's default: the
    decay follows ``steps`` unless ``schedule_steps`` sets its span, so a shorter run decays faster, and its phases
    need not come where the default recipe's do (a sweep of "the default recipe" at 800 steps saw no transition in
    0 of 2 seeds)."""
    notes = {}
    for cell in cells:
        recipe = cell.recipe
        default = next((f.default for f in fields(type(recipe)) if f.name == "steps"), None)
        chosen = getattr(recipe, "schedule_steps", None) is not None  # the spec set the span itself: no note
        rescaled = default is not None and recipe.steps != default and not chosen
        if getattr(recipe, "lr_schedule", None) == "cosine" and rescaled:
            notes[cell.condition] = (
                f"note: condition {cell.condition} trains {recipe.steps} steps where the {recipe.name} recipe's "
                f"default is {default}: its cosine learning-rate decay is rescaled to end at step {recipe.steps}, "
                f"so its schedule is not the default recipe's (schedule_steps = {default} keeps the default's rates, "
                f'cut at step {recipe.steps}; lr_schedule = "constant" keeps the rate fixed)'
            )
    return list(notes.values())


def condition_label(name: str, grid_point: dict) -> str:
    """The condition's directory below the sweep: its name, then one ``key=value`` per grid entry; each
    part a plain name (letters, digits, ``._,=+-``), so that no cell can land outside the sweep."""
    as_text = lambda value: ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)  # noqa: E731
    parts = [name, *(f"{key}={as_text(value)}" for key, value in grid_point.items())]
    bad = [part for part in parts if not PATH_PART.fullmatch(part) or part in (SPEC_FILE, LOG_FILE)]
    if bad:
        raise SpecError(
            f"{quoted(bad[0])} cannot name a directory of the sweep: use letters, digits and ._,=+- "
            "(not starting with a dot or a sign)"
        )
    long = [part for part in parts if len(part) > MAX_NAME]
    if long:
        raise SpecError(
            f"{quoted(long[0][:20])}... ({len(long[0])} characters) cannot name a directory of the sweep: "
            f"at most {MAX_NAME} characters (circuits/limits.py)"
        )
    return "/".join(parts)


def check_distinct(cells: list[Cell]) -> None:
    """Two cells with one directory, or one recipe under two names, would train one run twice."""
    seen: dict = {}
    for cell in cells:
        for key in (cell.relative_path, cell.recipe):
            if key in seen:
                raise SpecError(
                    f"cells {seen[key].relative_path} and {cell.relative_path} are the same run; "
                    "remove the repeated condition or grid value"
                )
            seen[key] = cell


def tomlish(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def parse_spec(text: str, source: str = "spec") -> Spec:
    """The spec in ``text``; every mistake is a :class:`SpecError` naming it."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{source} is not valid TOML: {error}") from None
    except RecursionError:  # arrays or tables nested deeper than the parser goes
        raise SpecError(f"{source} is nested too deeply to be a spec") from None
    unknown = sorted(set(raw) - SPEC_KEYS)
    if unknown:
        raise SpecError(f"{source}: unknown keys {', '.join(unknown)} (a spec has {', '.join(sorted(SPEC_KEYS))})")
    if raw.get("recipe") not in sweep_recipes():
        raise SpecError(
            f"{source}: recipe must be one of {', '.join(sweep_recipes())}, got {quoted(raw.get('recipe'))}"
        )
    seeds = raw.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise SpecError(f"{source}: seeds must be a non-empty list of integers >= 0")
    if len(set(seeds)) != len(seeds):
        raise SpecError(f"{source}: seeds repeat")
    if not isinstance(raw.get("description", ""), str):  # free text, shown as it is: a table would print as a dict
        raise SpecError(f"{source}: description must be a string, got {quoted(raw['description'])}")
    if raw.get("count") is not None and raw["count"] not in PRIORS:
        raise SpecError(f"{source}: count must name a prior ({', '.join(PRIORS)}), got {quoted(raw['count'])}")
    tables = {key: raw.get(key, {}) for key in ("base", "conditions", "grid")}
    for key, table in tables.items():
        if not isinstance(table, dict):
            raise SpecError(f"{source}: [{key}] must be a table")
    conditions = tables["conditions"] or {"base": {}}
    if not all(isinstance(overrides, dict) for overrides in conditions.values()):
        raise SpecError(f"{source}: each [conditions.NAME] must be a table of overrides")
    if not all(isinstance(values, list) and values for values in tables["grid"].values()):
        raise SpecError(f"{source}: each [grid] entry must be a non-empty list of values")
    check_cell_count(source, len(seeds), len(conditions), [len(values) for values in tables["grid"].values()])
    known = set(option_names(recipe_entry(raw["recipe"]).recipe)) - set(SEED_FIELDS)
    for where, names in [("base", tables["base"]), ("grid", tables["grid"])] + [
        (f"conditions.{name}", overrides) for name, overrides in conditions.items()
    ]:
        wrong = sorted(set(names) - known)
        if wrong:
            hint = " (seeds come from `seeds`)" if set(wrong) & set(SEED_FIELDS) else ""
            raise SpecError(
                f"{source}: [{where}] has keys the {raw['recipe']} recipe does not know: {', '.join(wrong)}{hint}"
            )
    spec = Spec(
        recipe=raw["recipe"],
        seeds=tuple(seeds),
        base={key: tomlish(value) for key, value in tables["base"].items()},
        conditions={name: {key: tomlish(v) for key, v in overrides.items()} for name, overrides in conditions.items()},
        grid={key: [tomlish(v) for v in values] for key, values in tables["grid"].items()},
        text=text,
        description=raw.get("description", ""),
        count=raw.get("count"),
    )
    spec.cells()  # every cell's recipe is checked before anything runs
    return spec


def check_cell_count(source: str, n_seeds: int, n_conditions: int, grid_sizes: list[int]) -> None:
    """Refuse more than :data:`MAX_CELLS` cells from their counts alone, before any is made (the product of
    three grids of 2,000 values would take gigabytes to list)."""
    log_cells = math.log(n_seeds) + math.log(n_conditions) + sum(map(math.log, grid_sizes))
    if log_cells > math.log(MAX_CELLS) + 1e-9:
        sizes = " x ".join(map(str, [n_conditions, *grid_sizes, n_seeds]))
        raise SpecError(
            f"{source}: {sizes} (conditions x grid values x seeds) cells is above the limit of "
            f"{MAX_CELLS:,} (circuits/limits.py)"
        )


def read_spec(path: str | Path, sweep_dir: Path | None = None) -> Spec:
    """The spec in the file ``path``; in a sweep's directory (``sweep_dir``, which a stranger may have
    written) no link on the way is followed. A regular file of at most :data:`MAX_SPEC_BYTES` either way."""
    path = Path(path) if sweep_dir is not None else Path(path).resolve()  # the user's own file may be a link
    try:
        text = read_text(path, MAX_SPEC_BYTES, root=sweep_dir if sweep_dir is not None else path)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise SpecError(f"cannot read spec {path}: {error}") from None
    return parse_spec(text, str(path))
