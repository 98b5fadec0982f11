"""What ``induction-probes toy`` and ``experiment`` show: Wang et al.'s toy model (one run with its four phases,
or the plateau sweep over L and σ) and the rebuttal's IH_4 capacity experiment, as text with ``figure: PATH``
lines, or JSON-ready dicts. The sweep and the experiment train through a library function that writes standard run
directories (into ``out``, or a temporary directory when none is given); one toy run is trained by its caller.
Callable from Python with the commands' text and JSON:

>>> toy_report(recipe, train_toy(recipe, "out/toy"), as_json=True)["phases"]  # doctest: +SKIP
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.toy_model import PARAMETERS, fit_plateau, toy_phases
from induction_probes.circuits.recipes.gaussian_recipes import ToyRecipe
from induction_probes.circuits.sweeps.experiment_runs import SWEEP_RECIPE, ih4_capacity, toy_sweep
from induction_probes.probes.figures.plots_toy import plot_capacity_table, plot_plateau_sweep, plot_toy
from induction_probes.probes.report.tables import figure_lines, format_table


@contextmanager
def output_directory(out: str | os.PathLike | None):
    """``out``, or a temporary directory that is removed afterwards."""
    if out is not None:
        yield Path(out)
        return
    with tempfile.TemporaryDirectory() as scratch:
        yield Path(scratch)


def toy_report(
    recipe: ToyRecipe,
    history: list[dict[str, Any]],
    *,
    plot: str | os.PathLike[str] | None = None,
    as_json: bool = False,
) -> str | dict[str, Any]:
    """A toy run of ``recipe`` (its ``history``, as :func:`~induction_probes.circuits.training.toy_training.train_toy`
    returns it) with its phases marked (a run whose four phases did not all appear is a result, and says which
    is missing)."""
    try:
        phases, missing = toy_phases(history), None
    except ValueError as error:
        phases, missing = None, str(error)
    figures = [toy_figure(recipe, history, phases, Path(plot))] if plot is not None else []
    last = history[-1]
    if as_json:
        return {
            "config": recipe.to_dict(),
            "phases": phases.to_json() if phases else {"missing": missing},
            "final": last,
        }
    lines = [
        toy_title_line(recipe),
        f"phase I ends at step {phases.end_of_I}, the plateau (II) at {phases.end_of_II} "
        f"(length {phases.plateau}), the emergence (III) at {phases.end_of_III}; IV after"
        if phases
        else f"the four phases did not all appear in {recipe.steps} steps: {missing}",
        f"final loss {last['loss']:.2e} (4-gram part {last['loss_4gram']:.2e}, "
        f"induction part {last['loss_induction']:.2e})",
        "final parameters: " + ", ".join(f"{name} {last[name]:.3f}" for name in PARAMETERS),
    ]
    return "\n".join(lines + figure_lines(figures))


def toy_title_line(recipe: ToyRecipe) -> str:
    line = (
        f"toy model, L={recipe.seq_len}, sigma={recipe.sigma:g}, alpha*={recipe.alpha_star:g}: {recipe.steps} "
        f"{recipe.optimizer} steps, lr {recipe.lr:g}"
    )
    line += ", ±1 tokens" if recipe.boolean else ""
    return line + (
        f", d = {recipe.d} (the high-dimensional toy; weights: identity components tr(W)/d)" if recipe.d > 1 else ""
    )


def toy_figure(recipe: ToyRecipe, history: list[dict], phases, directory: Path) -> Path:
    kind = ("_boolean" if recipe.boolean else "") + ("_adam" if recipe.optimizer == "adam" else "")
    kind += f"_d{recipe.d}" if recipe.d > 1 else ""
    title = f"toy model: L={recipe.seq_len}, σ={recipe.sigma:g}, α*={recipe.alpha_star:g}, {recipe.optimizer}"
    title += (", ±1 tokens" if recipe.boolean else "") + (f", d={recipe.d}" if recipe.d > 1 else "")
    title += "" if phases else " (the four phases did not all appear)"
    return plot_toy(history, phases, title, directory / f"toy_L{recipe.seq_len}_sigma{recipe.sigma:g}{kind}.png")


def toy_sweep_report(
    options: dict[str, Any] | None = None,
    *,
    out: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    plot: str | os.PathLike[str] | None = None,
    as_json: bool = False,
) -> str | dict[str, Any]:
    """The plateau sweep over L in {10, 20, 40} x σ in {1e-2, 1e-3, 1e-4}, its recipe the sweep's own with
    ``options`` (ToyRecipe fields other than the grid's seq_len and sigma) replaced, and the fit of the plateau's
    length against L·log(1/σ)."""
    options = dict(options or {})
    if grid := [name for name in ("seq_len", "sigma") if name in options]:
        raise BadInput(
            "the sweep runs its own grid of L and sigma: drop " + ", ".join(f"--{n.replace('_', '-')}" for n in grid)
        )
    with output_directory(out) as directory:
        rows = toy_sweep(directory, replace(SWEEP_RECIPE, **options), device=device)
    fit = fit_plateau(rows)
    figures = []
    if plot is not None:
        figures = [plot_plateau_sweep(rows, fit, Path(plot) / "toy_plateau_sweep.png")]
    if as_json:
        return {
            "rows": [{"seq_len": L, "sigma": s, "plateau": p} for L, s, p in rows],
            "fit": {"slope": fit[0], "intercept": fit[1], "r2": fit[2]},
        }
    table = format_table(["L", "sigma", "plateau (steps)"], [[L, f"{s:g}", p] for L, s, p in rows])
    summary = f"plateau ≈ {fit[0]:.2f}·L·log(1/σ) {fit[1]:+.0f} steps, R² = {fit[2]:.3f}"
    return "\n".join([table, summary] + figure_lines(figures))


def ih4_report(
    steps: int = 10_000,
    *,
    out: str | os.PathLike[str] | None = None,
    device: str = "cpu",
    plot: str | os.PathLike[str] | None = None,
    as_json: bool = False,
) -> str | list[dict[str, Any]]:
    """The rebuttal's capacity experiment: IH_4 (d = 2) needs several first-layer heads and D ≥ n·d."""
    with output_directory(out) as directory:
        rows = ih4_capacity(directory, steps, device=device)
    figures = []
    if plot is not None:
        figures = [plot_capacity_table(rows, Path(plot) / "ih4_capacity.png")]
    if as_json:
        return [{"model": label, "heads": h, "d_model": w, "relative_mse": e} for label, h, w, e in rows]
    table = format_table(["model", "heads", "D", "MSE / target variance"], [list(row) for row in rows])
    return "\n".join([f"IH_4, d = 2, L = 20, {steps} Adam steps each", table] + figure_lines(figures))
