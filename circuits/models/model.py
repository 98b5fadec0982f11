"""The one model class: a small TransformerLens-style HookedTransformer, on TransformerLens 4's hooks.

TransformerLens 4 dropped its HookedTransformer, and its replacement cannot express learned relative
positions, so this file rebuilds the part we need on the infrastructure TL 4 keeps (HookedRootModule,
HookPoint, ActivationCache, FactoredMatrix), with TL 3's parameter names, shapes and hook names:
``cache["pattern", 0]``, ``model.W_Q[layer, head]`` and ``model.OV`` work as researchers expect.

Attention of layer l, head h, query i, key j (x_i is the residual stream entering the layer):

    q_i = x_i W_Q + b_Q,  k_j = x_j W_K + b_K,  v_j = x_j W_V + b_V
    A_ij = q_i·k_j / sqrt(d_head) + pos_ij          (hook_attn_scores: after the mask, before softmax)
    pos_ij = q_i·r_{i−j} / sqrt(d_head)             positional="relative" (Edelman: r added to the keys)
           = −β_h (i − j − 1)                       positional="alibi" (Wang: a learned slope per head)
    mask: j ≤ i ("causal") or j < i ("strict"), and j ≥ skip_first_keys (keys whose window is not
          complete yet, as Wang et al.'s induction heads need); a query with no key attends nowhere
    z_i = Σ_j softmax_j(A_ij) v_j;  out_i = Σ_h z_i W_O + b_O

Rows are positions and weights multiply from the right (x @ W), as in TransformerLens.
"""

from __future__ import annotations

import copy
import math
from typing import Literal

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int, Shaped
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint, LensHandle

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.model_config import DTYPES, HookedTransformerConfig, dtype_name  # noqa: F401 (the model's config lives beside it)
from induction_probes.circuits.models.tl_hooks import CacheRuns
from induction_probes.circuits.models.tl_interface import FactoredCircuits, TransformerLensInterface


def softmax_over_allowed(
    scores: Tensor, allowed: Bool[Tensor, "query_pos key_pos"]
) -> Float[Tensor, "batch head query_pos key_pos"]:
    """Softmax over the last dimension of ``scores`` that are −inf where not ``allowed``; a query with no
    allowed key at all (the first under a strict mask) gets a row of zeros instead of NaN."""
    has_key = allowed.any(-1, keepdim=True)
    return torch.softmax(scores.masked_fill(~has_key, 0.0), dim=-1) * has_key


class SwitchedHookPoint(HookPoint):
    """A hook point that fires only while a config switch is on (``use_attn_result``,
    ``use_split_qkv_input``, ``use_attn_in``): adding a hook while it is off is an error, not silence."""

    def __init__(self, cfg: HookedTransformerConfig, switch: str):
        super().__init__()
        self.cfg, self.switch = cfg, switch

    def is_on(self) -> bool:
        return bool(getattr(self.cfg, self.switch))

    def add_hook(self, hook, dir: Literal["fwd", "bwd"] = "fwd", *args, **kwargs) -> LensHandle:
        if not self.is_on():
            raise BadInput(f"{self.name} fires only with {self.switch}: call model.set_{self.switch}(True) first")
        return super().add_hook(hook, dir, *args, **kwargs)


class LayerNorm(nn.Module):
    """LayerNorm with TransformerLens's hooks: ``hook_scale`` is the root mean square of the centred input
    (with eps) and ``hook_normalized`` the centred input divided by it, before the gain and bias."""

    def __init__(self, cfg: HookedTransformerConfig):
        super().__init__()
        self.eps: float = 1e-5
        self.w: nn.Parameter = nn.Parameter(torch.ones(cfg.d_model))
        self.b: nn.Parameter = nn.Parameter(torch.zeros(cfg.d_model))
        self.hook_scale: HookPoint = HookPoint()  # [batch, pos, 1]
        self.hook_normalized: HookPoint = HookPoint()  # [batch, pos, d_model]

    def forward(self, x: Tensor) -> Float[Tensor, "... d_model"]:
        centred = x - x.mean(-1, keepdim=True)
        scale = self.hook_scale((centred.pow(2).mean(-1, keepdim=True) + self.eps).sqrt())
        return self.hook_normalized(centred / scale) * self.w + self.b


