"""Where a language model comes from, told apart from a run of ours without loading anything (no torch, no
transformers: ``info`` and the command line's choice between a run and a model stay fast), in this order:

- a directory holding a Hugging Face model (``config.json`` with a ``model_type``, safetensors weights),
  as ``save_pretrained`` writes it;
- a directory of checkpoints: sub-folders ``step_N/`` (or ``stepN/``), each such a model directory (one that
  is not, or cannot be read, is refused by name: a series is never probed with a checkpoint left out);
- a name in the local Hugging Face cache (``HF_HUB_CACHE``), whose revisions named ``stepN`` (as Pythia
  publishes its training checkpoints) are its checkpoint series.

Loading one is :mod:`.language_models`'s.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from induction_probes.circuits.interop.model_folder import (
    CONFIG,
    LanguageModelError,
    ModelFolder,
    one_line,
    read_model_folder,
)
from induction_probes.circuits.runs.shipped import shipped_run_names
from induction_probes.circuits.untrusted import CheckpointError, read_text
from induction_probes.circuits.validation import quoted

STEP_FOLDER = re.compile(r"step_?(\d+)")  # step_1000/ (our convention) or step1000 (Pythia's revisions)


@dataclass(frozen=True)
class ModelSource:
    """One model on disk: a directory, or a name (and revision) in the local Hugging Face cache."""

    location: str  # the directory, or the cache's repository id
    revision: str | None = None  # a cache revision (a branch such as step1000, or a commit)
    step: int | None = None  # the training step, when the model is one of a series

    @property
    def in_cache(self) -> bool:
        return not Path(self.location).is_dir()

    def describe(self) -> str:
        where = f"{self.location} (local Hugging Face cache)" if self.in_cache else self.location
        return where + (f", revision {self.revision}" if self.revision else "")


@dataclass(frozen=True)
class Series:
    """Checkpoints of one training run, in step order."""

    name: str
    checkpoints: tuple[ModelSource, ...]

    @property
    def steps(self) -> list[int]:
        steps = []
        for source in self.checkpoints:
            if source.step is None:  # a series is found from its step folders: each checkpoint has one
                raise LanguageModelError(f"{source.describe()} is a checkpoint of {self.name} without a step")
            steps.append(source.step)
        return steps

    def at(self, step: int | None) -> ModelSource:
        """The checkpoint at ``step`` (default the last)."""
        if step is None:
            return self.checkpoints[-1]
        for source in self.checkpoints:
            if source.step == step:
                return source
        raise LanguageModelError(f"{self.name} has no checkpoint at step {step} (steps {format_steps(self.steps)})")


def format_steps(steps: Sequence[int | None]) -> str:
    return ", ".join(map(str, steps)) if len(steps) <= 8 else f"{steps[0]}, {steps[1]}, ..., {steps[-1]}"


def is_model_directory(path: Path) -> bool:
    """A Hugging Face model directory (:func:`not_a_model_directory`)."""
    return path.is_dir() and not_a_model_directory(path) is None


def not_a_model_directory(folder: Path) -> str | None:
    """Why the folder ``folder`` is not a Hugging Face model directory, None where it is one: that needs its own
    ``config.json`` (read through the untrusted-file reader: no link, a regular file of a sane size, and a pipe
    never waited on) naming a model type, and no ``manifest.json`` (a run directory of ours also has a
    config.json)."""
    if (folder / "manifest.json").exists():
        return "it holds a manifest.json, as a run of ours does"
    try:
        value = json.loads(read_text(folder / CONFIG, root=folder))
    except FileNotFoundError:
        return f"it has no {CONFIG}"
    except (CheckpointError, OSError) as error:  # a link, a pipe, a device, too large: the reader says which
        return one_line(error)
    except (ValueError, RecursionError):  # not UTF-8, not JSON
        return f"its {CONFIG} is not JSON"
    if not isinstance(value, dict) or not isinstance(value.get("model_type"), str):
        return f"its {CONFIG} has no model_type"
    return None


def step_folders(path: Path) -> list[ModelSource]:
    """The ``step_N/`` model directories of ``path``, in step order. A ``step_N`` that is not one (a link, which
    is not followed, a file, or a folder without a readable config.json) is refused by name, not left out: the
    series would be probed as if that checkpoint had never been saved."""
    found = []
    for child in path.iterdir() if path.is_dir() and not path.is_symlink() else []:
        match = STEP_FOLDER.fullmatch(child.name)
        if match:
            refuse_unreadable_checkpoint(child)
            found.append(ModelSource(str(child), step=int(match.group(1))))
    steps = [source.step for source in found]
    if len(set(steps)) < len(steps):
        raise LanguageModelError(f"{path} has two checkpoint folders for one step (step_N and stepN)")
    return sorted(found, key=lambda source: source.step)


def refuse_unreadable_checkpoint(folder: Path) -> None:
    """Refuse the checkpoint folder ``folder`` of a series unless it is a model directory of its own."""
    if folder.is_symlink():
        why = "it is a symbolic link: a series' checkpoints are its own folders"
    else:
        why = not_a_model_directory(folder) if folder.is_dir() else "it is not a folder"
    if why is not None:
        raise LanguageModelError(f"checkpoint {folder} cannot be read as a model: {why}")


def refuse_neither_run_nor_model(path: Path) -> None:
    """Refuse a folder with a config.json but no manifest.json, saying what it lacks to be either: it is no run of
    ours, so the message the run reader would give (no manifest.json) would tell half of it."""
    if path.is_dir() and os.path.lexists(path / CONFIG) and not os.path.lexists(path / "manifest.json"):
        raise LanguageModelError(
            f"{path} is neither a run of ours (no manifest.json) nor a Hugging Face model directory "
            f"({not_a_model_directory(path)})"
        )


def cached_revisions(name: str) -> list[str] | None:
    """The names of the revisions of model ``name`` in the local Hugging Face cache whose snapshot is there
    (None: no such model). Only that model's ``refs/`` is read, each ref as an untrusted file (a named pipe,
    a folder or a link at a ref's name is refused in one line: huggingface_hub's own scan of the whole cache
    would wait for ever on a pipe)."""
    from huggingface_hub import constants  # Hugging Face's libraries load in seconds: only when used

    folder = Path(constants.HF_HUB_CACHE) / ("models--" + name.replace("/", "--"))
    if not folder.is_dir() or folder.is_symlink():
        return None
    refs = folder / "refs"
    found = []
    for ref in ref_files(refs):
        try:
            commit = read_text(ref, limit=MAX_REF_BYTES, root=folder).strip()
        except (CheckpointError, UnicodeDecodeError) as error:
            raise LanguageModelError(f"the cache's ref {ref} of {name} cannot be read: {error}") from None
        if (folder / "snapshots" / commit).is_dir():
            found.append(ref.relative_to(refs).as_posix())
    return sorted(found)


MAX_REF_BYTES = 256  # a ref holds one commit hash


def ref_files(refs: Path) -> list[Path]:
    """Every entry below ``refs`` that is not a folder (links and pipes included, so that reading refuses them),
    without following a linked folder."""
    if not refs.is_dir() or refs.is_symlink():
        return []
    found = []
    for parent, folders, files in os.walk(refs, followlinks=False):
        found += [Path(parent) / name for name in files]
        found += [Path(parent) / name for name in folders if (Path(parent) / name).is_symlink()]
    return sorted(found)


def find_source(name: str) -> ModelSource | Series | None:
    """The language model ``name`` names, or None when it names a run of ours (a run directory or a
    shipped run), left to :class:`~induction_probes.circuits.runs.reader.Run`. Raises when it names nothing."""
    path = Path(name)
    if path.exists():
        if is_model_directory(path):
            return ModelSource(str(path))
        series = step_folders(path)
        if series:
            return Series(str(path), tuple(series))
        refuse_neither_run_nor_model(path)
        return None

    if name in shipped_run_names():
        return None
    looks_like_path = name.startswith(("/", ".", "~")) or name.count("/") > 1  # never a repository id
    revisions = None if looks_like_path else cached_revisions(name)
    if revisions is None:
        shipped = ", ".join(shipped_run_names()) or "none"
        raise LanguageModelError(
            f"no run directory or shipped run named {name!r} (shipped runs: {shipped}), nor a Hugging Face model "
            f"directory or a model in the local Hugging Face cache; nothing is downloaded "
            f"(fetch it first: hf download {name})"
        )
    steps = sorted((int(m.group(1)), ref) for ref in revisions if (m := STEP_FOLDER.fullmatch(ref)))
    if len({step for step, _ in steps}) < len(steps):
        raise LanguageModelError(f"{name} has two revisions for one step (step_N and stepN): name one")
    if steps:
        return Series(name, tuple(ModelSource(name, revision=ref, step=step) for step, ref in steps))
    return ModelSource(name)


def as_source(value: ModelSource | Series | str | os.PathLike) -> ModelSource | Series:
    """A language model or series as given, or the one a path or cache name names (a run of ours is refused)."""
    if isinstance(value, (ModelSource, Series)):
        return value
    source = find_source(os.fspath(value))
    if source is None:
        raise LanguageModelError(f"{os.fspath(value)} is a run of ours, not a language model: probe it as a run")
    return source


def require_series(name: str) -> Series:
    """The checkpoint series ``name`` names (a folder of ``step_N/`` checkpoints or a cache name with ``stepN``
    revisions); one clear error for anything else."""
    source = find_source(name)
    if not isinstance(source, Series):
        what = "a run of ours" if source is None else "one model"
        raise LanguageModelError(f"{name} is {what}, not a checkpoint series of a language model")
    return source


def require_model(source: ModelSource | Series, step: int | None) -> ModelSource:
    """One model of ``source``: itself, or a series' checkpoint at ``step`` (default the last)."""
    if isinstance(source, Series):
        return source.at(step)
    if step is not None:
        raise LanguageModelError(f"{source.location} is one model, not a checkpoint series: --step does not apply")
    return source


