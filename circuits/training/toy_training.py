"""Training Wang et al.'s toy model (§5): full-batch gradient descent (or Adam) on a fixed set of sequences,
with a record of the loss, the two errors and the six parameters every ``log_every`` steps.
"""

from __future__ import annotations

from pathlib import Path

import torch
from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.devices import Device, device_kind, resolve_device
from induction_probes.circuits.models.toy_model import ToyModel
from induction_probes.circuits.recipes.gaussian_recipes import ToyRecipe
from induction_probes.circuits.runs.writer import RunWriter, run_config
from induction_probes.circuits.tasks.gaussian.sequences import four_gram, induction_head


def train_toy(recipe: ToyRecipe, out: str | Path | None = None, device: Device = None) -> list[dict]:
    """Gradient descent (or Adam) on the toy model. Every ``log_every`` steps it records the total loss,
    the 4-gram part ½E[(g − α* x_{L−2})²], the induction part ½E[(i − IH_2)²] and every parameter; with
    ``out`` these become the metrics of a run directory, with the parameters checkpointed every tenth
    record and at the end. The sequences are drawn on the CPU (the same on every device), then moved once
    to ``device`` with the model."""

    device = resolve_device(device)
    task = recipe.task
    x = task.sample(recipe.n_seqs, torch.Generator().manual_seed(recipe.data_seed))
    target_g4 = (recipe.alpha_star * four_gram(x)).to(device)
    target_ih = induction_head(x, 2, task.W_star()).to(device)
    x = x.to(device)
    model = ToyModel(recipe.model_config()).to(device)
    params = model.params
    optimizer = (
        torch.optim.Adam([params], lr=recipe.lr)
        if recipe.optimizer == "adam"
        else torch.optim.SGD([params], lr=recipe.lr)
    )
    config = run_config(recipe) | {"devices": [device_kind(device)]}
    writer = RunWriter.create(Path(out), config) if out is not None else None
    layer_1 = torch.zeros_like(params.detach())
    layer_1[0] = 1.0  # p1 is layer 1's only parameter
    history = []
    for step in range(recipe.steps + 1):
        g, i = model.parts(x)
        loss = half_squared(g + i - target_g4 - target_ih)
        if step % recipe.log_every == 0 or step == recipe.steps:
            history.append(record(step, loss, g - target_g4, i - target_ih, model))
            if writer is not None:
                save_record(writer, history, model, recipe)
        if step == recipe.steps:
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if recipe.layerwise_steps:  # Wang et al.'s protocol: layer 1 first, then layer 2 with layer 1 frozen
            assert params.grad is not None  # backward() has just filled it
            params.grad *= layer_1 if step < recipe.layerwise_steps else 1 - layer_1
        optimizer.step()
        if not torch.isfinite(params).all():
            raise FloatingPointError(f"toy training diverged at step {step}; lower --lr")
    return history


def half_squared(error: Float[Tensor, "batch d_model"]) -> Float[Tensor, ""]:
    """½E‖error‖² over the sequences ([batch, d]: the squared norm of each sequence's error)."""
    return 0.5 * (error**2).sum(-1).mean()


def record(step: int, loss: Tensor, error_g4: Tensor, error_ih: Tensor, model: ToyModel) -> dict:
    return {
        "step": step,
        "loss": loss.item(),
        "loss_4gram": half_squared(error_g4).item(),
        "loss_induction": half_squared(error_ih).item(),
    } | model.summary()


def save_record(writer, history: list[dict], model: ToyModel, recipe: ToyRecipe) -> None:
    """The newest record as a metrics line, and as a checkpoint too at every tenth record and the last."""
    entry = history[-1]
    if (len(history) - 1) % 10 and entry["step"] != recipe.steps:
        writer.add_metrics(entry)
        return
    writer.add_checkpoint(entry["step"], entry["step"] * recipe.n_seqs, model.state_dict(), entry)
