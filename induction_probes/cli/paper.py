"""``induction-probes paper --out DIR``: both papers' figures redrawn from the shipped runs and results, on one
offline page (``DIR/index.html``, figures in ``DIR/figures/``)."""

from __future__ import annotations

import argparse

from induction_probes.circuits.lazy import lazy_module
from induction_probes.cli.common import path

# what the handlers call, loaded once a command runs: parsing (and --help) imports no torch
paper_build = lazy_module("induction_probes.probes.paper.build")


def register(commands) -> None:
    paper = commands.add_parser("paper", help="redraw both papers' figures from the shipped files, on one offline page")
    paper.add_argument(
        "--out",
        type=path,
        required=True,
        metavar="DIR",
        help="write DIR/index.html and DIR/figures/ (DIR may not be a link or a file)",
    )
    paper.set_defaults(handler=run_paper)


def run_paper(args: argparse.Namespace) -> str:
    return paper_build.write_paper(args.out).summary()
