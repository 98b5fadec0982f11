"""Hook names asked of a model that lacks them, and head labels, as TransformerLens users expect them.

TransformerLens answers a hook that does not exist with a bare ``KeyError: 'blocks.0.hook_mlp_out'``
(``run_with_hooks``, ``add_hook``), or with silence (``run_with_cache(names_filter=[...])`` caches nothing).
Here each is one :class:`MissingHookError` (a ValueError and a KeyError) that names the hooks that exist.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Self, SupportsIndex, cast, overload

from transformer_lens import ActivationCache, HookedRootModule
from transformer_lens.utilities.components_utils import get_act_name

if TYPE_CHECKING:
    from contextlib import _GeneratorContextManager

    from torch import Tensor
    from transformer_lens.hook_points import HookFunction, HookPoint

    from induction_probes.circuits.models.hooked_model import ModelConfig
    from induction_probes.circuits.models.model_config import HookedTransformerConfig

# a hook name, or a filter on names (as TransformerLens takes it), and the hook to add there
HookSpec = tuple[str | Callable[[str], bool], Callable[..., Any]]


class MissingHookError(ValueError, KeyError):
    """A hook point (or a cached activation) that the model does not have."""

    def __str__(self) -> str:  # a KeyError's str() would quote the whole message
        return str(self.args[0]) if self.args else ""


def hook_families(names: Iterable[str]) -> list[str]:
    """Hook names with the layer written as {l}, each once, in the model's order."""
    families = [re.sub(r"^blocks\.\d+\.", "blocks.{l}.", name) for name in names]
    return list(dict.fromkeys(families))


class HookTable(Protocol):
    """What :func:`missing_hook_error` reads of a model: its sizes (``cfg``) and its hook points."""

    @property
    def cfg(self) -> ModelConfig: ...

    @property
    def hook_dict(self) -> dict[str, HookPoint]: ...


def missing_hook_error(model: HookTable, name: str, what: str = "hook point") -> MissingHookError:
    cfg = model.cfg
    absent = "" if getattr(cfg, "d_mlp", None) is not None or "mlp" not in name else " (it has no MLPs)"
    families = ", ".join(hook_families(model.hook_dict))
    return MissingHookError(
        f"{type(model).__name__} has no {what} {name!r}{absent}; its hook points are "
        f"{families} (l = 0..{cfg.n_layers - 1})"
    )


class CacheRuns(HookedRootModule):
    """HookedRootModule whose ``run_with_cache`` returns the output and an ActivationCache (:meth:`cache_of`), as
    TransformerLens 3's HookedTransformer did and the tools built on it read it. Both model classes derive from it."""

    # TransformerLens 4's HookedRootModule returns the bare dict that an ActivationCache wraps: an API that returns
    # the cache object instead cannot be a compatible override of it
    def run_with_cache(  # type: ignore[override]  # TransformerLens 3's API: the ActivationCache, not the dict
        self, *args: Any, **kwargs: Any
    ) -> tuple[Tensor, ActivationCache]:
        out, cache_dict = super().run_with_cache(*args, **kwargs)
        return out, self.cache_of(cache_dict, has_batch_dim=not kwargs.get("remove_batch_dim", False))

    def cache_of(self, cache_dict: dict[str, Tensor], has_batch_dim: bool) -> ActivationCache:
        return ActivationCache(cache_dict, self, has_batch_dim=has_batch_dim)


if TYPE_CHECKING:
    _CacheRuns = CacheRuns  # what HookChecks is mixed into, for the checker: super() reaches its methods
else:
    _CacheRuns = object  # a mixin at run time, before CacheRuns in the model's bases


