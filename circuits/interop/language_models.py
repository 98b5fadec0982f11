"""Hugging Face language models as probe targets, booted through TransformerLens's ``TransformerBridge``.

Where a model comes from (:func:`find_source`), in this order:

- a directory holding a Hugging Face model (``config.json`` with a ``model_type``, safetensors weights),
  as ``save_pretrained`` writes it;
- a directory of checkpoints: sub-folders ``step_N/`` (or ``stepN/``), each such a model directory (one that
  is not, or cannot be read, is refused by name: a series is never probed with a checkpoint left out);
- a name in the local Hugging Face cache (``HF_HUB_CACHE``), whose revisions named ``stepN`` (as Pythia
  publishes its training checkpoints) are its checkpoint series.

Nothing is downloaded: every load is ``local_files_only``, so a model must be on disk (a name missing from
the cache is one clear error). A model's folder is untrusted input: transformers is given only the files
:mod:`.model_folder` read and checked (safetensors weights, never a pickle; no code, so none runs), and the
config only once :mod:`.hf_config` found its sizes within circuits/common/limits.py. A model whose weights do
not fill its config exactly (a parameter missing, left randomly initialised; a tensor it has no place for or
of another shape) or hold NaN or infinity is refused, not probed. Every refusal is a
:class:`LanguageModelError` of one line.

The bridge wraps the Hugging Face model with ``build_bridge_from_module``, TransformerLens's builder
behind ``boot_transformers``, with eager attention so that ``blocks.{l}.attn.hook_pattern`` fires. It
takes the tokenizer when the model has one and works without one (the probes' random tokens need none).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from induction_probes.circuits.common.devices import resolve_device
from induction_probes.circuits.common.untrusted import CheckpointError, read_text
from induction_probes.circuits.interop.hf_config import check_tokenizer_model, checked_config, refuse_code
from induction_probes.circuits.interop.model_folder import (
    CONFIG,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
    TOKENIZER_VOCABULARIES,
    CastWeightsWarning,
    LanguageModelError,
    ModelFiles,
    ModelFolder,
    as_model_error,
    one_line,
    read_model_folder,
    staged,
)
from induction_probes.circuits.runs.shipped import shipped_run_names

if TYPE_CHECKING:
    from torch import nn

STEP_FOLDER = re.compile(r"step_?(\d+)")  # step_1000/ (our convention) or step1000 (Pythia's revisions)
# causal masks that older transformers saved among GPT-2's and GPT-NeoX's weights (attn.bias, attn.masked_bias):
# buffers the model rebuilds, not weights, so a checkpoint holding them matches its config all the same
STALE_BUFFER = re.compile(r"(^|\.)(attn|attention)\.(bias|masked_bias)$")


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


if TYPE_CHECKING:  # what a language-model probe takes: a folder or cache name, a ModelSource, or a model
    ModelLike = ModelSource | nn.Module | str | os.PathLike  # (Hugging Face's, a TransformerBridge, any hooked one)


@dataclass(frozen=True)
class Series:
    """Checkpoints of one training run, in step order."""

    name: str
    checkpoints: tuple[ModelSource, ...]

    @property
    def steps(self) -> list[int]:
        return [source.step for source in self.checkpoints]

    def at(self, step: int | None) -> ModelSource:
        """The checkpoint at ``step`` (default the last)."""
        if step is None:
            return self.checkpoints[-1]
        for source in self.checkpoints:
            if source.step == step:
                return source
        raise LanguageModelError(f"{self.name} has no checkpoint at step {step} (steps {format_steps(self.steps)})")


def format_steps(steps: list[int]) -> str:
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
    """The names of the revisions of model ``name`` in the local Hugging Face cache (None: not there)."""
    from huggingface_hub import constants, scan_cache_dir  # Hugging Face's libraries load in seconds: only when used
    from huggingface_hub.errors import CacheNotFound

    try:  # the cache that try_to_load_from_cache reads (scan_cache_dir's own default is fixed at its import)
        repos = scan_cache_dir(constants.HF_HUB_CACHE).repos
    except CacheNotFound:
        return None
    for repo in repos:
        if repo.repo_id == name and repo.repo_type == "model":
            return sorted(ref for revision in repo.revisions for ref in revision.refs)
    return None


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
    if steps:
        return Series(name, tuple(ModelSource(name, revision=ref, step=step) for step, ref in steps))
    return ModelSource(name)


def require_model(source: ModelSource | Series, step: int | None) -> ModelSource:
    """One model of ``source``: itself, or a series' checkpoint at ``step`` (default the last)."""
    if isinstance(source, Series):
        return source.at(step)
    if step is not None:
        raise LanguageModelError(f"{source.location} is one model, not a checkpoint series: --step does not apply")
    return source


# --- loading ----------------------------------------------------------------------------------------


def model_folder(source: ModelSource) -> ModelFolder:
    if source.in_cache:
        return ModelFolder.cache(source.location, source.revision, source.describe())
    return ModelFolder(Path(source.location), source.describe())


