"""The summary of a sweep of Wang et al.'s toy model (``recipe = "toy"``).

- **Per seed** (``runs``): the phase boundaries of ``toy_phases`` and whether the four phases appear in the
  paper's order (0 < end of I < end of II < end of III < the last step, so that phase IV is seen); the first
  step at which each loss part is down to half its initial value, and whether the run goes lazy → rich (the
  4-gram part halves before the induction part); the step at which p1, p2, w_V1 and w_KQ each make half
  their total change (``reach_step``), and whether the positions come first (both slopes before w_KQ); the
  plateaus of the total loss and of its induction part (``count_plateaus``); the logged loss curves.
- **Per condition**: the mean and Student-t 95 % interval over seeds of each of these; the count of seeds
  with the four phases in order; the positions-first test over seeds: a one-sided sign test (binomial,
  p = 1/2) of "w_KQ after both slopes", and the paired t and Wilcoxon tests of step(w_KQ) − max(step p1, p2).
- **Between conditions**: the transition step (end of phase II) of every condition against the first's:
  paired by seed where the two cells of a seed train on the same sequences from the same start (their
  sequence and initialisation fields are equal), Welch's t and Mann-Whitney U otherwise (``statistics``).

The condition statistics are recomputed from the per-seed records alone (:func:`add_toy_statistics`), so a
shipped ``summary.json`` can be checked without its run directories.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scipy.stats import binomtest

from induction_probes.circuits.models.toy_model import count_plateaus, reach_step, toy_phases
from induction_probes.circuits.paths import portable
from induction_probes.circuits.runs.reader import Run
from induction_probes.circuits.untrusted import require_finite
from induction_probes.probes.sweeps.condition_tests import interval, paired_comparison, welch_comparison

CURVES = ("loss", "loss_4gram", "loss_induction")
LEARNED = ("p1", "p2", "w_V1", "w_KQ")
PHASES = ("end_of_I", "end_of_II", "end_of_III", "plateau")
# The recipe fields that fix a seed's sequences and starting point: equal in two conditions, seed s of each
# trains on the same data from the same parameters, and their comparison is paired.
SHARED = ("seq_len", "d", "boolean", "n_seqs", "sigma", "slope_init", "alpha_star", "w_star")


def toy_run_record(run: Run) -> dict:
    """One seed's record (the module docstring's per-seed values)."""
    history = run.metrics()
    phases: dict[str, Any]  # the phases' end steps, or why they are missing
    try:
        phases = toy_phases(history).to_json()
    except ValueError as error:  # a run without all four phases is a result, recorded as such
        phases = {"missing": str(error)}
    last = history[-1]["step"]
    in_order = "missing" not in phases and 0 < phases["end_of_I"] < phases["end_of_II"] < phases["end_of_III"] < last
    learned = {name: reach_step(history, [h[name] for h in history]) for name in LEARNED}
    halved = {key: halving_step(history, key) for key in ("loss_4gram", "loss_induction")}
    return {
        "seed": run.recipe.model_seed,
        "data_seed": run.recipe.data_seed,
        "phases": phases,
        "four_phases_in_order": in_order,
        "halved": halved,
        "lazy_then_rich": halved["loss_induction"] is not None
        and (halved["loss_4gram"] is not None and halved["loss_4gram"] < halved["loss_induction"]),
        "learned": learned,
        "positions_first": learned["w_KQ"] > max(learned["p1"], learned["p2"]),
        "plateaus": count_plateaus(history, "loss"),
        "plateaus_induction": count_plateaus(history, "loss_induction"),
        "final": {key: history[-1][key] for key in CURVES + LEARNED},
        "curves": {"step": [h["step"] for h in history]} | {key: [h[key] for h in history] for key in CURVES},
    }


def halving_step(history: list[dict], key: str) -> int | None:
    """The first logged step at which ``key`` is at most half its value at step 0 (None if it never is)."""
    return next((h["step"] for h in history if h[key] <= 0.5 * history[0][key]), None)


def positions_first_test(records: list[dict]) -> dict:
    """Over seeds: how many learn w_KQ after both slopes, the one-sided sign test of that, and the paired
    tests of step(w_KQ) against max(step p1, step p2)."""
    positions = [max(r["learned"]["p1"], r["learned"]["p2"]) for r in records]
    kq = [r["learned"]["w_KQ"] for r in records]
    first = sum(r["positions_first"] for r in records)
    return {
        "n_first": first,
        "n": len(records),
        "sign_test": "one-sided binomial, p = 1/2",
        "sign_p_value": float(binomtest(first, len(records), 0.5, alternative="greater").pvalue),
        "w_KQ_minus_positions": paired_comparison(positions, kq, bounded=False),
    }


def condition_statistics(condition: dict) -> dict:
    """The condition's statistics from its ``runs`` records."""
    records = condition["runs"]
    phased = [r for r in records if "missing" not in r["phases"]]
    stats = {key: interval([r["phases"][key] for r in phased]) for key in PHASES}
    stats["transition"] = stats["end_of_II"] | {"n_reached": len(phased)}
    return stats | {
        "n_in_order": sum(r["four_phases_in_order"] for r in records),
        "n_lazy_then_rich": sum(r["lazy_then_rich"] for r in records),
        "four_phases_in_order": all(r["four_phases_in_order"] for r in records),
        "learned": {name: interval([r["learned"][name] for r in records]) for name in LEARNED},
        "positions_first": positions_first_test(records),
        "n_plateaus": interval([len(r["plateaus"]) for r in records]),
        "n_plateaus_induction": interval([len(r["plateaus_induction"]) for r in records]),
        "final_loss": interval([r["final"]["loss"] for r in records]),
    }


