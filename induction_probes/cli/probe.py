"""``induction-probes probe`` and ``ablate``: attention and behaviour of a checkpoint or a whole run, and
what in-context learning loses when heads are ablated. The text, JSON and figures are the report's
(:mod:`induction_probes.probes.report.views`: chosen by the run's task)."""

from __future__ import annotations

import argparse

from induction_probes.cli.common import (
    add_language_model_options,
    add_probe_set_options,
    add_run_argument,
    answer,
    device_of,
    language_model,
    language_model_options,
)
from induction_probes.probes.report.views import ablation_report, probe_report

# Loaded to build the parser, before a command is chosen: the handlers below import the library they call
# (torch, matplotlib) inside themselves, so that --help and usage errors load neither (tests/unit/test_structure.py).


def register(commands) -> None:
    probe = commands.add_parser("probe", help="attention and behaviour probes of a checkpoint or a whole run")
    add_run_argument(probe)
    probe.add_argument("--step", type=int, help="checkpoint step (default: the last)")
    probe.add_argument("--all-steps", action="store_true", help="probe every checkpoint of the run")
    add_probe_set_options(probe)
    add_language_model_options(probe)
    probe.set_defaults(handler=run_probe)

    ablate = commands.add_parser("ablate", help="ablate heads and measure what in-context learning loses")
    add_run_argument(ablate)
    ablate.add_argument("--step", type=int, help="checkpoint step (default: the last)")
    ablate.add_argument("--mode", choices=["zero", "mean", "resample"], default="zero", help="default zero")
    ablate.add_argument("--heads", help="heads ablated together, as L.H,L.H (default: each head alone)")
    add_probe_set_options(ablate)
    add_language_model_options(ablate, ablate=True)
    ablate.set_defaults(handler=run_ablate)


def open_hooked_run(name: str):
    """The run, unless it holds no attention heads to probe (the toy model's six parameters)."""
    from induction_probes.circuits.runs.reader import Run

    run = Run.open(name)
    if run.kind == "toy":
        raise ValueError(f"run {run.path.name} is a toy-model run: six parameters, no attention heads to probe")
    return run


def run_probe(args: argparse.Namespace) -> str:
    """Attention and behaviour probes of one checkpoint (default the last) or of every checkpoint."""
    if (source := language_model(args)) is not None and args.task == "markov":
        from induction_probes.probes.report.lm_markov import markov_lm_report

        options = {"n_seqs": args.n_seqs, "seed": args.seed, "device": device_of(args), "plot": args.plot}
        return answer(
            markov_lm_report(source, k=args.k or 3, seq_len=args.seq_len, step=args.step, all_steps=args.all_steps,
                             as_json=args.json, **options)
        )  # fmt: skip
    if source is not None:
        from induction_probes.probes.report.lm import probe_language_model

        options = language_model_options(args) | {"text": args.text}
        return answer(probe_language_model(source, step=args.step, all_steps=args.all_steps, **options))
    run = open_hooked_run(args.run)
    if args.all_steps and args.step is not None:
        raise ValueError("give --step or --all-steps, not both")
    steps = run.steps if args.all_steps else [run.entry(args.step)["step"]]
    options = {"device": device_of(args), "plot": args.plot, "as_json": args.json}
    return answer(probe_report(run, steps, args.n_seqs, args.seed, **options))


def parse_language_model_heads(text: str | None) -> list[tuple[int, int]] | None:
    """--heads for a language model, checked against its shape once it is booted."""
    if text is None:
        return None
    from induction_probes.probes.ablation import parse_head_list

    return parse_head_list(text)


def run_ablate(args: argparse.Namespace) -> str:
    """Each head alone, or the --heads given together, ablated in the checkpoint at --step."""
    if (source := language_model(args)) is not None:
        from induction_probes.probes.report.lm import ablate_language_model

        heads = parse_language_model_heads(args.heads)
        return answer(
            ablate_language_model(source, step=args.step, heads=heads, mode=args.mode, **language_model_options(args))
        )
    run = open_hooked_run(args.run)
    head_sets = None
    if args.heads:
        from induction_probes.probes.ablation import heads_in_layer, parse_heads

        cfg = run.model_config
        head_sets = [parse_heads(args.heads, cfg.n_layers, lambda layer: heads_in_layer(cfg, layer))]
    options = {"device": device_of(args), "plot": args.plot, "as_json": args.json}
    return answer(ablation_report(run, head_sets, args.step, args.n_seqs, args.seed, args.mode, **options))
