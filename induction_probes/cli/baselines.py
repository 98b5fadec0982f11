"""``induction-probes baselines``: how well each in-context strategy does on a task."""

from __future__ import annotations

import argparse

from induction_probes.circuits.tasks.markov.task import MarkovTask
from induction_probes.cli.common import (
    add_config_options,
    add_output_options,
    add_subcommands,
    config_from_options,
    count,
    format_table,
    json_text,
    seed,
    typed_options,
)


def register(commands) -> None:
    baselines = commands.add_parser("baselines", help="in-context strategy baselines of a task")
    tasks = add_subcommands(baselines, "task")
    markov = tasks.add_parser("markov", help="ICL-MC: last-token KL and mean CE of each strategy")
    add_config_options(markov, MarkovTask)
    markov.add_argument("--n-seqs", type=count, default=20_000, help="sequences to average over (default 20000)")
    markov.add_argument("--seed", type=seed, default=0, help="seed of the sampled chains (default 0)")
    add_output_options(markov, plot=False)
    markov.set_defaults(handler=run_baselines)


def run_baselines(args: argparse.Namespace) -> str:
    from induction_probes.circuits.tasks.markov.strategies import strategy_baselines

    task = config_from_options(MarkovTask, typed_options(args, MarkovTask))
    result = strategy_baselines(task, n_seqs=args.n_seqs, seed=args.seed)
    if args.json:
        described = {"task": task.name} | {key: value for key, value in task.to_json().items() if key != "name"}
        return json_text(described | {key: value for key, value in vars(result).items() if key != "task"})
    rows = [["true", "-", result.mean_ce["true"]]]
    rows += [[name, kl, result.mean_ce[name]] for name, kl in result.last_token_kl.items()]
    chains = task.eval_task().describe().removeprefix("ICL-MC ")
    title = f"ICL-MC strategy baselines: {chains}, {result.n_seqs} sequences, seed {result.seed}"
    table = format_table(["strategy", "last-token KL(true||s)", "mean CE over positions"], rows)
    return f"{title}\n{table}"
