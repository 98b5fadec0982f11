"""Reading a run directory (:mod:`~induction_probes.circuits.runs.layout`) without pickle: :class:`Run` opens one,
checks what a stranger's files could get wrong (links, sizes, JSON, sha256, shapes) and loads its models.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from induction_probes.circuits.devices import Device, resolve_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import MAX_TEXT_BYTES
from induction_probes.circuits.models.minimal import MinimalConfig
from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
from induction_probes.circuits.models.model_classes import MODEL_CLASSES, build_model, config_class
from induction_probes.circuits.recipes.task_kinds import plugin_hint, recipe_from_json, task_from_json
from induction_probes.circuits.runs.layout import checkpoint_file
from induction_probes.circuits.runs.shipped import resolve_run
from induction_probes.circuits.untrusted import (
    CheckpointError,
    NotFiniteError,
    not_a_number,
    read_text,
    refuse_links,
)
from induction_probes.circuits.validation import quoted

if TYPE_CHECKING:
    from induction_probes.circuits.recipes.recipe import Recipe
    from induction_probes.circuits.tasks.task_config import TaskConfig


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    """The file's sha256, read a megabyte at a time (memory stays flat whatever the file's size)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def read_metrics_lines(path: Path) -> list[str]:
    """The non-empty lines of a run's ``metrics.jsonl``, each checked to be a JSON object with a step."""
    if not path.is_file():
        raise CheckpointError(f"missing metrics.jsonl in run {path.parent}")
    try:
        lines = [line for line in run_text(path).splitlines() if line.strip()]
        if all(has_integer_step(json.loads(line, parse_constant=not_a_number)) for line in lines):
            return lines
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        pass
    except NotFiniteError as error:
        raise CheckpointError(f"{path} holds {error}: an evaluation that is NaN or infinity is no result") from None
    raise CheckpointError(f"{path} has a line that is not a JSON object with an integer step")


NUMBER_FIELDS = ("sequences_seen", "train_loss", "eval_loss", "relative_mse")  # a number, where a line has one
KL_FIELDS = ("last_token_kl",)  # a strategy name -> number object, where a line has one


def check_metrics(lines: list[dict[str, Any]], steps: list[int], path: Path) -> list[dict[str, Any]]:
    """``lines``, if every field a reader reads is of its type and every checkpoint of the manifest (``steps``)
    has its line (the trainer appends the line before it lists the checkpoint); one clear refusal otherwise, not
    a reader's KeyError or AttributeError."""
    for line in lines:
        wrong = [f for f in NUMBER_FIELDS if f in line and not is_number(line[f])]
        wrong += [f for f in KL_FIELDS if f in line and not is_number_map(line[f])]
        if wrong:
            raise CheckpointError(f"{path} step {line['step']}: {wrong[0]} is not a number (or a map of numbers)")
    if missing := sorted(set(steps) - {line["step"] for line in lines}):
        raise CheckpointError(f"{path} has no evaluation of checkpoint step {missing[0]} (of {len(missing)} missing)")
    return lines


def is_number(value: object) -> bool:
    """A finite number (``1e999`` parses to infinity, which no evaluation is)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_number_map(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and is_number(v) for k, v in value.items())


def has_integer_step(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("step"), int) and not isinstance(value["step"], bool)


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """A run's ``manifest.json``: a list of entries, each with an integer step and the sequences seen by then,
    both counts, in strictly increasing step order (the last entry is the run's last checkpoint)."""
    manifest = read_json(path / "manifest.json")
    where = path / "manifest.json"
    if not isinstance(manifest, list) or not all(map(has_integer_step, manifest)):
        raise CheckpointError(f"{where} is not a list of checkpoints with integer steps")
    steps = [entry["step"] for entry in manifest]
    if any(step < 0 for step in steps) or any(a >= b for a, b in zip(steps, steps[1:])):
        raise CheckpointError(f"{where} is not in increasing step order (steps >= 0, each once): {quoted(steps)}")
    seen = [entry.get("sequences_seen") for entry in manifest]
    if not all(is_count(count) for count in seen) or any(a > b for a, b in zip(seen, seen[1:])):
        raise CheckpointError(f"{where} has sequences_seen that are not counts rising with the steps: {quoted(seen)}")
    return manifest


def is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def run_text(path: Path) -> str:
    """A text file of a run: its own (not a link to elsewhere), a regular file, of a size a run's file can have."""
    return read_text(path, MAX_TEXT_BYTES)


def read_json(path: Path) -> object:
    try:
        return json.loads(run_text(path))
    except FileNotFoundError:
        raise CheckpointError(f"missing {path.name} in run {path.parent}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{path} is not valid JSON: {error}") from None
    except RecursionError:  # nesting deeper than the parser goes
        raise CheckpointError(f"{path} is nested too deeply to be a run's JSON") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path} is a directory, not a JSON file") from None


