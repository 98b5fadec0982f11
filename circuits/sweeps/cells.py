"""One cell of a sweep (``circuits/sweeps/sweep_runner.py``): whether its directory is new, partial or finished, from
its own files, and its training in a worker process (fresh, or resumed where it stopped), reported without
ever raising. Torch is imported only in the functions that train."""

from __future__ import annotations

import json
import time
from pathlib import Path

from safetensors import SafetensorError, safe_open

from induction_probes.circuits.plugins import load_plugins
from induction_probes.circuits.recipes.task_kinds import recipe_from_json
from induction_probes.circuits.registry import outside_registrations, register_again
from induction_probes.circuits.runs.layout import RESUME_FILE
from induction_probes.circuits.runs.reader import read_manifest, sha256_of
from induction_probes.circuits.sweeps.sweep_spec import Cell, SpecError
from induction_probes.circuits.threads import one_thread_for_the_process
from induction_probes.circuits.training.run_lock import RunLocked
from induction_probes.circuits.training.toy_training import train_toy
from induction_probes.circuits.training.train_loop import saved_recipe, train_run
from induction_probes.circuits.untrusted import CheckpointError, read_text, refuse_links_below
from induction_probes.circuits.workers.worker_start import drop_current_folder


def cell_status(path: Path, recipe, root: Path) -> str:
    """Whether a cell directory of the sweep in ``root`` is new, done or partial, from its own files; a
    SpecError if it holds another recipe, a CheckpointError if a link sits anywhere on the way below ``root``
    (a linked condition folder would put a run, or its lock, outside the sweep)."""
    refuse_links_below(root, path, why="a sweep reads and writes only inside its own directory")
    config_path = path / "config.json"
    if not config_path.exists():
        return "new"

    if saved_recipe(path) != recipe:
        raise SpecError(f"{path} holds a run of another recipe than this spec's")
    if not is_finished(path):
        return "partial"
    return "damaged" if damage(path) else "done"


def damage(path: Path) -> str | None:
    """What is wrong with a finished run's last files, or None: its last checkpoint must still have the hash its
    manifest recorded (a file cut in half has not), and the last line of its metrics must be whole and of its
    last step (a line half-written by a killed process is not)."""
    last = read_manifest(path)[-1]
    checkpoint = path / last["file"]
    try:
        refuse_links_below(path, checkpoint)
        if not checkpoint.is_file():  # a pipe there would hold the hash's read for ever
            return f"its last checkpoint {last['file']} is missing or not a regular file"
        digest = sha256_of(checkpoint)
    except (OSError, CheckpointError) as error:
        return f"its last checkpoint cannot be read ({error})"
    if digest != last.get("sha256"):
        return f"its last checkpoint {last['file']} is not the file its manifest recorded (cut short or changed)"
    try:
        lines = read_text(path / "metrics.jsonl", root=path).splitlines()
        final = json.loads(lines[-1])["step"] if lines else None
    except (OSError, CheckpointError, ValueError, KeyError, TypeError):
        final = None
    if final != last["step"]:
        return f"the last line of its metrics.jsonl is not a whole record of step {last['step']}"
    return None


def is_finished(path: Path) -> bool:
    """Whether ``path`` holds a run that trained every step of its recipe and saved its last resume state."""
    if not (path / "config.json").is_file() or not (path / "manifest.json").is_file():
        return False
    steps = [entry["step"] for entry in read_manifest(path)]
    recipe = saved_recipe(path)
    if not steps or steps[-1] != recipe.steps:
        return False
    # the trainer lists its last checkpoint, then saves the resume state of that step: a run killed in between
    # (a lost node, a killed driver) holds the previous checkpoint's, so it is partial, to be resumed from there
    # (the toy's loop saves no resume state: its last checkpoint ends it)
    return recipe.name == "toy" or resume_step(path / RESUME_FILE) == recipe.steps


