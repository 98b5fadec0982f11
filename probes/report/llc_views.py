"""What ``induction-probes llc`` shows: the local learning coefficient of a run's checkpoints beside the
strategy phases, by the calibrated estimator of :mod:`induction_probes.probes.llc.estimator` (devinterp's SGLD
sampler). The estimator is first run on the calibration models (known coefficients) at the same settings, and
the answer carries that calibration; Proposition 2.1's construction is asked as written and at its best
scales, and is refused where it is not a minimum. Callable from Python with the command's text and JSON:

>>> llc_report("markov-k3", steps=[283, 606, 4000], as_json=True)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from induction_probes.circuits.defaults import LLC_CHECKPOINTS, LLC_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import MAX_CHECKPOINTS, require_at_most
from induction_probes.circuits.runs.reader import Run, RunOrPath, as_run
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.tasks.markov.strategies import closest_strategy
from induction_probes.circuits.validation import require_int
from induction_probes.probes.behaviour.icl_behaviour import log_spread_steps
from induction_probes.probes.figures.plots_llc import plot_llc
from induction_probes.probes.llc.calibration import calibrate, whole_cases
from induction_probes.probes.llc.checkpoint_llc import checkpoint_llc, construction_estimates, next_token_loss
from induction_probes.probes.llc.estimator import LLCSettings
from induction_probes.probes.llc.gate import gate, marked, quarter_label
from induction_probes.probes.llc.overrides import OVERRIDES
from induction_probes.probes.llc.resolution import sample_series
from induction_probes.probes.llc.sampling import sgld_sampler
from induction_probes.probes.report.llc_text import whole_text
from induction_probes.probes.report.tables import figure_lines, provenance

N_SEQS = LLC_SEQS
CHECKPOINTS = LLC_CHECKPOINTS
SAMPLER_FAILURES = ("diverged", "never moved")  # problems of the sampler itself, not of the point


def icl_mc_task(run: Run) -> MarkovTask:
    """The run's ICL-MC task; a run of any other is refused, since the llc command samples a next-token loss."""
    task = run.task
    if task.name != "markov" or not isinstance(task, MarkovTask):
        raise BadInput(f"run {run.path.name} is not an ICL-MC run: the llc command samples a next-token loss")
    return task


def llc_report(
    run: RunOrPath,
    *,
    checkpoints: int = CHECKPOINTS,
    steps: list[int] | None = None,
    n_seqs: int = N_SEQS,
    seed: int = PROBE_SEED,
    device: str = "cpu",
    plot: str | os.PathLike[str] | None = None,
    as_json: bool = False,
    verbose: bool = False,
    **overrides: float | None,
) -> str | dict[str, Any]:
    """The LLC of ``steps`` (default ``checkpoints`` of them, step 0 included) of an ICL-MC run, on ``n_seqs``
    fresh sequences of ``seed``; ``overrides`` replace the rule's settings (:data:`OVERRIDES`). ``verbose``: the
    text adds every estimate's diagnostics and every calibration case (:mod:`.llc_text`). Bad input
    raises ValueError before any sampling; a diverged or frozen sampler, FloatingPointError."""
    run = as_run(run)
    settings = estimator_settings(overrides, seed, n_seqs)
    task = icl_mc_task(run)
    steps = chosen_steps(run, steps, checkpoints)
    tokens = task.eval_set(n_seqs, seed).inputs.to(device)  # drawn on the CPU, then moved once
    metrics = {m["step"]: m for m in run.metrics()}
    models = [run.load(step=step, device=device) for step in steps]
    found, resolution = sample_series(
        models,
        next_token_loss,
        (tokens,),
        lambda model, series: checkpoint_llc(model, tokens, **series).to_json(),
        labels=steps,
        **settings,
    )
    estimates = [
        {"step": step, "sequences_seen": metrics[step]["sequences_seen"], "closest": closest(metrics[step])}
        | estimate
        | {"resolution": resolution}
        for step, estimate in zip(steps, found)
    ]
    refuse_broken_sampler(estimates)
    construction = construction_estimates(task.k, task.seq_len, tokens, **settings)  # each its own γ
    cases = calibrate(n=n_seqs, **settings)
    calibration = {"settings": settings, "n": n_seqs, "cases": cases, "gate": gate(whole_cases(cases))}
    calibration["gate_quarter"] = gate(whole_cases(cases, quarter=True))
    label = quarter_label(calibration["gate_quarter"])
    estimates = [with_quarter(e, label) for e in marked(estimates, calibration["gate"])]
    construction = {
        name: with_quarter(e, label)
        for name, e in zip(construction, marked(list(construction.values()), calibration["gate"]))
    }
    figures = plot_estimates(run, estimates, construction, calibration["gate"], Path(plot)) if plot is not None else []
    if as_json:
        return provenance(run, steps, n_seqs, seed) | {
            "settings": settings,
            "calibration": calibration,
            "checkpoints": estimates,
            "construction": construction,
        }
    shown = whole_text(run.path.name, settings, estimates, construction, calibration, verbose)
    return "\n".join([shown, *figure_lines(figures)])


