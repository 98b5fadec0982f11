"""A construction's config and weights as a model: loaded with ``load_state_dict`` into the same model class
that training uses, so every probe applies to it unchanged.
"""

from __future__ import annotations

from torch import Tensor

from induction_probes.circuits.devices import Device, resolve_device
from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig


def load_construction(
    cfg: HookedTransformerConfig, weights: dict[str, Tensor], device: Device = None
) -> HookedTransformer:
    """The construction as a model, on ``device`` (default cpu)."""
    model = HookedTransformer(cfg)
    model.load_state_dict(weights)
    return model.to(resolve_device(device)).eval()
