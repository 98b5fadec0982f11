"""A Hugging Face model's ``config.json``, checked before anything is built from it.

A config from a stranger names its own sizes, and one edited number (``n_layer: 100000``) must not become
minutes of building or gigabytes of memory before failing. So its sizes are checked as the JSON values they
are first (integers, at least 1, within circuits/limits.py), under every name transformers' own
config class reads them by (GPT-2's ``n_layer`` is ``num_hidden_layers`` through ``GPT2Config.attribute_map``),
with the class's declared default where the file gives none. Only then is the config class built, and the
model's parameters counted on the meta device, where building a model allocates no memory. A config asking
for quantized weights or code of its own is refused: the loader loads float32 weights and runs no code from
a model's folder. Its ``architectures`` must be a list of class names, and a ``tokenizer.json`` must hold the
token it names for unknown words.
"""

from __future__ import annotations

import dataclasses
from typing import cast

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.model_folder import one_line
from induction_probes.circuits.limits import (
    MAX_LAYERS,
    MAX_LM_CONTEXT,
    MAX_LM_HEADS,
    MAX_LM_PARAMETERS,
    MAX_LM_VOCABULARY,
    MAX_LM_WIDTH,
    require_at_most,
)
from induction_probes.circuits.validation import require_int

# transformers' name of each size -> the least and the most a config may ask for; None: bounded by the
# parameter count alone. A model must give the first five (or its class must default them).
REQUIRED_SIZES = {
    "num_hidden_layers": (1, MAX_LAYERS),
    "num_attention_heads": (1, MAX_LM_HEADS),
    "hidden_size": (1, MAX_LM_WIDTH),
    "vocab_size": (1, MAX_LM_VOCABULARY),
    "max_position_embeddings": (1, MAX_LM_CONTEXT),
}
OPTIONAL_SIZES = {
    "num_key_value_heads": (1, MAX_LM_HEADS),  # grouped-query attention (Llama); all heads where not given
    "head_dim": (1, MAX_LM_WIDTH),  # hidden size / heads where not given
    "intermediate_size": (1, None),
    "n_inner": (1, None),  # GPT-2's MLP width, under its own name: its attribute_map does not name it
    "num_local_experts": (0, MAX_LAYERS),  # every expert is a module of its own, as every layer is
    "num_experts": (0, MAX_LAYERS),  # the same, as Qwen's mixtures of experts name it
}
# entries that would make transformers load other than plain float32 weights, or run code from the folder
REFUSED_ENTRIES = {
    "quantization_config": "asks for quantized weights (quantization_config): only float32 weights are loaded",
    "auto_map": "names code of its own (auto_map): no code from a model's folder runs",
    "trust_remote_code": "asks for its own code to run (trust_remote_code): no code from a model's folder runs",
}


def refuse_code(value: dict) -> None:
    """Refuse a config (or a tokenizer's config) with an entry of :data:`REFUSED_ENTRIES`."""
    for key, why in REFUSED_ENTRIES.items():
        if key in value:
            raise BadInput(why)


def checked_config(value: dict):
    """The transformers config that ``value``, config.json's object, describes, once its sizes are within the
    limits; a ``ValueError`` in one sentence naming the key for the first that is not."""
    refuse_code(value)
    check_architectures(value)
    config_class = known_config_class(value)
    check_sizes(value, config_class)
    config = config_class.from_dict(value)  # bounded now: every size it builds from was checked above
    count = parameter_count(config)
    if count > MAX_LM_PARAMETERS:
        raise BadInput(
            f"the model would have {count:,} parameters, above the limit of {MAX_LM_PARAMETERS:,} (circuits/limits.py)"
        )
    return config


def check_architectures(value: dict) -> None:
    """``architectures``, where given, a list of class names: TransformerBridge picks its adapter by the first,
    and of a string it would take the first letter."""
    names = value.get("architectures")
    if names is not None and not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
        shown = one_line(repr(names))
        raise BadInput(f'architectures must be a list of class names, such as ["GPT2LMHeadModel"]: got {shown}')


