"""``induction-probes baselines``: how well each in-context strategy does on a task."""

from __future__ import annotations

import argparse

import induction_probes.probes.report.baseline_views as baselines_views
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.cli.common import (
    Parser,
    add_config_options,
    add_output_options,
    add_subcommands,
    answer,
    config_from_options,
    count,
    seed,
    typed_options,
)


def baselines_parser(baselines: Parser) -> None:
    tasks = add_subcommands(baselines, "task")
    markov = tasks.add_parser("markov", help="ICL-MC: last-token KL and mean CE of each strategy")
    add_config_options(markov, MarkovTask)
    markov.add_argument("--n-seqs", type=count, default=20_000, help="sequences to average over (default 20000)")
    markov.add_argument("--seed", type=seed, default=0, help="seed of the sampled chains (default 0)")
    add_output_options(markov, plot=False)
    markov.set_defaults(handler=run_baselines)


PARSERS = {"baselines": baselines_parser}


def run_baselines(args: argparse.Namespace) -> str:
    task = config_from_options(MarkovTask, typed_options(args, MarkovTask))
    return answer(baselines_views.baselines_report(task, args.n_seqs, args.seed, as_json=args.json))