@contextmanager
def pretrained(source: ModelSource, device: str = "cpu") -> Iterator[tuple]:
    """The Hugging Face causal language model of ``source`` in float32 with eager attention, and its
    tokenizer (None when the model has none), both read from disk only, through :mod:`.model_folder`'s
    checked files; its config within the limits (:mod:`.hf_config`), its weights matching it and finite.
    Inside, the private folder of the checked files still exists (TransformerBridge reloads a tokenizer from
    its folder to add the BOS token: it reads the checked copy, not the model's folder)."""
    from transformers import AutoModelForCausalLM  # the auto classes load architectures' code

    device = resolve_device(device)  # before anything is read: a device this machine lacks is one line
    files = read_model_folder(model_folder(source))
    with as_model_error(f"{source.describe()}: {CONFIG}"):
        config = checked_config(files.json(CONFIG))
    with as_model_error(f"{source.describe()}: {TOKENIZER_CONFIG}"):
        refuse_code(files.json(TOKENIZER_CONFIG) or {})
    with as_model_error(f"{source.describe()}: {TOKENIZER_JSON}"):
        check_tokenizer_model(files.json(TOKENIZER_JSON) or {})
    options = {"local_files_only": True, "trust_remote_code": False}
    with staged(files) as folder:
        with as_model_error(f"cannot load {source.describe()}"):
            model, info = AutoModelForCausalLM.from_pretrained(
                folder,
                config=config,
                use_safetensors=True,
                attn_implementation="eager",
                dtype=torch.float32,
                output_loading_info=True,
                ignore_mismatched_sizes=True,  # reported in info, and refused below by name and shapes
                **options,
            )
            tokenizer = load_tokenizer(folder, files, source.describe())
        refuse_unloaded_weights(source, info)
        refuse_not_finite(source, model)
        warn_cast_weights(source, files, model)
        model.config.name_or_path = source.location  # where it came from, not the private folder
        yield model.to(device).eval(), tokenizer


def load_tokenizer(folder: Path, files: ModelFiles, name: str):
    """The tokenizer of the checked files in ``folder`` (None where the model has none), tried once on text, as
    TransformerBridge uses it at once. Tokenizer files without a vocabulary make a tokenizer only of a class that
    needs none (ByT5's bytes): for any other, what is missing is said, not the library's long guess."""
    from transformers import AutoTokenizer  # the auto classes load architectures' code

    if not files.tokenizer_files:
        return None
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception:
        if files.has_vocabulary:
            raise  # the library's own message, as one line (as_model_error)
        present = ", ".join(files.tokenizer_files)
        raise LanguageModelError(
            f"{name} has {present} but no tokenizer file ({', '.join(TOKENIZER_VOCABULARIES)}) to build its "
            f"tokenizer from: add one, or remove {present}"
        ) from None
    tokenizer.encode("a")  # what TransformerBridge does first with it: a tokenizer that cannot fails here, in one line
    return tokenizer


def load_pretrained(source: ModelSource, device: str = "cpu"):
    """:func:`pretrained`'s model and tokenizer."""
    with pretrained(source, device) as (model, tokenizer):
        return model, tokenizer


def refuse_unloaded_weights(source: ModelSource, info: dict) -> None:
    """Refuse a model whose weights do not fill its config exactly: parameters they lack (left randomly
    initialised), tensors it has no place for, or a tensor of another shape."""
    if info["missing_keys"]:
        missing = sorted(info["missing_keys"])
        raise LanguageModelError(
            f"{source.describe()}: its weights lack {len(missing)} parameter(s) of its config "
            f"(e.g. {missing[0]}); refusing to probe randomly initialised weights"
        )
    unexpected = sorted(name for name in info["unexpected_keys"] if not STALE_BUFFER.search(name))
    if unexpected:
        raise LanguageModelError(
            f"{source.describe()}: its weights hold {len(unexpected)} tensor(s) its config has no place for "
            f"(e.g. {one_line(unexpected[0])}); refusing weights that do not match their config"
        )
    if info["mismatched_keys"]:
        name, saved, expected = min(info["mismatched_keys"], key=lambda mismatch: mismatch[0])
        raise LanguageModelError(
            f"{source.describe()}: tensor {one_line(name)} is {list(saved)} in its weights but {list(expected)} "
            f"in its config ({len(info['mismatched_keys'])} such tensor(s))"
        )


def refuse_not_finite(source: ModelSource, model: nn.Module) -> None:
    """Refuse a model with a NaN or infinite weight: every probe's number would be NaN, or a guess."""
    for name, tensor in itertools.chain(model.named_parameters(), model.named_buffers()):
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise LanguageModelError(f"{source.describe()}: tensor {name} holds NaN or infinity: refusing to probe it")


