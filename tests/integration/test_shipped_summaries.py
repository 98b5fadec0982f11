"""The shipped multi-run results (experiments/results/): each summary comes from a spec in experiments/,
with the keys docs/results.md and the README read and exactly the seeds and conditions its spec names."""

import json
from pathlib import Path

import pytest

from induction_probes.circuits.sweeps.sweep_runner import read_spec
from induction_probes.probes.sweeps.task_summary import task_comparisons, task_condition_statistics
from induction_probes.probes.sweeps.toy_summary import add_toy_statistics

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
SUMMARIES = sorted((EXPERIMENTS / "results").glob("*/summary.json"))


def test_every_spec_has_its_summary_shipped():
    assert {path.stem for path in EXPERIMENTS.glob("*.toml")} == {path.parent.name for path in SUMMARIES}


def test_every_queued_spec_parses_and_has_not_shipped():
    # a loop, not a parametrisation: with nothing queued an empty parameter set would read as a skipped test
    for path in sorted((EXPERIMENTS / "queued").glob("*.toml")):
        spec = read_spec(path)  # its recipe, conditions and every cell's config are checked here
        assert spec.seeds and not (EXPERIMENTS / f"{path.stem}.toml").exists(), path.name


@pytest.mark.parametrize("summary_path", SUMMARIES, ids=lambda p: p.parent.name)
def test_each_summary_holds_its_specs_seeds_and_conditions(summary_path):
    spec = read_spec(EXPERIMENTS / f"{summary_path.parent.name}.toml")
    summary = json.loads(summary_path.read_text())
    assert summary["unfinished"] == []
    assert list(summary["conditions"]) == spec.condition_names()
    kind = summary.get("summary")
    {"toy": check_toy_summary, "task": check_task_summary}.get(kind, check_strategy_summary)(summary, spec)
    figures = list(summary_path.parent.glob("*.png"))
    # a task sweep draws two figures per condition (three with the Gaussian probes' read-out); the others two, and
    # a third of the positional profiles where the runs hold them
    profiles = any("even_odd" in condition for condition in summary["conditions"].values())
    expected = {len(summary["conditions"]) * n for n in (2, 3)} if kind == "task" else {3 if profiles else 2}
    assert len(figures) in expected and all(figure.stat().st_size > 10_000 for figure in figures)


def check_strategy_summary(summary: dict, spec) -> None:
    for condition in summary["conditions"].values():
        assert condition["seeds"] == list(spec.seeds) and condition["n_seeds"] == len(spec.seeds)
        for key in ("transition", "plateau", "final_kl"):
            assert {"mean", "low", "high", "n"} <= condition[key].keys()
        final = condition["final_kl"]
        if final["n"] >= 2:
            assert final["low"] <= final["mean"] <= final["high"]
        else:  # one seed (trigram-authors-long): a mean, and no interval to print
            assert final["low"] is None and final["high"] is None and final["mean"] is not None
        assert [run["seed"] for run in condition["runs"]] == list(spec.seeds)
        kl = condition["curves"]["kl"]
        assert all(run["phases"] and set(run["phases"]) <= set(kl) - {"true"} for run in condition["runs"])
        assert len(kl["true"]["mean"]) == len(condition["curves"]["x"]) == len(condition["curves"]["steps"])


