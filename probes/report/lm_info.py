"""What ``induction-probes info`` shows of a Hugging Face language model: its architecture and sizes, its parameters,
its tokenizer and its checkpoints, from ``config.json``, the tokenizer's files and the safetensors headers alone,
read through the same checks as a load (:mod:`~induction_probes.circuits.interop.model_folder`). Nothing is
booted and no torch is imported: a second, whatever the model's size. ``probe`` loads the weights, and refuses
those that do not match the config.
"""

from __future__ import annotations

import os

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.hf_config import check_architectures, check_tokenizer_model, refuse_code
from induction_probes.circuits.interop.model_folder import (
    CONFIG,
    NON_FLOAT_DTYPES,
    STALE_BUFFER,
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
    as_model_error,
    read_model_folder,
)
from induction_probes.circuits.interop.model_sources import ModelSource, Series, as_source, model_folder, require_model
from induction_probes.circuits.limits import (
    MAX_LAYERS,
    MAX_LM_CONTEXT,
    MAX_LM_HEADS,
    MAX_LM_VOCABULARY,
    MAX_LM_WIDTH,
    require_at_most,
)
from induction_probes.circuits.validation import require_int, shortened

# the names config.json gives each size under, across transformers' architectures (GPT-2 keeps its own)
SIZE_NAMES = {
    "n_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "n_heads": ("num_attention_heads", "n_head", "num_heads"),
    "n_key_value_heads": ("num_key_value_heads",),
    "d_model": ("hidden_size", "n_embd", "d_model"),
    "d_head": ("head_dim",),
    "d_vocab": ("vocab_size",),
    "n_ctx": ("max_position_embeddings", "n_positions", "n_ctx"),
}
SIZE_LIMITS = {  # the bounds the loader holds each size to (circuits/interop/hf_config.py's, without transformers)
    "n_layers": MAX_LAYERS,
    "n_heads": MAX_LM_HEADS,
    "n_key_value_heads": MAX_LM_HEADS,
    "d_model": MAX_LM_WIDTH,
    "d_head": MAX_LM_WIDTH,
    "d_vocab": MAX_LM_VOCABULARY,
    "n_ctx": MAX_LM_CONTEXT,
}
ROTARY_KEYS = ("rope_parameters", "rope_theta", "rope_scaling", "rotary_pct", "rotary_dim", "rotary_emb_base")
FLOAT_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def config_sizes(config: dict) -> dict:
    """The sizes ``config`` gives (None where it gives one under no name known here), d_head derived; a size
    outside the loader's bounds (:data:`SIZE_LIMITS`: 0, −1, 100,000 layers) is refused as the loader refuses it."""
    sizes = {}
    for size, names in SIZE_NAMES.items():
        given = [(name, config[name]) for name in names if name in config and config[name] is not None]
        for name, value in given:
            require_at_most(name, require_int(name, value, 1), SIZE_LIMITS[size])
        sizes[size] = given[0][1] if given else None
    if sizes["d_head"] is None and sizes["d_model"] and sizes["n_heads"]:
        sizes["d_head"] = sizes["d_model"] // sizes["n_heads"]
    return sizes


def positions(config: dict) -> str:
    """Rotary where the config has rotary settings; otherwise learned absolute positions where it bounds them."""
    if any(key in config for key in ROTARY_KEYS):
        return "rotary"
    return "absolute" if "n_positions" in config else "as its architecture defines them"


