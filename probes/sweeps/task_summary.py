"""The summary of a sweep of a registered task other than ICL-MC (a Gaussian-task sweep, the text task, or a task
from outside the package).

- **Per seed** (``runs``): the task's final evaluation metrics; each of its probes' best head per layer at the
  final checkpoint (what ``probe_run`` gives for the task: the registered attention probes, or a Gaussian run's
  previous-token and induction scores) on ``probe_seqs`` fresh sequences of the task; its metrics at every
  checkpoint (``curves``); the norm of its positions and attention maps and how far each has moved from its
  initial value at every checkpoint (``weights``, :mod:`induction_probes.probes.progress.weight_norms`); the half-way
  step of
  each metric and of each weight's distance from its start (``reached``); for a task with baselines (the text
  task), their losses on the run's own evaluation windows and the loss's plateau at the bigram level.
- **Per condition**: the mean and 95 % interval over seeds of each of these, and the paired tests over seeds of
  what comes first. The timing definitions are :mod:`induction_probes.probes.sweeps.task_timing`'s.

ICL-MC sweeps get the strategy summary of :mod:`induction_probes.probes.sweeps.summary`."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

from induction_probes.circuits.defaults import PROBE_SEED
from induction_probes.circuits.paths import portable
from induction_probes.circuits.runs.reader import Run
from induction_probes.circuits.untrusted import require_finite
from induction_probes.probes.progress.weight_norms import weight_curves
from induction_probes.probes.run_level.all_probes import probe_run
from induction_probes.probes.run_level.task_probes import scalar_metrics
from induction_probes.probes.sweeps.condition_tests import compare_conditions, interval, nonnegative_interval
from induction_probes.probes.sweeps.task_timing import PLATEAU_BASELINE, order_tests, plateau, reached_steps

NOT_METRICS = ("step", "sequences_seen")  # what a metrics.jsonl line holds besides metrics


def summarize_task_run(run: Run, probe_seqs: int) -> dict:
    """One seed: the module docstring's per-seed values."""
    eval_set = run.task.eval_set(probe_seqs, PROBE_SEED)
    (probes,) = probe_run(run, eval_set, [run.steps[-1]])
    metrics = run.metrics()
    final = {k: v for k, v in scalar_metrics(metrics[-1]).items() if k not in NOT_METRICS}
    curves = {"steps": [m["step"] for m in metrics], "sequences_seen": [m["sequences_seen"] for m in metrics]}
    curves |= {name: [m[name] for m in metrics] for name in final}
    weights = weight_curves(run)
    record = {
        "seed": run.recipe.model_seed,
        "final": final,
        "probes": best_per_layer(probes.to_records()),
        "curves": curves,
        "weights": weights,
        "reached": reached_steps(curves, weights),
    }
    task_baselines = getattr(run.task, "baselines", None)  # a task's own strategies, where it has them
    if task_baselines is not None:  # on the windows the curves were measured on: the run's evaluation set
        baselines = task_baselines(run.task.eval_set(run.recipe.eval_seqs, run.recipe.eval_seed))
        record["baselines"] = baselines
        if PLATEAU_BASELINE in baselines and "eval_loss" in curves:
            record["plateau"] = plateau(curves["steps"], curves["eval_loss"], baselines[PLATEAU_BASELINE])
    return record


def best_per_layer(records: list[dict]) -> dict[str, float]:
    """``MEASURE_layerL``: the largest value over the heads of layer L, of every per-head measure of ``records``."""
    best: dict[str, float] = {}
    for record in records:
        value = record["value"]
        if record["layer"] is not None and value is not None:  # None: no value at that head
            name = f"{record['measure']}_layer{record['layer']}"
            best[name] = max(best[name], value) if name in best else value
    return best


def plateau_intervals(records: list[dict]) -> dict:
    """Mean and interval of each plateau measure (steps: never below 0) over the seeds that have it, with their
    count."""
    return {
        key: nonnegative_interval([v for v in values if v is not None]) | {"n": sum(v is not None for v in values)}
        for key in ("arrival", "escape", "length")
        for values in [[r["plateau"][key] for r in records]]
    }


def task_condition_statistics(records: list[dict]) -> dict:
    """A condition's statistics from its per-seed records alone, so that a shipped summary can be checked
    without its run directories."""

    def over_seeds(key: str, statistic=interval) -> dict:
        values = {name: [r[key].get(name) for r in records] for name in records[0][key]}
        return {name: statistic([v for v in seeds if v is not None]) for name, seeds in values.items()}

    return {
        "final": over_seeds("final"),
        "probes": over_seeds("probes"),
        "reached": over_seeds("reached", nonnegative_interval),  # steps: an interval never reaches below 0
        **({"baselines": over_seeds("baselines")} if "baselines" in records[0] else {}),
        **({"plateau": plateau_intervals(records)} if "plateau" in records[0] else {}),
        "order_tests": order_tests(records),
    }


COMPARED = ("final", "plateau", "probes")  # the per-seed records' groups whose every measure is compared


def task_measure(record: dict, measure: str) -> float | None:
    """One seed's value of ``group.name`` (``final.eval_loss``), None where the seed has none."""
    group, name = measure.split(".", 1)
    return record.get(group, {}).get(name)


def task_comparisons(conditions: dict) -> dict:
    """With two or more conditions, every pair's comparison of every final, plateau and probe measure, paired
    on the seeds where the conditions share their seed list (paired t and Wilcoxon), Welch and Mann-Whitney
    otherwise; probe scores, in [0, 1], take bootstrap intervals. Read from the per-seed records alone."""
    if len(conditions) < 2:
        return {}
    first = next(iter(conditions.values()))["runs"][0]
    measures = [f"{group}.{name}" for group in COMPARED if group in first for name in first[group]]
    comparisons = [
        entry
        for (na, a), (nb, b) in combinations(conditions.items(), 2)
        for measure in measures
        if (entry := compare_conditions(na, a, nb, b, measure, task_measure, measure.startswith("probes.")))
    ]
    return {"comparisons": comparisons}


def summarize_task_condition(runs: list[Run], probe_seqs: int) -> dict:
    records = [summarize_task_run(run, probe_seqs) for run in runs]
    head = {"n_seeds": len(records), "seeds": [r["seed"] for r in records], "task": runs[0].task.describe()}
    return head | task_condition_statistics(records) | {"runs": records}


def summarize_task_sweep(root: Path, spec, done: dict[str, list[Path]], missing: list[str], probe_seqs: int) -> dict:
    conditions = {
        name: summarize_task_condition([Run.open(path) for path in paths], probe_seqs) for name, paths in done.items()
    }
    return require_finite(
        {
            "sweep": portable(root),
            "summary": "task",  # not the ICL-MC strategy summary: no strategy transition
            "description": spec.description,
            "recipe": spec.recipe,
            "unfinished": missing,
            "conditions": conditions,
        }
        | task_comparisons(conditions),
        "the summary's value at ",
    )
