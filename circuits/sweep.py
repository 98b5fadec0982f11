"""Many runs from one experiment spec: conditions × grid × seeds, each a standard run directory, on a
local process pool or a Ray cluster, resumable cell by cell.

A spec is a TOML file::

    recipe = "markov"                  # markov, minimal or gaussian (the `train` sub-commands)
    seeds = [0, 1, 2]                  # seed S sets the model, data and eval seeds to S, S+1, S+2
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
import json
import os
import re
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from induction_probes.circuits.config import config_from_options, option_names
from induction_probes.circuits.recipes import GaussianRecipe, MarkovRecipe, MinimalRecipe, recipe_from_json
from induction_probes.circuits.tasks import PRIOR_NAMES

SWEEP_RECIPES = {recipe.name: recipe for recipe in (MarkovRecipe, MinimalRecipe, GaussianRecipe)}
SPEC_KEYS = {"recipe", "seeds", "description", "count", "base", "conditions", "grid"}
SEED_KEYS = ("model_seed", "data_seed", "eval_seed")
SPEC_FILE, LOG_FILE = "spec.toml", "sweep.jsonl"
PATH_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._,=+-]*")  # a condition's directory name: never "..", "/" or empty


class SpecError(ValueError):
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
    base: dict
    conditions: dict[str, dict]
    grid: dict[str, list]
    text: str
    description: str = ""
    count: str | None = None

    def grid_points(self) -> list[dict]:
        return [dict(zip(self.grid, values)) for values in itertools.product(*self.grid.values())]

    def condition_names(self) -> list[str]:
        return [condition_label(name, point) for name in self.conditions for point in self.grid_points()]

    def cells(self) -> list[Cell]:
        """Every cell in a fixed order: condition, then grid point, then seed."""
        recipe_class = SWEEP_RECIPES[self.recipe]
        cells = []
        for name, overrides in self.conditions.items():
            for point in self.grid_points():
                for seed in self.seeds:
                    options = dict(zip(SEED_KEYS, (seed, seed + 1, seed + 2))) | self.base | overrides | point
                    label = condition_label(name, point)
                    try:
                        recipe = config_from_options(recipe_class, options)
                    except ValueError as error:
                        raise SpecError(f"condition {label}: {error}") from None
                    cells.append(Cell(label, seed, recipe))
        check_distinct(cells)
        return cells


def condition_label(name: str, grid_point: dict) -> str:
    """The condition's directory below the sweep: its name, then one ``key=value`` per grid entry; each
    part a plain name (letters, digits, ``._,=+-``), so that no cell can land outside the sweep."""
    as_text = lambda value: ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)  # noqa: E731
    parts = [name, *(f"{key}={as_text(value)}" for key, value in grid_point.items())]
    bad = [part for part in parts if not PATH_PART.fullmatch(part) or part in (SPEC_FILE, LOG_FILE)]
    if bad:
        raise SpecError(f"{bad[0]!r} cannot name a directory of the sweep: use letters, digits and ._,=+- "
                        "(not starting with a dot or a sign)")
    return "/".join(parts)


def check_distinct(cells: list[Cell]) -> None:
    """Two cells with one directory, or one recipe under two names, would train one run twice."""
    seen: dict = {}
    for cell in cells:
        for key in (cell.relative_path, cell.recipe):
            if key in seen:
                raise SpecError(f"cells {seen[key].relative_path} and {cell.relative_path} are the same run; "
                                "remove the repeated condition or grid value")
            seen[key] = cell


def tomlish(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def parse_spec(text: str, source: str = "spec") -> Spec:
    """The spec in ``text``; every mistake is a :class:`SpecError` naming it."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{source} is not valid TOML: {error}") from None
    unknown = sorted(set(raw) - SPEC_KEYS)
    if unknown:
        raise SpecError(f"{source}: unknown keys {', '.join(unknown)} (a spec has {', '.join(sorted(SPEC_KEYS))})")
    if raw.get("recipe") not in SWEEP_RECIPES:
        raise SpecError(f"{source}: recipe must be one of {', '.join(SWEEP_RECIPES)}, got {raw.get('recipe')!r}")
    seeds = raw.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise SpecError(f"{source}: seeds must be a non-empty list of integers >= 0")
    if len(set(seeds)) != len(seeds):
        raise SpecError(f"{source}: seeds repeat")
    if raw.get("count") is not None and raw["count"] not in PRIOR_NAMES:
        raise SpecError(f"{source}: count must name a prior ({', '.join(PRIOR_NAMES)}), got {raw['count']!r}")
    tables = {key: raw.get(key, {}) for key in ("base", "conditions", "grid")}
    for key, table in tables.items():
        if not isinstance(table, dict):
            raise SpecError(f"{source}: [{key}] must be a table")
    conditions = tables["conditions"] or {"base": {}}
    if not all(isinstance(overrides, dict) for overrides in conditions.values()):
        raise SpecError(f"{source}: each [conditions.NAME] must be a table of overrides")
    if not all(isinstance(values, list) and values for values in tables["grid"].values()):
        raise SpecError(f"{source}: each [grid] entry must be a non-empty list of values")
    known = set(option_names(SWEEP_RECIPES[raw["recipe"]])) - set(SEED_KEYS)
    for where, names in [("base", tables["base"]), ("grid", tables["grid"])] + [
        (f"conditions.{name}", overrides) for name, overrides in conditions.items()
    ]:
        wrong = sorted(set(names) - known)
        if wrong:
            hint = " (seeds come from `seeds`)" if set(wrong) & set(SEED_KEYS) else ""
            raise SpecError(f"{source}: [{where}] has keys the {raw['recipe']} recipe does not know: {', '.join(wrong)}{hint}")
    spec = Spec(
        recipe=raw["recipe"],
        seeds=tuple(seeds),
        base={key: tomlish(value) for key, value in tables["base"].items()},
        conditions={name: {key: tomlish(v) for key, v in overrides.items()} for name, overrides in conditions.items()},
        grid={key: [tomlish(v) for v in values] for key, values in tables["grid"].items()},
        text=text,
        description=str(raw.get("description", "")),
        count=raw.get("count"),
    )
    spec.cells()  # every cell's recipe is checked before anything runs
    return spec


