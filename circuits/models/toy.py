"""Wang et al.'s toy model of the lazy → rich transition (§5) and its four phases (its training loop is
:mod:`induction_probes.circuits.training.toy`).

Six parameters: slopes p1 (layer 1) and p2 (the 4-gram head), the 4-gram value w_V1, and the induction
head's w_K, w_Q and w_V2. The paper gives the parameter count and the phases, not every formula; the
forward pass below is a reconstruction (README, "The toy model").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor, nn

from induction_probes.circuits.common.config import Config
from induction_probes.circuits.common.metrics import linear_fit
from induction_probes.circuits.models.model import softmax_over_allowed

PARAMETERS = ("p1", "p2", "w_V1", "w_K", "w_Q", "w_V2")


@dataclass(frozen=True)
class ToyConfig(Config):
    """The toy model's initialisation: the four weights at σ, the two slopes at ``slope_init``."""

    sigma: float = 1e-2
    slope_init: float = 1.0


def past_weights(slope: Tensor, n_pos: int) -> Float[Tensor, "query_pos key_pos"]:
    """[query s, key t]: softmax over t < s of −slope·(s − t − 1), an ALiBi head under the strict mask;
    row 0 has no key and is all zeros."""
    position = torch.arange(n_pos, device=slope.device)
    distance = (position[:, None] - position[None, :]).to(slope.dtype)
    allowed = distance >= 1
    return softmax_over_allowed((-slope * (distance - 1)).masked_fill(~allowed, -torch.inf), allowed)


class ToyModel(nn.Module):
    """``params`` = (p1, p2, w_V1, w_K, w_Q, w_V2), float64."""

    config_class = ToyConfig  # what the model is built from (circuits/models/registry.py)

    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        s, p0 = cfg.sigma, cfg.slope_init
        self.params = nn.Parameter(torch.tensor([p0, p0, s, s, s, s], dtype=torch.float64))

    def parts(self, x: Float[Tensor, "batch pos"]) -> tuple[Tensor, Tensor]:
        """The two parts of the output at the last position: the 4-gram path g and the induction path i
        (f = g + i).

        h_s = Σ_j softmax_j(−p1 (j − 1)) x_{s−j}                       layer 1, → x_{s−1} as p1 grows
        g   = w_V1 Σ_j softmax_j(−p2 (j − 1)) h_{L−j}                   → w_V1 x_{L−2}: the lazy 4-gram path
        i   = w_V2 Σ_{s=2}^{L−1} softmax_s(w_K w_Q x_L h_s) x_s          → IH_2 with w* = w_K w_Q: the rich path
        The dot-product parameter is the product w_K w_Q, so its growth from σ is quadratic, as in the paper.
        """
        p1, p2, w_V1, w_K, w_Q, w_V2 = self.params
        n_pos = x.shape[1]
        h = x @ past_weights(p1, n_pos).T
        g = w_V1 * (h * past_weights(p2, n_pos)[-1]).sum(-1)
        scores = w_K * w_Q * x[:, -1:] * h[:, 1 : n_pos - 1]
        i = w_V2 * (torch.softmax(scores, -1) * x[:, 1 : n_pos - 1]).sum(-1)
        return g, i

    def forward(self, x: Float[Tensor, "batch pos"]) -> Float[Tensor, " batch"]:
        g, i = self.parts(x)
        return g + i


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
        raise ValueError("the 4-gram loss never fell by 95%: train longer (phase I did not end)")
    level = end_i["loss_induction"]
    later = [h for h in history if h["step"] >= end_i["step"]]
    end_ii = next((h for h in later if h["loss_induction"] < 0.5 * level), None)
    end_iii = next((h for h in later if h["loss_induction"] < 0.05 * level), None)
    if end_ii is None or end_iii is None:
        raise ValueError("the induction loss never dropped: train longer (the plateau did not end)")
    return ToyPhases(end_i["step"], end_ii["step"], end_iii["step"])


def fit_plateau(rows: list[tuple[int, float, int]]) -> tuple[float, float, float]:
    """Least-squares fit of plateau length ≈ a·L·log(1/σ) + b over (L, σ, plateau) rows: (a, b, R²)."""
    x = torch.tensor([length * math.log(1 / sigma) for length, sigma, _ in rows], dtype=torch.float64)
    y = torch.tensor([plateau for _, _, plateau in rows], dtype=torch.float64)
    return linear_fit(x, y)
