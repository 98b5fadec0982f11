"""The registries: one small class, lazy entries, refusals in one line, and the priors' facts in place of their
order (``SIMPLE_PRIOR_NAMES = PRIOR_NAMES[:3]`` changed meaning if a name was inserted before the third)."""

import json
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from induction_probes import (
    MODEL_CLASSES,
    PRIORS,
    PROBES,
    TASK_KINDS,
    MarkovTask,
    RecipeEntry,
    TaskKind,
    TaskView,
    nested,
    register_task,
    unregister_task,
)
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.recipes.task_kinds import recipe_entry, recipe_names
from induction_probes.circuits.registry import (
    Expects,
    Registry,
    UnknownName,
    UnusableEntry,
    outside_registrations,
    register_again,
)
from induction_probes.circuits.tasks.markov.prior_registry import SIMPLE_PRIORS


def twice_the_pattern(patterns, tokens):
    """A probe as PROBES holds one: a Python function of (patterns, tokens)."""
    return [2 * pattern for pattern in patterns]


def twice(x):
    return 2 * x


def test_an_entry_is_an_object_or_a_lazy_reference_and_register_is_also_a_decorator():
    registry = Registry("thing", __name__)
    registry.register("twice", twice, doubles=True)
    registry.register("dumps", "json:dumps")
    assert registry.registration("dumps").entry == "json:dumps"  # not imported until asked for
    assert registry.get("dumps")([1]) == "[1]" and registry["twice"](3) == 6

    @registry.register("thrice", doubles=False)
    def thrice(x):
        return 3 * x

    assert thrice(2) == 6  # the decorator hands back what it decorates
    assert registry.names() == ("twice", "dumps", "thrice") and list(registry) == list(registry.names())
    assert registry.names(doubles=True) == ("twice",) and registry.info("thrice") == {"doubles": False}
    assert "twice" in registry and "nothing" not in registry and ["unhashable"] not in registry


def test_unknown_and_taken_names_are_refused_in_one_line():
    registry = Registry("thing", __name__)
    registry.register("a", twice)
    with pytest.raises(UnknownName, match=r"^unknown thing 'b' \(known: a\)$"):
        registry.get("b")
    assert issubclass(UnknownName, ValueError)
    with pytest.raises(ValueError, match="registered already"):
        registry.register("a", thrice_of)
    registry.register("a", thrice_of, replace=True)
    assert registry.get("a") is thrice_of
    with pytest.raises(ValueError, match="package.module:attribute"):
        registry.register("c", "no_colon_here")
    registry.unregister("a")
    with pytest.raises(UnknownName):
        registry.unregister("a")


def thrice_of(x):
    return 3 * x


def test_a_view_follows_later_registrations():
    registry = Registry("thing", __name__)
    view = registry.where(kept=True)
    registry.register("a", twice, kept=True)
    registry.register("b", twice, kept=False)
    assert list(view) == ["a"] and "a" in view and "b" not in view and len(view) == 1


def test_the_registries_hold_the_objects_themselves_so_tools_can_follow_them():
    """issue 50: entries were "module:function" strings so that --help stayed torch-free; the command table does
    that now."""
    from induction_probes.probes.report.run_views import TASK_VIEWS
    from induction_probes.probes.run_level.all_probes import TASK_PROBES

    for registry in (MODEL_CLASSES, PROBES, PRIORS, TASK_KINDS):
        entries = [registry.registration(name).entry for name in registry.names()]
        assert entries and not any(isinstance(entry, str) for entry in entries), registry
    views = [getattr(view, part) for view in TASK_VIEWS.values() for part in ("probe", "ablate", "report", "html")]
    assert len(views) == 8 and all(callable(view) for view in views)
    assert list(TASK_PROBES) == list(TASK_VIEWS) == [MarkovTask, TASK_KINDS.get("gaussian").task]  # text: generic
    assert (len(TASK_KINDS), len(recipe_names()), len(MODEL_CLASSES), len(PRIORS), len(PROBES)) == (3, 5, 3, 5, 3)


