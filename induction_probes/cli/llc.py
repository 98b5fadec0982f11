"""``induction-probes llc``: parses, then calls :func:`induction_probes.probes.report.llc.llc_report`, which
estimates the local learning coefficient of a run's checkpoints with its calibration."""

from __future__ import annotations

import argparse

from induction_probes.circuits.common.defaults import LLC_CHECKPOINTS, LLC_SEQS, PROBE_SEED
from induction_probes.cli.common import (
    add_device_option,
    add_output_options,
    add_run_argument,
    answer,
    count,
    device_of,
    seed,
)

RULE = "(default: the estimator's rule, see docs/learning-coefficient.md)"


def register(commands) -> None:
    llc = commands.add_parser("llc", help="the local learning coefficient over training (calibrated SGLD estimator)")
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
    llc.add_argument("--lr", type=float, help=f"SGLD step size {RULE}")
    llc.add_argument("--localization", type=float, help=f"pull towards the checkpoint, gamma {RULE}")
    llc.add_argument("--n-beta", type=float, help=f"inverse temperature n*beta {RULE}")
    llc.add_argument("--chains", type=int, help="SGLD chains (default 4)")
    llc.add_argument("--draws", type=int, help=f"draws per chain after the burn-in {RULE}")
    llc.add_argument("--burn-in", type=int, help=f"SGLD steps per chain before the draws {RULE}")
    llc.add_argument("--batch-size", type=int, help="sequences per SGLD step (default min(n, 256))")
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
    add_device_option(llc)
    add_output_options(llc)
    llc.set_defaults(handler=run_llc)


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
    from induction_probes.probes.report.llc import OVERRIDES, llc_report
    from induction_probes.probes.report.llc_heads import per_head_report

    if args.blocks is not None and not args.per_head:
        raise ValueError("--blocks names the blocks of --per-head: give --per-head too")
    settings = {name: getattr(args, name) for name in OVERRIDES}
    where = {"steps": args.steps, "checkpoints": args.checkpoints, "n_seqs": args.n_seqs, "seed": args.seed}
    options = {"device": device_of(args), "plot": args.plot, "as_json": args.json}
    if args.per_head:
        return answer(per_head_report(args.run, blocks=args.blocks, **where, **options, **settings))
    return answer(llc_report(args.run, **where, **options, **settings))
