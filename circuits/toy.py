"""Wang et al.'s toy model of the lazy → rich transition (§5), its training, and its four phases.

Six parameters: slopes p1 (layer 1) and p2 (the 4-gram head), the 4-gram value w_V1, and the induction
head's w_K, w_Q and w_V2. The paper gives the parameter count and the phases, not every formula; the
forward pass below is a reconstruction (README, "The toy model").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from jaxtyping import Float
from torch import Tensor, nn

from induction_probes.circuits.config import Config
from induction_probes.circuits.metrics import linear_fit
from induction_probes.circuits.model import softmax_over_allowed
from induction_probes.circuits.recipes import ToyRecipe

PARAMETERS = ("p1", "p2", "w_V1", "w_K", "w_Q", "w_V2")
LAYER_1 = torch.tensor([1.0, 0, 0, 0, 0, 0], dtype=torch.float64)  # p1 is layer 1's only parameter


@dataclass(frozen=True)
class ToyConfig(Config):
    """The toy model's initialisation: the four weights at σ, the two slopes at ``slope_init``."""

    sigma: float = 1e-2
    slope_init: float = 1.0


def past_weights(slope: Tensor, n_pos: int) -> Tensor:
    """[query s, key t]: softmax over t < s of −slope·(s − t − 1), an ALiBi head under the strict mask;
    row 0 has no key and is all zeros."""
    position = torch.arange(n_pos)
    distance = (position[:, None] - position[None, :]).to(slope.dtype)
    allowed = distance >= 1
    return softmax_over_allowed((-slope * (distance - 1)).masked_fill(~allowed, -torch.inf), allowed)


class ToyModel(nn.Module):
    """``params`` = (p1, p2, w_V1, w_K, w_Q, w_V2), float64."""

    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        s, p0 = cfg.sigma, cfg.slope_init
        self.params = nn.Parameter(torch.tensor([p0, p0, s, s, s, s], dtype=torch.float64))

    def parts(self, x: Float[Tensor, "batch seq"]) -> tuple[Tensor, Tensor]:
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

    def forward(self, x: Float[Tensor, "batch seq"]) -> Float[Tensor, " batch"]:
        g, i = self.parts(x)
        return g + i


def train_toy(recipe: ToyRecipe, out: str | Path | None = None) -> list[dict]:
    """Gradient descent (or Adam) on the toy model. Every ``log_every`` steps it records the total loss,
    the 4-gram part ½E[(g − α* x_{L−2})²], the induction part ½E[(i − IH_2)²] and every parameter; with
    ``out`` these become the metrics of a run directory, with the parameters checkpointed every tenth
    record and at the end."""
    from induction_probes.circuits.checkpoint import RunWriter, run_config

    from induction_probes.circuits.tasks.gaussian import four_gram, induction_head

    task = recipe.task
    x = task.sample(recipe.n_seqs, torch.Generator().manual_seed(recipe.data_seed))
    target_g4 = recipe.alpha_star * four_gram(x)[:, 0]
    target_ih = induction_head(x, 2, task.W_star())[:, 0]
    x = x[..., 0]
    model = ToyModel(recipe.model_config())
    params = model.params
    optimizer = torch.optim.Adam([params], lr=recipe.lr) if recipe.optimizer == "adam" else torch.optim.SGD([params], lr=recipe.lr)
    writer = RunWriter.create(Path(out), run_config(recipe)) if out is not None else None
    history = []
    for step in range(recipe.steps + 1):
        g, i = model.parts(x)
        loss = 0.5 * ((g + i - target_g4 - target_ih) ** 2).mean()
        if step % recipe.log_every == 0 or step == recipe.steps:
            history.append(record(step, loss, g - target_g4, i - target_ih, params))
            if writer is not None:
                save_record(writer, history, model, recipe)
        if step == recipe.steps:
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if recipe.layerwise_steps:  # Wang et al.'s protocol: layer 1 first, then layer 2 with layer 1 frozen
            params.grad *= LAYER_1 if step < recipe.layerwise_steps else 1 - LAYER_1
        optimizer.step()
        if not torch.isfinite(params).all():
            raise FloatingPointError(f"toy training diverged at step {step}; lower --lr")
    return history


def record(step: int, loss: Tensor, error_g4: Tensor, error_ih: Tensor, params: Tensor) -> dict:
    return {
        "step": step,
        "loss": loss.item(),
        "loss_4gram": 0.5 * (error_g4**2).mean().item(),
        "loss_induction": 0.5 * (error_ih**2).mean().item(),
    } | dict(zip(PARAMETERS, params.tolist()))


def save_record(writer, history: list[dict], model: ToyModel, recipe: ToyRecipe) -> None:
    """The newest record as a metrics line, and as a checkpoint too at every tenth record and the last."""
    entry = history[-1]
    if (len(history) - 1) % 10 and entry["step"] != recipe.steps:
        writer.add_metrics(entry)
        return
    writer.add_checkpoint(entry["step"], entry["step"] * recipe.n_seqs, model.state_dict(), entry)


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
