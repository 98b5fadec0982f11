"""Writing a run directory (:mod:`~induction_probes.circuits.runs.layout`): every file is written whole to a new
temporary file with an unpredictable name, fsync'ed and renamed into place, so a crash leaves either the old
file or the new one, the manifest only ever lists checkpoints that were completely written, and a symbolic
link planted in the run directory is never written through.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch
from safetensors.torch import save

from induction_probes.circuits.models.model_classes import model_class_name
from induction_probes.circuits.recipes.task_kinds import plugin_of
from induction_probes.circuits.runs.layout import LOCK_FILE, checkpoint_file
from induction_probes.circuits.runs.reader import read_manifest, read_metrics_lines
from induction_probes.circuits.untrusted import (
    TEMPORARY_SUFFIX,
    CheckpointError,
    is_temporary_of,
    write_atomic,
)


def write_json(path: Path, value: object) -> None:
    write_atomic(path, (json.dumps(value, indent=2) + "\n").encode())


def save_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> str:
    """Save tensors as safetensors, written like every other file of a run; returns the file's sha256."""
    data = save({name: t.detach().cpu().contiguous() for name, t in tensors.items()}, metadata=metadata)
    write_atomic(path, data)
    return hashlib.sha256(data).hexdigest()


def package_version() -> str:
    try:
        return version("induction-probes")
    except PackageNotFoundError:
        return "unknown"


def run_config(recipe) -> dict:
    """What a run's ``config.json`` holds: the task, the recipe and the resolved model config."""
    model_config = recipe.model_config()
    config = {
        "package_version": package_version(),
        "task": recipe.task.to_json(),
        "recipe": recipe.to_json(),
        "model_class": model_class_name(model_config),
        "model": model_config.to_dict(),
    }
    plugin = plugin_of(recipe)  # only a plugin's runs carry it: our own runs' configs stay as they were
    return config | {"plugin": plugin} if plugin else config


class RunWriter:
    """Adds to a run directory in the one order that keeps it consistent through a crash: a checkpoint's
    weights, then its metrics line, then the manifest that lists it, each written whole before the next.
    ``metrics.jsonl`` is rewritten whole each time, never appended to in place, so a crash cannot leave a
    torn last line that would make the run unreadable."""

    def __init__(self, path: Path, manifest: list[dict], metrics_lines: list[str] | None = None):
        self.path, self.manifest, self.metrics_lines = path, manifest, list(metrics_lines or [])

    @classmethod
    def create(cls, path: Path, config: dict, restart: bool = False) -> RunWriter:
        """A new run in ``path``, with its ``config.json`` and no checkpoint yet; ``restart`` starts the
        run in ``path`` over (for a run that crashed before its first resume state)."""
        if restart:
            (path / "manifest.json").unlink(missing_ok=True)
        else:
            refuse_a_used_folder(path)
        path.mkdir(parents=True, exist_ok=True)
        remove_unfinished_writes(path)
        write_json(path / "config.json", config)  # first: a writer killed before it leaves the directory empty
        for folder in ("checkpoints", "resume"):
            (path / folder).mkdir(exist_ok=True)
        writer = cls(path, manifest=[])
        writer.write_metrics()
        return writer

    @classmethod
    def reopen(cls, path: Path, step: int) -> RunWriter:
        """The run in ``path`` as it was at ``step``: anything written after it (a crash between files)
        is dropped from the manifest and the metrics, to be redone identically."""
        manifest = [entry for entry in read_manifest(path) if entry["step"] <= step]
        kept = [line for line in read_metrics_lines(path / "metrics.jsonl") if json.loads(line)["step"] <= step]
        remove_unfinished_writes(path)
        writer = cls(path, manifest, kept)
        write_json(path / "manifest.json", manifest)
        writer.write_metrics()
        return writer

    def write_metrics(self) -> None:
        write_atomic(self.path / "metrics.jsonl", "".join(line + "\n" for line in self.metrics_lines).encode())

    def add_metrics(self, metrics: dict) -> None:
        self.metrics_lines.append(json.dumps(metrics))
        self.write_metrics()

    def add_checkpoint(self, step: int, sequences_seen: int, weights: dict[str, torch.Tensor], metrics: dict) -> None:
        file = checkpoint_file(step)
        sha = save_tensors(self.path / file, weights)
        self.add_metrics(metrics)
        self.manifest.append({"step": step, "sequences_seen": sequences_seen, "file": file, "sha256": sha})
        write_json(self.path / "manifest.json", self.manifest)


def refuse_a_used_folder(path: Path) -> None:
    """A new run goes into a missing or empty folder (or one that only a killed start of it has touched).
    Checked by the trainer before it takes the run's lock too, so that a refusal leaves the folder as it was."""
    if (path / "manifest.json").exists():
        raise CheckpointError(f"{path} already holds a run: continue it with --resume or choose another --out")
    if path.is_dir() and not all(map(left_by_a_killed_start, path.iterdir())):
        raise CheckpointError(f"{path} is not empty: a new run goes into a missing or empty directory")


def left_by_a_killed_start(entry: Path) -> bool:
    """What a writer killed before its run's config.json was in place leaves in a directory: the lock, and
    the temporary file of config.json (a directory holding only these is still empty for a new run)."""
    name = entry.name
    return name == LOCK_FILE or (is_temporary_of(name, "config.json") and entry.is_file())


def remove_unfinished_writes(path: Path) -> None:
    """Delete the temporary files of writes that a crash interrupted (only names :func:`write_atomic`
    makes, and only in the run's own folders; unlinking a link never touches where it points)."""
    for folder in (path, path / "checkpoints", path / "resume"):
        if folder.is_dir() and not folder.is_symlink():
            for leftover in folder.glob(f".*{TEMPORARY_SUFFIX}"):
                if leftover.is_dir() and not leftover.is_symlink():  # no write of ours leaves a folder
                    raise CheckpointError(f"{leftover} is a folder named like a temporary file: not ours to remove")
                leftover.unlink()