def read_spec(path: str | Path) -> Spec:
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"cannot read spec {path}: {error}") from None
    return parse_spec(text, str(path))


# --- running cells ------------------------------------------------------------------------------------


def cell_status(path: Path, recipe) -> str:
    """Whether a cell directory is new, done or partial; a SpecError if it holds another recipe."""
    config_path = path / "config.json"
    if not config_path.is_file():
        return "new"
    from induction_probes.circuits.train import saved_recipe

    if saved_recipe(path) != recipe:
        raise SpecError(f"{path} holds a run of another recipe than this spec's")
    return "done" if is_finished(path) else "partial"


def is_finished(path: Path) -> bool:
    """Whether ``path`` holds a run that trained every step of its recipe and saved its last resume state."""
    from induction_probes.circuits.checkpoint import read_manifest
    from induction_probes.circuits.train import RESUME_FILE, saved_recipe

    if not (path / "config.json").is_file() or not (path / "manifest.json").is_file():
        return False
    steps = [entry["step"] for entry in read_manifest(path)]
    return bool(steps) and steps[-1] == saved_recipe(path).steps and (path / RESUME_FILE).is_file()


def run_cell(root: str, cell_json: dict) -> dict:
    """Train one unfinished cell (fresh, or continued where it stopped) in its own process; never raises:
    a failure is reported in the result so that it never takes the other cells down."""
    import torch

    from induction_probes.circuits.train import train_run

    torch.set_num_threads(1)
    started = time.perf_counter()
    recipe = recipe_from_json(cell_json["recipe"], cell_json["task"])
    path = Path(root) / cell_json["path"]
    result = {"cell": cell_json["path"], "status": "", "seconds": 0.0, "error": None}
    try:
        status = cell_status(path, recipe)
        run = train_run(recipe if status == "new" else None, path, resume=status == "partial", progress=False,
                        device=cell_json.get("device"))
        final_kl = run.metrics()[-1].get("last_token_kl", {}).get("true")
        result |= {"status": "trained" if status == "new" else "resumed", "final_kl": final_kl}
    except Exception as error:  # noqa: BLE001 -- reported per cell, the sweep goes on
        result |= {"status": "failed", "error": f"{type(error).__name__}: {error}".splitlines()[0]}
    return result | {"seconds": round(time.perf_counter() - started, 2)}


