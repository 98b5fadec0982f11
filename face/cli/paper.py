"""``induction-probes paper --out DIR``: both papers' figures redrawn from the shipped runs and results, on one
offline page (``DIR/index.html``, figures in ``DIR/figures/``)."""

from __future__ import annotations

import argparse

import induction_probes.probes.paper.build as paper_build
from induction_probes.cli.common import Parser, path


def paper_parser(paper: Parser) -> None:
    paper.add_argument(
        "--out",
        type=path,
        required=True,
        metavar="DIR",
        help="write DIR/index.html and DIR/figures/ (DIR may not be a link or a file)",
    )
    paper.set_defaults(handler=run_paper)


PARSERS = {"paper": paper_parser}


def run_paper(args: argparse.Namespace) -> str:
    return paper_build.write_paper(args.out).summary()
