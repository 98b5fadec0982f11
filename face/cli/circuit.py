"""``induction-probes circuit RUN_OR_MODEL_OR_SERIES``: path patching of every edge, the circuit and its
faithfulness, at one checkpoint or over training, of an ICL-MC run of ours
(:mod:`induction_probes.probes.report.circuit_views`) or a Hugging Face language model or ``step_N`` series
(:mod:`induction_probes.probes.report.lm_circuit_views`)."""

from __future__ import annotations

import argparse
from typing import Any

import induction_probes.probes.report.circuit_views as circuit_views
import induction_probes.probes.report.lm_circuit_views as lm_circuit_views
from induction_probes.circuits.defaults import CIRCUIT_SEQS, LM_CIRCUIT_SEQS, PROBE_SEED
from induction_probes.cli.common import (
    Parser,
    add_config_options,
    add_device_option,
    add_output_options,
    add_run_argument,
    answer,
    count,
    device_of,
    language_model,
    language_model_options,
    seed,
)
from induction_probes.probes.lm.options import CircuitOptions, share


def circuit_parser(circuit: Parser) -> None:
    add_run_argument(circuit)
    circuit.add_argument("--step", type=int, help="checkpoint step (default: the last)")
    circuit.add_argument("--all-steps", action="store_true", help="every checkpoint: the edges over training")
    seqs = f"fresh sequences patched (default {CIRCUIT_SEQS} for a run, {LM_CIRCUIT_SEQS} for a language model)"
    circuit.add_argument("--n-seqs", type=count, help=seqs)
    circuit.add_argument("--seed", type=seed, default=PROBE_SEED, help="seed of those sequences (default %(default)s)")
    share_help = "share of the gap an edge carries to be in the circuit (0.1)"
    # its own name: a language model's --threshold (probe's, ablate's) is an option a run refuses
    circuit.add_argument("--threshold", dest="edge_threshold", type=share, default=0.1, help=share_help)
    add_device_option(circuit)
    add_output_options(circuit)
    graph = "with --plot: the steps whose layered graph is drawn, as 0,606,4000 (default: the first with a gap, the "
    circuit.add_argument("--graph-steps", type=steps, metavar="S,S", help=graph + "formation, the last)")
    add_config_options(
        circuit.add_argument_group("language models (a Hugging Face model, cache name or series)"), CircuitOptions
    )
    circuit.set_defaults(handler=run_circuit)


PARSERS = {"circuit": circuit_parser}


def steps(text: str) -> list[int]:
    """The type of --graph-steps: checkpoint steps separated by commas."""
    parts = text.split(",")
    if not all(part.strip().isdigit() and len(part.strip()) <= 12 for part in parts):
        raise argparse.ArgumentTypeError(f"steps must look like 0,606,4000, got {text[:200]!r}")
    return [int(part) for part in parts]


def run_circuit(args: argparse.Namespace) -> str:
    where: dict[str, Any] = {"step": args.step, "all_steps": args.all_steps, "threshold": args.edge_threshold}
    where["graph_at"] = args.graph_steps
    if (source := language_model(args)) is not None:
        options = language_model_options(args)
        options["n_seqs"] = args.n_seqs or LM_CIRCUIT_SEQS
        return answer(lm_circuit_views.circuit_language_model(source, **where, **options))
    options = {"seed": args.seed, "device": device_of(args), "plot": args.plot, "as_json": args.json}
    return answer(circuit_views.circuit_report(args.run, **where, n_seqs=args.n_seqs or CIRCUIT_SEQS, **options))
