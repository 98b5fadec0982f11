"""``induction-probes toy`` and ``experiment``: Wang et al.'s toy model and the experiments of several runs.
They parse, then call :mod:`induction_probes.probes.report.toy_views`."""

from __future__ import annotations

import argparse

import induction_probes.circuits.training.toy_training as toy_training
import induction_probes.probes.report.toy_views as toy_report
from induction_probes.circuits.recipes.gaussian_recipes import ToyRecipe
from induction_probes.cli.common import (
    Parser,
    add_config_options,
    add_device_option,
    add_output_options,
    add_subcommands,
    answer,
    config_from_options,
    device_of,
    path,
    typed_options,
)


def toy_parser(toy: Parser) -> None:
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


def experiment_parser(experiment: Parser) -> None:
    experiments = add_subcommands(experiment, "experiment")
    ih4 = experiments.add_parser("ih4", help="IH_4: one head or D = 2d fails, enough heads and D = n·d succeed")
    ih4.add_argument("--steps", type=int, default=10_000, help="Adam steps per model (default 10000, ~8 min in all)")
    ih4.add_argument("--out", type=path, help="write the three run directories here")
    add_output_options(ih4)
    add_device_option(ih4)
    ih4.set_defaults(handler=run_experiment_ih4)


PARSERS = {"toy": toy_parser, "experiment": experiment_parser}


def run_toy(args: argparse.Namespace) -> str:
    """One toy run with its phases marked, or the plateau sweep over L and σ."""
    given, device, shown = typed_options(args, ToyRecipe), device_of(args), {"plot": args.plot, "as_json": args.json}
    if args.sweep:
        return answer(toy_report.toy_sweep_report(given, out=args.out, device=device, **shown))
    recipe = config_from_options(ToyRecipe, given)
    with toy_report.output_directory(args.out) as out:
        history = toy_training.train_toy(recipe, out / "toy" if args.out is None else out, device=device)
    return answer(toy_report.toy_report(recipe, history, **shown))


def run_experiment_ih4(args: argparse.Namespace) -> str:
    options = {"out": args.out, "device": device_of(args), "plot": args.plot, "as_json": args.json}
    return answer(toy_report.ih4_report(args.steps, **options))