def compare_transitions(name_a: str, a: dict, name_b: str, b: dict) -> dict:
    """B's transition step against A's: paired by seed when ``a`` and ``b`` share :data:`SHARED` (and seeds)."""
    steps = {
        name: {r["seed"]: r["phases"].get("end_of_II") for r in condition["runs"]}
        for name, condition in ((name_a, a), (name_b, b))
    }
    paired = a["shared"] == b["shared"] and a["seeds"] == b["seeds"]
    if paired:
        seeds = [s for s in a["seeds"] if steps[name_a][s] is not None and steps[name_b][s] is not None]
        result = paired_comparison([steps[name_a][s] for s in seeds], [steps[name_b][s] for s in seeds], False)
    else:
        values = [[v for v in steps[name].values() if v is not None] for name in (name_a, name_b)]
        result = welch_comparison(*values, bounded=False)
    return {"a": name_a, "b": name_b, "measure": "transition (end of phase II, steps)", "paired": paired} | result


def add_toy_statistics(summary: dict) -> dict:
    """``summary`` with every condition's statistics and the comparisons recomputed from its per-seed records."""
    conditions = summary["conditions"]
    for condition in conditions.values():
        condition |= condition_statistics(condition)
    names = list(conditions)
    summary["comparisons"] = [
        compare_transitions(names[0], conditions[names[0]], name, conditions[name]) for name in names[1:]
    ]
    return summary


def summarize_toy_sweep(root: Path, spec, done: dict[str, list[Path]], missing: list[str]) -> dict:
    conditions = {}
    for name, paths in done.items():
        runs = [Run.open(path) for path in paths]
        conditions[name] = {
            "n_seeds": len(runs),
            "seeds": [run.recipe.model_seed for run in runs],
            "shared": {key: getattr(runs[0].recipe, key) for key in SHARED},
            "recipe": {k: v for k, v in runs[0].recipe.to_dict().items() if k not in ("model_seed", "data_seed")},
            "runs": [toy_run_record(run) for run in runs],
        }
    summary = {
        "sweep": portable(root),
        "summary": "toy",  # not the ICL-MC strategy summary: phases of the toy's two loss parts
        "description": spec.description,
        "recipe": spec.recipe,
        "unfinished": missing,
        "conditions": conditions,
    }
    return require_finite(add_toy_statistics(summary), "the summary's value at ")