def test_the_package_registers_what_config_json_names():
    assert TASK_KINDS.names() == ("markov", "gaussian", "text")
    assert recipe_names() == ["markov", "minimal", "gaussian", "toy", "text"]
    assert recipe_names(command=True) == ["markov", "minimal", "gaussian", "text"]  # toy trains with the toy command
    assert MODEL_CLASSES.names() == ("HookedTransformer", "MinimalModel", "ToyModel")
    for name in TASK_KINDS:
        assert TASK_KINDS.get(name).task.name == name
    for name in recipe_names():
        assert recipe_entry(name).recipe.name == name
    assert PROBES.names() == ("previous_token", "bigram_matching", "bigram_matching_ideal")
    from dataclasses import fields

    assert [f.name for f in fields(TaskKind)] == ["task", "recipes"]  # its probe and view are the probe layer's


@dataclass(frozen=True, kw_only=True)
class SecondMarkovTask(MarkovTask):
    name: ClassVar[str] = "second-markov"


@dataclass(frozen=True, kw_only=True)
class SecondMarkovRecipe(MarkovRecipe):
    task: SecondMarkovTask = nested(SecondMarkovTask)
    name: ClassVar[str] = "second-markov"


def test_a_task_kind_refuses_a_recipe_of_another_task_or_a_recipe_name_taken():
    with pytest.raises(ValueError, match="recipe markov trains the task markov, not second-markov"):
        TaskKind(SecondMarkovTask, (RecipeEntry(MarkovRecipe, "twice"),))
    with pytest.raises(ValueError, match="a task kind's task is a task config class"):
        TaskKind(MarkovRecipe, ())
    with pytest.raises(ValueError, match="a recipe is a config class"):
        RecipeEntry(twice, "not a class")
    taken = TaskKind(SecondMarkovTask, (RecipeEntry(recipe_entry("toy").recipe, "the toy again", command=False),))
    with pytest.raises(ValueError, match="the recipe 'toy' is registered already, by the task gaussian"):
        register_task(taken)
    with pytest.raises(ValueError, match="register_task takes a TaskKind, got 'markov'"):
        register_task("markov")
    assert "second-markov" not in TASK_KINDS


def test_probe_run_probes_a_gaussian_run_through_its_tasks_registration_as_probe_gaussian_does():
    from induction_probes import Run, probe_run
    from induction_probes.probes.run_level.checkpoint_probes import GaussianProbes, probe_gaussian

    run = Run.open("gaussian-ih2")
    steps = [run.steps[0], run.steps[-1]]
    probes = probe_run(run, steps=steps)
    # the same call in the same process (its default probe set is probe_gaussian's): exactly equal
    assert list(probes) == [probe_gaussian(run, step) for step in steps]
    assert all(isinstance(p, GaussianProbes) for p in probes) and probes.steps == steps
    assert probes[-1].relative_mse < 0.1 < probes[0].relative_mse  # trained: the error fell (1 is the mean's)
    (chosen,) = probe_run(run, run.task.eval_set(50, 3), [steps[-1]])
    assert chosen == probe_gaussian(run, steps[-1], n_seqs=50, seed=3)  # a given probe set is the one used
    table = probes.to_frame()
    window = {f"window_r2_distance{i}" for i in range(3)} | {"target_r2_after_layer0"}  # the layer-0 read-out
    assert set(table.measure) == {"relative_mse", "previous_token", "induction"} | window
    assert set(table.step) == set(steps)
    assert probes.chance == {} and probes.calibration() == {}  # the token probes' chance levels do not apply


def test_a_tasks_own_probe_that_gives_no_run_probes_is_refused_in_one_line(monkeypatch):
    """A task from outside gives its probe as a function, which cannot be type-checked where it is registered:
    what it returns is checked where it is called. Here the ICL-MC task stands in for such a task (the package's
    own table replaced by one that holds such a function)."""
    from induction_probes import Run, probe_run
    from induction_probes.probes.run_level import all_probes

    monkeypatch.setitem(all_probes.TASK_PROBES, MarkovTask, lambda run, eval_set, steps, device: [steps])
    with pytest.raises(ValueError, match="the probe of the task markov gave list, not a RunProbes"):
        probe_run(Run.open("markov-k3"), steps=[0])


def test_an_icl_mc_run_is_probed_on_its_own_tasks_sequences_only():
    from induction_probes import Run, probe_run

    run, gaussian = Run.open("markov-k3"), Run.open("gaussian-ih2")
    with pytest.raises(ValueError, match="an ICL-MC run is probed on ICL-MC sequences .* not a GaussianEvalSet"):
        probe_run(run, gaussian.task.eval_set(4, 0), [run.steps[-1]])


