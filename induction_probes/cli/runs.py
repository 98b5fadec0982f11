"""``induction-probes info`` and ``report``: what a run is, and its phases over training."""

from __future__ import annotations

import argparse

import induction_probes.probes.report.views as views
from induction_probes.circuits.lazy import lazy_module
from induction_probes.cli.common import (
    add_device_option,
    add_output_options,
    add_run_argument,
    answer,
    device_of,
    language_model,
    path,
)
from induction_probes.probes.report.lm_info import language_model_info

# what the handlers call, loaded once a command runs: parsing (and --help) imports no torch
info_views = lazy_module("induction_probes.probes.report.info")


def register(commands) -> None:
    info = commands.add_parser("info", help="task, recipe, architecture, checkpoint steps and final metrics of a run")
    add_run_argument(info)
    info.add_argument("--step", type=int, help="checkpoint to load and verify (default: the last)")
    add_output_options(info, plot=False)
    info.set_defaults(handler=run_info, computes_nothing=True)  # a language model's info imports no torch

    report = commands.add_parser("report", help="loss against the strategies over an ICL-MC run, phases, figures")
    add_run_argument(report)
    add_output_options(report)
    report.add_argument(
        "--html",
        type=path,
        metavar="DIR",
        help="write RUN_report.html into DIR: phases, probes, ablations and the construction on one "
        "offline page (about half a minute)",
    )
    add_device_option(report)
    report.set_defaults(handler=run_report)


def run_info(args: argparse.Namespace) -> str:
    if (source := language_model(args)) is not None:
        return answer(language_model_info(source, step=args.step, as_json=args.json))

    return answer(info_views.info_report(args.run, args.step, as_json=args.json))


def run_report(args: argparse.Namespace) -> str:
    """The main job: a run's loss against the strategies over training, its phases and figures, and with --html
    the whole argument on one page (the report's: :func:`induction_probes.probes.report.views.run_report`)."""
    options = {"device": device_of(args), "plot": args.plot, "as_json": args.json, "html": args.html}
    return answer(views.run_report(args.run, **options))
