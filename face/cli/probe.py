"""``induction-probes probe`` and ``ablate``: attention and behaviour of a checkpoint or a whole run, and
what in-context learning loses when heads are ablated. The text, JSON and figures are the report's
(:mod:`induction_probes.probes.report.run_views`: chosen by the run's task)."""

from __future__ import annotations

import argparse

import induction_probes.probes.report.lm_ablation as lm_ablation_report
import induction_probes.probes.report.lm_markov as lm_markov_report
import induction_probes.probes.report.lm_views as lm_report
from induction_probes.circuits.errors import BadInput
from induction_probes.cli.common import (
    Parser,
    add_language_model_options,
    add_probe_set_options,
    add_run_argument,
    answer,
    device_of,
    language_model,
    language_model_options,
    probe_set_size,
)
from induction_probes.probes.report.run_views import ablation_report, probe_report


def probe_parser(probe: Parser) -> None:
    add_run_argument(probe)
    probe.add_argument("--step", type=int, help="checkpoint step (default: the last)")
    probe.add_argument("--all-steps", action="store_true", help="probe every checkpoint of the run")
    add_probe_set_options(probe)
    add_language_model_options(probe)
    probe.set_defaults(handler=run_probe)


def ablate_parser(ablate: Parser) -> None:
    add_run_argument(ablate)
    ablate.add_argument("--step", type=int, help="checkpoint step (default: the last)")
    ablate.add_argument("--mode", choices=["zero", "mean", "resample"], default="zero", help="default zero")
    ablate.add_argument("--heads", help="heads ablated together, as L.H,L.H or L0H0,L1H0 (default: each head alone)")
    ablate.add_argument("--all-steps", action="store_true", help="ablate every head at every checkpoint of a series")
    add_probe_set_options(ablate)
    add_language_model_options(ablate, ablate=True)
    ablate.set_defaults(handler=run_ablate)


PARSERS = {"probe": probe_parser, "ablate": ablate_parser}


def run_probe(args: argparse.Namespace) -> str:
    """Attention and behaviour probes of one checkpoint (default the last) or of every checkpoint."""
    if (source := language_model(args)) is not None and getattr(args, "task", None) == "markov":
        options = language_model_options(args)
        return answer(lm_markov_report.markov_lm_report(source, step=args.step, all_steps=args.all_steps, **options))
    if source is not None:
        options = language_model_options(args)
        return answer(lm_report.probe_language_model(source, step=args.step, all_steps=args.all_steps, **options))
    if args.all_steps and args.step is not None:
        raise BadInput("give --step or --all-steps, not both")
    steps = "all" if args.all_steps else None if args.step is None else [args.step]
    options = {"device": device_of(args), "plot": args.plot, "as_json": args.json}
    return answer(probe_report(args.run, steps, probe_set_size(args, False), args.seed, **options))


def run_ablate(args: argparse.Namespace) -> str:
    """Each head alone, or the --heads given together, ablated in the checkpoint at --step, or with --all-steps
    every head at every checkpoint."""
    if (source := language_model(args)) is not None:
        options = language_model_options(args) | {"step": args.step, "heads": args.heads, "mode": args.mode}
        return answer(lm_ablation_report.ablate_language_model(source, all_steps=args.all_steps, **options))
    options = {"device": device_of(args), "plot": args.plot, "as_json": args.json}
    n_seqs = probe_set_size(args, False)
    options |= {"all_steps": args.all_steps}
    return answer(ablation_report(args.run, args.heads, args.step, n_seqs, args.seed, args.mode, **options))
