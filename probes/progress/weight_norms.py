"""How a run's weights move over training: at every checkpoint, the Frobenius norm of each attention map (W_Q,
W_K per layer, all heads together) and of the positions (W_pos, each layer's W_rel or ALiBi slopes), and the
distance each has moved from its initial value, ‖W(t) − W(0)‖. Wang et al. read their natural-text run (Figure 3)
this way: the positions are learned first, ‖W_K‖ and ‖W_Q‖ grow slowly, and the loss leaves its plateau when they
do."""

from __future__ import annotations

from typing import TYPE_CHECKING

from induction_probes.circuits.runs.reader import Run

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import WeightedModel

ATTENTION_MAPS = ("W_Q", "W_K")


def tracked_weights(model: WeightedModel) -> dict:
    """The tensors :func:`weight_curves` follows, by name, in float64: the positions (``W_pos``, ``W_rel_layerL``,
    ``alibi_layerL``: the ALiBi slopes) and the attention maps ``W_Q_layerL`` and ``W_K_layerL``."""
    tracked = {}
    pos_embed = getattr(model, "pos_embed", None)  # absolute positions only
    if pos_embed is not None:
        tracked["W_pos"] = pos_embed.W_pos
    for layer, block in enumerate(model.blocks):
        if getattr(block.attn, "W_rel", None) is not None:
            tracked[f"W_rel_layer{layer}"] = block.attn.W_rel
        if getattr(block.attn, "alibi_slope", None) is not None:
            tracked[f"alibi_layer{layer}"] = block.attn.alibi_slope
        for name in ATTENTION_MAPS:
            tracked[f"{name}_layer{layer}"] = getattr(block.attn, name)
    return {name: tensor.detach().double() for name, tensor in tracked.items()}


def weight_curves(run: Run, steps: list[int] | None = None) -> dict:
    """``{"steps": [...], "norm": {name: [...]}, "moved": {name: [...]}}`` over the run's checkpoints (or
    ``steps``, whose first is the reference of ``moved``), one checkpoint loaded at a time."""
    steps = run.steps if steps is None else steps
    start, norm, moved = None, {}, {}
    for step in steps:  # each checkpoint loaded once, the first kept as the reference
        weights = tracked_weights(run.load(step=step))
        start = weights if start is None else start
        for name, tensor in weights.items():
            norm.setdefault(name, []).append(tensor.norm().item())
            moved.setdefault(name, []).append((tensor - start[name]).norm().item())
    return {"steps": list(steps), "norm": norm, "moved": moved}
