"""The summary of a sweep of a registered task other than ICL-MC (a Gaussian-task sweep, or a task from outside
the package): per condition, the mean and 95 % interval over seeds of each of the task's final evaluation
metrics and of each of its probes' best head per layer at the final checkpoint (what ``probe_run`` gives for
the task: the registered attention probes, or a Gaussian run's previous-token and induction scores), on
``probe_seqs`` fresh sequences of the task; each seed's values in ``runs``. ICL-MC sweeps get the strategy summary of
:mod:`induction_probes.probes.sweeps.summary`."""

from __future__ import annotations

from pathlib import Path

from induction_probes.circuits.common.paths import portable
from induction_probes.circuits.common.untrusted import require_finite
from induction_probes.circuits.runs.reader import Run
from induction_probes.probes.summary import probe_run
from induction_probes.probes.sweeps.statistics import interval
from induction_probes.probes.task_probes import scalar_metrics

PROBE_SEED = 12345  # the probe sequences' seed, as `induction-probes probe` uses
NOT_METRICS = ("step", "sequences_seen")


def summarize_task_run(run: Run, probe_seqs: int) -> dict:
    """One seed: its final metrics and, per probe of its task (``probe_run``'s), the best head of each layer
    at the end."""
    (probes,) = probe_run(run, run.task.eval_set(probe_seqs, PROBE_SEED), [run.steps[-1]])
    final = {k: v for k, v in scalar_metrics(run.metrics()[-1]).items() if k not in NOT_METRICS}
    return {"seed": run.recipe.model_seed, "final": final, "probes": best_per_layer(probes.to_records())}


def best_per_layer(records: list[dict]) -> dict[str, float]:
    """``MEASURE_layerL``: the largest value over the heads of layer L, of every per-head measure of ``records``."""
    best: dict[str, float] = {}
    for record in records:
        if record["layer"] is not None:
            name = f"{record['measure']}_layer{record['layer']}"
            best[name] = max(best.get(name, record["value"]), record["value"])
    return best


def summarize_task_condition(runs: list[Run], probe_seqs: int) -> dict:
    records = [summarize_task_run(run, probe_seqs) for run in runs]

    def over_seeds(key: str) -> dict:
        return {name: interval([r[key][name] for r in records if name in r[key]]) for name in records[0][key]}

    return {
        "n_seeds": len(records),
        "seeds": [r["seed"] for r in records],
        "task": runs[0].task.describe(),
        "final": over_seeds("final"),
        "probes": over_seeds("probes"),
        "runs": records,
    }


def summarize_task_sweep(root: Path, spec, done: dict[str, list[Path]], missing: list[str], probe_seqs: int) -> dict:
    conditions = {
        name: summarize_task_condition([Run.open(path) for path in paths], probe_seqs) for name, paths in done.items()
    }
    return require_finite(
        {
            "sweep": portable(root),
            "summary": "task",  # not the ICL-MC strategy summary: no transition, plateau or comparisons
            "description": spec.description,
            "recipe": spec.recipe,
            "unfinished": missing,
            "conditions": conditions,
        },
        "the summary's value at ",
    )
