"""``induction-probes info``: what a run or a language model is. A language model's info reads its folder's
config and files and needs no weights, so this module imports no torch: a run's info (which loads its checkpoint)
loads the report that reads it when it is asked for."""

from __future__ import annotations

import argparse

from induction_probes.circuits.lazy import lazy_module
from induction_probes.cli.common import Parser, add_output_options, add_run_argument, answer, language_model
from induction_probes.probes.report.lm_info import language_model_info

run_info_report = lazy_module("induction_probes.probes.report.info_views")  # loads torch: a run's info only


def info_parser(info: Parser) -> None:
    add_run_argument(info)
    info.add_argument("--step", type=int, help="checkpoint to load and verify (default: the last)")
    add_output_options(info, plot=False)
    info.set_defaults(handler=run_info, computes_nothing=True)  # a language model's info imports no torch


PARSERS = {"info": info_parser}


def run_info(args: argparse.Namespace) -> str:
    if (source := language_model(args)) is not None:
        return answer(language_model_info(source, step=args.step, as_json=args.json))
    return answer(run_info_report.info_report(args.run, args.step, as_json=args.json))