class Attention(FactoredCircuits, nn.Module):
    # buffers, registered in __init__: key distances i − j (clamped at 0), the keys each query may attend, and the
    # mask as an added bias (0 or −inf)
    distance: Tensor
    allowed: Tensor
    mask_bias: Tensor

    def __init__(self, cfg: HookedTransformerConfig, layer: int):
        super().__init__()
        n_heads, d_model, d_head = cfg.heads(layer), cfg.d_model, cfg.d_head
        self.cfg, self.scale = cfg, 1.0 / math.sqrt(d_head)
        self.W_Q = nn.Parameter(torch.empty(n_heads, d_model, d_head))
        self.W_K = nn.Parameter(torch.empty(n_heads, d_model, d_head))
        self.W_V = nn.Parameter(torch.empty(n_heads, d_model, d_head))
        self.W_O = nn.Parameter(torch.empty(n_heads, d_head, d_model))
        if cfg.use_bias:
            self.b_Q, self.b_K, self.b_V = (nn.Parameter(torch.zeros(n_heads, d_head)) for _ in range(3))
            self.b_O = nn.Parameter(torch.zeros(d_model))
        self.positional = cfg.layer_positional(layer)
        if self.positional == "relative":
            self.W_rel = nn.Parameter(torch.empty(n_heads, cfg.n_ctx, d_head))  # r_d, d = i − j
        elif self.positional == "alibi":
            self.alibi_slope = nn.Parameter(torch.zeros(n_heads))  # β_h
        skip = cfg.layer_skip(layer)
        self.strict = cfg.layer_mask(layer) == "strict" or skip > 0  # some query may have no key at all
        self.causal = cfg.layer_mask(layer) == "causal"
        position = torch.arange(cfg.n_ctx)
        distance = position[:, None] - position[None, :]
        allowed = (distance > 0 if cfg.layer_mask(layer) == "strict" else distance >= 0) & (position[None, :] >= skip)
        self.register_buffer("distance", distance.clamp_min(0), persistent=False)
        self.register_buffer("allowed", allowed, persistent=False)
        mask_bias = torch.zeros(cfg.n_ctx, cfg.n_ctx).masked_fill(~allowed, -torch.inf)
        self.register_buffer("mask_bias", mask_bias, persistent=False)

        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()  # [batch, pos, head, d_head]
        self.hook_pos_scores = HookPoint()  # [batch, head, q_pos, k_pos], the positional term of the scores
        self.hook_attn_scores = HookPoint()  # [batch, head, q_pos, k_pos]
        self.hook_pattern = HookPoint()  # [batch, head, q_pos, k_pos]
        self.hook_z = HookPoint()  # [batch, pos, head, d_head]
        self.hook_result = SwitchedHookPoint(cfg, "use_attn_result")  # [batch, pos, head, d_model]
        # [batch, pos, head, d_model], per-head copies of the residual stream entering the layer (before ln1),
        # as TransformerLens 4's direct-path patching hooks them; fired by the block
        self.hook_attn_in = SwitchedHookPoint(cfg, "use_attn_in")
        self.hook_q_input, self.hook_k_input, self.hook_v_input = (
            SwitchedHookPoint(cfg, "use_split_qkv_input") for _ in range(3)
        )
        self.dropout = nn.Dropout(cfg.dropout)

    def _project(self, x: Tensor, weight: Tensor, bias_name: str) -> Float[Tensor, "batch pos head d_head"]:
        """x W for every head at once, as one [batch·pos, d_model] × [d_model, heads·d_head] product; or,
        for per-head inputs [batch, pos, head, d_model] (split inputs), each head's own."""
        n_heads, d_model, d_head = weight.shape
        if x.dim() == 4:
            out = torch.einsum("bphd,hde->bphe", x, weight)
        else:
            out = (x @ weight.transpose(0, 1).reshape(d_model, n_heads * d_head)).unflatten(-1, (n_heads, d_head))
        return out + getattr(self, bias_name) if self.cfg.use_bias else out

    def positional_scores(
        self, q_heads: Float[Tensor, "batch head pos d_head"]
    ) -> Float[Tensor, "batch head query_pos key_pos"]:
        """pos_ij: q_i·r_{i−j}/sqrt(d_head) (relative) or −β_h (i − j − 1) (alibi); takes q/sqrt(d_head).

        The relative term is one product q Rᵀ over distances, then "skewed" into [query, key] by reshaping
        (Huang et al.'s Music Transformer): no gather, and a backward pass without scatters. R holds a zero
        row and then r_{n−1}, …, r_0, so column m + 1 of q Rᵀ is distance n − 1 − m; read as n + 1 rows of n,
        row i + 1 then starts at distance i. Entries where the mask forbids the key (j > i) are meaningless.
        """
        n_pos = q_heads.shape[2]
        if self.positional == "relative":
            distances = F.pad(self.W_rel[:, :n_pos].flip(1), (0, 0, 1, 0))  # [head, n + 1, d_head]
            by_distance = q_heads @ distances.transpose(-1, -2)  # [batch, head, n, n + 1]
            return by_distance.reshape(*by_distance.shape[:-2], n_pos + 1, n_pos)[..., 1:, :]
        offset = (self.distance[:n_pos, :n_pos] - 1).to(q_heads.dtype)
        return (-self.alibi_slope[:, None, None] * offset).expand(q_heads.shape[0], -1, -1, -1)

    def forward(
        self, x: Tensor, key_input: Tensor | None = None, value_input: Tensor | None = None
    ) -> Float[Tensor, "batch pos d_model"]:
        """[batch, pos, d_model] out from one input, or from separate query, key and value inputs (each
        [batch, pos, d_model] or per head [batch, pos, head, d_model], as split inputs give them)."""
        n_pos = x.shape[1]
        q = self.hook_q(self._project(x, self.W_Q, "b_Q"))
        k = self.hook_k(self._project(x if key_input is None else key_input, self.W_K, "b_K"))
        v = self.hook_v(self._project(x if value_input is None else value_input, self.W_V, "b_V"))
        if self.fused():
            z = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, scale=self.scale
            )
            return self.output(self.hook_z(z.transpose(1, 2)))
        q_heads = (q * self.scale).transpose(1, 2)  # scale the [pos, d_head] query once, not [q, k] scores
        keys = k.permute(0, 2, 3, 1)  # [batch, head, d_head, pos]
        mask = self.mask_bias[:n_pos, :n_pos]  # 0 where allowed, −inf elsewhere: adding it masks
        if self.positional == "none":
            scores = q_heads @ keys + mask
        else:  # fold the positional term and the mask into one batched multiply-add
            offsets = self.hook_pos_scores(self.positional_scores(q_heads)) + mask
            scores = torch.baddbmm(offsets.flatten(0, 1), q_heads.flatten(0, 1), keys.flatten(0, 1)).view_as(offsets)
        scores = self.hook_attn_scores(scores)
        allowed = self.allowed[:n_pos, :n_pos]
        pattern = softmax_over_allowed(scores, allowed) if self.strict else torch.softmax(scores, dim=-1)
        pattern = self.dropout(self.hook_pattern(pattern))
        return self.output(self.hook_z((pattern @ v.transpose(1, 2)).transpose(1, 2)))

    def fused(self) -> bool:
        """Whether torch's fused attention computes this layer: no positional term in the scores, the causal
        mask, no dropout to draw, and no hook on the scores or the pattern, which it never forms (so
        ``run_with_cache`` and every hook on them see the eager maths). Relative and ALiBi terms would need
        a float mask, with which torch's kernel was slower than the eager maths; bench/bench_peer.py times it.
        Nor while gradients are taken on CUDA under deterministic algorithms: the fused kernels' backward is
        not deterministic there and torch, told ``warn_only``, only warns, while the eager maths repeat."""
        return (
            self.positional == "none"
            and not self.strict
            and self.causal
            and (self.dropout.p == 0 or not self.training)
            and not (self.hook_attn_scores._forward_hooks or self.hook_pattern._forward_hooks)
            and not (self.W_Q.is_cuda and torch.is_grad_enabled() and torch.are_deterministic_algorithms_enabled())
        )

    def output(self, z: Float[Tensor, "batch pos head d_head"]) -> Float[Tensor, "batch pos d_model"]:
        """Σ_h z_h W_O + b_O, per head under ``hook_result`` when ``use_attn_result`` is on."""
        if self.cfg.use_attn_result:
            out = self.hook_result(torch.einsum("bqhe,hed->bqhd", z, self.W_O)).sum(2)
        else:
            n_heads, d_head, d_model = self.W_O.shape
            out = z.flatten(2) @ self.W_O.reshape(n_heads * d_head, d_model)
        return out + self.b_O if self.cfg.use_bias else out


