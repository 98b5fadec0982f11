"""Wang et al.'s toy model of the lazy → rich transition (§5) and its four phases (its training loop is
:mod:`induction_probes.circuits.training.toy_training`).

Six parameters: slopes p1 (layer 1) and p2 (the 4-gram head), the 4-gram value w_V1, and the induction
head's w_K, w_Q and w_V2. The paper gives the parameter count and the phases, not every formula; the
forward pass below is a reconstruction (README, "The toy model").

The high-dimensional toy (``d`` > 1, our definition for the rebuttal's Adam experiment: the paper gives no
dimensions) keeps the two scalar slopes and makes the four weights d × d matrices acting on d-dimensional
tokens: 2 + 4d² parameters, the six-parameter toy at d = 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor, nn

from induction_probes.circuits.config import Config
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.metrics import linear_fit
from induction_probes.circuits.models.model import softmax_over_allowed

PARAMETERS = ("p1", "p2", "w_V1", "w_K", "w_Q", "w_V2")


@dataclass(frozen=True)
class ToyConfig(Config):
    """The toy model's initialisation: the two slopes at ``slope_init``; at d = 1 the four weights at σ, at
    d > 1 the entries of the four d × d matrices i.i.d. N(0, σ²) from ``seed`` (a constant σ would keep every
    matrix a multiple of the identity, d copies of the scalar toy)."""

    sigma: float = 1e-2
    slope_init: float = 1.0
    d: int = 1
    seed: int = 0


def past_weights(slope: Tensor, n_pos: int) -> Float[Tensor, "query_pos key_pos"]:
    """[query s, key t]: softmax over t < s of −slope·(s − t − 1), an ALiBi head under the strict mask;
    row 0 has no key and is all zeros."""
    position = torch.arange(n_pos, device=slope.device)
    distance = (position[:, None] - position[None, :]).to(slope.dtype)
    allowed = distance >= 1
    return softmax_over_allowed((-slope * (distance - 1)).masked_fill(~allowed, -torch.inf), allowed)


class ToyModel(nn.Module):
    """``params`` = (p1, p2, W_V1, W_K, W_Q, W_V2) flattened, float64: at d = 1 the six scalars in this order."""

    config_class = ToyConfig  # what the model is built from (circuits/models/model_classes.py)

    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        s, p0, d = cfg.sigma, cfg.slope_init, cfg.d
        if d == 1:
            weights = torch.full((4,), s, dtype=torch.float64)
        else:
            weights = s * torch.randn(4 * d * d, generator=torch.Generator().manual_seed(cfg.seed), dtype=torch.float64)
        self.params = nn.Parameter(torch.cat([torch.tensor([p0, p0], dtype=torch.float64), weights]))

    def weights(self) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """p1, p2 (scalars) and W_V1, W_K, W_Q, W_V2 (d × d views of ``params``)."""
        d = self.cfg.d
        W_V1, W_K, W_Q, W_V2 = self.params[2:].view(4, d, d)
        return self.params[0], self.params[1], W_V1, W_K, W_Q, W_V2

    def parts(self, x: Float[Tensor, "batch pos d_model"]) -> tuple[Tensor, Tensor]:
        """The two parts of the output at the last position, each [batch, d]: the 4-gram path g and the
        induction path i (f = g + i).

        h_s = Σ_j softmax_j(−p1 (j − 1)) x_{s−j}                       layer 1, → x_{s−1} as p1 grows
        g   = W_V1 Σ_j softmax_j(−p2 (j − 1)) h_{L−j}                   → W_V1 x_{L−2}: the lazy 4-gram path
        i   = W_V2 Σ_{s=2}^{L−1} softmax_s((W_Q x_L)·(W_K h_s)) x_s      → IH_2 with W* = W_Qᵀ W_K: the rich path
        The dot-product parameter is the product W_Qᵀ W_K, so its growth from σ is quadratic, as in the paper.
        """
        p1, p2, W_V1, W_K, W_Q, W_V2 = self.weights()
        n_pos = x.shape[1]
        h = torch.einsum("st,btd->bsd", past_weights(p1, n_pos), x)
        g = torch.einsum("t,btd->bd", past_weights(p2, n_pos)[-1], h) @ W_V1.T
        scores = torch.einsum("bd,bsd->bs", x[:, -1] @ W_Q.T, h[:, 1 : n_pos - 1] @ W_K.T)
        i = torch.einsum("bs,bsd->bd", torch.softmax(scores, -1), x[:, 1 : n_pos - 1]) @ W_V2.T
        return g, i

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch d_model"]:
        g, i = self.parts(x)
        return g + i

    def summary(self) -> dict[str, float]:
        """The logged values: p1, p2, each matrix's component along the identity tr(W)/d (the target is
        α* I on the 4-gram path and w* I on the induction path), and w_KQ = tr(W_Qᵀ W_K)/d, the induction
        head's effective w*. At d = 1 these are the six parameters and w_K·w_Q."""
        p1, p2, *matrices = self.weights()
        d = self.cfg.d
        values = [p1.item(), p2.item()] + [(torch.trace(W) / d).item() for W in matrices]
        W_K, W_Q = matrices[1], matrices[2]
        return dict(zip(PARAMETERS, values)) | {"w_KQ": (torch.trace(W_Q.T @ W_K) / d).item()}


