"""A forward pass resumed at layer L from the residual stream entering it, without running the layers below:
what an ablation of a head in layer L needs, since nothing below L changes (the clean pass's residual there is
the ablated pass's too). TransformerLens's ``start_at_layer`` is the interface.

- Our ``HookedTransformer`` skips the blocks below L itself.
- TransformerLens 4's ``TransformerBridge`` accepts ``start_at_layer`` but still runs the Hugging Face blocks below
  L on the embeddings, then discards their output at block L. So here, for the length of the pass, each block
  below L hands its input on unchanged: Hugging Face's decoder loops (transformers 5) read a block's output as the
  next block's input, and block L replaces it with the given residual anyway.
- Any other hooked model runs the whole pass from the tokens.

Resuming is exact: the same operations on the same residual (tests/unit/test_lm_ablation.py compares it with
whole passes on GPT-2, GPT-NeoX and Llama).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel


def resid_pre_hook(layer: int) -> str:
    return f"blocks.{layer}.hook_resid_pre"


def resumes_at_layer(model: HookedModel) -> bool:
    """Whether ``model``'s forward takes ``start_at_layer`` (TransformerLens's models and ours do)."""
    forward = getattr(model, "forward", None)  # a hooked model need not be a module
    if forward is None:
        return False
    try:
        return "start_at_layer" in inspect.signature(forward).parameters
    except (TypeError, ValueError):  # a forward without a signature Python can read
        return False


@contextmanager
def handing_on(module: nn.Module) -> Iterator[None]:
    """``module`` returns its input (the first positional argument, or ``hidden_states``) until the block ends."""

    def hand_on(*args, **kwargs):
        return args[0] if args else kwargs["hidden_states"]

    module.forward = hand_on  # an instance attribute: nn.Module's call finds it before the class's forward
    try:
        yield
    finally:
        del module.forward


@contextmanager
def blocks_below_skipped(model: HookedModel, layer: int) -> Iterator[None]:
    """A bridge's Hugging Face blocks below ``layer`` hand their input on (module docstring); other models as
    they are."""
    with ExitStack() as stack:
        for block in list(getattr(model, "blocks", []))[:layer]:  # a model without blocks has none to skip
            original = getattr(block, "original_component", None)  # a TransformerBridge's block wraps one
            if isinstance(original, nn.Module):
                stack.enter_context(handing_on(original))
        yield


def run_from_layer(
    model: HookedModel,
    tokens: Int[Tensor, "batch pos"],
    residual: Float[Tensor, "batch pos d_model"] | None,
    layer: int,
    fwd_hooks: list,
) -> Float[Tensor, "batch pos d_vocab"]:
    """The logits of ``model`` on ``tokens`` with ``fwd_hooks``, resumed at ``layer`` from ``residual`` (the clean
    pass's ``blocks.{layer}.hook_resid_pre``) where the model can resume; otherwise the whole pass."""
    with torch.no_grad():
        if layer == 0 or residual is None or not resumes_at_layer(model):
            return model.run_with_hooks(tokens, fwd_hooks=fwd_hooks)
        with blocks_below_skipped(model, layer):
            return model.run_with_hooks(residual, start_at_layer=layer, fwd_hooks=fwd_hooks)
