"""What TransformerLens's analysis tools read from a model, under their names: stacked weights and biases,
factored circuits, token helpers, accumulated biases, head labels and composition scores.

A mixin of :class:`induction_probes.circuits.models.model.HookedTransformer`, kept apart from the model's
maths. TransformerLens 4 checks no types at run time; its patching, head detection, residual decompositions
and logit attribution read exactly these attributes (README, "TransformerLens's tools on our models").
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, Self

import torch
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens import FactoredMatrix
from transformer_lens.utilities.matrix import composition_scores

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.tl_hooks import HeadLabels, HookChecks
from induction_probes.circuits.models.tl_tokens import MixedIntoModule, TokenInterface
from induction_probes.circuits.names import head_label


class AttentionWeights(Protocol):
    """What :class:`FactoredCircuits` reads of the class it is mixed into."""

    @property
    def W_Q(self) -> Float[Tensor, "... head d_model d_head"]: ...

    @property
    def W_K(self) -> Float[Tensor, "... head d_model d_head"]: ...

    @property
    def W_V(self) -> Float[Tensor, "... head d_model d_head"]: ...

    @property
    def W_O(self) -> Float[Tensor, "... head d_head d_model"]: ...


class FactoredCircuits:
    """QK = W_Q W_Kᵀ and OV = W_V W_O of every head, factored as TransformerLens's FactoredMatrix, for the
    W_Q, W_K, W_V, W_O of the class: one attention layer's [heads, ...] or a model's [layers, heads, ...]."""

    @property
    def QK(self: AttentionWeights) -> FactoredMatrix:
        return FactoredMatrix(self.W_Q, self.W_K.transpose(-2, -1))

    @property
    def OV(self: AttentionWeights) -> FactoredMatrix:
        return FactoredMatrix(self.W_V, self.W_O)


class ConfiguredModule(Protocol):
    """What :class:`KnowsItsDevice` reads of the module it is mixed into: its parameters and its own config."""

    @property
    def cfg(self) -> object: ...

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...


class KnowsItsDevice(MixedIntoModule):
    """Mixed into a model with a ``cfg`` of its own: after ``.to(device)`` (or ``.cuda()``), ``cfg.device``
    says where the weights are, as TransformerLens's tools read it to put their tensors beside them."""

    def _apply(self: ConfiguredModule, fn, recurse: bool = True):
        module = super()._apply(fn, recurse)
        first = next(self.parameters(), None)
        if first is not None:
            object.__setattr__(self.cfg, "device", str(first.device))
        return module