def check_toy_summary(summary: dict, spec) -> None:
    """A toy sweep's: every seed of the spec with its phases (or why they are missing), half-way steps and
    curves, and statistics that its own records reproduce (to float rounding: made on another machine)."""
    for condition in summary["conditions"].values():
        assert condition["seeds"] == list(spec.seeds) and [run["seed"] for run in condition["runs"]] == list(spec.seeds)
        for run in condition["runs"]:
            assert set(run["phases"]) in ({"missing"}, {"end_of_I", "end_of_II", "end_of_III", "plateau"})
            assert set(run["learned"]) == {"p1", "p2", "w_V1", "w_KQ"}
            assert len(run["curves"]["step"]) == len(run["curves"]["loss"])
    again = add_toy_statistics(json.loads(json.dumps(summary)))
    for name, condition in summary["conditions"].items():
        redone = again["conditions"][name]
        assert redone["n_in_order"] == condition["n_in_order"]
        for key in ("mean", "low", "high"):  # Student-t intervals: the same to float rounding anywhere
            shipped = condition["transition"][key]  # None: no interval from fewer than two seeds
            assert redone["transition"][key] == (None if shipped is None else pytest.approx(shipped, rel=1e-9))
        first = condition["positions_first"]
        assert redone["positions_first"]["sign_p_value"] == pytest.approx(first["sign_p_value"], rel=1e-9)
    for shipped, redone in zip(summary["comparisons"], again["comparisons"], strict=True):
        assert (redone["a"], redone["b"], redone["paired"]) == (shipped["a"], shipped["b"], shipped["paired"])
        mean = shipped["difference"]["mean"]  # None: no pair of seeds has the measure (no transition in either)
        assert redone["difference"]["mean"] == (None if mean is None else pytest.approx(mean, rel=1e-9))


def same_numbers(a, b) -> bool:
    """Equal structures whose floats agree to 1e-9 relative (JSON written on another machine)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_numbers(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same_numbers, a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=1e-9)
    return a == b


def check_task_summary(summary: dict, spec) -> None:
    """A task sweep's: every seed of the spec with its curves and weights at one schedule, and statistics that its
    own records reproduce (to float rounding: made on another machine)."""
    for condition in summary["conditions"].values():
        assert condition["seeds"] == list(spec.seeds) and [run["seed"] for run in condition["runs"]] == list(spec.seeds)
        for run in condition["runs"]:
            steps = run["curves"]["steps"]
            assert all(len(values) == len(steps) for values in run["curves"].values())
            assert run["weights"]["steps"] == steps
            assert all(
                len(values) == len(steps) for part in ("norm", "moved") for values in run["weights"][part].values()
            )
        for part in ("reached", "plateau"):  # steps: no interval reaches below 0
            assert all(stat["low"] is None or stat["low"] >= 0 for stat in condition.get(part, {}).values())
        redone = task_condition_statistics(json.loads(json.dumps(condition["runs"])))
        for part in ("final", "probes", "reached", "baselines", "plateau"):
            for name, stat in condition.get(part, {}).items():
                for key in ("mean", "low", "high"):
                    assert redone[part][name][key] == (
                        None if stat[key] is None else pytest.approx(stat[key], rel=1e-9)
                    )
        for name, test in condition["order_tests"].items():
            assert redone["order_tests"][name]["difference"]["mean"] == pytest.approx(test["difference"]["mean"])
            assert redone["order_tests"][name]["p_value"] == (
                None if test["p_value"] is None else pytest.approx(test["p_value"], rel=1e-9)
            )
    # two conditions: every final, plateau and probe measure compared, and the comparisons are the records' own
    expected = task_comparisons(json.loads(json.dumps(summary["conditions"])))
    assert same_numbers(summary.get("comparisons", []), expected.get("comparisons", []))
    assert len(summary["conditions"]) < 2 or len(summary["comparisons"]) >= 7


@pytest.mark.parametrize("summary_path", SUMMARIES, ids=lambda p: p.parent.name)
def test_each_seed_ships_its_curves_at_the_conditions_steps(summary_path):
    summary = json.loads(summary_path.read_text())
    if summary.get("summary") in ("toy", "task"):  # their seeds carry their curves (check_toy/task_summary)
        assert all("curves" in run for condition in summary["conditions"].values() for run in condition["runs"])
        return
    has_curves = ["curve" in run for condition in summary["conditions"].values() for run in condition["runs"]]
    assert all(has_curves)
    for condition in summary["conditions"].values():
        for run in condition["runs"]:
            curve = run["curve"]
            assert set(run["phases"]) | {"true"} <= set(curve["kl"])
            assert all(len(values) == len(curve["steps"]) for values in curve["kl"].values())
            assert curve["steps"] == condition["curves"]["steps"]  # every seed of a condition shares its schedule
