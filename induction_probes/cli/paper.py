"""``induction-probes paper --out DIR``: both papers' figures redrawn from the shipped runs and results, on one
offline page (``DIR/index.html``, figures in ``DIR/figures/``)."""

from __future__ import annotations

import argparse

from induction_probes.cli.common import path


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
    from induction_probes.probes.paper.build import write_paper
    from induction_probes.probes.paper.page import counts_text

    paper = write_paper(args.out)
    return (
        f"page: {paper.page}\n{len(paper.figures)} figures, {len(paper.entries)} entries "
        f"({counts_text(paper.entries)}) in {paper.seconds:.0f} s"
    )
