"""Hugging Face language models as probe targets, booted through TransformerLens's ``TransformerBridge``.

Where a model comes from (:func:`find_source`), in this order:

- a directory holding a Hugging Face model (``config.json`` with a ``model_type``, safetensors weights),
  as ``save_pretrained`` writes it;
- a directory of checkpoints: sub-folders ``step_N/`` (or ``stepN/``), each such a model directory;
- a name in the local Hugging Face cache (``HF_HUB_CACHE``), whose revisions named ``stepN`` (as Pythia
  publishes its training checkpoints) are its checkpoint series.

Nothing is downloaded: every load is ``local_files_only``, so a model must be on disk (a name missing from
the cache is one clear error). Weights are read from safetensors only (never a pickle) and no code from
the model's folder runs (``trust_remote_code`` stays off). A model whose weights do not cover its config
(parameters that loading would leave randomly initialised) is refused, not probed.

The bridge wraps the Hugging Face model with ``build_bridge_from_module``, TransformerLens's builder
behind ``boot_transformers``, with eager attention so that ``blocks.{l}.attn.hook_pattern`` fires. It
takes the tokenizer when the model has one and works without one (the probes' random tokens need none).
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from induction_probes.circuits.common.limits import MAX_TEXT_BYTES
from induction_probes.circuits.runs.shipped import shipped_run_names

STEP_FOLDER = re.compile(r"step_?(\d+)")  # step_1000/ (our convention) or step1000 (Pythia's revisions)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")


class LanguageModelError(ValueError):
    """A language model that cannot be found, read or booted."""


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
    """A Hugging Face model directory: its own ``config.json`` (no link, a sane size) naming a model type,
    and no ``manifest.json`` (a run directory of ours also has a config.json)."""
    config = path / "config.json"
    if not path.is_dir() or (path / "manifest.json").exists() or not config.is_file() or config.is_symlink():
        return False
    if config.stat().st_size > MAX_TEXT_BYTES:
        return False
    try:
        value = json.loads(config.read_text())
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(value, dict) and isinstance(value.get("model_type"), str)


def step_folders(path: Path) -> list[ModelSource]:
    """The ``step_N/`` model directories of ``path``, in step order (links are not followed)."""
    found = []
    for child in path.iterdir() if path.is_dir() and not path.is_symlink() else []:
        match = STEP_FOLDER.fullmatch(child.name)
        if match and not child.is_symlink() and is_model_directory(child):
            found.append(ModelSource(str(child), step=int(match.group(1))))
    steps = [source.step for source in found]
    if len(set(steps)) < len(steps):
        raise LanguageModelError(f"{path} has two checkpoint folders for one step (step_N and stepN)")
    return sorted(found, key=lambda source: source.step)


def cached_revisions(name: str) -> list[str] | None:
    """The names of the revisions of model ``name`` in the local Hugging Face cache (None: not there)."""
    from huggingface_hub import scan_cache_dir  # Hugging Face's libraries load in seconds: only when used
    from huggingface_hub.errors import CacheNotFound

    try:
        repos = scan_cache_dir().repos
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
        return Series(str(path), tuple(series)) if series else None

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


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def refuse_linked_files(source: ModelSource) -> None:
    """A model directory a user names is read only through its own regular files: a config or weights
    file that is a link is refused (the cache's snapshot links are Hugging Face's own and stay allowed)."""
    if source.in_cache:
        return
    directory = Path(source.location)
    weights = [*directory.glob("*.safetensors"), *directory.glob("*.safetensors.index.json")]
    for path in [directory / "config.json", *weights]:
        if path.is_symlink():
            raise LanguageModelError(f"{path} is a symbolic link: a model directory is read through its own files only")
    if not any(directory.glob("*.safetensors")):
        raise LanguageModelError(
            f"{directory} has no safetensors weights: only safetensors are loaded (never a pickle)"
        )


def has_tokenizer(source: ModelSource) -> bool:
    if not source.in_cache:
        return any((Path(source.location) / name).is_file() for name in TOKENIZER_FILES)
    from huggingface_hub import try_to_load_from_cache  # only for a model in the cache

    return any(
        isinstance(try_to_load_from_cache(source.location, name, revision=source.revision), str)
        for name in TOKENIZER_FILES
    )


def load_pretrained(source: ModelSource, device: str = "cpu"):
    """The Hugging Face causal language model of ``source`` in float32 with eager attention, and its
    tokenizer (None when the model has none), both read from disk only."""
    import torch  # finding a model's source needs neither torch nor transformers: loaded to load a model
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM, AutoTokenizer

    refuse_linked_files(source)
    options = {"revision": source.revision, "local_files_only": True, "trust_remote_code": False}
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            source.location,
            use_safetensors=True,
            attn_implementation="eager",
            dtype=torch.float32,
            output_loading_info=True,
            **options,
        )
        tokenizer = AutoTokenizer.from_pretrained(source.location, **options) if has_tokenizer(source) else None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, SafetensorError) as error:
        raise LanguageModelError(f"cannot load {source.describe()}: {first_line(error)}") from None
    if info["missing_keys"]:
        missing = sorted(info["missing_keys"])
        raise LanguageModelError(
            f"{source.describe()}: its weights lack {len(missing)} parameter(s) of its config "
            f"(e.g. {missing[0]}); refusing to probe randomly initialised weights"
        )
    return model.to(device).eval(), tokenizer


def architecture(model) -> str:
    """The class name TransformerLens's adapters are registered under (GPT2LMHeadModel, LlamaForCausalLM)."""
    names = getattr(model.config, "architectures", None) or [type(model).__name__]
    return names[0]


def bridge_from_hf(model, tokenizer=None, name: str = "in-memory model"):
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
        message = f"TransformerBridge cannot boot {name} ({architecture(model)}): {first_line(error)}"
        raise LanguageModelError(message) from None
    return bridge.eval()


def load_bridge(source: ModelSource, device: str = "cpu"):
    """The model of ``source`` booted through TransformerBridge, on ``device``."""
    model, tokenizer = load_pretrained(source, device)
    return bridge_from_hf(model, tokenizer, source.describe())


def is_bridge(model) -> bool:
    from transformer_lens.model_bridge import TransformerBridge  # loads transformers: only to test for a bridge

    return isinstance(model, TransformerBridge)


def as_hooked(model, device: str = "cpu"):
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
        return bridge_from_hf(copy.deepcopy(model), None, type(model).__name__)
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