class TransformerLensInterface(KnowsItsDevice, HookChecks, TokenInterface, FactoredCircuits):
    """Mixed into HookedTransformer: needs ``cfg``, ``blocks``, ``embed``, ``unembed`` and (standard
    positions) ``pos_embed``."""

    def __getattr__(self, name: str) -> Any:
        """``nn.Module.__getattr__`` (parameters, buffers, submodules), except that a property of ours
        that raises AttributeError (``W_pos`` on a relative-position model) keeps its own message: Python
        retries a failed property through ``__getattr__``, whose generic "no attribute" would replace it."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            attribute = getattr(type(self), name, None)
            if isinstance(attribute, property) and attribute.fget is not None:
                attribute.fget(self)  # raises the property's own AttributeError
            raise

    def _stack(self, name: str) -> Tensor:
        if len({self.cfg.heads(layer) for layer in range(self.cfg.n_layers)}) > 1:
            raise BadInput(f"layers have different head counts; use model.blocks[l].attn.{name}")
        return torch.stack([self._attn_tensor(block.attn, name) for block in self.blocks])

    def _attn_tensor(self, attn, name: str) -> Tensor:
        """A weight or bias of one attention layer; a bias the model does not have is zero."""
        if hasattr(attn, name):
            return getattr(attn, name)
        shape = (self.cfg.d_model,) if name == "b_O" else (attn.W_Q.shape[0], self.cfg.d_head)
        return attn.W_Q.new_zeros(shape)

    # --- weights [n_layers, n_heads, ...] and biases, as in TransformerLens ---------------------------

    @property
    def W_E(self) -> Float[Tensor, "d_vocab d_model"]:
        return self.embed.W_E

    @property
    def W_pos(self) -> Float[Tensor, "pos d_model"]:
        if not hasattr(self, "pos_embed"):
            raise AttributeError(f"a model with {self.cfg.positional} positions has no W_pos (only 'standard' has)")
        return self.pos_embed.W_pos

    @property
    def W_U(self) -> Float[Tensor, "d_model d_vocab"]:
        return self.unembed.W_U

    @property
    def b_U(self) -> Float[Tensor, " d_vocab"]:
        return getattr(self.unembed, "b_U", self.W_U.new_zeros(self.cfg.d_vocab_out))

    @property
    def W_Q(self) -> Float[Tensor, "layer head d_model d_head"]:
        return self._stack("W_Q")

    @property
    def W_K(self) -> Float[Tensor, "layer head d_model d_head"]:
        return self._stack("W_K")

    @property
    def W_V(self) -> Float[Tensor, "layer head d_model d_head"]:
        return self._stack("W_V")

    @property
    def W_O(self) -> Float[Tensor, "layer head d_head d_model"]:
        return self._stack("W_O")

    @property
    def b_Q(self) -> Float[Tensor, "layer head d_head"]:
        return self._stack("b_Q")

    @property
    def b_K(self) -> Float[Tensor, "layer head d_head"]:
        return self._stack("b_K")

    @property
    def b_V(self) -> Float[Tensor, "layer head d_head"]:
        return self._stack("b_V")

    @property
    def b_O(self) -> Float[Tensor, "layer d_model"]:
        return self._stack("b_O")

    # --- heads -----------------------------------------------------------------------------------------

    @property
    def all_head_labels(self) -> HeadLabels:
        """The label L{layer}H{head} of every head, layer by layer (per-layer head counts included). Call it,
        ``model.all_head_labels()``, as in TransformerLens; using it as a list still works but is deprecated."""
        cfg = self.cfg
        return HeadLabels(head_label(layer, head) for layer in range(cfg.n_layers) for head in range(cfg.heads(layer)))

    def all_composition_scores(self, mode: str) -> Float[Tensor, "layer head layer head"]:
        """[n_layers, n_heads, n_layers, n_heads]: ‖M_right M_left‖_F / (‖M_left‖_F ‖M_right‖_F) of every
        earlier head's OV (left) against every later head's QK (mode "Q" or "K") or OV ("V"); zero where
        the left head is not in an earlier layer. Computed by TransformerLens's ``composition_scores``."""
        if mode not in ("Q", "K", "V"):
            raise BadInput(f"mode must be Q, K or V, got {mode!r}")
        left, queries = self.OV, self.QK  # [L, H, d, d] each; composition_scores pairs every left with every right
        right = {"Q": queries, "K": queries.T, "V": self.OV}[mode]
        scores = composition_scores(left, right, broadcast_dims=True)  # [L, H, L, H]
        n_layers = self.cfg.n_layers
        layers = torch.arange(n_layers, device=scores.device)
        earlier = layers[:, None] < layers[None, :]
        return scores * earlier[:, None, :, None]

    def to(self, *args: Any, print_details: bool = True, **kwargs: Any) -> Self:
        """``nn.Module.to``, accepting TransformerLens's ``print_details`` (tools such as devinterp pass it
        to any model they recognise as TransformerLens's); there is nothing to print here."""
        return super().to(*args, **kwargs)

    # --- switches for hooks that fire only on request, and the check that a hook can fire -------------

    def set_use_attn_result(self, use: bool) -> None:
        """Compute each head's output [batch, pos, head, d_model] under ``hook_result`` (costs memory)."""
        object.__setattr__(self.cfg, "use_attn_result", bool(use))

    def set_use_split_qkv_input(self, use: bool) -> None:
        """Give queries, keys and values per-head copies of the residual stream (``hook_q_input`` ...)."""
        self._switch_inputs("use_split_qkv_input", "use_attn_in", use)

    def set_use_attn_in(self, use: bool) -> None:
        """One per-head copy of the residual stream for the attention input (``hook_attn_in``)."""
        self._switch_inputs("use_attn_in", "use_split_qkv_input", use)

    def _switch_inputs(self, switch: str, other: str, use: bool) -> None:
        """The two ways of splitting the attention input exclude each other, as in TransformerLens: with
        both on, one set of hooks would be accepted and never fire. The switches live on the model's
        config, shared by everything that holds it (TransformerLens's behaviour too)."""
        if use and getattr(self.cfg, other):
            raise BadInput(f"{switch} and {other} exclude each other: call model.set_{other}(False) first")
        object.__setattr__(self.cfg, switch, bool(use))

    # --- tokens and the residual stream ----------------------------------------------------------------

    def tokens_to_residual_directions(self, tokens: Tensor | int | Sequence[int]) -> Float[Tensor, "... d_model"]:
        """The unembedding direction of each token, [..., d_model] (one token: [d_model])."""
        tokens = torch.as_tensor(tokens)
        if tokens.numel() == 1:
            token = tokens.item()
            if not isinstance(token, int):
                raise BadInput(f"token ids are integers, got {token!r}")
            return self.W_U[:, token]
        return self.W_U[:, tokens].movedim(0, -1)

    def accumulated_bias(
        self, layer: int, mlp_input: bool = False, include_mlp_biases: bool = True
    ) -> Float[Tensor, " d_model"]:
        """[d_model]: the sum of the biases written into the residual stream before ``layer`` (before its
        MLP with ``mlp_input``): attention b_O and MLP b_out."""
        total = self.W_E.new_zeros(self.cfg.d_model)
        for index, block in enumerate(self.blocks[: layer + (1 if mlp_input else 0)]):
            total = total + self._attn_tensor(block.attn, "b_O")
            if include_mlp_biases and hasattr(block, "mlp") and index < layer:
                total = total + block.mlp.b_out
        return total