def check_tokenizer_model(tokenizer: dict) -> None:
    """tokenizer.json's model, where it names a token for unknown words (WordLevel, WordPiece, BPE), holding
    that token in its vocabulary: the tokenizers library loads one that does not, then fails on the first word
    it does not know, such as the one TransformerBridge encodes when it boots."""
    model = tokenizer.get("model")
    unknown, vocabulary = (model.get("unk_token"), model.get("vocab")) if isinstance(model, dict) else (None, None)
    if isinstance(unknown, str) and isinstance(vocabulary, dict) and unknown not in vocabulary:
        raise BadInput(
            f"its model's unk_token {one_line(repr(unknown))} is not in its vocabulary ({len(vocabulary):,} tokens): "
            "no word outside the vocabulary could be encoded"
        )


def known_config_class(value: dict):
    """The config class of ``value``'s ``model_type``, one transformers itself defines (no code of the folder's),
    with no sub-configs (a vision tower, a text config inside), whose sizes the checks here would not reach."""
    # transformers' registry of configs, to check a folder's: finding a folder (any probe command) needs none
    import transformers
    from transformers import CONFIG_MAPPING

    model_type = value.get("model_type")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        shown = one_line(repr(model_type))
        raise BadInput(f"model_type {shown} is not one transformers {transformers.__version__} defines")
    config_class = CONFIG_MAPPING[model_type]
    # a classproperty in transformers, read on the class: the dict of its sub-configs' classes, by name
    sub_configs = cast("dict[str, type]", config_class.sub_configs)
    if sub_configs:
        names = ", ".join(sorted(sub_configs))
        raise BadInput(f"model_type {model_type!r} holds configs inside it ({names}): only plain language models load")
    return config_class


def check_sizes(value: dict, config_class) -> None:
    """Every size of :data:`REQUIRED_SIZES` and :data:`OPTIONAL_SIZES` within its bounds, under each name
    config.json may give it by; then the heads: the key-value heads dividing them, and they the hidden size
    (as transformers' Llama requires even of a config that names its own head size)."""
    given = {name: given_size(value, config_class, name, bounds) for name, bounds in REQUIRED_SIZES.items()}
    sizes: dict[str, int] = {}
    for name, size in given.items():
        if size is None:
            raise BadInput(f"gives no {name}, and {config_class.__name__} has no default: not a transformer")
        sizes[name] = size
    optional = {name: given_size(value, config_class, name, bounds) for name, bounds in OPTIONAL_SIZES.items()}
    heads, hidden = sizes["num_attention_heads"], sizes["hidden_size"]
    key_value_heads = optional["num_key_value_heads"] or heads
    if heads % key_value_heads:
        raise BadInput(f"its {key_value_heads} key-value heads do not divide its {heads} attention heads")
    if hidden % heads:
        raise BadInput(f"its hidden size {hidden} is not divisible by its {heads} attention heads")


def given_size(value: dict, config_class, name: str, bounds: tuple[int, int | None]) -> int | None:
    """Size ``name`` as config.json gives it (each of its names checked; two that differ are refused), else
    the config class's declared default (None where it has none)."""
    required = name in REQUIRED_SIZES
    given = {key: value[key] for key in names_of(config_class, name) if key in value}
    given = {key: size for key, size in given.items() if required or size is not None}  # null: the default
    for key, size in given.items():
        least, most = bounds
        require_int(key, size, least)
        if most is not None:
            require_at_most(key, size, most)
    if len(set(given.values())) > 1:
        raise BadInput(f"gives {name} twice, differently ({', '.join(f'{k} {v}' for k, v in given.items())})")
    if given:
        return next(iter(given.values()))
    defaults = {field.name: field.default for field in dataclasses.fields(config_class)}
    default = defaults.get(config_class.attribute_map.get(name, name))
    return default if type(default) is int else None


def names_of(config_class, name: str) -> list[str]:
    """The keys config.json may give size ``name`` under: transformers' name, and the class's aliases for it
    in either direction (GPT-2's ``n_layer`` for ``num_hidden_layers``; Mixtral's ``num_experts`` for
    ``num_local_experts``)."""
    aliases = config_class.attribute_map
    return list(dict.fromkeys([name, aliases.get(name, name), *(a for a, t in aliases.items() if t == name)]))


def parameter_count(config) -> int:
    """The parameters of a model of ``config``, counted on the meta device: its modules are built, no tensor
    is allocated, and what it counts is exact for every architecture, tied embeddings counted once."""
    import torch  # here, not at the top: info's checks (refuse_code, check_architectures) run without torch
    from transformers import AutoModelForCausalLM  # the auto classes load each architecture's code when used

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(parameter.numel() for parameter in model.parameters())
