"""The weights and widths a language-model probe reads by TransformerLens's names, and the check that a hooked model
has them.

:func:`~induction_probes.circuits.interop.language_models.as_hooked` gives any hooked model, ones without weights by
those names included (the minimal model has no ``ln_final``, ``W_U`` or ``cfg.d_model``). A probe that reads them
(the head scores' copying, AtP*'s QK fix, the residual stream an ablation resumes from) narrows the model here to
the protocol it reads, and refuses in one line a model that lacks a member of it, as a missing hook point is
refused. The members are checked by name (``hasattr``), as ``as_hooked`` checks a hooked model's: a runtime-checkable
protocol's ``isinstance`` would not find a module's submodules (``blocks``) from Python 3.12, which looks members up
statically.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeGuard

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.hooked_model import HookedModel

if TYPE_CHECKING:
    from jaxtyping import Float
    from torch import Tensor

    from induction_probes.circuits.models.hooked_model import ModelConfig, WeightedConfig, WeightedModel

WEIGHTS = ("blocks", "W_E", "W_U", "ln_final")  # what WeightedModel declares beyond HookedModel
WIDTHS = ("d_model", "d_head")  # what WeightedConfig declares beyond ModelConfig


class StackedOutputs(HookedModel, Protocol):
    """A :class:`HookedModel` with every layer's W_O stacked, [layer, head, d_head, d_model], as TransformerLens's
    models (a TransformerBridge's included) and our HookedTransformer give it."""

    @property
    def W_O(self) -> Float[Tensor, "layer head d_head d_model"]: ...


def lacking(model: HookedModel, names: tuple[str, ...], widths: tuple[str, ...] = ()) -> list[str]:
    """The members of ``names`` that ``model`` lacks, then the config's of ``widths``."""
    return [name for name in names if not hasattr(model, name)] + [
        f"cfg.{name}" for name in widths if not hasattr(model.cfg, name)
    ]


def has_widths(cfg: ModelConfig) -> TypeGuard[WeightedConfig]:
    return all(hasattr(cfg, name) for name in WIDTHS)


def has_weights(model: HookedModel) -> TypeGuard[WeightedModel]:
    return not lacking(model, WEIGHTS, WIDTHS)


def has_stacked_outputs(model: HookedModel) -> TypeGuard[StackedOutputs]:
    return hasattr(model, "W_O")


def refusal(model: HookedModel, absent: list[str], probe: str) -> BadInput:
    return BadInput(f"{type(model).__name__} has no {absent[0]} by TransformerLens's names: {probe} cannot run on it")


def widths(model: HookedModel, probe: str) -> WeightedConfig:
    """``model.cfg`` with the widths ``probe`` reads (``d_model``, ``d_head``); refused where it lacks one."""
    cfg = model.cfg
    if has_widths(cfg):
        return cfg
    raise refusal(model, lacking(model, (), WIDTHS), probe)


def weighted(model: HookedModel, probe: str) -> WeightedModel:
    """``model`` as the :class:`~induction_probes.circuits.models.hooked_model.WeightedModel` ``probe`` reads;
    refused where it lacks a member of it."""
    if has_weights(model):
        return model
    raise refusal(model, lacking(model, WEIGHTS, WIDTHS), probe)


def stacked_outputs(model: HookedModel, probe: str) -> StackedOutputs:
    """``model`` as the :class:`StackedOutputs` ``probe`` reads; refused where it has no stacked W_O."""
    if has_stacked_outputs(model):
        return model
    raise refusal(model, ["W_O"], probe)