def test_a_simple_prior_is_what_its_registration_says_not_where_it_stands():
    assert tuple(SIMPLE_PRIORS) == ("dirichlet", "doubly-stochastic", "unigram")
    assert PRIORS.names(needs_p=True) == ("spectrum", "mixture")

    def two_state_rows(n_seqs, k, order, alpha, p, generator):
        top = torch.rand(n_seqs, k**order, k, generator=generator, dtype=torch.float64).topk(2, dim=-1).indices
        return torch.zeros(n_seqs, k**order, k, dtype=torch.float64).scatter_(-1, top, 0.5)

    PRIORS.register("two-state", two_state_rows, simple=True)
    try:
        assert "two-state" in SIMPLE_PRIORS and PRIORS.names(needs_p=True) == ("spectrum", "mixture")
        task = MarkovTask(k=4, seq_len=20, prior="two-state", eval_prior="two-state")
        sample = task.stream(seed=0).take(70)  # two seeded blocks of 64
        assert set(sample.transitions.unique().tolist()) == {0.0, 0.5}  # drawn by the registered function
        assert ((sample.transitions > 0).sum(-1) == 2).all()
        assert task.describe_prior() == "two-state"
        mixed = MarkovTask(k=4, seq_len=20, prior="mixture", p=0.25, mixture=("two-state", "unigram"))
        assert mixed.sequences_per_batch(8) == {"two-state": 2, "unigram": 6}
    finally:
        PRIORS.unregister("two-state")
    with pytest.raises(ValueError, match="prior must be one of dirichlet, doubly-stochastic, unigram, spectrum"):
        MarkovTask(k=4, prior="two-state")


def test_a_worker_makes_the_registrations_of_its_parent_again():
    # a function of (patterns, tokens) is what PROBES holds, and the round trip is the registry's: the worker gets
    # "module:name", which it resolves and checks as its own lazy entries (a task registered as a function, or a
    # function of other arguments, would now be refused there)
    PROBES.register("twice", twice_the_pattern)
    try:
        sent = [item for item in outside_registrations() if item["name"] == "twice"]
        assert sent == [
            {
                "registry": "induction_probes.probes.attention.probe_registry",
                "kind": "probe",
                "name": "twice",
                "entry": f"{__name__}:twice_the_pattern",
                "info": {},
            }
        ]
        PROBES.unregister("twice")
        register_again(sent)
        assert PROBES.get("twice") is twice_the_pattern  # found again from the module that defines it
    finally:
        PROBES.unregister("twice")

    def local():
        pass

    PROBES.register("local", local)
    try:
        with pytest.raises(ValueError, match="not defined at the top level of a module"):
            outside_registrations()
    finally:
        PROBES.unregister("local")


def test_a_worker_makes_a_task_kind_of_its_parent_again_from_plain_data():
    kind = register_task(TaskKind(SecondMarkovTask, (RecipeEntry(SecondMarkovRecipe, "ICL-MC, renamed"),)))
    try:
        (sent,) = [item for item in outside_registrations() if item["name"] == "second-markov"]
        assert sent["entry"]["task"] == f"{__name__}:SecondMarkovTask"  # JSON a worker is sent, not the objects
        assert json.loads(json.dumps(sent)) == sent
        unregister_task(kind)
        assert "second-markov" not in recipe_names()
        register_again([sent])
        again = TASK_KINDS.get("second-markov")
        assert again == kind and again is not kind  # rebuilt, equal field by field
        assert recipe_entry("second-markov").recipe is SecondMarkovRecipe
    finally:
        unregister_task("second-markov")


def second_markov_probe(run, eval_set, steps, device):
    """A task's own probe, as a plugin gives it (at a module's top level, so that a worker finds it)."""
    from induction_probes.probes.run_level.all_probes import probe_task_run

    return probe_task_run(run, eval_set, steps, device)


def second_markov_report(run, output):
    return f"the second-markov report of {run.path.name}"


