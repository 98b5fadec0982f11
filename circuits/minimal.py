"""Edelman et al.'s minimal model of a statistical induction head (their eq. 6), with hook points.

    f(E) = mask(E W (A E)ᵀ) E,     E ∈ {0,1}^{T×k} the one-hot tokens, W ∈ R^{k×k}

where A is the first layer's attention, a function of relative position only, from a learned v:

- ``first_layer="linear"`` (eq. 6): A = M, the lower-triangular Toeplitz matrix M_ij = v_{i−j}, j ≤ i.
- ``first_layer="softmax"``: A_ij = softmax over j ≤ i of v_{i−j}, a causally masked attention row.

Row i of A E is what layer 1 wrote at position i (A_{i,i−1} = 1 makes it e_{x_{i−1}}); layer 2 scores
key j ≤ i by e_{x_i}ᵀ W (A E)_j, without a softmax, and sums e_{x_j} with those weights: with A the
previous-token shift and W = I the output is the vector of bigram counts c(x_i → ·). Both layers mask
the future (the authors' released code leaks it into layer 1: its masked_fill is not in place).

Hook names follow TransformerLens, so the probes that read patterns run on it: the first layer's A is
``blocks.0.attn.hook_pattern`` and the second layer's (unnormalised) scores ``blocks.1.attn.hook_pattern``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens import ActivationCache, HookedRootModule
from transformer_lens.hook_points import HookPoint

from circuits.validation import require_int, require_positive

FIRST_LAYERS = ("linear", "softmax")


@dataclass(frozen=True)
class MinimalConfig:
    d_vocab: int  # k
    n_ctx: int
    first_layer: str = "softmax"
    v_init: float = 0.0
    w_init: float = 0.01  # every entry of W, as in the authors' code
    dtype: str = "float32"

    n_layers = 2  # for probes that read cfg.n_layers / cfg.n_heads, as on a TransformerLens model
    n_heads = 1

    def __post_init__(self) -> None:
        require_int("d_vocab", self.d_vocab, 2)
        require_int("n_ctx", self.n_ctx, 2)
        if self.first_layer not in FIRST_LAYERS:
            raise ValueError(f"first_layer must be linear or softmax, got {self.first_layer!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> MinimalConfig:
        return cls(**values)

    @property
    def torch_dtype(self) -> torch.dtype:
        return {"float32": torch.float32, "float64": torch.float64}[self.dtype]

    def heads(self, layer: int) -> int:
        return 1


class MinimalModel(HookedRootModule):
    """The minimal model; parameters ``v`` ([n_ctx], v_d for distance d) and ``W`` ([k, k])."""

    def __init__(self, cfg: MinimalConfig):
        super().__init__()
        self.cfg = cfg
        self.v = nn.Parameter(torch.full((cfg.n_ctx,), cfg.v_init, dtype=cfg.torch_dtype))
        self.W = nn.Parameter(torch.full((cfg.d_vocab, cfg.d_vocab), cfg.w_init, dtype=cfg.torch_dtype))
        self.blocks = nn.ModuleList([nn.Module(), nn.Module()])
        for block in self.blocks:
            block.attn = nn.Module()
            block.attn.hook_pattern = HookPoint()  # [batch, 1, q_pos, k_pos]
        position = torch.arange(cfg.n_ctx)
        self.register_buffer("distance", (position[:, None] - position[None, :]).clamp_min(0), persistent=False)
        self.register_buffer("causal", position[:, None] >= position[None, :], persistent=False)
        self.setup()

    def first_layer(self, n_pos: int) -> Float[Tensor, "q k"]:
        logits = self.v[self.distance[:n_pos, :n_pos]]
        causal = self.causal[:n_pos, :n_pos]
        if self.cfg.first_layer == "linear":
            return logits * causal
        return torch.softmax(logits.masked_fill(~causal, -torch.inf), dim=-1)

    def forward(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos k"]:
        if tokens.dim() != 2 or not 1 <= tokens.shape[1] <= self.cfg.n_ctx:
            raise ValueError(f"tokens must be [batch, pos] with pos in 1..{self.cfg.n_ctx}")
        if tokens.min() < 0 or tokens.max() >= self.cfg.d_vocab:
            raise ValueError(f"tokens must be integers in 0..{self.cfg.d_vocab - 1}")
        batch, n_pos = tokens.shape
        E = nn.functional.one_hot(tokens, self.cfg.d_vocab).to(self.W.dtype)
        A = self.blocks[0].attn.hook_pattern(self.first_layer(n_pos).expand(batch, 1, n_pos, n_pos))
        written = A[:, 0] @ E  # (A E)_j
        scores = (E @ self.W @ written.transpose(1, 2)) * self.causal[:n_pos, :n_pos]
        scores = self.blocks[1].attn.hook_pattern(scores[:, None])
        return scores[:, 0] @ E

    def run_with_cache(self, *args, **kwargs) -> tuple[Tensor, ActivationCache]:
        out, cache_dict = super().run_with_cache(*args, **kwargs)
        return out, ActivationCache(cache_dict, self)


def odd_even_gap(v: Tensor) -> float:
    """Mean of v at odd distances 3, 5, 7 minus the mean at even distances 2, 4, 6: positive during
    the transition, as Edelman et al. predict (distance 1, the previous token, is left out: it wins
    anyway)."""
    return (v[[3, 5, 7]].mean() - v[[2, 4, 6]].mean()).item()


# --- Wang et al.'s toy model of the lazy → rich transition -------------------------------------------


@dataclass(frozen=True)
class ToyConfig:
    """The toy model's task and training (reference/papers.md B3; several choices are reconstructions).

    Scalar tokens x_1..x_L (standard Gaussian, or ±1), target α*·x_{L−2} + IH_2 with w* = 1. The four
    weights start at σ, the two slopes at ``slope_init``. Full-batch gradient descent on a fixed
    set of ``n_seqs`` sequences approximates gradient flow on the population loss ½E[(f − y)²].
    """

    seq_len: int = 20
    sigma: float = 1e-2
    slope_init: float = 1.0  # ALiBi slopes start local: from 0 the 4-gram signal fades as 1/L (see README)
    alpha_star: float = 2.0
    w_star: float = 1.0
    boolean: bool = False
    optimizer: str = "gd"  # or "adam" (the rebuttal's comparison)
    layerwise_steps: int = 0  # if > 0: train only layer 1 (p1) for this many steps, then freeze it
    lr: float = 0.1
    steps: int = 5000
    n_seqs: int = 8192
    seed: int = 0
    log_every: int = 20

    def __post_init__(self) -> None:
        require_int("seq_len", self.seq_len, 4)
        for name in ("sigma", "alpha_star", "w_star", "lr"):
            require_positive(name, getattr(self, name))
        for name in ("steps", "n_seqs", "log_every"):
            require_int(name, getattr(self, name), 1)
        require_int("layerwise_steps", self.layerwise_steps, 0)
        if self.optimizer not in ("gd", "adam"):
            raise ValueError(f"optimizer must be gd or adam, got {self.optimizer!r}")


TOY_PARAMETERS = ("p1", "p2", "w_V1", "w_K", "w_Q", "w_V2")
LAYER_1 = torch.tensor([1.0, 0, 0, 0, 0, 0], dtype=torch.float64)  # p1 is layer 1's only parameter


def past_weights(slope: Tensor, n_pos: int) -> Tensor:
    """[query s, key t]: softmax over t < s of −slope·(s − t − 1), an ALiBi head under the strict mask;
    row 0 has no key and is all zeros."""
    position = torch.arange(n_pos)
    distance = (position[:, None] - position[None, :]).to(slope.dtype)
    allowed = distance >= 1
    logits = (-slope * (distance - 1)).masked_fill(~allowed, -torch.inf)
    has_key = allowed.any(-1, keepdim=True)
    return torch.softmax(logits.masked_fill(~has_key, 0.0), -1) * has_key


def toy_forward(params: Tensor, x: Float[Tensor, "batch seq"]) -> tuple[Tensor, Tensor]:
    """The two parts of the toy model's output at the last position: the 4-gram path g and the
    induction path i (f = g + i).

    h_s = Σ_j softmax_j(−p1 (j − 1)) x_{s−j}                       layer 1, → x_{s−1} as p1 grows
    g   = w_V1 Σ_j softmax_j(−p2 (j − 1)) h_{L−j}                   → w_V1 x_{L−2}: the lazy 4-gram path
    i   = w_V2 Σ_{s=2}^{L−1} softmax_s(w_K w_Q x_L h_s) x_s          → IH_2 with w* = w_K w_Q: the rich path
    The dot-product parameter is the product w_K w_Q, so its growth from σ is quadratic, as in the paper.
    """
    p1, p2, w_V1, w_K, w_Q, w_V2 = params
    n_pos = x.shape[1]
    h = x @ past_weights(p1, n_pos).T
    g = w_V1 * (h * past_weights(p2, n_pos)[-1]).sum(-1)
    scores = w_K * w_Q * x[:, -1:] * h[:, 1 : n_pos - 1]
    i = w_V2 * (torch.softmax(scores, -1) * x[:, 1 : n_pos - 1]).sum(-1)
    return g, i


def train_toy(cfg: ToyConfig) -> list[dict]:
    """Gradient descent (or Adam) on the toy model; every ``log_every`` steps the total loss, the 4-gram part
    ½E[(g − α* x_{L−2})²], the induction part ½E[(i − IH_2)²] and every parameter."""
    from circuits.tasks.gaussian import induction_head, sample_sequences

    generator = torch.Generator().manual_seed(cfg.seed)
    x = sample_sequences(cfg.n_seqs, cfg.seq_len, 1, generator=generator, boolean=cfg.boolean)
    target_g4 = cfg.alpha_star * x[:, -3, 0]
    target_ih = induction_head(x, 2, torch.full((1, 1), cfg.w_star, dtype=torch.float64))[:, 0]
    x = x[..., 0]
    s = cfg.sigma
    p0 = cfg.slope_init
    params = torch.tensor([p0, p0, s, s, s, s], dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([params], lr=cfg.lr) if cfg.optimizer == "adam" else torch.optim.SGD([params], lr=cfg.lr)
    history = []
    for step in range(cfg.steps + 1):
        g, i = toy_forward(params, x)
        loss = 0.5 * ((g + i - target_g4 - target_ih) ** 2).mean()
        if step % cfg.log_every == 0:
            history.append({
                "step": step,
                "loss": loss.item(),
                "loss_4gram": 0.5 * ((g - target_g4) ** 2).mean().item(),
                "loss_induction": 0.5 * ((i - target_ih) ** 2).mean().item(),
            } | dict(zip(TOY_PARAMETERS, params.tolist())))
        if step == cfg.steps:
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.layerwise_steps:  # Wang et al.'s protocol: layer 1 first, then layer 2 with layer 1 frozen
            params.grad *= LAYER_1 if step < cfg.layerwise_steps else 1 - LAYER_1
        optimizer.step()
        if not torch.isfinite(params).all():
            raise FloatingPointError(f"toy training diverged at step {step}; lower --lr")
    return history
