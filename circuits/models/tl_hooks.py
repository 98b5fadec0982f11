"""Hook names asked of a model that lacks them, and head labels, as TransformerLens users expect them.

TransformerLens answers a hook that does not exist with a bare ``KeyError: 'blocks.0.hook_mlp_out'``
(``run_with_hooks``, ``add_hook``), or with silence (``run_with_cache(names_filter=[...])`` caches nothing).
Here each is one :class:`MissingHookError` (a ValueError and a KeyError) that names the hooks that exist.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, SupportsIndex, overload

from transformer_lens import ActivationCache
from transformer_lens.utilities import get_act_name

if TYPE_CHECKING:
    from torch import Tensor
    from transformer_lens.hook_points import HookFunction

    from induction_probes.circuits.models.hooked_model import HookedModel

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


def missing_hook_error(model: HookedModel, name: str, what: str = "hook point") -> MissingHookError:
    cfg = model.cfg
    absent = "" if getattr(cfg, "d_mlp", None) is not None or "mlp" not in name else " (it has no MLPs)"
    families = ", ".join(hook_families(model.hook_dict))
    return MissingHookError(
        f"{type(model).__name__} has no {what} {name!r}{absent}; its hook points are "
        f"{families} (l = 0..{cfg.n_layers - 1})"
    )


class HookChecks:
    """Mixed into the model (before HookedRootModule): hook names are checked before they are used."""

    def check_hook_names(self, names: str | Sequence[str] | Callable[[str], bool] | None) -> None:
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
    ) -> AbstractContextManager[Any]:
        """TransformerLens's context manager of temporary hooks (``run_with_hooks`` uses it), names checked."""
        self.check_hook_names([name for name, _ in [*fwd_hooks, *bwd_hooks]])
        return super().hooks(list(fwd_hooks), list(bwd_hooks), *args, **kwargs)

    def cache_of(self, cache_dict: dict[str, Tensor], has_batch_dim: bool) -> HookCache:
        return HookCache(cache_dict, self, has_batch_dim=has_batch_dim)


class HookCache(ActivationCache):
    """TransformerLens's ActivationCache; a key it does not hold is one clear error naming what it holds."""

    def __getitem__(self, key: str | tuple[Any, ...]) -> Tensor:
        try:
            return super().__getitem__(key)
        except KeyError:
            pass
        name = resolved_name(key)
        if name in self.model.hook_dict:
            held = ", ".join(hook_families(self.cache_dict)) or "nothing"
            raise MissingHookError(f"the cache holds no activation {name!r}; it holds {held}") from None
        raise missing_hook_error(self.model, name) from None


def resolved_name(key: object) -> str:
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
