"""``induction-probes verify``: hand-made constructions against their limits, and trained runs against them."""

from __future__ import annotations

import argparse

import induction_probes.probes.report.verify_views as verify_reports
from induction_probes.circuits.errors import BadInput
from induction_probes.cli.common import (
    Parser,
    add_device_option,
    add_output_options,
    add_subcommands,
    answer,
    count,
    device_of,
    run_name,
    seed,
)


def verify_parser(verify: Parser) -> None:
    constructions = add_subcommands(verify, "construction")
    prop21 = constructions.add_parser("prop21", help="Edelman et al.'s Proposition 2.1 (statistical induction)")
    prop21.add_argument("--k", type=int, help="number of states (>= 2; with --against, the run's)")
    prop21.add_argument("--c", type=float, default=100.0, help="the construction's scale (> 0, default 100)")
    prop21.add_argument("--seq-len", type=int, default=100, help="tokens per sequence (default 100)")
    prop21.add_argument("--n-seqs", type=count, default=500, help="ICL-MC sequences (default 500)")
    prop21.add_argument("--seed", type=seed, default=0, help="seed of those sequences")
    prop21.add_argument(
        "--against", type=run_name, help="compare a trained run (directory or shipped name) with the construction"
    )
    prop21.add_argument("--step", type=int, help="with --against: checkpoint step (default: the last)")
    prop21.add_argument("--all-steps", action="store_true", help="with --against: spread-out steps of the run")
    add_output_options(prop21)
    add_device_option(prop21)
    prop21.set_defaults(handler=run_verify_prop21)

    wang = constructions.add_parser("wang-ih2", help="Wang et al.'s Theorem 4.1 (vanilla induction head, ALiBi)")
    wang.add_argument("--beta", type=float, default=20.0, help="ALiBi slope of layer 0 (> 0, default 20)")
    wang.add_argument("--d", type=int, default=2, help="token dimension (default 2)")
    wang.add_argument("--seq-len", type=int, default=20, help="L (>= 4, default 20)")
    add_fresh_sequence_options(wang)
    wang.set_defaults(handler=run_verify_wang_ih2)

    wang_n = constructions.add_parser("wang-ihn", help="Wang et al.'s Theorem 4.3 (IH_n from H first-layer heads)")
    wang_n.add_argument("--n", type=int, required=True, help="n-gram order (>= 2)")
    wang_n.add_argument("--heads", type=int, help="first-layer heads H (>= n(n-1)/2; default that + 3(n-1))")
    wang_n.add_argument("--d", type=int, default=1, help="token dimension (default 1)")
    wang_n.add_argument("--seq-len", type=int, default=20, help="L (>= n + 2, default 20)")
    add_fresh_sequence_options(wang_n)
    wang_n.set_defaults(handler=run_verify_wang_ihn)


PARSERS = {"verify": verify_parser}


def add_fresh_sequence_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n-seqs", type=count, default=1000, help="fresh sequences (default 1000)")
    parser.add_argument("--seed", type=seed, default=0, help="seed of those sequences")
    add_output_options(parser, plot=False)
    add_device_option(parser)


def run_verify_prop21(args: argparse.Namespace) -> str:
    """Proposition 2.1 against its exact limit, the error as c grows, and its probe scores; with
    --against, a trained run against the construction."""
    options = {"device": device_of(args), "plot": args.plot, "as_json": args.json}
    if args.against is not None:
        where = {"all_steps": args.all_steps} | options
        return answer(
            verify_reports.prop21_comparison(args.against, args.step, args.n_seqs, args.seed, args.c, args.k, **where)
        )
    if args.k is None:
        raise BadInput("--k is required (or --against RUN, whose k is used)")
    return answer(verify_reports.prop21_report(args.k, args.c, args.seq_len, args.n_seqs, args.seed, **options))


def run_verify_wang_ih2(args: argparse.Namespace) -> str:
    """Wang et al.'s Theorem 4.1 against IH_2 on fresh Gaussian sequences, over a grid of β."""
    options = {"device": device_of(args), "as_json": args.json}
    return answer(verify_reports.wang_ih2_report(args.d, args.beta, args.seq_len, args.n_seqs, args.seed, **options))


def run_verify_wang_ihn(args: argparse.Namespace) -> str:
    """Wang et al.'s Theorem 4.3 against IH_n over a grid of first-layer head counts."""
    options = {"device": device_of(args), "as_json": args.json}
    return answer(
        verify_reports.wang_ihn_report(args.d, args.n, args.heads, args.seq_len, args.n_seqs, args.seed, **options)
    )