# the config.json fields that size a model, across transformers' architectures: a series is one model only where
# every checkpoint agrees on each (layers, heads, width, vocabulary, context)
SIZE_FIELDS = (
    "model_type",
    "n_layer",
    "num_hidden_layers",
    "n_head",
    "num_attention_heads",
    "num_key_value_heads",
    "n_embd",
    "hidden_size",
    "vocab_size",
    "n_positions",
    "max_position_embeddings",
)


def require_one_model(series: Series) -> Series:
    """``series``, if every checkpoint has the first's sizes (:data:`SIZE_FIELDS` of its config.json): checkpoints
    of different models are not one training run, and probing them on one set of sequences would compare
    unlike things. One line naming the first step that differs, and how."""
    first = None
    for source in series.checkpoints:
        config = config_of(source)
        sizes = {field: config.get(field) for field in SIZE_FIELDS}  # a field left out reads as null
        if first is None:
            first = (source.step, sizes)
        elif sizes != first[1]:
            field = next(f for f in SIZE_FIELDS if sizes.get(f) != first[1].get(f))
            raise LanguageModelError(
                f"{series.name} is not one model: step {source.step}'s {field} is {quoted(sizes.get(field))}, step "
                f"{first[0]}'s {quoted(first[1].get(field))}"
            )
    return series


def config_of(source: ModelSource) -> dict:
    """A checkpoint's config.json, read as every file of a stranger's model folder is."""
    return read_model_folder(model_folder(source)).json(CONFIG) or {}


def model_folder(source: ModelSource) -> ModelFolder:
    if source.in_cache:
        return ModelFolder.cache(source.location, source.revision, source.describe())
    return ModelFolder(Path(source.location), source.describe())
