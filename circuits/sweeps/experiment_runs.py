"""Experiments that need several runs, as library functions: every run is a standard run directory
under ``out``, so each can be opened, probed and plotted on its own afterwards."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from induction_probes.circuits.models.toy_model import toy_phases
from induction_probes.circuits.recipes.gaussian_recipes import GaussianRecipe, ToyRecipe
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.training.toy_training import train_toy
from induction_probes.circuits.training.train_loop import train_run

if TYPE_CHECKING:
    from induction_probes.circuits.devices import Device

SWEEP_LENGTHS, SWEEP_SIGMAS = (10, 20, 40), (1e-2, 1e-3, 1e-4)
# Fewer sequences than a single toy run (8192), more steps: the slowest cell (L = 40, σ = 1e-4) needs them.
SWEEP_RECIPE = ToyRecipe(steps=6000, n_seqs=2048)


def toy_sweep(
    out: str | Path,
    base: ToyRecipe = SWEEP_RECIPE,
    lengths=SWEEP_LENGTHS,
    sigmas=SWEEP_SIGMAS,
    device: Device = None,
) -> list[tuple[int, float, int]]:
    """Wang et al.'s plateau-length sweep: the toy model over L × σ; (L, σ, plateau length in steps) per cell."""

    rows = []
    for length, sigma in itertools.product(lengths, sigmas):
        recipe = replace(base, seq_len=length, sigma=sigma)
        history = train_toy(recipe, Path(out) / f"L{length}_sigma{sigma:g}", device=device)
        rows.append((length, sigma, toy_phases(history).plateau))
    return rows


IH4_MODELS = (("1 head, D = n·d", 1, 8), ("6 heads, D = 2d", 6, 4), ("6 heads, D = n·d", 6, 8))


def ih4_capacity(out: str | Path, steps: int = 10_000, device: Device = None) -> list[tuple[str, int, int, float]]:
    """The rebuttal's capacity experiment: IH_4 (d = 2, L = 20) needs several first-layer heads and a
    residual stream of n·d; (model, heads, width, final MSE over the target's variance) per model."""
    rows = []
    for label, heads, width in IH4_MODELS:
        recipe = GaussianRecipe(
            task=GaussianTask(target="ihn", n=4, d=2), heads=heads, d_model=width, steps=steps, n_checkpoints=20
        )
        run = train_run(recipe, Path(out) / f"heads{heads}_D{width}", progress=False, device=device)
        rows.append((label, heads, width, run.metrics()[-1]["relative_mse"]))
    return rows