class HookChecks(_CacheRuns):
    """Mixed into HookedTransformer (before HookedRootModule): hook names are checked before they are used."""

    if TYPE_CHECKING:
        cfg: HookedTransformerConfig  # the model's, as HookedTransformer declares it

    def check_hook_names(
        self, names: str | Sequence[str | Callable[[str], bool]] | Callable[[str], bool] | None
    ) -> None:
        """Raise :class:`MissingHookError` for the first of ``names`` (str or list; a filter function
        is left alone) that is not a hook point of the model."""
        for name in [names] if isinstance(names, str) else names if isinstance(names, (list, tuple)) else []:
            if isinstance(name, str) and name not in self.hook_dict:
                raise missing_hook_error(self, name)

    def add_hook(self, name: str | Callable[[str], bool], hook: HookFunction, *args: Any, **kwargs: Any) -> None:
        self.check_hook_names(name)
        super().add_hook(name, hook, *args, **kwargs)

    def hooks(
        self, fwd_hooks: Sequence[HookSpec] = (), bwd_hooks: Sequence[HookSpec] = (), *args: Any, **kwargs: Any
    ) -> _GeneratorContextManager[Self]:
        """TransformerLens's context manager of temporary hooks (``run_with_hooks`` uses it), names checked."""
        self.check_hook_names([name for name, _ in [*fwd_hooks, *bwd_hooks]])
        return super().hooks(list(fwd_hooks), list(bwd_hooks), *args, **kwargs)

    def run_with_cache(self, *args: Any, **kwargs: Any) -> tuple[Tensor, ActivationCache]:
        """Like TransformerLens: the output and an ActivationCache. Hooks that are switched off (the model's
        ``set_use_...`` switches) are left out unless asked for by name, which is then an error."""
        if kwargs.get("names_filter") is None:
            kwargs["names_filter"] = lambda name: getattr(self.hook_dict[name], "is_on", lambda: True)()
        self.check_hook_names(kwargs["names_filter"])
        return super().run_with_cache(*args, **kwargs)

    def cache_of(self, cache_dict: dict[str, Tensor], has_batch_dim: bool) -> HookCache:
        return HookCache(cache_dict, self, has_batch_dim=has_batch_dim)


class HookCache(ActivationCache):
    """TransformerLens's ActivationCache; a key it does not hold is one clear error naming what it holds."""

    def __init__(self, cache_dict: dict[str, Tensor], model: HookTable, has_batch_dim: bool = True) -> None:
        super().__init__(cache_dict, model, has_batch_dim=has_batch_dim)

    def __getitem__(self, key: str | tuple[Any, ...]) -> Tensor:
        try:
            return super().__getitem__(key)
        except KeyError:
            pass
        name = resolved_name(key)
        # the model __init__ was given: ActivationCache stores it typed as its own protocol, which has no hooks
        model = cast("HookTable", self.model)
        if name in model.hook_dict:
            held = ", ".join(hook_families(self.cache_dict)) or "nothing"
            raise MissingHookError(f"the cache holds no activation {name!r}; it holds {held}") from None
        raise missing_hook_error(model, name) from None


def resolved_name(key: str | tuple[Any, ...]) -> str:
    """The hook name a cache key stands for: itself, or TransformerLens's shorthand ("pattern", 0) resolved."""
    if isinstance(key, str) and "." in key:
        return key
    try:
        return get_act_name(*key) if isinstance(key, tuple) else get_act_name(key)
    except (AssertionError, TypeError, ValueError, IndexError):
        return str(key)


class HeadLabels(list[str]):
    """``model.all_head_labels``: call it, ``model.all_head_labels()``, as in TransformerLens (a method there).
    Reading it as a list, as this package used to offer, still works with a DeprecationWarning."""

    def __call__(self) -> list[str]:
        return list.__getitem__(self, slice(None))  # a plain list, built without the warning below

    def _deprecated(self) -> None:
        warnings.warn(
            "all_head_labels is a method, as in TransformerLens: call model.all_head_labels()",
            DeprecationWarning,
            stacklevel=3,
        )

    def __iter__(self) -> Iterator[str]:
        self._deprecated()
        return super().__iter__()

    @overload
    def __getitem__(self, index: SupportsIndex) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> str | list[str]:
        self._deprecated()
        return super().__getitem__(index)

    def __len__(self) -> int:
        self._deprecated()
        return super().__len__()

    def __eq__(self, other: object) -> bool:
        self._deprecated()
        return list.__getitem__(self, slice(None)) == other

    __hash__ = None
