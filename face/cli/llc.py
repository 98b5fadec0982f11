"""``induction-probes llc``: parses, then calls :func:`induction_probes.probes.report.llc_views.llc_report`, which
estimates the local learning coefficient of a run's checkpoints with its calibration."""

from __future__ import annotations

import argparse

import induction_probes.probes.report.llc_heads as llc_heads_report
import induction_probes.probes.report.llc_views as llc_report
from induction_probes.circuits.defaults import LLC_CHECKPOINTS, LLC_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.cli.common import (
    Parser,
    add_config_options,
    add_device_option,
    add_output_options,
    add_run_argument,
    answer,
    count,
    device_of,
    seed,
    typed_options,
)
from induction_probes.probes.llc.overrides import LLCOverrides


def llc_parser(llc: Parser) -> None:
    add_run_argument(llc)
    llc.add_argument(
        "--checkpoints",
        type=int,
        default=LLC_CHECKPOINTS,
        help="checkpoints to estimate, spread evenly in log(sequences seen), step 0 included (default %(default)s)",
    )
    llc.add_argument(
        "--steps", type=step_list, help="comma-separated checkpoint steps to estimate instead of --checkpoints"
    )
    add_config_options(llc, LLCOverrides)
    llc.add_argument(
        "--n-seqs",
        type=count,
        default=LLC_SEQS,
        help="fresh sequences the sampler draws its batches from (default %(default)s)",
    )
    llc.add_argument(
        "--seed", type=seed, default=PROBE_SEED, help="seed of those sequences and of the sampler (default %(default)s)"
    )
    llc.add_argument("--per-head", action="store_true", help="each head's, the embedding's and unembedding's own LLC")
    llc.add_argument("--blocks", type=names, help="with --per-head: comma-separated blocks, e.g. L1H0,embed")
    draws = "with --per-head: draws of the sequences (seeds --seed, --seed + 1, ...), --chains chains on each"
    llc.add_argument("--data-draws", type=count, default=1, help=f"{draws} (default %(default)s)")
    llc.add_argument(
        "--verbose", action="store_true", help="the text adds every estimate's diagnostics and every calibration case"
    )
    add_device_option(llc)
    add_output_options(llc)
    llc.set_defaults(handler=run_llc)


PARSERS = {"llc": llc_parser}


def step_list(text: str) -> list[int]:
    try:
        steps = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--steps takes comma-separated integers, got {text[:200]!r}") from None
    if not steps or steps[0] < 0:
        raise argparse.ArgumentTypeError(f"--steps takes steps >= 0, got {text[:200]!r}")
    return steps


def names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def run_llc(args: argparse.Namespace) -> str:
    if args.blocks is not None and not args.per_head:
        raise BadInput("--blocks names the blocks of --per-head: give --per-head too")
    if args.data_draws != 1 and not args.per_head:
        raise BadInput("--data-draws is a setting of --per-head: give --per-head too")
    settings = typed_options(args, LLCOverrides)
    where = {"steps": args.steps, "checkpoints": args.checkpoints, "n_seqs": args.n_seqs, "seed": args.seed}
    options = {"device": device_of(args), "plot": args.plot, "as_json": args.json, "verbose": args.verbose}
    if args.per_head:
        heads = {"blocks": args.blocks, "data_draws": args.data_draws}
        return answer(llc_heads_report.per_head_report(args.run, **heads, **where, **options, **settings))
    return answer(llc_report.llc_report(args.run, **where, **options, **settings))