def with_quarter(estimate: dict, label: str) -> dict:
    """An estimate with its value at γ/4 (the estimator's localization check) and that value's calibration label
    (:func:`~induction_probes.probes.llc.gate.quarter_label`); no value where the estimate at γ is refused."""
    check = (estimate.get("diagnostics") or {}).get("localization_check") or {}
    value = check.get("estimate") if estimate["llc"] is not None else None
    return estimate | {"at_quarter_gamma": {"llc": value, "calibration": label}}


def estimator_settings(overrides: dict, seed: int, n_seqs: int) -> dict:
    """The settings given (the rest follow the estimator's rule), checked before any work."""
    unknown = sorted(set(overrides) - set(OVERRIDES))
    if unknown:
        raise BadInput(f"unknown LLC settings {unknown}: the rule's settings are {', '.join(OVERRIDES)}")
    given = {name: value for name, value in overrides.items() if value is not None}
    require_int("n_seqs", n_seqs, 1)
    LLCSettings(**({"n_beta": 1.0, "localization": 1.0, "lr": 1.0, "burn_in": 1, "draws": 3} | given))
    if given.get("batch_size") is not None and given["batch_size"] > n_seqs:
        raise BadInput(f"batch_size {given['batch_size']} is more than the {n_seqs} sequences (n_seqs) to draw from")
    sgld_sampler()  # the llc extra: without it, its install command now, not a traceback after the Hessian
    return given | {"seed": seed}


def chosen_steps(run: Run, steps: list[int] | None, checkpoints: int) -> list[int]:
    """``steps`` as given (each a checkpoint of the run), or ``checkpoints`` spread in log(sequences seen)."""
    if steps is not None:
        steps = sorted({require_int("a step", s, 0) for s in steps})
        if not steps:
            raise BadInput("steps is empty: give at least one checkpoint step")
        if missing := sorted(set(steps) - set(run.steps)):
            raise BadInput(f"run {run.path.name} has no checkpoint at steps {missing}")
        return steps
    require_int("checkpoints", checkpoints, 1)  # also refused by name here, where a bool or 2.5 would pass
    require_at_most("checkpoints", checkpoints, MAX_CHECKPOINTS)
    return log_spread(run.steps, [run.entry(s)["sequences_seen"] for s in run.steps], checkpoints)


def log_spread(steps: list[int], sequences: list[int], count: int) -> list[int]:
    """Step 0 and about ``count − 1`` steps evenly spread in log(sequences seen) over the rest."""
    if count < 1:
        raise BadInput(f"checkpoints must be at least 1, got {count}")
    return sorted({steps[0]} | log_spread_steps(dict(zip(steps, sequences)), count - 1))


def refuse_broken_sampler(estimates: list[dict]) -> None:
    """A diverged or frozen sampler has no estimate to report at any point: one line with the reason and
    status 1 (a FloatingPointError), before the construction and the calibration are sampled."""
    for estimate in estimates:
        failure = next((p for p in estimate["problems"] if p.startswith(SAMPLER_FAILURES)), None)
        if failure is not None:
            raise FloatingPointError(f"the SGLD sampler at step {estimate['step']}: {failure}; change --lr or --n-beta")


def closest(metrics: dict) -> str:
    return closest_strategy(metrics["last_token_kl"])


def plot_estimates(run: Run, estimates: list[dict], construction: dict, verdict: dict, directory: Path) -> list[Path]:
    name = run.path.name
    path = directory / f"{name}_llc.png"
    return [plot_llc(estimates, run.metrics(), construction["best_scales"], name, path, failing=verdict["mark"])]