@dataclass(frozen=True)
class ToyPhases:
    """Phase boundaries (steps) read from the loss parts of a toy run.

    I ends when the 4-gram loss has lost 95% of its initial value; the plateau (II) lasts until the
    induction loss falls below half its level at that moment (the middle of the abrupt drop); III (the
    emergence of the induction head) ends when it is below 5% of that level; IV is the rest.
    """

    end_of_I: int
    end_of_II: int
    end_of_III: int

    @property
    def plateau(self) -> int:
        return self.end_of_II - self.end_of_I

    def to_json(self) -> dict:
        return vars(self) | {"plateau": self.plateau}


def toy_phases(history: list[dict]) -> ToyPhases:
    first = history[0]["loss_4gram"]
    end_i = next((h for h in history if h["loss_4gram"] <= 0.05 * first), None)
    if end_i is None:
        raise BadInput("the 4-gram loss never fell by 95%: train longer (phase I did not end)")
    level = end_i["loss_induction"]
    later = [h for h in history if h["step"] >= end_i["step"]]
    end_ii = next((h for h in later if h["loss_induction"] < 0.5 * level), None)
    end_iii = next((h for h in later if h["loss_induction"] < 0.05 * level), None)
    if end_ii is None or end_iii is None:
        raise BadInput("the induction loss never dropped: train longer (the plateau did not end)")
    return ToyPhases(end_i["step"], end_ii["step"], end_iii["step"])


def fit_plateau(rows: list[tuple[int, float, int]]) -> tuple[float, float, float]:
    """Least-squares fit of plateau length ≈ a·L·log(1/σ) + b over (L, σ, plateau) rows: (a, b, R²)."""
    x = torch.tensor([length * math.log(1 / sigma) for length, sigma, _ in rows], dtype=torch.float64)
    y = torch.tensor([plateau for _, _, plateau in rows], dtype=torch.float64)
    return linear_fit(x, y)


HALF = 0.5  # the fraction of its total change at which a parameter counts as learned (docs/results.md says why)


def reach_step(history: list[dict], values: list[float], fraction: float = HALF) -> int:
    """The first logged step at which ``values`` has made ``fraction`` of its change from the first record to
    the last (|v − v₀| ≥ fraction·|v_T − v₀|)."""
    start, end = values[0], values[-1]
    return next(h["step"] for h, v in zip(history, values) if abs(v - start) >= fraction * abs(end - start))


FLAT = 0.05  # decades per 100 steps: a loss falling slower than ~11% per 100 steps is on a plateau
MIN_PLATEAU = 100  # steps: a flat stretch shorter than this is a bend of the curve, not a plateau
ESCAPE = math.log10(2)  # decades: the steep fall after a plateau must at least halve the loss


def count_plateaus(history: list[dict], key: str = "loss") -> list[tuple[int, int]]:
    """The plateaus of the logged ``key`` curve: maximal stretches of at least :data:`MIN_PLATEAU` steps
    where log10 of it changes by less than :data:`FLAT` per 100 steps, each escaped by the steep stretch
    right after it, over which the value falls at least by half (the converged tail has no escape and is
    no plateau). (first step, last step) per plateau."""
    steps = [h["step"] for h in history]
    logs = [math.log10(max(h[key], 1e-300)) for h in history]
    flat = [abs(logs[k + 1] - logs[k]) * 100 / (steps[k + 1] - steps[k]) < FLAT for k in range(len(steps) - 1)]
    runs, k = [], 0  # (first interval, past the last interval, is flat) of each maximal run
    while k < len(flat):
        end = next((j for j in range(k, len(flat)) if flat[j] != flat[k]), len(flat))
        runs.append((k, end, flat[k]))
        k = end
    plateaus = []
    for (start, end, is_flat), after in zip(runs, runs[1:]):
        long = steps[end] - steps[start] >= MIN_PLATEAU
        escaped = logs[after[0]] - min(logs[after[0] : after[1] + 1]) >= ESCAPE
        if is_flat and long and escaped:
            plateaus.append((steps[start], steps[end]))
    return plateaus