def test_register_task_writes_the_kind_its_probe_and_its_view_and_unregister_task_removes_all_three():
    from induction_probes.probes.report import task_views
    from induction_probes.probes.report.run_views import TASK_VIEWS
    from induction_probes.probes.report.view_protocols import ResolvedView
    from induction_probes.probes.run_level.all_probes import TASK_PROBES

    own = f"{__name__}:second_markov_report"  # a function may be named by its module and name
    view = TaskView(task_views.probe_task, task_views.ablate_task, own, task_views.task_report_html)
    kind = TaskKind(SecondMarkovTask, (RecipeEntry(SecondMarkovRecipe, "ICL-MC, renamed"),))
    register_task(kind, probe=second_markov_probe, view=view)
    try:
        assert TASK_KINDS.get("second-markov") is kind and TASK_PROBES[SecondMarkovTask] is second_markov_probe
        resolved = ResolvedView(task_views.probe_task, task_views.ablate_task, second_markov_report, view.html)
        assert TASK_VIEWS[SecondMarkovTask] == resolved  # resolved once, at registration
        (sent,) = [item for item in outside_registrations() if item["name"] == "second-markov"]
        assert sent["kind"] == "task"  # a worker only trains: it is sent the kind alone
        register_task(kind, replace=True)  # again without them: the generic probe and view
        assert SecondMarkovTask not in TASK_PROBES and SecondMarkovTask not in TASK_VIEWS
        register_task(kind, probe=second_markov_probe, view=view, replace=True)
    finally:
        unregister_task("second-markov")
    assert "second-markov" not in TASK_KINDS
    assert SecondMarkovTask not in TASK_PROBES and SecondMarkovTask not in TASK_VIEWS


@pytest.mark.parametrize(
    "probe, view, message",
    [
        (len, None, "the probe of the task second-markov is a run probe: a Python function taking"),
        (twice, None, "the probe of the task second-markov is a run probe"),  # takes two arguments, not four
        ("not a reference", None, "is a function or 'package.module:function'"),
        ("json:no_such_function", None, "the probe .* is 'json:no_such_function', which cannot be imported"),
        (None, "a view", "the view of the task second-markov is a TaskView"),
        (None, TaskView(twice, twice, 3, twice), "the report view of the task second-markov is a function, got 3"),
    ],
)
def test_register_task_refuses_a_probe_or_view_that_cannot_be_called_and_registers_nothing(probe, view, message):
    kind = TaskKind(SecondMarkovTask, (RecipeEntry(SecondMarkovRecipe, "ICL-MC, renamed"),))
    with pytest.raises(ValueError, match=message):
        register_task(kind, probe=probe, view=view)
    assert "second-markov" not in TASK_KINDS


def test_the_packages_own_registrations_cannot_be_replaced_or_unregistered():
    kind = TASK_KINDS.get("markov")
    for undo in (
        lambda: TASK_KINDS.register("markov", "os:system", replace=True),
        lambda: TASK_KINDS.unregister("markov"),
    ):
        with pytest.raises(ValueError, match="the task 'markov' is the package's own"):
            undo()
    assert TASK_KINDS.get("markov") is kind
    registry = Registry("thing", __name__)  # an outside registration is replaced and unregistered as before
    registry.register("a", twice)
    registry.register("a", thrice_of, replace=True)
    registry.unregister("a")


@pytest.mark.parametrize(
    "entry, message",
    [
        ("json:no_such_attribute", "cannot be imported: AttributeError"),
        ("no_such_module_anywhere:thing", "cannot be imported: ModuleNotFoundError"),
        ("json:JSONDecoder", "a type, not a function"),
    ],
)
def test_a_lazy_entry_that_is_not_what_its_registry_holds_is_one_line_when_resolved(entry, message):
    registry = Registry("thing", __name__, Expects("a function", lambda value: not isinstance(value, type)))
    registry.register("odd", entry)  # not imported yet: registering stays cheap
    with pytest.raises(UnusableEntry, match=f"^the thing 'odd' is registered as '{entry}', .*{message}"):
        registry.get("odd")
    assert issubclass(UnusableEntry, ValueError)


@pytest.mark.parametrize("entry", [".json:dumps", "json:", ":dumps", "js on:dumps", "json:dumps()"])
def test_a_lazy_entry_must_name_an_absolute_module_and_an_attribute(entry):
    with pytest.raises(ValueError, match="package.module:attribute"):
        Registry("thing", __name__).register("odd", entry)
