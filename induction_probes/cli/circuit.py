"""``induction-probes circuit RUN``: path patching of every edge, the circuit and its faithfulness, at one checkpoint
or over training (:mod:`induction_probes.probes.report.circuit_views`)."""

from __future__ import annotations

import argparse

import induction_probes.probes.report.circuit_views as circuit_views
from induction_probes.circuits.defaults import CIRCUIT_SEQS, PROBE_SEED
from induction_probes.cli.common import (
    Parser,
    add_device_option,
    add_output_options,
    add_run_argument,
    answer,
    count,
    device_of,
    seed,
)
from induction_probes.probes.lm.options import share


def circuit_parser(circuit: Parser) -> None:
    add_run_argument(circuit)
    circuit.add_argument("--step", type=int, help="checkpoint step (default: the last)")
    circuit.add_argument("--all-steps", action="store_true", help="every checkpoint: the edges over training")
    circuit.add_argument(
        "--n-seqs", type=count, default=CIRCUIT_SEQS, help="fresh sequences patched (default %(default)s)"
    )
    circuit.add_argument("--seed", type=seed, default=PROBE_SEED, help="seed of those sequences (default %(default)s)")
    circuit.add_argument(
        "--threshold", type=share, default=0.1, help="share of the gap an edge carries to be in the circuit (0.1)"
    )
    add_device_option(circuit)
    add_output_options(circuit)
    circuit.set_defaults(handler=run_circuit)


PARSERS = {"circuit": circuit_parser}


def run_circuit(args: argparse.Namespace) -> str:
    where = {"step": args.step, "all_steps": args.all_steps, "n_seqs": args.n_seqs, "seed": args.seed}
    options = {"threshold": args.threshold, "device": device_of(args), "plot": args.plot, "as_json": args.json}
    return answer(circuit_views.circuit_report(args.run, **where, **options))