def resume_step(path: Path) -> int | None:
    """The step of the resume state at ``path`` (from its header alone), None if it is not one."""
    if not path.is_file():
        return None
    try:
        with safe_open(path, "np") as handle:
            return json.loads((handle.metadata() or {})["state"])["step"]
    except (OSError, ValueError, KeyError, TypeError, SafetensorError):
        return None


def run_cell(root: str, cell_json: dict) -> dict:
    """Train one unfinished cell (fresh, or continued where it stopped) in its own process; never raises:
    a failure is reported in the result so that it never takes the other cells down."""

    one_thread_for_the_process()  # the thread policy's default: the cell's model is small
    started = time.perf_counter()
    drop_current_folder()  # on Ray too, before a plugin is imported (worker_start's docstring)
    load_plugins()  # the installed plugins' entry points, as every process of the tool loads them
    register_again(cell_json.get("registrations", []))  # the tasks, recipes, probes, priors its parent registered
    recipe = recipe_from_json(cell_json["recipe"], cell_json["task"])
    path = Path(root) / cell_json["path"]
    result = {"cell": cell_json["path"], "status": "", "seconds": 0.0, "error": None}
    try:
        status = cell_status(path, recipe, Path(root))
        if status == "done":  # finished by another sweep since this one looked
            return result | {"status": "skipped"}
        if status == "damaged":  # never "skipped": summarize would refuse it; retraining would hide the damage
            raise CheckpointError(f"finished but damaged: {damage(path)}; remove {path} and run again to retrain it")
        if recipe.name == "toy":
            final_kl = train_toy_cell(recipe, path, status, cell_json.get("device"))
        else:
            run = train_run(
                recipe if status == "new" else None,
                path,
                resume=status == "partial",
                progress=False,
                device=cell_json.get("device"),
                background=False,  # the sweep's workers fill the cores, one cell each
            )
            final_kl = run.metrics()[-1].get("last_token_kl", {}).get("true")
        result |= {"status": "trained" if status == "new" else "resumed", "final_kl": final_kl}
    except RunLocked:  # another sweep (or trainer) is training it now: its status is that one's to report
        result |= {"status": "busy", "error": "another process is training this cell"}
    except Exception as error:  # noqa: BLE001 -- reported per cell, the sweep goes on
        result |= {"status": "failed", "error": f"{type(error).__name__}: {error}".splitlines()[0]}
    return result | {"seconds": round(time.perf_counter() - started, 2)}


def train_toy_cell(recipe, path: Path, status: str, device: str | None) -> None:
    """A toy cell (``train_toy``: seconds, no resume state): trained from its first step; an interrupted one
    is refused, since its files cannot be continued."""
    if status == "partial":
        raise SpecError(f"{path} holds an interrupted toy run, which cannot be resumed: remove it and run again")
    train_toy(recipe, path, device=device)
    return None  # a toy run has no KL


def died(cell: dict, error: Exception) -> dict:
    """The result of a cell whose worker process died before it could report."""
    message = f"{type(error).__name__}: {error}".splitlines()[0]
    return {"cell": cell["path"], "status": "failed", "seconds": 0.0, "error": f"its worker died ({message})"}


def cell_json(cell: Cell) -> dict:
    return {
        "path": cell.relative_path,
        "recipe": cell.recipe.to_json(),
        "task": cell.recipe.task.to_json(),
        "registrations": outside_registrations(),
    }


HEARTBEAT_SECONDS = 30  # a line about the cells in training at least this often, so a long cell is never silent


def training_line(root: Path, cells: list[dict]) -> str:
    """Where the cells in training are, from each one's metrics as written so far (a line half-written, or no
    metrics yet, reads as starting)."""
    where = []
    for cell in cells:
        try:
            lines = read_text(Path(root) / cell["path"] / "metrics.jsonl", root=Path(root)).splitlines()
            step = json.loads(lines[-1])["step"]
        except (OSError, CheckpointError, ValueError, KeyError, TypeError, IndexError):
            step = None
        total = cell["recipe"].get("steps")
        where.append(f"{cell['path']} " + ("starting" if step is None else f"at step {step} of {total}"))
    return "training: " + (", ".join(where) if where else "waiting for a worker")
