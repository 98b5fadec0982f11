"""Summaries of a sweep (``circuits/sweeps/sweep_runner.py``): per condition, the mean and 95 % interval over seeds of
the strategy-KL curves, the transition time, the plateau length, the final KL and the final probe scores.

Definitions (per run, from its ``metrics.jsonl``; closest strategy = smallest KL(strategy ‖ model) at the
last token, Edelman et al.'s phases):

- **transition**: the first checkpoint from which on, to the end of training, the task's own strategy
  (bigram for n = 2, the n-gram for chains of order n − 1) is the closest one; ``None`` if it never
  settles there. Reported in training sequences seen (or, with ``count``, in sequences of one prior).
- **plateau**: from the first checkpoint at which the unigram strategy is the closest to the transition;
  0 if it is never the closest before the transition (doubly stochastic chains, say).
- **final_kl**: KL(true ‖ model) at the last token, at the last checkpoint.
- **transition_kl**: the same in every condition: the first checkpoint from which on KL(task strategy ‖ model)
  at the last token stays below :data:`TRANSITION_KL_LEVEL` nats (the task strategy is bigram for n = 2); it
  does not depend on which other strategies a condition's prior makes available.

Each run's record also holds its ``curve``: KL(s ‖ model) per strategy at every checkpoint step, and, for a model
with relative positions that reaches the transition, ``positional_layer0``: layer 0's positional profile at the
plateau's middle, the transition and the last checkpoint (:func:`positional_checkpoints`). The statistics
(``comparisons`` between conditions, bounded probe intervals, kinds of solution, the even/odd measures) are
:mod:`induction_probes.probes.sweeps.summary_statistics`'s.

Intervals are Student-t 95 % intervals of the mean over seeds, mean ± t₀.₉₇₅,ₙ₋₁ · s / √n (none for one
seed); runs that never reach the transition are left out of its interval and counted in ``n_reached``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from induction_probes.circuits.defaults import PROBE_SEED
from induction_probes.circuits.paths import portable
from induction_probes.circuits.runs.reader import Run, run_task
from induction_probes.circuits.sweeps.sweep_runner import SPEC_FILE, SpecError, cell_status, is_finished, read_spec  # noqa: F401
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.tasks.markov.strategies import closest_strategy, strategy_name
from induction_probes.circuits.untrusted import require_finite
from induction_probes.circuits.validation import require_int
from induction_probes.probes.attention.patterns import positional_profiles
from induction_probes.probes.attention.probe_registry import attention_probes
from induction_probes.probes.behaviour.by_prior import evaluate_run_on_priors, prior_names, prior_task
from induction_probes.probes.sweeps.condition_tests import interval, nonnegative_interval
from induction_probes.probes.sweeps.summary_statistics import add_statistics
from induction_probes.probes.sweeps.task_summary import summarize_task_sweep
from induction_probes.probes.sweeps.toy_summary import summarize_toy_sweep

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import WeightedModel

PROFILE_DISTANCES = 21  # the positional profile's distances kept per run: the even/odd measures read 2..20
TRANSITION_KL_LEVEL = 0.05  # nats; markov-k3's KL(bigram ‖ model) is 0.13 on the plateau and 0.017 at the end


def transition_index(closest: list[str], target: str) -> int | None:
    """The first index from which on every entry is ``target``."""
    index = len(closest)
    while index > 0 and closest[index - 1] == target:
        index -= 1
    return index if index < len(closest) else None


def kl_transition(metrics: list[dict], target: str, x: list[float]) -> float | None:
    """The x from which on KL(target ‖ model) stays below :data:`TRANSITION_KL_LEVEL`; None if it ends above."""
    below = [m["last_token_kl"][target] < TRANSITION_KL_LEVEL for m in metrics]
    index = transition_index(["below" if b else "above" for b in below], "below")
    return None if index is None else x[index]


def run_curve(metrics: list[dict]) -> dict:
    """One run's KL(s ‖ model) per strategy (and the truth) at each checkpoint step."""
    names = list(metrics[0]["last_token_kl"])
    return {"steps": [m["step"] for m in metrics], "kl": {n: [m["last_token_kl"][n] for m in metrics] for n in names}}


def unigram_before(closest: list[str], transition: int) -> list[int]:
    """The indices before the transition at which the unigram strategy is the closest: the plateau's checkpoints."""
    return [i for i in range(transition) if closest[i] == "unigram"]


def plateau_length(closest: list[str], x: list[float], transition: int | None) -> float | None:
    if transition is None:
        return None
    unigram = unigram_before(closest, transition)
    return x[transition] - x[unigram[0]] if unigram else 0.0


def run_x(run: Run, count: str | None) -> list[float]:
    """Each checkpoint's x: training sequences seen, or those of prior ``count`` only."""
    if count is None:
        return [float(m["sequences_seen"]) for m in run.metrics()]
    batch_size = run.recipe.batch_size
    task = run_task(run, MarkovTask)
    x = [float(task.sequences_of_prior(count, m["sequences_seen"], batch_size)) for m in run.metrics()]
    if x[-1] == 0:
        raise SpecError(f"run {run.path} trains on no {count} sequences: --count {count} has no meaning for it")
    return x