def tokenizer_about(tokenizer_config: dict | None, tokenizer: dict | None) -> dict | None:
    """The tokenizer's class and size, from its files (None: the model has none)."""
    if tokenizer_config is None and tokenizer is None:
        return None
    model = (tokenizer or {}).get("model")
    vocabulary = model.get("vocab") if isinstance(model, dict) else None
    added = (tokenizer or {}).get("added_tokens")
    size = len(vocabulary) if isinstance(vocabulary, (dict, list)) else None
    if size is not None and isinstance(added, list):
        ids = [token.get("id") for token in added if isinstance(token, dict)]
        for i in ids:  # an added token's id makes the vocabulary that large: bounded as a config's size is
            if isinstance(i, int) and not 0 <= i < MAX_LM_VOCABULARY:
                raise BadInput(f"an added token's id {shortened(str(i), 40)} is outside 0..{MAX_LM_VOCABULARY - 1:,}")
        size = max([size, *(i + 1 for i in ids if isinstance(i, int))])
    name = (tokenizer_config or {}).get("tokenizer_class")
    return {"class": shortened(name) if isinstance(name, str) else "from tokenizer.json", "size": size}


def text_field(value: object) -> str | None:
    """A name from a stranger's config as info shows it: a string, at most
    :data:`~induction_probes.circuits.validation.QUOTE_LIMIT` characters (its control characters are escaped where
    the command line prints); anything else is no name."""
    return shortened(value) if isinstance(value, str) else None


def language_model_info(
    source: ModelSource | Series | str | os.PathLike, *, step: int | None = None, as_json: bool = False
) -> str | dict:
    """What was found: the model, its architecture and sizes, its parameters, its tokenizer, its checkpoints."""
    source = as_source(source)
    model = require_model(source, step)
    files = read_model_folder(model_folder(model))
    with as_model_error(f"{model.describe()}: {CONFIG}"):
        config = files.json(CONFIG) or {}
        refuse_code(config)  # what the loader refuses, info refuses too (auto_map, quantized weights)
        check_architectures(config)
        sizes = config_sizes(config)
    with as_model_error(f"{model.describe()}: tokenizer files"):
        refuse_code(files.json(TOKENIZER_CONFIG) or {})
        check_tokenizer_model(files.json(TOKENIZER_JSON) or {})
        tokenizer = tokenizer_about(files.json(TOKENIZER_CONFIG), files.json(TOKENIZER_JSON))
    architectures = config.get("architectures")
    stored = {code for name, (code, _, _) in files.tensors().items() if not STALE_BUFFER.search(name)}
    about = {
        "architecture": text_field(architectures[0] if isinstance(architectures, list) and architectures else None),
        "model_type": text_field(config.get("model_type")),
        **sizes,
        "parameters": files.parameter_count(),
        "dtype": ", ".join(
            sorted(FLOAT_NAMES.get(c) or NON_FLOAT_DTYPES.get(c) or shortened(str(c), 20) for c in stored)
        ),
        "positional": positions(config),
        "tokenizer": tokenizer,
    }
    steps = source.steps if isinstance(source, Series) else None
    if as_json:
        return {"model": model.describe(), "step": model.step, "steps": steps, **about}
    return "\n".join(info_lines(model, about, steps))


def info_lines(model: ModelSource, about: dict, steps: list[int] | None) -> list[str]:
    grouped = about["n_key_value_heads"] not in (None, about["n_heads"])
    kv = f" ({about['n_key_value_heads']} key-value heads)" if grouped else ""
    tokenizer = about["tokenizer"]
    lines = [
        f"Hugging Face model {model.describe()} (its config and weights' headers; probe loads the weights)",
        f"architecture {about['architecture']} ({about['model_type']}): {about['n_layers']} layers, "
        f"{about['n_heads']} head(s) per layer{kv}, d_model {about['d_model']}, d_head {about['d_head']}, "
        f"vocabulary {about['d_vocab']}, context {about['n_ctx']}, positions {about['positional']}",
        f"parameters: {about['parameters']:,} ({about['dtype']})",
        "tokenizer: "
        + (
            f"{tokenizer['class']}, {tokenizer['size']} tokens"
            if tokenizer
            else "none (the random-token probes need none; --text needs one)"
        ),
    ]
    if steps is not None:
        lines.append(f"checkpoint series: {len(steps)} steps from {steps[0]} to {steps[-1]}; read step {model.step}")
    return lines
