"""Run directories: save and load checkpoints without pickle.

    <run>/config.json       the task, the recipe (its seeds included), the resolved model config, package version
    <run>/manifest.json     [{step, sequences_seen, file, sha256}], ordered by step
    <run>/metrics.jsonl     one JSON object per evaluation
    <run>/checkpoints/step_00001234.safetensors   model weights only
    <run>/resume/           latest optimiser + RNG state (safetensors + JSON), for exact resume

Weights are safetensors and everything else is JSON, so opening a run never executes code from it.
Every file is written whole to a new temporary file with an unpredictable name, fsync'ed and renamed into
place: a crash leaves either the old file or the new one, the manifest only ever lists checkpoints that
were completely written, and a symbolic link planted in the run directory is never written through.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from induction_probes.circuits.devices import resolve_device
from induction_probes.circuits.limits import MAX_TEXT_BYTES
from induction_probes.circuits.minimal import MinimalConfig, MinimalModel
from induction_probes.circuits.model import HookedTransformer, HookedTransformerConfig
from induction_probes.circuits.recipes import recipe_from_json
from induction_probes.circuits.tasks import task_from_json
from induction_probes.circuits.toy import ToyConfig, ToyModel
from induction_probes.circuits.untrusted import CheckpointError, NotFiniteError, not_a_number, read_text, refuse_links

# The model classes a run may hold, by the name written in config.json ("model_class").
MODEL_CLASSES = {
    "HookedTransformer": (HookedTransformer, HookedTransformerConfig),
    "MinimalModel": (MinimalModel, MinimalConfig),
    "ToyModel": (ToyModel, ToyConfig),
}


def model_class_name(config: HookedTransformerConfig | MinimalConfig) -> str:
    return next(name for name, (_, config_class) in MODEL_CLASSES.items() if isinstance(config, config_class))


def build_model(config: HookedTransformerConfig | MinimalConfig) -> HookedTransformer | MinimalModel:
    return MODEL_CLASSES[model_class_name(config)][0](config)


# --- writing --------------------------------------------------------------------------------------


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never half, and no link
    planted in the run is followed: a fresh temporary file beside ``path`` (created exclusively under a
    random name, so nothing can be waiting there), fsync'ed, then renamed over ``path`` (a rename replaces
    a link at ``path`` itself instead of writing where it points)."""
    refuse_links(path.parent, why="a run writes only inside its own directory")
    descriptor, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE & ~current_umask())  # mkstemp's 0600 would differ from file to file
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


FILE_MODE = 0o666  # what open() gives a new file before the umask: every file of a run gets the same mode


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: Path, value: object) -> None:
    write_atomic(path, (json.dumps(value, indent=2) + "\n").encode())


def save_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> str:
    """Save tensors as safetensors, written like every other file of a run; returns the file's sha256."""
    data = save({name: t.detach().cpu().contiguous() for name, t in tensors.items()}, metadata=metadata)
    write_atomic(path, data)
    return hashlib.sha256(data).hexdigest()


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    """The file's sha256, read a megabyte at a time (memory stays flat whatever the file's size)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def checkpoint_file(step: int) -> str:
    return f"checkpoints/step_{step:08d}.safetensors"


def package_version() -> str:
    try:
        return version("induction-probes")
    except PackageNotFoundError:
        return "unknown"


def run_config(recipe) -> dict:
    """What a run's ``config.json`` holds: the task, the recipe and the resolved model config."""
    model_config = recipe.model_config()
    return {
        "package_version": package_version(),
        "task": recipe.task.to_json(),
        "recipe": recipe.to_json(),
        "model_class": model_class_name(model_config),
        "model": model_config.to_dict(),
    }


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
        if (path / "manifest.json").exists():
            raise CheckpointError(f"{path} already holds a run: continue it with --resume or choose another --out")
        if not restart and path.is_dir() and not all(map(left_by_a_killed_start, path.iterdir())):
            raise CheckpointError(f"{path} is not empty: a new run goes into a missing or empty directory")
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


def left_by_a_killed_start(entry: Path) -> bool:
    """What a writer killed before its run's config.json was in place leaves in a directory: the lock, and
    the temporary file of config.json (a directory holding only these is still empty for a new run)."""
    name = entry.name
    return name == "lock" or (name.startswith(".config.json.") and name.endswith(".tmp") and entry.is_file())


def remove_unfinished_writes(path: Path) -> None:
    """Delete the temporary files of writes that a crash interrupted (only names :func:`write_atomic`
    makes, and only in the run's own folders; unlinking a link never touches where it points)."""
    for folder in (path, path / "checkpoints", path / "resume"):
        if folder.is_dir() and not folder.is_symlink():
            for leftover in folder.glob(".*.tmp"):
                leftover.unlink()


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


def has_integer_step(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("step"), int) and not isinstance(value["step"], bool)


def read_manifest(path: Path) -> list[dict]:
    """A run's ``manifest.json``: a list of entries, each with an integer step."""
    manifest = read_json(path / "manifest.json")
    if not isinstance(manifest, list) or not all(map(has_integer_step, manifest)):
        raise CheckpointError(f"{path / 'manifest.json'} is not a list of checkpoints with integer steps")
    return manifest