class MLP(nn.Module):
    def __init__(self, d_model: int, d_mlp: int):
        super().__init__()
        self.W_in = nn.Parameter(torch.empty(d_model, d_mlp))
        self.b_in = nn.Parameter(torch.zeros(d_mlp))
        self.W_out = nn.Parameter(torch.empty(d_mlp, d_model))
        self.b_out = nn.Parameter(torch.zeros(d_model))
        self.hook_pre, self.hook_post = HookPoint(), HookPoint()  # [batch, pos, d_mlp]

    def forward(self, x: Tensor) -> Float[Tensor, "batch pos d_model"]:
        pre = self.hook_pre(x @ self.W_in + self.b_in)
        return self.hook_post(F.relu(pre)) @ self.W_out + self.b_out


class TransformerBlock(nn.Module):
    def __init__(self, cfg: HookedTransformerConfig, layer: int):
        super().__init__()
        norm = (lambda: LayerNorm(cfg)) if cfg.normalization == "LN" else nn.Identity
        self.ln1, self.attn = norm(), Attention(cfg, layer)
        if cfg.d_mlp is not None:
            self.ln2, self.mlp = norm(), MLP(cfg.d_model, cfg.d_mlp)
            self.hook_mlp_out = HookPoint()
        self.dropout = nn.Dropout(cfg.dropout)
        self.hook_resid_pre, self.hook_attn_out = HookPoint(), HookPoint()  # [batch, pos, d_model]
        self.hook_resid_mid, self.hook_resid_post = HookPoint(), HookPoint()
        self.cfg = cfg

    def attention_inputs(self, resid: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The query, key and value inputs, after ln1: the residual stream, or per-head copies of it
        that hooks can change head by head."""
        if not (self.cfg.use_split_qkv_input or self.cfg.use_attn_in):
            normed = self.ln1(resid)
            return normed, normed, normed
        attn = self.attn
        per_head = resid[:, :, None, :].repeat(1, 1, attn.W_Q.shape[0], 1)
        if self.cfg.use_split_qkv_input:
            hooks = (attn.hook_q_input, attn.hook_k_input, attn.hook_v_input)
            return tuple(self.ln1(hook(per_head.clone())) for hook in hooks)
        normed = self.ln1(attn.hook_attn_in(per_head))
        return normed, normed, normed

    def forward(self, resid: Tensor) -> Float[Tensor, "batch pos d_model"]:
        resid = self.hook_resid_pre(resid)
        attn_out = self.attn(*self.attention_inputs(resid))
        resid = self.hook_resid_mid(resid + self.hook_attn_out(self.dropout(attn_out)))
        if hasattr(self, "mlp"):
            resid = resid + self.hook_mlp_out(self.dropout(self.mlp(self.ln2(resid))))
        return self.hook_resid_post(resid)


class Weights(nn.Module):
    """Parameters under TransformerLens's names (``embed.W_E``, ``pos_embed.W_pos``, ``unembed.W_U`` and ``b_U``),
    created in the order given, uninitialised (``W_*``) or zero (biases); the model computes with them. Read by name
    they are tensors, which a plain ``nn.Module``'s attributes are not to a type checker."""

    def __init__(self, **shapes: tuple[int, ...]):
        super().__init__()
        for name, shape in shapes.items():
            self.register_parameter(
                name, nn.Parameter(torch.empty(shape) if name.startswith("W_") else torch.zeros(shape))
            )

    def __getattr__(self, name: str) -> Tensor:
        value = super().__getattr__(name)  # its parameters (and buffers, if given any): tensors, never modules
        if not isinstance(value, Tensor):
            raise AttributeError(f"{type(self).__name__} holds tensors, and {name} is none")
        return value


class HookedTransformer(TransformerLensInterface, CacheRuns):
    """Attention-first transformer with TransformerLens names; see the module docstring for the maths."""

    config_class = HookedTransformerConfig  # what the model is built from (circuits/models/model_classes.py)
    cfg: HookedTransformerConfig

    def __init__(self, cfg: HookedTransformerConfig):
        super().__init__()
        # the model's own config, shared by its layers: its device and hook switches change with the model
        cfg = self.cfg = copy.copy(cfg)
        self.embed: Weights = Weights(W_E=(cfg.d_vocab, cfg.d_model))
        self.hook_embed: HookPoint = HookPoint()  # [batch, pos, d_model]
        if cfg.positional == "standard":
            self.pos_embed: Weights = Weights(W_pos=(cfg.n_ctx, cfg.d_model))
            self.hook_pos_embed: HookPoint = HookPoint()  # [batch, pos, d_model]
        self.dropout: nn.Dropout = nn.Dropout(cfg.dropout)
        self.blocks: nn.ModuleList = nn.ModuleList(TransformerBlock(cfg, layer) for layer in range(cfg.n_layers))
        self.ln_final: LayerNorm | nn.Identity = LayerNorm(cfg) if cfg.normalization == "LN" else nn.Identity()
        self.unembed: Weights = Weights(
            W_U=(cfg.d_model, cfg.d_vocab_out), **({"b_U": (cfg.d_vocab_out,)} if cfg.use_bias else {})
        )
        self.init_weights()
        self.to(cfg.torch_dtype)
        self.setup()

    def init_weights(self) -> None:
        """N(0, init_range) for every matrix, init_range/sqrt(2 n_layers) for those writing into the
        residual stream (GPT-2's scaling, Edelman's 0.01 at two layers); zero biases and slopes, unit
        LayerNorm gains. Drawn from ``cfg.seed`` alone, so the same config gives the same weights."""
        generator = torch.Generator().manual_seed(self.cfg.seed)
        out_std = self.cfg.init_range / math.sqrt(2 * self.cfg.n_layers)
        with torch.no_grad():
            for name, param in self.named_parameters():
                leaf = name.rsplit(".", 1)[-1]
                if leaf in ("W_O", "W_out"):
                    param.normal_(0.0, out_std, generator=generator)
                elif leaf.startswith("W_"):
                    param.normal_(0.0, self.cfg.init_range, generator=generator)

    def check_input(self, input: Tensor) -> None:
        """Raise ValueError for inputs the model would silently misread."""
        cfg = self.cfg
        expected_dims = 2 if cfg.input_type == "tokens" else 3
        if input.dim() != expected_dims:
            raise BadInput(f"{cfg.input_type} input must have {expected_dims} dims, got shape {tuple(input.shape)}")
        if not 1 <= input.shape[1] <= cfg.n_ctx:
            raise BadInput(f"sequence length must be in 1..{cfg.n_ctx}, got {input.shape[1]}")
        if cfg.input_type == "tokens":
            if input.dtype != torch.long or input.numel() and (input.min() < 0 or input.max() >= cfg.d_vocab):
                raise BadInput(f"tokens must be integers in 0..{cfg.d_vocab - 1}")
        elif input.shape[-1] != cfg.d_vocab or not torch.isfinite(input).all():
            raise BadInput(f"vector input must be finite with last dimension {cfg.d_vocab}")

    def with_batch(self, input: Tensor) -> Shaped[Tensor, "batch ..."]:
        """One sequence ([pos] tokens, [pos, d_in] vectors) gains a batch dimension, as in TransformerLens."""
        one_sequence = 1 if self.cfg.input_type == "tokens" else 2
        return input[None] if isinstance(input, Tensor) and input.dim() == one_sequence else input

    def embed_input(self, input: Tensor) -> Float[Tensor, "batch pos d_model"]:
        """The residual stream entering block 0: token (or linear vector) embedding, plus absolute positions.
        The input moves to the model's device first, as TransformerLens's models move theirs."""
        self.check_input(input)
        input = input.to(self.embed.W_E.device)
        if self.cfg.input_type == "tokens":
            resid = self.hook_embed(self.embed.W_E[input])
        else:
            resid = self.hook_embed(input.to(self.embed.W_E.dtype) @ self.embed.W_E)
        if self.cfg.positional == "standard":
            resid = resid + self.hook_pos_embed(self.pos_embed.W_pos[: input.shape[1]].expand_as(resid))
        return self.dropout(resid)

    def forward(
        self,
        input: Int[Tensor, "batch pos"] | Float[Tensor, "batch pos d_in"],
        return_type: str | None = "logits",
        loss_per_token: bool = False,
        start_at_layer: int | None = None,
        stop_at_layer: int | None = None,
        tokens: Int[Tensor, "batch pos"] | None = None,
    ) -> Tensor | tuple[Tensor, Tensor] | None:
        """Logits (token models) or output vectors (vector models) at every position, with
        TransformerLens's options: ``return_type`` "logits", "loss" (next-token cross-entropy, mean or
        ``loss_per_token`` [batch, pos − 1]), "both" or None; ``stop_at_layer`` L returns the residual
        stream entering block L; with ``start_at_layer`` L, ``input`` is that residual stream (and
        ``tokens`` gives the targets of a loss)."""
        if return_type not in ("logits", "loss", "both", None):
            raise BadInput(f"return_type must be logits, loss, both or None; got {return_type!r}")
        if start_at_layer is None:
            input = self.with_batch(input)
            resid, tokens = self.embed_input(input), input
        else:
            resid = input
        for block in self.blocks[start_at_layer:stop_at_layer]:
            resid = block(resid)
        if stop_at_layer is not None:
            return resid
        out = self.ln_final(resid) @ self.unembed.W_U
        out = out + self.unembed.b_U if self.cfg.use_bias else out
        if return_type in ("logits", None):
            return out if return_type else None
        loss = self.next_token_loss(out, tokens, loss_per_token)
        return loss if return_type == "loss" else (out, loss)

    def next_token_loss(
        self, logits: Tensor, tokens: Tensor | None, per_token: bool
    ) -> Float[Tensor, ""] | Float[Tensor, "batch pos_1"]:
        """Cross-entropy of token t + 1 given the logits at t, as TransformerLens's loss."""
        if self.cfg.input_type != "tokens" or tokens is None:
            raise BadInput("a loss needs token inputs (with start_at_layer, pass tokens=...)")
        log_probs = torch.log_softmax(logits[:, :-1], dim=-1)
        per_position = -log_probs.gather(-1, tokens[:, 1:, None].to(logits.device)).squeeze(-1)
        return per_position if per_token else per_position.mean()
