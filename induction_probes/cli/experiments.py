"""``induction-probes toy`` and ``experiment``: Wang et al.'s toy model and the experiments of several runs.
Each trains through a library function that writes standard run directories (into ``--out``, or a
temporary directory when none is given)."""

from __future__ import annotations

import argparse
import tempfile
from contextlib import contextmanager
from pathlib import Path

from induction_probes.circuits.recipes.gaussian import ToyRecipe
from induction_probes.cli.common import (
    add_config_options,
    add_device_option,
    add_output_options,
    add_subcommands,
    config_from_options,
    device_of,
    figure_lines,
    flag,
    format_table,
    json_text,
    path,
    typed_options,
)

# Loaded to build the parser, before a command is chosen: the handlers below import the library they call
# (torch, matplotlib) inside themselves, so that --help and usage errors load neither (tests/unit/test_structure.py).


def register(commands) -> None:
    toy = commands.add_parser("toy", help="Wang et al.'s toy model: four phases, and the plateau sweep")
    add_config_options(toy, ToyRecipe)
    toy.add_argument(
        "--sweep",
        action="store_true",
        help="plateau length over L in {10,20,40} x sigma in {1e-2,1e-3,1e-4} (--seq-len and --sigma "
        "are the grid's; the sweep's own defaults: --steps 6000, --n-seqs 2048)",
    )
    toy.add_argument("--out", type=path, help="write the run directory (one per cell with --sweep) here")
    add_output_options(toy)
    add_device_option(toy)
    toy.set_defaults(handler=run_toy)

    experiment = commands.add_parser("experiment", help="the rebuttal experiments that need several runs")
    experiments = add_subcommands(experiment, "experiment")
    ih4 = experiments.add_parser("ih4", help="IH_4: one head or D = 2d fails, enough heads and D = n·d succeed")
    ih4.add_argument("--steps", type=int, default=10_000, help="Adam steps per model (default 10000, ~8 min in all)")
    ih4.add_argument("--out", type=path, help="write the three run directories here")
    add_output_options(ih4)
    add_device_option(ih4)
    ih4.set_defaults(handler=run_experiment_ih4)


@contextmanager
def output_directory(out: Path | None):
    """``out``, or a temporary directory that is removed afterwards."""
    if out is not None:
        yield out
        return
    with tempfile.TemporaryDirectory() as scratch:
        yield Path(scratch)


def run_toy(args: argparse.Namespace) -> str:
    """One toy run with its phases marked, or the plateau sweep over L and σ."""
    if args.sweep:
        return run_toy_sweep(args)
    from induction_probes.circuits.models.toy import PARAMETERS, toy_phases
    from induction_probes.circuits.training.toy import train_toy

    recipe = config_from_options(ToyRecipe, typed_options(args, ToyRecipe))
    with output_directory(args.out) as out:
        history = train_toy(recipe, out / "toy" if args.out is None else out, device=device_of(args))
    try:
        phases, missing = toy_phases(history), None
    except ValueError as error:  # a finished run whose phases did not all appear is a result, not bad input
        phases, missing = None, str(error)
    figures = []
    if args.plot:
        from induction_probes.probes.figures.plots_toy import plot_toy

        kind = ("_boolean" if recipe.boolean else "") + ("_adam" if recipe.optimizer == "adam" else "")
        kind += f"_d{recipe.d}" if recipe.d > 1 else ""
        title = f"toy model: L={recipe.seq_len}, σ={recipe.sigma:g}, α*={recipe.alpha_star:g}, {recipe.optimizer}" + (
            ", ±1 tokens" if recipe.boolean else ""
        )
        title += f", d={recipe.d}" if recipe.d > 1 else ""
        title += "" if phases else " (the four phases did not all appear)"
        figures = [
            plot_toy(history, phases, title, args.plot / f"toy_L{recipe.seq_len}_sigma{recipe.sigma:g}{kind}.png")
        ]
    if args.json:
        phases_json = phases.to_json() if phases else {"missing": missing}
        return json_text({"config": recipe.to_dict(), "phases": phases_json, "final": history[-1]})
    last = history[-1]
    lines = [
        f"toy model, L={recipe.seq_len}, sigma={recipe.sigma:g}, alpha*={recipe.alpha_star:g}: {recipe.steps} "
        f"{recipe.optimizer} steps, lr {recipe.lr:g}"
        + (", ±1 tokens" if recipe.boolean else "")
        + (
            f", d = {recipe.d} (the high-dimensional toy; weights: identity components tr(W)/d)" if recipe.d > 1 else ""
        ),
        f"phase I ends at step {phases.end_of_I}, the plateau (II) at {phases.end_of_II} "
        f"(length {phases.plateau}), the emergence (III) at {phases.end_of_III}; IV after"
        if phases
        else f"the four phases did not all appear in {recipe.steps} steps: {missing}",
        f"final loss {last['loss']:.2e} (4-gram part {last['loss_4gram']:.2e}, "
        f"induction part {last['loss_induction']:.2e})",
        "final parameters: " + ", ".join(f"{name} {last[name]:.3f}" for name in PARAMETERS),
    ]
    return "\n".join(lines + figure_lines(figures))


def run_toy_sweep(args: argparse.Namespace) -> str:
    from dataclasses import replace

    from induction_probes.circuits.models.toy import fit_plateau
    from induction_probes.circuits.sweeps.experiments import SWEEP_RECIPE, toy_sweep

    options = typed_options(args, ToyRecipe)
    if {"seq_len", "sigma"} & options.keys():
        raise ValueError(
            "the sweep runs its own grid of L and sigma: drop "
            + ", ".join(flag(n) for n in ("seq_len", "sigma") if n in options)
        )
    with output_directory(args.out) as out:
        rows = toy_sweep(out, replace(SWEEP_RECIPE, **options), device=device_of(args))
    fit = fit_plateau(rows)
    figures = []
    if args.plot:
        from induction_probes.probes.figures.plots_toy import plot_plateau_sweep

        figures = [plot_plateau_sweep(rows, fit, args.plot / "toy_plateau_sweep.png")]
    if args.json:
        return json_text(
            {
                "rows": [{"seq_len": L, "sigma": s, "plateau": p} for L, s, p in rows],
                "fit": {"slope": fit[0], "intercept": fit[1], "r2": fit[2]},
            }
        )
    table = format_table(["L", "sigma", "plateau (steps)"], [[L, f"{s:g}", p] for L, s, p in rows])
    summary = f"plateau ≈ {fit[0]:.2f}·L·log(1/σ) {fit[1]:+.0f} steps, R² = {fit[2]:.3f}"
    return "\n".join([table, summary] + figure_lines(figures))


def run_experiment_ih4(args: argparse.Namespace) -> str:
    """The rebuttal's capacity experiment: IH_4 (d = 2) needs several first-layer heads and D ≥ n·d."""
    from induction_probes.circuits.sweeps.experiments import ih4_capacity

    with output_directory(args.out) as out:
        rows = ih4_capacity(out, args.steps, device=device_of(args))
    figures = []
    if args.plot:
        from induction_probes.probes.figures.plots_toy import plot_capacity_table

        figures = [plot_capacity_table(rows, args.plot / "ih4_capacity.png")]
    if args.json:
        return json_text([{"model": label, "heads": h, "d_model": w, "relative_mse": e} for label, h, w, e in rows])
    table = format_table(["model", "heads", "D", "MSE / target variance"], [list(row) for row in rows])
    return "\n".join([f"IH_4, d = 2, L = 20, {args.steps} Adam steps each", table] + figure_lines(figures))
