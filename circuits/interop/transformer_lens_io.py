"""Weights in and out of TransformerLens: its HookedTransformer state-dict format both ways, a
``TransformerBridge`` booted natively with our weights, and TransformerLens's own weight processing
(``ProcessWeights``) applied to our models.

TransformerLens's format has every bias (zero where a model has none) and, per attention layer, the
causal ``mask`` and ``IGNORE`` buffers; it expresses only absolute ("standard") positions and causal
masks, so relative positions, ALiBi, strict masks and ``skip_first_keys`` stay ours (refused here in one
line). Weight processing needs no such limit except where its maths does (stated per option).
"""

from __future__ import annotations

import logging

import torch
from torch import Tensor
from transformer_lens.config import TransformerBridgeConfig
from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint

from induction_probes.circuits.devices import model_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig

BIASES = ("b_Q", "b_K", "b_V", "b_O")
BUFFERS = ("mask", "IGNORE")


def check_expressible(cfg: HookedTransformerConfig) -> None:
    """Raise ValueError unless TransformerLens's HookedTransformer can express this model."""
    layers = range(cfg.n_layers)
    if cfg.positional != "standard" or any(cfg.layer_mask(l) != "causal" or cfg.layer_skip(l) for l in layers):
        raise BadInput(
            "TransformerLens expresses absolute ('standard') positions and causal masks only; this model has "
            f"positional={cfg.positional!r}, mask={cfg.mask!r}, skip_first_keys={cfg.skip_first_keys!r}"
        )
    if len({cfg.heads(l) for l in layers}) > 1 or cfg.input_type != "tokens":
        raise BadInput("TransformerLens needs one head count for every layer and token inputs")


def transformer_lens_state_dict(model: HookedTransformer) -> dict[str, Tensor]:
    """Our weights in TransformerLens's HookedTransformer format: missing biases as zeros, and the
    ``mask`` / ``IGNORE`` buffers of every attention layer."""
    cfg = model.cfg
    check_expressible(cfg)
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    causal = torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool).tril()
    for layer, block in enumerate(model.blocks):
        prefix = f"blocks.{layer}.attn."
        for name in BIASES:
            state.setdefault(prefix + name, model._attn_tensor(block.attn, name).detach().clone())
        state[prefix + "mask"], state[prefix + "IGNORE"] = causal.clone(), torch.tensor(-torch.inf)
    state.setdefault("unembed.b_U", model.b_U.detach().clone())
    return state


def load_transformer_lens_state_dict(model: HookedTransformer, state_dict: dict[str, Tensor]) -> None:
    """Load a TransformerLens-format state dict: its buffers (a causal ``mask``) are dropped, and biases
    the model does not have must be zero (a nonzero one is refused: the model cannot hold it). Every other
    key, a weight that is not finite and a shape that does not fit are refused in one ValueError."""
    ours, droppable = model.state_dict(), format_only_names(model.cfg)
    kept = {}
    for name, tensor in state_dict.items():
        if not isinstance(tensor, Tensor):
            raise BadInput(f"{name} is not a tensor")
        if tensor.is_floating_point() and not torch.isfinite(tensor).all() and not name.endswith(".IGNORE"):
            raise BadInput(f"{name} is not finite (NaN or infinity)")
        if name in ours:
            if tensor.shape != ours[name].shape:
                raise BadInput(f"{name} has shape {tuple(tensor.shape)}; this model's is {tuple(ours[name].shape)}")
            kept[name] = tensor
        elif name.endswith(".mask") and name in droppable:
            causal = torch.ones(model.cfg.n_ctx, model.cfg.n_ctx, dtype=torch.bool).tril()
            if tensor.shape != causal.shape or not torch.equal(tensor.bool().cpu(), causal):
                raise BadInput(
                    f"{name} is not the causal mask of {model.cfg.n_ctx} positions: this model cannot hold it"
                )
        elif name not in droppable or (not name.endswith(".IGNORE") and tensor.any()):
            raise BadInput(f"{name} has no place in this model (nonzero, or unknown); build it with use_bias=True?")
    missing = sorted(set(ours) - set(kept))
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise BadInput(f"the state dict has no {missing[0]}{more}")
    model.load_state_dict(kept, strict=True)


def format_only_names(cfg: HookedTransformerConfig) -> set[str]:
    """The keys of TransformerLens's format that our model has no parameter for: per attention layer its
    buffers and biases, the unembedding bias, and the MLP of an attention-only model."""
    names = {"unembed.b_U"}
    for layer in range(cfg.n_layers):
        names |= {f"blocks.{layer}.attn.{leaf}" for leaf in (*BIASES, *BUFFERS)}
        if cfg.d_mlp is None:
            names |= {f"blocks.{layer}.mlp.{leaf}" for leaf in ("W_in", "b_in", "W_out", "b_out")}
    return names


def bridge_config(cfg: HookedTransformerConfig):
    check_expressible(cfg)
    return TransformerBridgeConfig(
        n_layers=cfg.n_layers,
        d_model=cfg.d_model,
        n_heads=cfg.heads(0),
        d_head=cfg.d_head,
        n_ctx=cfg.n_ctx,
        d_vocab=cfg.d_vocab,
        d_vocab_out=cfg.d_vocab_out,
        attn_only=cfg.attn_only,
        d_mlp=cfg.d_mlp if cfg.d_mlp is not None else 4 * cfg.d_model,
        act_fn=cfg.act_fn or "relu",
        normalization_type=cfg.normalization_type,
        positional_embedding_type="standard",
    )