def warn_cast_weights(source: ModelSource, files: ModelFiles, model: nn.Module) -> None:
    """Warn, in one line naming the file, of weights stored as integers or booleans that were loaded cast to
    float32: the values are kept, but such weights are usually quantized ones whose scales are not applied, so
    the probes may measure another model than the one trained. Only tensors loaded into a float tensor of the
    model count (by name, a base model's without its prefix): not the integer buffers it keeps as they are,
    nor those it has no place for (GPT-2's saved masks)."""
    floating = {name for name, tensor in model.state_dict().items() if tensor.is_floating_point()}
    prefix = model.base_model_prefix
    stored = files.non_float_tensors().items()
    cast = {name: found for name, found in stored if {name, f"{prefix}.{name}"} & floating}
    if cast:
        first = min(cast)
        dtypes = " and ".join(sorted({dtype for dtype, _ in cast.values()}))
        message = (
            f"{source.describe()}: {len(cast)} weight tensor(s) stored as {dtypes} (e.g. {one_line(first)}) were cast "
            "to float32: integer weights are usually quantized ones, whose scales are not applied here"
        )
        # the file at fault as the warning's place, line 0: one line, and not a line of this module's source
        warnings.warn_explicit(message, CastWeightsWarning, filename=str(cast[first][1]), lineno=0)


def architecture(model: nn.Module) -> str:
    """The class name TransformerLens's adapters are registered under (GPT2LMHeadModel, LlamaForCausalLM): the
    config's first architecture (a list of names in a config read from a folder: :mod:`.hf_config`), else the
    model's own class, as for a model built in Python without one."""
    names = getattr(model.config, "architectures", None)
    return names[0] if isinstance(names, list) and names and isinstance(names[0], str) else type(model).__name__


def bridge_from_hf(model: nn.Module, tokenizer=None, name: str = "in-memory model"):
    """A ``TransformerBridge`` wrapping the Hugging Face model ``model`` itself (the bridge rewires the
    module it wraps: pass a copy to keep the original), in eval mode with eager attention."""
    from transformer_lens.model_bridge.sources import build_bridge_from_module  # loads transformers: only to bridge
    from transformer_lens.utilities.attn_implementation import force_eager_attention

    force_eager_attention(model)
    try:
        bridge = build_bridge_from_module(
            model, architecture(model), hf_config=model.config, tokenizer=tokenizer, model_name=name
        )
    except (ValueError, KeyError, AttributeError, NotImplementedError, TypeError) as error:
        message = f"TransformerBridge cannot boot {name} ({architecture(model)}): {one_line(error)}"
        raise LanguageModelError(message) from None
    return bridge.eval()


def load_bridge(source: ModelSource, device: str = "cpu"):
    """The model of ``source`` booted through TransformerBridge, on ``device``."""
    with pretrained(source, device) as (model, tokenizer):
        return bridge_from_hf(model, tokenizer, source.describe())


def is_bridge(model: object) -> bool:
    from transformer_lens.model_bridge import TransformerBridge  # loads transformers: only to test for a bridge

    return isinstance(model, TransformerBridge)


def as_hooked(model: ModelLike, device: str = "cpu"):
    """A hooked model to probe, from a path or cache name, a ``ModelSource``, a Hugging Face model (copied
    first, so that the caller's model stays as it was), a TransformerBridge or any TransformerLens-style
    hooked model (``run_with_hooks`` and ``cfg.n_layers``), which is returned as it is."""
    if isinstance(model, (str, os.PathLike, ModelSource)):
        source = model if isinstance(model, ModelSource) else find_source(os.fspath(model))
        if source is None:
            raise LanguageModelError(f"{os.fspath(model)} is a run of ours: open it with Run.open(...).load()")
        if isinstance(source, Series):
            raise LanguageModelError(
                f"{source.name} is a checkpoint series (steps {format_steps(source.steps)}): give one checkpoint"
            )
        return load_bridge(source, device)
    from transformers import PreTrainedModel  # only once the model is not one of ours

    if isinstance(model, PreTrainedModel):
        device = resolve_device(device)
        return bridge_from_hf(copy.deepcopy(model).to(device), None, type(model).__name__)
    if hasattr(model, "run_with_hooks") and hasattr(getattr(model, "cfg", None), "n_layers"):
        return model
    raise LanguageModelError(
        f"cannot probe a {type(model).__name__}: give a model directory or cache name, a "
        "Hugging Face model, a TransformerBridge or a hooked model"
    )


def describe(bridge) -> dict:
    """What was loaded, for ``info``: architecture, sizes, parameters, tokenizer."""
    cfg, tokenizer = bridge.cfg, getattr(bridge, "tokenizer", None)
    original = getattr(bridge, "original_model", None)
    hf_config = getattr(original, "config", None)
    return {
        "architecture": architecture(original) if original is not None else type(bridge).__name__,
        "model_type": getattr(hf_config, "model_type", None),
        "n_layers": cfg.n_layers,
        "n_heads": cfg.n_heads,
        "n_key_value_heads": getattr(cfg, "n_key_value_heads", None),
        "d_model": cfg.d_model,
        "d_head": cfg.d_head,
        "d_vocab": cfg.d_vocab,
        "n_ctx": cfg.n_ctx,
        "parameters": sum(p.numel() for p in bridge.parameters()),
        "dtype": str(next(bridge.parameters()).dtype).removeprefix("torch."),
        "positional": getattr(cfg, "positional_embedding_type", None),
        "tokenizer": None if tokenizer is None else {"class": type(tokenizer).__name__, "size": len(tokenizer)},
    }
