"""Hugging Face language models as probe targets, booted through TransformerLens's ``TransformerBridge``.

Where a model comes from (a folder, a series of ``step_N/`` folders, a name in the local cache) is
:mod:`.model_sources`'s, which loads nothing.

Nothing is downloaded: every load is ``local_files_only``, so a model must be on disk (a name missing from
the cache is one clear error). A model's folder is untrusted input: transformers is given only the files
:mod:`.model_folder` read and checked (safetensors weights, never a pickle; no code, so none runs), and the
config only once :mod:`.hf_config` found its sizes within circuits/limits.py. A model whose weights do
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
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from induction_probes.circuits.devices import Device, resolve_device
from induction_probes.circuits.interop.hf_config import check_tokenizer_model, checked_config, refuse_code
from induction_probes.circuits.interop.model_folder import (
    CONFIG,
    STALE_BUFFER,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
    TOKENIZER_VOCABULARIES,
    CastWeightsWarning,
    LanguageModelError,
    ModelFiles,
    as_model_error,
    one_line,
    read_model_folder,
    staged,
)
from induction_probes.circuits.interop.model_sources import ModelSource, Series, find_source, format_steps, model_folder
from induction_probes.circuits.validation import quoted

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedModel

    from induction_probes.circuits.models.hooked_model import HookedModel


if TYPE_CHECKING:  # what a language-model probe takes: a folder or cache name, a ModelSource, or a model
    ModelLike = ModelSource | nn.Module | HookedModel | str | os.PathLike  # (Hugging Face's, a bridge, any hooked one)


# --- loading ----------------------------------------------------------------------------------------


@contextmanager
def pretrained(source: ModelSource, device: Device = "cpu") -> Iterator[tuple]:
    """The Hugging Face causal language model of ``source`` in float32 with eager attention, and its
    tokenizer (None when the model has none), both read from disk only, through :mod:`.model_folder`'s
    checked files; its config within the limits (:mod:`.hf_config`), its weights matching it and finite.
    Inside, the private folder of the checked files still exists (TransformerBridge reloads a tokenizer from
    its folder to add the BOS token: it reads the checked copy, not the model's folder)."""
    from transformers import AutoModelForCausalLM  # the auto classes load architectures' code

    where = resolve_device(device)  # before anything is read: a device this machine lacks is one line
    files = read_model_folder(model_folder(source))
    with as_model_error(f"{source.describe()}: {CONFIG}"):
        config = checked_config(files.config)
    with as_model_error(f"{source.describe()}: {TOKENIZER_CONFIG}"):
        refuse_code(files.json(TOKENIZER_CONFIG) or {})
    with as_model_error(f"{source.describe()}: {TOKENIZER_JSON}"):
        check_tokenizer_model(files.json(TOKENIZER_JSON) or {})
    options = {"local_files_only": True, "trust_remote_code": False}
    with staged(files) as folder:
        with as_model_error(f"cannot load {source.describe()}"):
            loaded = AutoModelForCausalLM.from_pretrained(
                folder,
                config=config,
                use_safetensors=True,
                attn_implementation="eager",
                dtype=torch.float32,
                output_loading_info=True,
                ignore_mismatched_sizes=True,  # reported in info, and refused below by name and shapes
                **options,
            )
            # output_loading_info=True returns (model, info): transformers annotates the model alone
            model, info = cast("tuple[PreTrainedModel, dict]", loaded)
            tokenizer = load_tokenizer(folder, files, source.describe())
        refuse_unloaded_weights(source, info)
        refuse_not_finite(source, model)
        warn_cast_weights(source, files, model)
        model.config.name_or_path = source.location  # where it came from, not the private folder
        # transformers wraps PreTrainedModel.to in functools.wraps, which pyright reads as an unbound function
        yield model.to(where).eval(), tokenizer  # pyright: ignore[reportArgumentType]  # the wrapped to, above


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


def load_pretrained(source: ModelSource, device: Device = "cpu"):
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


def bridge_from_hf(model: nn.Module, tokenizer=None, name: str = "in-memory model") -> HookedModel:
    """A ``TransformerBridge`` wrapping the Hugging Face model ``model`` itself (the bridge rewires the
    module it wraps: pass a copy to keep the original), in eval mode with eager attention. Typed as the
    :class:`~induction_probes.circuits.models.hooked_model.HookedModel` it meets at run time (a test checks every
    model a probe is given against the protocol), which TransformerLens's own annotations do not declare."""
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
    return cast("HookedModel", bridge.eval())


def load_bridge(source: ModelSource, device: Device = "cpu") -> HookedModel:
    """The model of ``source`` booted through TransformerBridge, on ``device``."""
    if not isinstance(source, ModelSource):  # a path read as a source would fail on a missing attribute
        raise TypeError(
            f"load_bridge takes a ModelSource (lm.find_source(path)), not {quoted(source)}; as_hooked takes a path"
        )
    with pretrained(source, device) as (model, tokenizer):
        return bridge_from_hf(model, tokenizer, source.describe())


def as_hooked(model: ModelLike, device: Device = "cpu") -> HookedModel:
    """A hooked model to probe, from a path or cache name, a ``ModelSource``, a Hugging Face model (copied
    first, so that the caller's model stays as it was), a TransformerBridge or any TransformerLens-style
    hooked model (``run_with_hooks`` and ``cfg.n_layers``), which is returned as it is."""
    if isinstance(model, ModelSource):
        return load_bridge(model, device)
    if isinstance(model, (str, os.PathLike)):
        source = find_source(os.fspath(model))
        if source is None:
            raise LanguageModelError(f"{os.fspath(model)} is a run of ours: open it with Run.open(...).load()")
        if isinstance(source, Series):
            raise LanguageModelError(
                f"{source.name} is a checkpoint series (steps {format_steps(source.steps)}): give one checkpoint"
            )
        return load_bridge(source, device)
    from transformers import PreTrainedModel  # only once the model is not one of ours

    if isinstance(model, PreTrainedModel):
        # transformers' functools.wraps around PreTrainedModel.to reads to pyright as an unbound function
        copied = copy.deepcopy(model).to(resolve_device(device))  # pyright: ignore[reportArgumentType]  # see above
        return bridge_from_hf(copied, None, type(model).__name__)
    if hasattr(model, "run_with_hooks") and hasattr(getattr(model, "cfg", None), "n_layers"):
        return cast("HookedModel", model)  # a hooked model of ours, or one of TransformerLens's
    raise LanguageModelError(
        f"cannot probe a {type(model).__name__}: give a model directory or cache name, a "
        "Hugging Face model, a TransformerBridge or a hooked model"
    )