def to_bridge(model: HookedTransformer):
    """A ``TransformerBridge.boot_native`` model holding our weights (TransformerLens's own loader,
    ``convert_tl_checkpoint``), in eval mode, not in compatibility mode."""
    # TransformerBridge.boot_native is this function, attached to the class by setattr (which type checkers cannot
    # follow); it loads transformers: only when a bridge is asked for
    from transformer_lens.model_bridge.sources.native import boot as boot_native

    bridge = boot_native(bridge_config(model.cfg), dtype=model.cfg.torch_dtype)
    bridge.load_state_dict(convert_tl_checkpoint(transformer_lens_state_dict(model), bridge.cfg), strict=True)
    return bridge.to(model_device(model)).eval()  # booted on the CPU; it runs where our model does


def state_dict_from_bridge(bridge) -> dict[str, Tensor]:
    """A bridge's weights in TransformerLens's HookedTransformer format (its ``get_params``)."""
    return {name: tensor.detach().clone() for name, tensor in bridge.get_params().items()}


PROCESSING = (
    "fold_ln",
    "center_writing_weights",
    "center_unembed",
    "fold_value_biases",
    "refactor_factored_attn_matrices",
)


def process_weights(model: HookedTransformer, **options: bool) -> HookedTransformer:
    """A new model with TransformerLens's weight processing applied (``ProcessWeights.process_weights``):
    ``fold_ln``, ``center_writing_weights``, ``center_unembed``, ``fold_value_biases`` and
    ``refactor_factored_attn_matrices``. The output keeps the log-probabilities; it has biases (folding
    creates them), and LayerNorm gains of one and biases of zero where LN was folded.

    By default every step is applied whose maths holds for the model, as TransformerLens does: folding
    and centring need LayerNorm; folding value biases needs every query to attend somewhere (no strict
    mask); refactoring (off by default) changes the queries, which a relative or ALiBi-free positional term
    reads, so it is for standard positions only. Asking explicitly for a step that cannot hold is refused.
    """
    from transformer_lens.weight_processing import ProcessWeights  # loads transformers: only when weights are processed

    unknown = sorted(set(options) - set(PROCESSING))
    if unknown:
        raise BadInput(f"unknown weight processing {', '.join(unknown)}; options: {', '.join(PROCESSING)}")
    if len({model.cfg.heads(layer) for layer in range(model.cfg.n_layers)}) > 1:
        raise BadInput("TransformerLens's weight processing reads one n_heads; this model's layers differ")
    reasons = unsound_steps(model.cfg)
    refused = [name for name, wanted in options.items() if wanted and name in reasons]
    if refused:
        raise BadInput(f"{refused[0]}: {reasons[refused[0]]}")
    chosen = {name: name not in reasons and name != "refactor_factored_attn_matrices" for name in PROCESSING} | options
    processed = HookedTransformer(model.cfg.from_dict(model.cfg.to_dict() | {"use_bias": True}))  # mixed heads too
    processed.to(model_device(model))  # its zero biases join the model's weights, on the model's device
    state = biased_state_dict(model, processed)
    logging.disable(logging.WARNING)  # ProcessWeights logs every key it leaves alone
    try:
        state = ProcessWeights.process_weights(state, model.cfg, **chosen)
    finally:
        logging.disable(logging.NOTSET)
    if chosen["fold_ln"]:  # folded: each LayerNorm keeps only its normalisation
        for name, tensor in processed.state_dict().items():
            if name.endswith((".w", ".b")) and ".ln" in f".{name}":
                state[name] = torch.ones_like(tensor) if name.endswith(".w") else torch.zeros_like(tensor)
    processed.load_state_dict({name: state[name] for name in processed.state_dict()}, strict=True)
    return processed.eval()


def unsound_steps(cfg: HookedTransformerConfig) -> dict[str, str]:
    """The processing steps that would change this model's log-probabilities, with the reason."""
    reasons = {}
    if cfg.normalization != "LN":
        reasons["fold_ln"] = reasons["center_writing_weights"] = "needs LayerNorm, which this model does not have"
    if any(cfg.layer_mask(layer) == "strict" or cfg.layer_skip(layer) for layer in range(cfg.n_layers)):
        reasons["fold_value_biases"] = "needs every query to attend somewhere; a strict mask leaves some without keys"
    if cfg.positional != "standard":
        reasons["refactor_factored_attn_matrices"] = (
            f"changes the queries, which the {cfg.positional} positional term reads: standard positions only"
        )
    if cfg.normalization == "LN" and cfg.d_vocab_out == cfg.d_model:
        reasons["fold_ln"] = "TransformerLens folds the final LayerNorm along the wrong axis when d_vocab == d_model"
    return reasons


def biased_state_dict(model: HookedTransformer, biased: HookedTransformer) -> dict[str, Tensor]:
    """``model``'s weights with every bias ``biased`` has (zeros where ``model`` has none), and a zero
    W_pos for a model without absolute positions (TransformerLens centres the W_pos it expects)."""
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    for name, tensor in biased.state_dict().items():
        state.setdefault(name, torch.zeros_like(tensor))
    state.setdefault("pos_embed.W_pos", model.W_E.new_zeros(model.cfg.n_ctx, model.cfg.d_model).detach())
    return state