def final_probes(model: WeightedModel, tokens) -> dict:
    """Every registered probe's scores of every head at the final checkpoint (previous-token and bigram-matching
    among them), and the distance at which each layer-0 head's positional profile peaks and its mass there (for
    relative positions)."""
    _, scores, _ = attention_probes(model, tokens, chunk=len(tokens))  # one chunk: the whole set at once
    probes = {name: [layer.tolist() for layer in score.values] for name, score in scores.items()}
    if has_relative_positions(model):  # with the mass there: a flat profile has a peak too
        profiles = positional_profiles(model, tokens, 0)
        probes["positional_peaks_layer0"] = profiles.argmax(-1).tolist()
        probes["positional_peak_mass_layer0"] = profiles.max(-1).values.tolist()
    return probes


def has_relative_positions(model: WeightedModel) -> bool:
    return getattr(model.blocks[0].attn, "W_rel", None) is not None


def positional_checkpoints(closest: list[str], steps: list[int], transition: int) -> dict[str, int | None]:
    """The checkpoints of Edelman et al.'s positional panels: the unigram-closest one nearest the middle (in steps)
    of the unigram plateau (the summary's plateau, from its first unigram-closest checkpoint to the transition; None
    without one), the transition's, and the last."""
    unigram = [steps[i] for i in unigram_before(closest, transition)]
    plateau = None
    if unigram:
        middle = (unigram[0] + steps[transition]) / 2
        plateau = min(unigram, key=lambda step: abs(step - middle))
    return {"plateau": plateau, "transition": steps[transition], "end": steps[-1]}


def positional_record(run: Run, checkpoints: dict[str, int | None], tokens, final_model) -> dict:
    """Layer 0's positional profile (mean over its heads) at distances 0..PROFILE_DISTANCES − 1 at each of
    ``checkpoints``: what the even/odd measures of the summary's statistics are computed from. ``final_model``,
    already loaded for the final probes, serves the last checkpoint."""
    profiles = {}
    for point, step in checkpoints.items():
        if step is not None:
            model = final_model if step == run.steps[-1] else run.load(step=step)
            profiles[point] = positional_profiles(model, tokens, 0).mean(0)[:PROFILE_DISTANCES].tolist()
    return {"steps": checkpoints, "profiles": profiles}


def checked_metrics(run: Run) -> list[dict]:
    """The run's evaluations, each checked to hold what a summary reads: sequences seen, and KL(s ‖ model) at
    the last token for the truth and every strategy (:meth:`Run.metrics` has checked that each is a finite number
    where a line has it)."""
    metrics = run.metrics()
    for m in metrics:
        kl = m.get("last_token_kl")
        if not isinstance(m.get("sequences_seen"), int) or kl is None or "true" not in kl:
            raise SpecError(
                f"{run.path / 'metrics.jsonl'} step {m['step']}: no sequences_seen or no finite "
                "last_token_kl for the truth and the strategies: not an ICL-MC run's evaluation"
            )
    return metrics


def summarize_run(run: Run, count: str | None, probe_seqs: int, by_prior: tuple[str, ...] = ()) -> dict:
    metrics = checked_metrics(run)
    target = strategy_name(run_task(run, MarkovTask).n)
    closest = [closest_strategy(m["last_token_kl"]) for m in metrics]
    x = run_x(run, count)
    transition = transition_index(closest, target)
    phases = [name for i, name in enumerate(closest) if i == 0 or closest[i - 1] != name]
    record = {
        "seed": run.recipe.model_seed,
        "transition": None if transition is None else x[transition],
        "transition_step": None if transition is None else metrics[transition]["step"],
        "plateau": plateau_length(closest, x, transition),
        "final_kl": metrics[-1]["last_token_kl"]["true"],
        "phases": phases,
        "transition_kl": kl_transition(metrics, target, x),
        "curve": run_curve(metrics),
    }
    if run.kind == "markov":
        tokens = run.task.eval_set(probe_seqs, PROBE_SEED).inputs
        model = run.load()
        record["probes"] = final_probes(model, tokens)
        if transition is not None and has_relative_positions(model):
            steps = [m["step"] for m in metrics]
            checkpoints = positional_checkpoints(closest, steps, transition)
            record["positional_layer0"] = positional_record(run, checkpoints, tokens, model)
    if by_prior:
        evaluations = evaluate_run_on_priors(run, by_prior, probe_seqs, PROBE_SEED)
        record["by_prior"] = {prior: {"loss": e["loss"], "kl": e["kl"]} for prior, e in evaluations.items()}
    return record


def curves(runs: list[Run], x: list[float]) -> dict:
    """Mean and interval over seeds of KL(s ‖ model) for the truth and every strategy, per checkpoint."""
    metrics = [run.metrics() for run in runs]
    names = list(metrics[0][0]["last_token_kl"])
    kl = {}
    for name in names:
        per_step = [interval([m[i]["last_token_kl"][name] for m in metrics]) for i in range(len(x))]
        kl[name] = {key: [point[key] for point in per_step] for key in ("mean", "low", "high")}
    return {"x": x, "steps": [m["step"] for m in metrics[0]], "kl": kl}


