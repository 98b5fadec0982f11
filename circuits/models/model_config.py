"""The model's config: everything that fixes a HookedTransformer's shapes and maths, saved as JSON next
to every checkpoint, and presented to TransformerLens's tools under the attribute names they read."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import torch

from induction_probes.circuits.config import Config
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import (
    MAX_HEADS,
    MAX_LAYERS,
    MAX_PARAMETERS,
    require_at_most,
    require_numbers,
)
from induction_probes.circuits.validation import quoted, require_int

ATTENTION_POSITIONALS = ("relative", "alibi", "none")
POSITIONALS = ATTENTION_POSITIONALS + ("standard",)
MASKS = ("causal", "strict")
DTYPES = {"float32": torch.float32, "float64": torch.float64}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class HookedTransformerConfig(Config):
    """Everything that fixes the model's shapes and maths; saved as JSON next to every checkpoint.

    ``positional`` and ``mask`` take one value for all layers or a tuple with one per layer;
    ``layer_heads`` overrides ``n_heads`` per layer (n − 1 first-layer heads for n-gram chains).
    With ``input_type="vectors"`` the input is ``[batch, pos, d_vocab]`` and the embedding is linear.
    """

    n_layers: int
    d_model: int
    n_ctx: int
    d_vocab: int
    n_heads: int = 1
    # None (the default) is derived in __post_init__, d_model // n_heads and d_vocab: a built config always holds an
    # int, which is the type its readers see
    d_head: int = cast(int, None)
    d_vocab_out: int = cast(int, None)
    layer_heads: tuple[int, ...] | None = None
    positional: str | tuple[str, ...] = "relative"
    mask: str | tuple[str, ...] = "causal"
    skip_first_keys: int | tuple[int, ...] = 0  # per layer: key positions below this are never attended
    normalization: str | None = None  # None or "LN" (pre-LN in each block and before the unembed)
    dropout: float = 0.0
    d_mlp: int | None = None  # None: attention-only
    input_type: str = "tokens"
    use_attn_result: bool = False
    use_bias: bool = False
    dtype: str | torch.dtype = "float32"  # a torch dtype once built, as TransformerLens reads it; JSON: its name
    init_range: float = 0.02
    seed: int = 0

    @classmethod
    def from_dict(cls, values: object) -> HookedTransformerConfig:
        """The config from a JSON object: a :class:`MixedHeadsConfig` where the layers' head counts differ."""
        heads = values.get("layer_heads") if isinstance(values, dict) else None
        if cls is HookedTransformerConfig and isinstance(heads, list | tuple) and len(set(heads)) > 1:
            return MixedHeadsConfig.from_dict(values)
        return super().from_dict(values)

    def __post_init__(self) -> None:
        for name in ("n_layers", "d_model", "n_ctx", "d_vocab"):
            require_int(name, getattr(self, name), 1)
        n_heads = self.__dict__["n_heads"]  # the field itself: MixedHeadsConfig's attribute refuses to be read
        require_int("n_heads", n_heads, 1)
        for name in ("layer_heads", "positional", "mask", "skip_first_keys"):  # JSON gives lists; keep it hashable
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.d_head is None:
            if self.d_model % n_heads:
                raise BadInput(f"d_model {self.d_model} is not divisible by n_heads {n_heads}")
            object.__setattr__(self, "d_head", self.d_model // n_heads)
        if self.d_vocab_out is None:
            object.__setattr__(self, "d_vocab_out", self.d_vocab)
        require_int("d_head", self.d_head, 1)
        require_int("d_vocab_out", self.d_vocab_out, 1)
        if self.layer_heads is not None:
            self._check_per_layer("layer_heads", self.layer_heads)
            for heads in self.layer_heads:
                require_int("heads per layer", heads, 1)
            if len(set(self.layer_heads)) > 1 and not isinstance(self, MixedHeadsConfig):
                raise BadInput(
                    f"layer_heads {self.layer_heads} differ between layers: build the config with "
                    "transformer_config(...) or MixedHeadsConfig(...), whose n_heads says why it has none"
                )
            if len(set(self.layer_heads)) == 1:  # TransformerLens's tools count a layer's heads with n_heads
                if n_heads not in (1, self.layer_heads[0]):  # 1: the field's default, or a file from before
                    raise BadInput(f"n_heads {n_heads} contradicts layer_heads {self.layer_heads}")
                object.__setattr__(self, "n_heads", self.layer_heads[0])
        if self.positional == "standard":
            pass
        elif isinstance(self.positional, tuple) and "standard" in self.positional:
            raise BadInput("standard positions are absolute: give positional='standard' for the whole model")
        else:
            self._check_choices("positional", self.positional, ATTENTION_POSITIONALS)
        self._check_choices("mask", self.mask, MASKS)
        if isinstance(self.skip_first_keys, tuple):
            self._check_per_layer("skip_first_keys", self.skip_first_keys)
        for skip in self.skip_first_keys if isinstance(self.skip_first_keys, tuple) else (self.skip_first_keys,):
            require_int("skip_first_keys", skip, 0)
        self._check_choices("normalization", self.normalization, (None, "LN"))
        self._check_choices("input_type", self.input_type, ("tokens", "vectors"))
        name = dtype_name(self.dtype) if isinstance(self.dtype, torch.dtype) else self.dtype
        self._check_choices("dtype", name, tuple(DTYPES))
        object.__setattr__(self, "dtype", DTYPES[name])
        # switches TransformerLens's tools flip on a loaded model (set_use_split_qkv_input, set_use_attn_in);
        # not fields: they change which hooks fire, never the maths, and are not saved
        object.__setattr__(self, "use_split_qkv_input", False)
        object.__setattr__(self, "use_attn_in", False)
        if self.d_mlp is not None:
            require_int("d_mlp", self.d_mlp, 1)
        if not 0.0 <= self.dropout < 1.0:
            raise BadInput(f"dropout must be in [0, 1), got {self.dropout}")
        self._check_sizes()

    def _check_sizes(self) -> None:
        """The sizes this config implies, against circuits/limits.py, before any model is built."""
        require_at_most("n_layers", self.n_layers, MAX_LAYERS)
        require_at_most("heads in a layer", self.max_heads, MAX_HEADS)
        require_numbers("the attention masks (n_layers x n_ctx^2)", self.n_layers * self.n_ctx**2)
        count = self.parameter_count()
        if count > MAX_PARAMETERS:
            raise BadInput(
                f"this model would have {count:.3g} parameters, above the limit of {MAX_PARAMETERS:,} "
                "(circuits/limits.py)"
            )

    @property
    def max_heads(self) -> int:
        return max(self.layer_heads) if self.layer_heads is not None else self.n_heads

    def parameter_count(self) -> int:
        """The parameters of a model of this config (biases and LayerNorms included, a little generously)."""
        per_layer = [
            self.heads(layer) * self.d_head * (4 * self.d_model + self.n_ctx + 4)
            + 3 * self.d_model
            + (2 * self.d_model * self.d_mlp + self.d_mlp if self.d_mlp else 0)
            for layer in range(self.n_layers)
        ]
        ends = self.d_model * (self.d_vocab + self.d_vocab_out + self.n_ctx + 2) + self.d_vocab_out
        return sum(per_layer) + ends

    def numbers_per_sequence(self) -> int:
        """About how many numbers one sequence costs in a forward pass: the widest layer's attention
        patterns and the residual stream's widest view."""
        return self.max_heads * self.n_ctx**2 + self.n_ctx * max(self.d_model, self.d_vocab_out, self.d_mlp or 0)

    def _check_per_layer(self, name: str, values: tuple) -> None:
        if len(values) != self.n_layers:
            raise BadInput(f"{name} has {len(values)} entries for {self.n_layers} layers")

    def _check_choices(self, name: str, value: object, choices: tuple) -> None:
        if isinstance(value, tuple):
            self._check_per_layer(name, value)
        for item in value if isinstance(value, tuple) else (value,):
            if item not in choices:
                raise BadInput(f"{name} must be one of {', '.join(map(str, choices))}; got {quoted(item)}")

    def heads(self, layer: int) -> int:
        return self.layer_heads[layer] if self.layer_heads is not None else self.n_heads

    def layer_positional(self, layer: int) -> str:
        """The positional term inside layer ``layer``'s attention: relative, alibi or none."""
        if self.positional == "standard":
            return "none"
        return self.positional[layer] if isinstance(self.positional, tuple) else self.positional

    def layer_mask(self, layer: int) -> str:
        return self.mask[layer] if isinstance(self.mask, tuple) else self.mask

    def layer_skip(self, layer: int) -> int:
        skip = self.skip_first_keys
        return skip[layer] if isinstance(skip, tuple) else skip

    @property
    def torch_dtype(self) -> torch.dtype:
        """``dtype``, which construction makes a torch dtype (a name only in JSON)."""
        return self.dtype if isinstance(self.dtype, torch.dtype) else DTYPES[self.dtype]

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict() | {"dtype": dtype_name(self.torch_dtype)}

    # --- what TransformerLens's analysis tools read from a config, under their names ---------------

    device = "cpu"
    n_key_value_heads = None  # no grouped-query attention
    final_rms = False
    eps: ClassVar[float] = 1e-5  # a class constant, not a field: ClassVar keeps it out of the dataclass's fields
    # TransformerLens's hook switches (set per config in __post_init__, never saved): class-level declarations only,
    # which keep them out of the fields as eps is kept
    use_split_qkv_input: ClassVar[bool]
    use_attn_in: ClassVar[bool]

    @property
    def attn_only(self) -> bool:
        return self.d_mlp is None

    @property
    def normalization_type(self) -> str | None:
        return self.normalization

    @property
    def positional_embedding_type(self) -> str | tuple[str, ...]:
        """The scheme under TransformerLens's name: "standard" as there, or ours (relative, alibi, none)."""
        return self.positional

    @property
    def act_fn(self) -> str | None:
        return None if self.d_mlp is None else "relu"


class MixedHeadsConfig(HookedTransformerConfig):
    """The config of a model whose layers have different head counts (``layer_heads=(2, 1)``).

    It holds and saves the same fields, but reading ``cfg.n_heads`` is an error that says why:
    TransformerLens's per-head tools count heads with it and would silently skip some (its patching, head
    detection and head stacks read one ``n_heads``). Our code asks ``cfg.heads(layer)``. Build it with
    :func:`transformer_config`, which picks this class where the head counts differ.
    """

    # A property over the field, by design: a reader of one n_heads is refused. Pyright lets no property override a
    # dataclass field, though this one's reads and writes keep the field's type (it reports the setter's line).
    @property
    def n_heads(self) -> int:
        counts = ", ".join(f"{self.heads(layer)} in layer {layer}" for layer in range(self.n_layers))
        raise BadInput(
            f"this model's layers have different head counts ({counts}): a tool that reads one "
            "cfg.n_heads would skip heads; per-layer counts are cfg.heads(layer)"
        )

    @n_heads.setter
    def n_heads(self, value: int) -> None:  # type: ignore[override]  # the field's type, read and written
        # the dataclass's __init__ stores the field through here
        self.__dict__["n_heads"] = value

    def values(self) -> tuple:
        return tuple(self.__dict__[f.name] for f in dataclasses.fields(self))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MixedHeadsConfig) and self.values() == other.values()

    def __hash__(self) -> int:
        return hash(self.values())

    def __repr__(self) -> str:
        return f"MixedHeadsConfig({', '.join(f'{f.name}={self.__dict__[f.name]!r}' for f in dataclasses.fields(self))})"

    def to_dict(self) -> dict[str, Any]:
        values = {f.name: self.__dict__[f.name] for f in dataclasses.fields(self)}
        return values | {"dtype": dtype_name(self.torch_dtype)}


def transformer_config(**fields) -> HookedTransformerConfig:
    """The model config of these fields: a :class:`MixedHeadsConfig` where ``layer_heads`` differ between
    layers, a :class:`HookedTransformerConfig` otherwise."""
    heads = fields.get("layer_heads")
    mixed = heads is not None and len(set(heads)) > 1
    return (MixedHeadsConfig if mixed else HookedTransformerConfig)(**fields)