def died(cell: dict, error: Exception) -> dict:
    """The result of a cell whose worker process died before it could report."""
    message = f"{type(error).__name__}: {error}".splitlines()[0]
    return {"cell": cell["path"], "status": "failed", "seconds": 0.0, "error": f"its worker died ({message})"}


def cell_json(cell: Cell) -> dict:
    return {"path": cell.relative_path, "recipe": cell.recipe.to_json(), "task": cell.recipe.task.to_json()}


def prepare(spec: Spec, out: Path) -> None:
    """Claim ``out`` for this spec: a new or empty directory, or one holding the same spec."""
    from induction_probes.circuits.checkpoint import write_atomic  # torch comes with it: not needed to parse a spec

    saved = out / SPEC_FILE
    if saved.is_file():
        if parse_spec(saved.read_text(), str(saved)).cells() != spec.cells():
            raise SpecError(f"{out} holds another sweep (its {SPEC_FILE} differs); choose another --out")
        write_atomic(saved, spec.text.encode())  # the same cells: a new description or count is taken up
        return
    if out.exists() and any(out.iterdir()):
        raise SpecError(f"{out} is not empty and holds no sweep; choose a new or empty --out")
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(saved, spec.text.encode())


def place_cells(cells: list[dict], device: str | None, gpus_per_cell: float, n_gpus: int) -> list[dict]:
    """Each cell with the device it trains on: ``device`` (default cpu), or with ``gpus_per_cell`` the
    visible GPUs in turn (cell i on cuda:(i mod n_gpus)); several processes share a GPU when fewer
    GPUs than workers are visible, as a fraction asks."""
    if not gpus_per_cell:
        return [cell | {"device": device} for cell in cells]
    return [cell | {"device": f"cuda:{index % n_gpus}"} for index, cell in enumerate(cells)]


def check_placement(device: str | None, gpus_per_cell: float, n_gpus: int | None) -> None:
    """Refuse, before anything is written, a GPU share that is not a number in (0, 1] or a whole number
    of GPUs, a share beside a non-CUDA ``device``, and GPUs asked of a machine without one (``n_gpus``
    None: not known here, a Ray cluster's)."""
    if isinstance(gpus_per_cell, bool) or not isinstance(gpus_per_cell, (int, float)) or not (
            gpus_per_cell == 0 or 0 < gpus_per_cell <= 1 or float(gpus_per_cell).is_integer() and gpus_per_cell > 0):
        raise SpecError(f"--gpus-per-cell must be a fraction in (0, 1] or a whole number of GPUs, "
                        f"got {gpus_per_cell!r}")
    if gpus_per_cell and device is not None and not device.startswith("cuda"):
        raise SpecError(f"--gpus-per-cell places cells on CUDA GPUs; it cannot go with --device {device}")
    if gpus_per_cell and n_gpus == 0:
        raise SpecError(f"--gpus-per-cell {gpus_per_cell:g} asks for a GPU, but this machine has no CUDA GPU")