def summarize_condition(runs: list[Run], count: str | None, probe_seqs: int, by_prior: tuple[str, ...] = ()) -> dict:
    records = [summarize_run(run, count, probe_seqs, by_prior) for run in runs]
    steps = {tuple((m["step"], tuple(m["last_token_kl"])) for m in run.metrics()) for run in runs}
    if len(steps) != 1:
        raise SpecError(
            f"the runs of {runs[0].path.parent} have different checkpoint steps or strategies: they cannot be averaged"
        )
    reached = [r["transition"] for r in records if r["transition"] is not None]
    summary = {
        "n_seeds": len(runs),
        "seeds": [r["seed"] for r in records],
        "task": runs[0].task.describe(),
        "transition": nonnegative_interval(reached) | {"n_reached": len(reached)},
        "plateau": nonnegative_interval([r["plateau"] for r in records if r["plateau"] is not None]),
        "final_kl": nonnegative_interval([r["final_kl"] for r in records]),
        "curves": curves(runs, run_x(runs[0], count)),
        "runs": records,
    }
    if all("probes" in r for r in records):
        summary["probes"] = {
            "previous_token_layer0": interval([max(r["probes"]["previous_token"][0]) for r in records]),
            "bigram_matching_last_layer": interval([max(r["probes"]["bigram_matching"][-1]) for r in records]),
        }
    if by_prior:
        summary["by_prior"] = {
            prior: {key: interval([r["by_prior"][prior][key] for r in records]) for key in ("loss", "kl")}
            for prior in by_prior
        }
    return summary


def summarize_sweep(
    root: str | Path, *, count: str | None = None, probe_seqs: int = 500, by_prior: str | tuple[str, ...] = ()
) -> dict[str, Any]:
    """The summary of the finished cells of the sweep in ``root`` (JSON-ready: no NaN, no tensors);
    ``count`` defaults to the spec's own. ``by_prior`` (e.g. ``"doubly-stochastic,unigram"``) adds each run's
    final loss and KL on ``probe_seqs`` fresh chains of each of those priors
    (:mod:`induction_probes.probes.behaviour.by_prior`),
    their intervals per condition and their comparisons. A sweep of any other task (Gaussian, or a task
    registered from outside) gets the task summary
    (:func:`~induction_probes.probes.sweeps.task_summary.summarize_task_sweep`):
    there are no strategy phases to time; a toy-model sweep its own
    (:func:`~induction_probes.probes.sweeps.toy_summary.summarize_toy_sweep`)."""
    require_int("probe_seqs", probe_seqs, 1)  # before any run is read
    root = Path(root)
    if not (root / SPEC_FILE).exists():
        raise SpecError(f"{root} is not a sweep directory (it has no {SPEC_FILE})")
    spec = read_spec(root / SPEC_FILE, root)
    task = spec.cells()[0].recipe.task
    by_prior = prior_names(by_prior) if by_prior else ()
    if by_prior and not isinstance(task, MarkovTask):
        raise SpecError("--by-prior evaluates ICL-MC models on chains of other priors; this sweep is not ICL-MC")
    for prior in by_prior:  # a prior that does not suit the sweep's chains is refused before any run is read
        prior_task(task, prior)
    done, missing = finished_cells(root, spec)
    if spec.recipe == "toy":
        return summarize_toy_sweep(root, spec, done, missing)
    if not isinstance(task, MarkovTask):
        return summarize_task_sweep(root, spec, done, missing, probe_seqs)
    count = count if count is not None else spec.count
    conditions = {
        name: summarize_condition([Run.open(path) for path in paths], count, probe_seqs, by_prior)
        for name, paths in done.items()
    }
    return require_finite(
        add_statistics(
            {
                "sweep": portable(root),
                "description": spec.description,
                "x_axis": f"training sequences of the {count} prior" if count else "training sequences seen",
                "unfinished": missing,
                "conditions": conditions,
            }
        ),
        "the summary's value at ",
    )


def finished_cells(root: Path, spec) -> tuple[dict[str, list[Path]], list[str]]:
    """The finished cells' directories by condition, and the unfinished cells; refuses a sweep with none."""
    cells: dict[str, list] = {}
    for cell in spec.cells():
        cells.setdefault(cell.condition, []).append(cell)
    done, missing = {}, []
    for name, group in cells.items():
        # a cell counts only if its own files say it is this spec's cell, finished (a run of another
        # recipe, or a link on the way, is refused by cell_status)
        paths = [root / c.relative_path for c in group if cell_status(root / c.relative_path, c.recipe, root) == "done"]
        missing += [c.relative_path for c in group if root / c.relative_path not in paths]
        if paths:
            done[name] = paths
    if not done:
        raise SpecError(f"no cell of the sweep in {root} has finished yet: run the sweep first")
    return done, missing
