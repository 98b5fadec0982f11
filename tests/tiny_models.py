"""The tiny models the unit tests build, in one place: each test says only the sizes and options it needs.
Built in milliseconds, so each test makes its own instead of sharing one it might change."""

from __future__ import annotations

import torch

from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig

AFFINE = ("w", "b", "b_Q", "b_K", "b_V", "b_O", "b_U", "b_in", "b_out")  # norm gains and every bias


def tiny_model(**config) -> HookedTransformer:
    """A two-layer HookedTransformer of ``config`` (any other layer count given there)."""
    return HookedTransformer(HookedTransformerConfig(**({"n_layers": 2} | config)))


def with_affine_parts(model: HookedTransformer, scale: float, seed: int) -> HookedTransformer:
    """``model`` with its LayerNorm gains drawn from N(1, scale²) and its biases from N(0, scale²): away from 1
    and 0, so that a norm's affine step and the biases show in what a test decomposes. In eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.rsplit(".", 1)[-1] in AFFINE:
                param.copy_(torch.randn(param.shape, generator=generator) * scale + name.endswith(".w"))
    return model.eval()
