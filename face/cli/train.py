"""``induction-probes train``: one sub-command per registered recipe with ``command=True``
(:mod:`~induction_probes.circuits.recipes.task_kinds`), its options generated from the recipe class."""

from __future__ import annotations

import argparse
import shlex

import induction_probes.circuits.training.train_loop as training
import induction_probes.probes.report.info_views as info_views
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.recipes.recipe import seeds_from
from induction_probes.circuits.recipes.task_kinds import recipe_entries, recipe_entry
from induction_probes.circuits.training.interrupts import TrainingInterrupted
from induction_probes.cli.common import (
    PROG,
    Parser,
    add_config_options,
    add_device_option,
    add_subcommands,
    config_from_options,
    device_of,
    flag,
    path,
    seed,
    typed_options,
)


def train_parser(train: Parser) -> None:
    recipes = add_subcommands(train, "recipe")
    for entry in recipe_entries(command=True):
        recipe_class = entry.recipe
        description = (recipe_class.__doc__ or "").split("\n\n")[0]
        parser = recipes.add_parser(recipe_class.name, help=entry.help or description, description=description)
        add_config_options(parser, recipe_class)
        parser.add_argument("--out", type=path, required=True, help="run directory to create (or continue)")
        parser.add_argument("--seed", type=seed, help="sets the model, data and eval seeds to S, S+1, S+2")
        parser.add_argument("--resume", action="store_true", help="continue the run in --out (no other option needed)")
        parser.add_argument("--stop-after", type=int, help="stop at this step; continue later with --resume")
        add_device_option(parser)
        parser.set_defaults(handler=run_train)


PARSERS = {"train": train_parser}


def run_train(args: argparse.Namespace) -> str:
    recipe = recipe_of(args)  # None with --resume: the saved recipe, checked against the options
    options = {"resume": args.resume, "stop_after": args.stop_after, "device": device_of(args)}
    try:
        run = training.train_run(recipe, args.out, **options)
    except TrainingInterrupted as interrupt:  # main prints this line and exits 130
        again = shlex.join([PROG, "train", args.recipe, "--out", str(args.out), "--resume"])
        raise KeyboardInterrupt(
            f"interrupted at step {interrupt.step}, which is saved: continue with {again}"
        ) from None
    return info_views.info_text(run)


def recipe_of(args: argparse.Namespace):
    """The recipe the options describe; with --resume, a check that none was given and that the run in --out
    is of this recipe (None: the saved one is continued)."""
    recipe_class = recipe_entry(args.recipe).recipe
    typed = typed_options(args, recipe_class)
    if not args.resume:
        seeds = seeds_from(args.seed, recipe_class) if args.seed is not None else {}
        return config_from_options(recipe_class, seeds | typed)
    ignored = [flag(name) for name in typed] + (["--seed"] if args.seed is not None else [])
    if ignored:
        raise BadInput(f"--resume continues the recipe saved in the run; drop {', '.join(ignored)}")
    saved = training.saved_recipe(args.out)
    if saved.name != recipe_class.name:
        raise BadInput(f"{args.out} is a {saved.name} run: continue it with 'train {saved.name} --resume'")
    return None