# --- reading --------------------------------------------------------------------------------------


def shipped_runs_dir() -> Path | None:
    """Where the shipped runs are installed: ``induction_probes.checkpoints``, data with no code (the
    repository's ``checkpoints/``, mapped there by pyproject's ``package-dir``); None without them."""
    try:
        return Path(str(resources.files("induction_probes.checkpoints")))
    except ModuleNotFoundError:
        return None


def shipped_run_names() -> list[str]:
    directory = shipped_runs_dir()
    if directory is None:  # an install without the shipped runs
        return []
    return sorted(p.name for p in directory.iterdir() if (p / "manifest.json").is_file())


def resolve_run(run: str | os.PathLike) -> Path:
    """A run directory from a path, or from the name of a shipped run such as ``markov-k3``."""
    path = Path(run)
    if path.is_dir():
        return path
    if os.sep not in str(run) and str(run) in shipped_run_names():
        return shipped_runs_dir() / str(run)
    shipped = ", ".join(shipped_run_names()) or "none"
    raise CheckpointError(f"no run directory or shipped run named {str(run)!r} (shipped runs: {shipped})")


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
    config: dict = field(repr=False)
    manifest: list[dict] = field(repr=False)  # a run's repr is its path, not its 150 checkpoints

    @classmethod
    def open(cls, run: str | os.PathLike) -> Run:
        path = resolve_run(run)
        config, manifest = read_json(path / "config.json"), read_manifest(path)
        if not isinstance(config, dict) or not {"task", "recipe", "model"} <= config.keys():
            raise CheckpointError(f"{path / 'config.json'} is not a run config: it needs a task, a recipe and a model")
        name = config.get("model_class")
        if not isinstance(name, str) or name not in MODEL_CLASSES:
            raise CheckpointError(f"unknown model class {name!r} in {path / 'config.json'}")
        return cls(path=path, config=config, manifest=manifest)

    @property
    def task(self):
        """The task the run was trained on (:mod:`induction_probes.circuits.tasks`)."""
        try:
            return task_from_json(self.config["task"])
        except ValueError as error:
            raise CheckpointError(f"invalid task in {self.path / 'config.json'}: {error}") from None

    @property
    def recipe(self):
        """The recipe that trained the run (:mod:`induction_probes.circuits.recipes`), its task included."""
        try:
            return recipe_from_json(self.config["recipe"], self.config["task"])
        except ValueError as error:
            raise CheckpointError(f"invalid recipe in {self.path / 'config.json'}: {error}") from None

    @property
    def kind(self) -> str:
        """The recipe's name: markov, minimal, gaussian or toy."""
        return self.config["recipe"].get("name", "") if isinstance(self.config["recipe"], dict) else ""

    @property
    def steps(self) -> list[int]:
        return [entry["step"] for entry in self.manifest]

    @property
    def model_config(self) -> HookedTransformerConfig | MinimalConfig:
        name = self.config.get("model_class")
        if name not in MODEL_CLASSES:
            raise CheckpointError(f"unknown model class {name!r} in {self.path / 'config.json'}")
        try:
            return MODEL_CLASSES[name][1].from_dict(self.config["model"])
        except (TypeError, ValueError) as error:
            raise CheckpointError(f"invalid model config in {self.path}: {error}") from None

    def entry(self, step: int | None = None, index: int | None = None) -> dict:
        """The manifest entry at a step value or at an index into the schedule (TL's
        ``checkpoint_value`` / ``checkpoint_index``); the last checkpoint when neither is given."""
        if step is not None and index is not None:
            raise CheckpointError("give a step or an index, not both")
        for what, value in (("step", step), ("index", index)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise CheckpointError(f"a checkpoint's {what} must be an integer, got {value!r}")
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
            raise CheckpointError(f"step {step} is not saved in run {self.path.name}; the nearest saved {are} {nearest}")
        if index is not None:
            if not -len(self.manifest) <= index < len(self.manifest):
                raise CheckpointError(f"index {index} is out of range for {len(self.manifest)} checkpoints")
            return self.manifest[index]
        return self.manifest[-1]

    def checkpoint_path(self, entry: dict) -> Path:
        """The file of a manifest entry, which must be the run's own: ``checkpoints/step_<step>.safetensors``
        inside the run directory, no link anywhere on the way. A stranger's manifest cannot point
        outside the run (an absolute path, ``..``, a symlink): it is refused before anything is opened."""
        step = entry.get("step")
        if not isinstance(step, int) or isinstance(step, bool) or entry.get("file") != checkpoint_file(step):
            raise CheckpointError(f"manifest entry {entry!r} of {self.path.name} does not name its own checkpoint file")
        if not isinstance(entry.get("sha256"), str):
            raise CheckpointError(f"manifest entry of step {step} in {self.path.name} has no sha256 to verify")
        path = self.path / entry["file"]
        refuse_links(path, self.path / "checkpoints", why="checkpoints are read from inside the run only")
        return path

    def load(self, step: int | None = None, index: int | None = None, device=None) -> HookedTransformer:
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

    def metrics(self) -> list[dict]:
        """Every evaluation written so far, one dict per checkpoint, ordered by step."""
        return [json.loads(line) for line in read_metrics_lines(self.path / "metrics.jsonl")]