def local_results(root: Path, cells: list[dict], workers: int):
    """Run cells on a pool of ``workers`` processes (spawned: a clean torch in each), yielding results
    as they finish."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_cell, str(root), cell): cell for cell in cells}
        for future in as_completed(futures):
            try:
                yield future.result()
            except Exception as error:  # noqa: BLE001 -- a worker that died (killed, out of memory)
                yield died(futures[future], error)


def ray_results(root: Path, cells: list[dict], workers: int, address: str | None, gpus_per_cell: float = 0.0):
    """Run cells as Ray tasks of one CPU (and ``gpus_per_cell`` GPUs) each: on the cluster at ``address``,
    or on a local Ray instance of ``workers`` CPUs. Every node must see ``root`` at the same path (a
    shared filesystem). Ray gives a task its GPU share through CUDA_VISIBLE_DEVICES, so it trains on cuda."""
    try:
        import ray
    except ImportError:
        raise SpecError("the ray backend needs Ray: pip install 'induction-probes[ray]'") from None
    if address is None:
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)
    try:
        gpus = ray.cluster_resources().get("GPU", 0)
        if gpus_per_cell > gpus:  # Ray would wait forever for a GPU that is not there
            raise SpecError(f"--gpus-per-cell {gpus_per_cell:g} asks for more GPUs than the Ray cluster has ({gpus:g})")
        remote = ray.remote(num_cpus=1, num_gpus=gpus_per_cell)(run_cell)
        if gpus_per_cell:
            cells = [cell | {"device": "cuda"} for cell in cells]
        pending = {remote.remote(str(root), cell): cell for cell in cells}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            cell = pending.pop(done[0])
            try:
                yield ray.get(done[0])
            except Exception as error:  # noqa: BLE001 -- a worker that died
                yield died(cell, error)
    finally:
        ray.shutdown()


def run_sweep(spec: Spec, out: str | Path, *, workers: int = 1, backend: str = "local", address: str | None = None,
              report=print, device: str | None = None, gpus_per_cell: float = 0.0) -> list[dict]:
    """Train every cell of ``spec`` under ``out``; finished cells are skipped, interrupted ones resumed.
    ``report`` gets one line per finished cell. Returns the cells' results in spec order. Cells train on
    ``device`` (default cpu), or with ``gpus_per_cell`` on a share of a GPU each: Ray's ``num_gpus``, or
    the local pool's visible GPUs in turn."""
    if backend not in ("local", "ray"):
        raise SpecError(f"backend must be local or ray, got {backend!r}")
    if not isinstance(workers, int) or workers < 1:
        raise SpecError(f"workers must be an integer >= 1, got {workers!r}")
    if address is not None and backend != "ray":
        raise SpecError("--address is for the ray backend")
    from induction_probes.circuits.devices import resolve_device, visible_gpus

    if device is not None:
        resolve_device(device)  # a device this machine lacks: refused before the sweep directory is made
    n_gpus = None if backend == "ray" and address is not None else visible_gpus()
    check_placement(device, gpus_per_cell, n_gpus)
    out = Path(out).resolve()  # every worker, on every node, must find the same directory
    prepare(spec, out)
    cells = [cell_json(cell) for cell in spec.cells()]
    recipes = {cell.relative_path: cell.recipe for cell in spec.cells()}
    done = [cell for cell in cells if cell_status(out / cell["path"], recipes[cell["path"]]) == "done"]
    todo = [cell for cell in cells if cell not in done]
    skipped = ({"cell": cell["path"], "status": "skipped", "seconds": 0.0, "error": None} for cell in done)
    if not todo:
        trained = iter(())
    elif backend == "local":
        trained = local_results(out, place_cells(todo, device, gpus_per_cell, n_gpus), min(workers, len(todo)))
    else:
        trained = ray_results(out, place_cells(todo, device, 0.0, 0), workers, address, gpus_per_cell)
    finished: dict[str, dict] = {}
    started = time.perf_counter()
    # a journal for people, appended to; O_NOFOLLOW: a link planted at its name is refused, not followed
    descriptor = os.open(out / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    with os.fdopen(descriptor, "a") as log:
        for result in itertools.chain(skipped, trained):
            finished[result["cell"]] = result
            log.write(json.dumps(result) + "\n")
            log.flush()
            report(progress_line(result, len(finished), len(cells), len(done), time.perf_counter() - started))
    return [finished[cell["path"]] for cell in cells]


def progress_line(result: dict, n_done: int, n_cells: int, n_skipped: int, elapsed: float) -> str:
    """One line per finished cell; the time left is extrapolated from the cells trained so far."""
    line = f"[{n_done}/{n_cells}] {result['cell']}: {result['status']}"
    if result["status"] == "failed":
        return f"{line}: {result['error']}"
    if result["status"] != "skipped":
        kl = result.get("final_kl")
        line += f" in {result['seconds']:.0f} s" + (f", final KL(true||model) {kl:.4f}" if kl is not None else "")
    if n_done > n_skipped and n_done < n_cells:
        line += f"; {elapsed:.0f} s so far, about {elapsed / (n_done - n_skipped) * (n_cells - n_done):.0f} s to go"
    return line
