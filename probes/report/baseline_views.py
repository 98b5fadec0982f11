"""What ``induction-probes baselines`` shows: how well each in-context strategy does on ICL-MC chains."""

from __future__ import annotations

from typing import Any

from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.tasks.markov.strategies import strategy_baselines
from induction_probes.probes.report.tables import format_table


def baselines_report(task: MarkovTask, n_seqs: int, seed: int, *, as_json: bool = False) -> str | dict[str, Any]:
    """Each strategy's last-token KL to the truth and mean cross-entropy over positions, on ``n_seqs`` chains
    of ``task`` drawn with ``seed``: a table, or with ``as_json`` the task's description and the numbers."""
    result = strategy_baselines(task, n_seqs=n_seqs, seed=seed)
    if as_json:
        described = {"task": task.name} | {key: value for key, value in task.to_json().items() if key != "name"}
        return described | {key: value for key, value in vars(result).items() if key != "task"}
    rows = [["true", "-", result.mean_ce["true"]]]
    rows += [[name, kl, result.mean_ce[name]] for name, kl in result.last_token_kl.items()]
    chains = task.eval_task().describe().removeprefix("ICL-MC ")
    title = f"ICL-MC strategy baselines: {chains}, {result.n_seqs} sequences, seed {result.seed}"
    return f"{title}\n{format_table(['strategy', 'last-token KL(true||s)', 'mean CE over positions'], rows)}"
