"""``induction-probes report``: a run's loss against the strategies over training, its phases and figures."""

from __future__ import annotations

import argparse

from induction_probes.cli.common import (
    Parser,
    add_device_option,
    add_output_options,
    add_run_argument,
    answer,
    device_of,
    path,
)
from induction_probes.probes.report.run_views import run_report


def report_parser(report: Parser) -> None:
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
    report.set_defaults(handler=run_report_command)


PARSERS = {"report": report_parser}


def run_report_command(args: argparse.Namespace) -> str:
    """The main job: a run's loss against the strategies over training, its phases and figures, and with --html
    the whole argument on one page (the report's: :func:`induction_probes.probes.report.run_views.run_report`)."""
    options = {"device": device_of(args), "plot": args.plot, "as_json": args.json, "html": args.html}
    return answer(run_report(args.run, **options))
