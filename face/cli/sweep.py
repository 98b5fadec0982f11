"""``induction-probes sweep`` (many runs from an experiment spec) and ``summarize`` (their aggregate): they
parse, then call :mod:`induction_probes.probes.report.sweeps`."""

from __future__ import annotations

import argparse

import induction_probes.probes.report.sweeps as sweep_reports
from induction_probes.cli.common import Parser, add_device_option, add_output_options, answer, count, path


def sweep_parser(sweep: Parser) -> None:
    sweep.description = (
        "Train every cell of a spec into DIR/<condition>/seed-<S>; rerun the same command to "
        "continue an interrupted sweep (finished cells are skipped, interrupted ones resumed). docs/sweeps.md "
        "says what a spec holds and how cells are placed."
    )
    sweep.add_argument("spec", type=path, help="experiment spec (TOML; see docs/sweeps.md)")
    sweep.add_argument("--out", type=path, required=True, help="sweep directory (new, empty, or this spec's)")
    sweep.add_argument("--workers", type=int, default=1, help="cells trained at once (default 1)")
    sweep.add_argument("--backend", choices=("local", "ray"), default="local", help="local pool (default) or Ray")
    sweep.add_argument("--address", help="with --backend ray: a running cluster's (default: a local Ray)")
    add_device_option(sweep)
    sweep.add_argument("--gpus-per-cell", type=float, default=0.0, metavar="F", help="GPUs per cell (docs/devices.md)")
    # the sweep checks --device itself: against this machine, or by name only for a remote Ray cluster, whose
    # nodes have the GPUs (docs/devices.md)
    sweep.set_defaults(handler=run_sweep_command, checks_its_device=True)


def summarize_parser(summarize: Parser) -> None:
    summarize.description = (
        "The summary of a sweep directory, or of a summary.json recomputed from its per-seed records (docs/sweeps.md)."
    )
    summarize.add_argument("sweep_dir", type=path, metavar="DIR", help="a sweep directory, or a summary.json")
    summarize.add_argument(
        "--count", metavar="PRIOR", help="x-axis: sequences of this prior only (default: the spec's)"
    )
    summarize.add_argument(
        "--probe-seqs", type=count, default=500, help="fresh sequences of the final probes and --by-prior (default 500)"
    )
    summarize.add_argument(
        "--by-prior", metavar="PRIORS", default="", help="also each final checkpoint's loss and KL on these priors"
    )
    add_output_options(summarize)
    summarize.set_defaults(handler=run_summarize)


PARSERS = {"sweep": sweep_parser, "summarize": summarize_parser}


def run_sweep_command(args: argparse.Namespace) -> str:
    options = {"workers": args.workers, "backend": args.backend, "address": args.address}
    device = getattr(args, "device", None)  # --device is left out of the namespace unless given
    return sweep_reports.sweep_report(args.spec, args.out, device=device, gpus_per_cell=args.gpus_per_cell, **options)


def run_summarize(args: argparse.Namespace) -> str:
    options = {"count": args.count, "probe_seqs": args.probe_seqs, "by_prior": args.by_prior}
    return answer(sweep_reports.summary_report(args.sweep_dir, plot=args.plot, as_json=args.json, **options))