def load_tensors(path: Path, sha256: str | None = None) -> dict[str, torch.Tensor]:
    """Tensors of a safetensors file, after checking its sha256; never unpickles."""
    if not path.is_file():
        raise CheckpointError(f"missing checkpoint file {path}")
    if sha256 is not None and sha256_of(path) != sha256:
        raise CheckpointError(f"sha256 mismatch for {path}: the file changed since it was written")
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{path} is not a readable safetensors file ({error})") from None


@dataclass(frozen=True)
class Run:
    """An opened run directory: its config, checkpoint manifest and metrics."""

    path: Path
    config: dict[str, Any] = field(repr=False)
    manifest: list[dict[str, Any]] = field(repr=False)  # a run's repr is its path, not its 150 checkpoints

    @classmethod
    def open(cls, run: str | os.PathLike[str]) -> Run:
        path = resolve_run(run)
        config, manifest = read_json(path / "config.json"), read_manifest(path)
        if not isinstance(config, dict) or not {"task", "recipe", "model"} <= config.keys():
            raise CheckpointError(f"{path / 'config.json'} is not a run config: it needs a task, a recipe and a model")
        name = config.get("model_class")
        if not isinstance(name, str) or name not in MODEL_CLASSES:
            raise CheckpointError(f"unknown model class {quoted(name)} in {path / 'config.json'}")
        return cls(path=path, config=config, manifest=manifest)

    @property
    def task(self) -> TaskConfig:
        """The task the run was trained on (:mod:`induction_probes.circuits.tasks`)."""
        try:
            return task_from_json(self.config["task"])
        except ValueError as error:
            hint = plugin_hint(self.config)
            raise CheckpointError(f"invalid task in {self.path / 'config.json'}: {error}{hint}") from None

    @property
    def recipe(self) -> Recipe:
        """The recipe that trained the run (:mod:`induction_probes.circuits.recipes`), its task included."""
        try:
            return recipe_from_json(self.config["recipe"], self.config["task"])
        except ValueError as error:
            hint = plugin_hint(self.config)
            raise CheckpointError(f"invalid recipe in {self.path / 'config.json'}: {error}{hint}") from None

    @property
    def kind(self) -> str:
        """The recipe's name: markov, minimal, gaussian, toy or a registered recipe's."""
        return self.config["recipe"].get("name", "") if isinstance(self.config["recipe"], dict) else ""

    @property
    def steps(self) -> list[int]:
        return [entry["step"] for entry in self.manifest]

    @property
    def model_config(self) -> HookedTransformerConfig | MinimalConfig:
        name = self.config.get("model_class")
        if not isinstance(name, str) or name not in MODEL_CLASSES:
            raise CheckpointError(f"unknown model class {quoted(name)} in {self.path / 'config.json'}")
        try:
            return config_class(name).from_dict(self.config["model"])
        except (TypeError, ValueError) as error:
            raise CheckpointError(f"invalid model config in {self.path}: {error}") from None

    def entry(self, step: int | None = None, index: int | None = None) -> dict[str, Any]:
        """The manifest entry at a step value or at an index into the schedule (TL's
        ``checkpoint_value`` / ``checkpoint_index``); the last checkpoint when neither is given."""
        if step is not None and index is not None:
            raise CheckpointError("give a step or an index, not both")
        for what, value in (("step", step), ("index", index)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise CheckpointError(f"a checkpoint's {what} must be an integer, got {quoted(value)}")
        if not self.manifest:
            raise CheckpointError(f"run {self.path} has no checkpoints")
        if step is not None:
            for entry in self.manifest:
                if entry["step"] == step:
                    return entry
            below = [s for s in self.steps if s < step][-1:]
            above = [s for s in self.steps if s > step][:1]
            nearest = " and ".join(map(str, below + above))
            are = "steps are" if len(below + above) == 2 else "step is"
            raise CheckpointError(
                f"step {step} is not saved in run {self.path.name}; the nearest saved {are} {nearest}"
            )
        if index is not None:
            if not -len(self.manifest) <= index < len(self.manifest):
                raise CheckpointError(f"index {index} is out of range for {len(self.manifest)} checkpoints")
            return self.manifest[index]
        return self.manifest[-1]

    def saved_steps(self, steps: Iterable[int]) -> list[int]:
        """``steps`` as a list of the run's saved steps, in increasing order and each once: what the probes of
        chosen steps take. A string is no list of steps (it would be read digit by digit), and a step given
        twice would give its rows twice."""
        if isinstance(steps, (str, bytes, Mapping)) or not isinstance(steps, Iterable):
            raise BadInput(f"steps must be a list of saved steps (integers), got {quoted(steps)}")
        steps = list(steps)
        if not steps:
            raise BadInput("steps must hold at least one step (leave it out, None, for the default)")
        for step in steps:
            self.entry(step)  # an integer and saved, or the nearest saved steps are named
        if any(a >= b for a, b in zip(steps, steps[1:])):
            raise BadInput(f"steps must be in increasing order, each once, got {quoted(steps)}")
        return [int(step) for step in steps]

    def checkpoint_path(self, entry: dict[str, Any]) -> Path:
        """The file of a manifest entry, which must be the run's own: ``checkpoints/step_<step>.safetensors``
        inside the run directory, no link anywhere on the way. A stranger's manifest cannot point
        outside the run (an absolute path, ``..``, a symlink): it is refused before anything is opened."""
        step = entry.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or entry.get("file") != checkpoint_file(step):
            raise CheckpointError(
                f"manifest entry {quoted(entry)} of {self.path.name} does not name its own checkpoint file"
            )
        if not isinstance(entry.get("sha256"), str):
            raise CheckpointError(f"manifest entry of step {step} in {self.path.name} has no sha256 to verify")
        path = self.path / entry["file"]
        refuse_links(path, self.path / "checkpoints", why="checkpoints are read from inside the run only")
        return path

    def load(self, step: int | None = None, index: int | None = None, device: Device = None) -> HookedTransformer:
        """The model at a checkpoint on ``device`` (default cpu), sha256 verified, shapes checked against the config."""
        device = resolve_device(device)
        entry = self.entry(step, index)
        weights = load_tensors(self.checkpoint_path(entry), entry["sha256"])
        for name, tensor in weights.items():  # a NaN weight would make every probe's number NaN, or a guess
            if tensor.is_floating_point() and not torch.isfinite(tensor).all():
                raise CheckpointError(f"weights of step {entry['step']} are not finite (NaN or infinity in {name})")
        model = build_model(self.model_config)
        try:
            model.load_state_dict(weights)
        except RuntimeError as error:
            first = str(error).strip().splitlines()
            detail = next((line.strip() for line in first[1:] if line.strip()), first[0] if first else "")
            raise CheckpointError(f"weights of step {entry['step']} do not match the config: {detail}") from None
        return model.to(device).eval()

    def metrics(self) -> list[dict[str, Any]]:
        """Every evaluation written so far, one dict per checkpoint, ordered by step; each field a reader reads of
        the type it reads, and a line for every checkpoint of the manifest (:func:`check_metrics`)."""
        path = self.path / "metrics.jsonl"
        found = [json.loads(line) for line in read_metrics_lines(path)]
        return check_metrics(found, self.steps, path)


# what the report's entry points take: a Run, or a run's folder or shipped name
RunOrPath = Run | str | os.PathLike[str]


def as_run(run: RunOrPath) -> Run:
    """``run`` itself, or the run its folder or shipped name opens (:meth:`Run.open`)."""
    return run if isinstance(run, Run) else Run.open(run)


T = TypeVar("T", bound="TaskConfig")  # the task class run_task checks for


def run_task(run: Run, task_class: type[T]) -> T:
    """The run's task, if it is a ``task_class`` task; otherwise one clear refusal."""
    task = run.task
    if not isinstance(task, task_class):
        raise BadInput(f"run {run.path.name} is a {task.name} run, not a {task_class.name} run: {task.describe()}")
    return task
