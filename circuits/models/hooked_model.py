"""What a probe may be given as a model: anything TransformerLens-style, read through its hooks.

:class:`HookedModel` is a protocol, not a base class, because three unrelated classes meet it: our
:class:`~induction_probes.circuits.models.model.HookedTransformer` and
:class:`~induction_probes.circuits.models.minimal.MinimalModel` (TransformerLens's ``HookedRootModule``), and
TransformerLens 4's ``TransformerBridge`` around a Hugging Face model, which derives from neither. A probe
annotated with it promises to read only these members; one that reads weights by name (``W_Q``, ``blocks``)
says so in its own docstring."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # for the annotations only: importing the protocol stays free of torch and TransformerLens
    import torch
    from jaxtyping import Float
    from torch import Tensor
    from transformer_lens import ActivationCache
    from transformer_lens.hook_points import HookPoint


class ModelConfig(Protocol):
    """What probes read of any model's ``cfg``: the sizes every model class has under TransformerLens's names,
    and the dtype (a name on :class:`~induction_probes.circuits.models.minimal.MinimalConfig`, a
    ``torch.dtype`` on the others). Read-only properties, not attributes, so that a frozen dataclass's fields
    and TransformerLens's wider config both meet it (a mutable protocol attribute must match exactly)."""

    @property
    def n_layers(self) -> int: ...

    @property
    def n_heads(self) -> int: ...

    @property
    def n_ctx(self) -> int: ...

    @property
    def d_vocab(self) -> int: ...

    @property
    def dtype(self) -> str | torch.dtype: ...


@runtime_checkable
class HookedModel(Protocol):
    """A model with a config (``cfg``: at least :class:`ModelConfig`'s sizes and dtype), named hook
    points (``hook_dict``), and forward passes with hooks attached (``run_with_hooks``) or activations cached
    (``run_with_cache``)."""

    # read-only: each class's cfg is its own config type, which has ModelConfig's members; a protocol's
    # mutable attribute would need the very same type
    @property
    def cfg(self) -> ModelConfig: ...

    @property
    def hook_dict(self) -> dict[str, HookPoint]: ...

    # The arguments stay open (Any): the three classes name theirs differently (tokens, input, residual
    # with start_at_layer). The output's shape depends on them: logits [batch, pos, d_vocab_out] by default, a
    # loss or a residual stream with TransformerLens's return_type and stop_at_layer.
    def run_with_hooks(self, *model_args: Any, **kwargs: Any) -> Float[Tensor, ...]: ...

    def run_with_cache(self, *model_args: Any, **kwargs: Any) -> tuple[Float[Tensor, ...], ActivationCache]: ...

    def __call__(self, *args: Any, **kwargs: Any) -> Float[Tensor, ...]: ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]: ...


class Blocks(Protocol):
    """A model's transformer blocks, by layer (an ``nn.ModuleList``): each with ``ln1`` and ``attn`` (``W_Q``,
    ``W_K``, ``W_V``, ``W_O``), read by TransformerLens's names, and untyped here since the classes' blocks differ."""

    def __getitem__(self, layer: int, /) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class WeightedConfig(ModelConfig, Protocol):
    """A :class:`ModelConfig` with the widths weight-reading probes divide by."""

    @property
    def d_model(self) -> int: ...

    @property
    def d_head(self) -> int: ...


@runtime_checkable
class WeightedModel(HookedModel, Protocol):
    """A :class:`HookedModel` whose weights a probe reads by TransformerLens's names: ``blocks``, the embedding
    ``W_E``, the unembedding ``W_U`` and ``ln_final``. Our HookedTransformer and a TransformerBridge meet it; the
    minimal model (no blocks) does not."""

    @property
    def cfg(self) -> WeightedConfig: ...

    @property
    def blocks(self) -> Blocks: ...

    @property
    def W_E(self) -> Float[Tensor, "d_vocab d_model"]: ...

    @property
    def W_U(self) -> Float[Tensor, "d_model d_vocab"]: ...

    @property
    def ln_final(self) -> torch.nn.Module: ...
