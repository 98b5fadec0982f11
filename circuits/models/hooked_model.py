"""What a probe may be given as a model: anything TransformerLens-style, read through its hooks.

:class:`HookedModel` is a protocol, not a base class, because three unrelated classes meet it: our
:class:`~induction_probes.circuits.models.model.HookedTransformer` and
:class:`~induction_probes.circuits.models.minimal.MinimalModel` (TransformerLens's ``HookedRootModule``), and
TransformerLens 4's ``TransformerBridge`` around a Hugging Face model, which derives from neither. A probe
annotated with it promises to read only these members; one that reads weights by name (``W_Q``, ``blocks``)
says so in its own docstring."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class HookedModel(Protocol):
    """A model with a config (``cfg``: ``n_layers``, ``n_heads``, ``n_ctx``, ``d_vocab`` and more), named hook
    points (``hook_dict``), and forward passes with hooks attached (``run_with_hooks``) or activations cached
    (``run_with_cache``)."""

    cfg: Any

    @property
    def hook_dict(self) -> dict[str, Any]: ...

    def run_with_hooks(self, *model_args: Any, **kwargs: Any) -> Any: ...

    def run_with_cache(self, *model_args: Any, **kwargs: Any) -> Any: ...

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
