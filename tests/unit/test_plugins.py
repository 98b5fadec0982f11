"""What a module named in ``$INDUCTION_PROBES_PLUGINS`` may not do (issue 40): fail to parse, raise, call
``sys.exit``, take over a task of the package's own or register an entry that is not what its registry holds.
Each ends every command in one line on stderr with status 2, nothing on stdout, and the package's own
registrations unchanged."""

import itertools

import pytest
from plugin_distributions import installed_plugin

from induction_probes import PROBES, TASK_KINDS
from induction_probes.circuits.plugins import PLUGINS_VARIABLE
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.recipes.task_kinds import recipe_entry
from induction_probes.circuits.registry import UnusableEntry
from induction_probes.cli import main

NUMBERS = itertools.count()  # each plugin a module name of its own: a module that imported stays imported


def plugin(tmp_path, monkeypatch, source: str) -> str:
    name = f"issue40_plugin_{next(NUMBERS)}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(PLUGINS_VARIABLE, name)
    return name


def refused(capsys, argv=("info", "markov-k3")) -> str:
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("induction-probes: error: "), err
    return err


@pytest.mark.parametrize(
    "source, message",
    [
        ("def (\n", "SyntaxError"),
        ("raise RuntimeError('boom')\n", "RuntimeError: boom"),
        ("import sys\nsys.exit(3)\n", "sys.exit(3)"),
        ("import sys\nsys.exit(0)\n", "sys.exit(0)"),
        ("raise ValueError('two\\nlines')\n", "ValueError: two lines"),
        ("import no_such_module_anywhere\n", "No module named 'no_such_module_anywhere'"),
    ],
)
def test_a_plugin_that_fails_to_import_is_one_line_naming_it(source, message, tmp_path, monkeypatch, capsys):
    name = plugin(tmp_path, monkeypatch, source)
    err = refused(capsys)
    assert name in err and message in err


@pytest.mark.parametrize("names", [".plug", "..x", "a..b", "my plugin", "x-y", "1st"])
def test_a_name_that_is_no_module_name_is_refused_by_name(names, monkeypatch, capsys):
    monkeypatch.setenv(PLUGINS_VARIABLE, names)
    assert "not a module name" in refused(capsys)


@pytest.mark.parametrize(
    "registration",
    [
        'TASK_KINDS.register("markov", "os:system")',
        'TASK_KINDS.register("markov", "os:system", replace=True)',
        "register_task(TaskKind(MarkovTask, ()), replace=True)",
        "register_task(TaskKind(GaussianTask, (RecipeEntry(MarkovRecipe, 'mine'),)))",
        'TASK_KINDS.unregister("markov")',
    ],
)
def test_a_plugin_cannot_take_over_a_task_of_the_package(registration, tmp_path, monkeypatch, capsys):
    kind = TASK_KINDS.get("markov")
    source = (
        "from induction_probes import TASK_KINDS, GaussianTask, MarkovTask, RecipeEntry, TaskKind, register_task\n"
        "from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe\n"
        f"{registration}\n"
    )
    plugin(tmp_path, monkeypatch, source)
    assert "markov" in refused(capsys)
    assert TASK_KINDS.get("markov") is kind and recipe_entry("markov").recipe is MarkovRecipe
    monkeypatch.delenv(PLUGINS_VARIABLE)
    assert main(["info", "markov-k3"]) == 0  # and the next command is as before


@pytest.mark.parametrize(
    "target, message",
    [("os:system", "not a TaskKind"), ("no_such_module_anywhere:Kind", "cannot be imported")],
)
def test_a_task_kind_registered_as_a_string_that_is_no_kind_is_refused_when_resolved(
    target, message, tmp_path, monkeypatch, capsys
):
    source = f'from induction_probes import TASK_KINDS\nTASK_KINDS.register("sideways", "{target}")\n'
    plugin(tmp_path, monkeypatch, source)
    try:
        err = refused(capsys, ["train", "sideways", "--out", str(tmp_path / "run")])
    finally:
        TASK_KINDS.unregister("sideways")
    assert message in err and "'sideways'" in err and target in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "GeneratorExit"])
def test_a_plugin_raising_a_base_exception_on_import_is_one_line_naming_it(raised, tmp_path, monkeypatch, capsys):
    # issue 52 (B7): neither is an Exception, and both once ended the command in a 23-line traceback
    name = plugin(tmp_path, monkeypatch, f"raise {raised}\n")
    err = refused(capsys)
    assert f"names the module '{name}', which failed while being imported: {raised}\n" in err


def test_a_probe_registered_as_a_builtin_is_refused_in_one_line_before_it_is_called(tmp_path, monkeypatch, capsys):
    # issue 52 (B8): "os:system" passed the check (it is callable) and was then called with the patterns
    source = 'from induction_probes import PROBES\nPROBES.register("shell", "os:system")\n'
    plugin(tmp_path, monkeypatch, source)
    try:
        err = refused(capsys, ["probe", "markov-k3", "--step", "4000", "--n-seqs", "10"])
    finally:
        PROBES.unregister("shell")
    assert "the probe 'shell' is registered as 'os:system', a builtin_function_or_method, not a probe" in err


@pytest.mark.parametrize(
    "target, refusal",
    [
        ("os:system", "a builtin_function_or_method, not a probe: a Python function taking (patterns, tokens)"),
        ("json:dumps", "a function taking (obj, *, skipkeys=False"),  # a Python function, but not of (patterns, tokens)
        ("json:JSONDecoder", "a type, not a probe"),
        (f"{__name__}:first_token", None),  # a real probe, defined outside the package: resolved as it is
    ],
)
def test_a_lazy_probe_is_checked_to_be_a_python_function_of_patterns_and_tokens(target, refusal):
    PROBES.register("lazy", target)
    try:
        if refusal is None:
            assert PROBES.get("lazy") is first_token
        else:
            with pytest.raises(UnusableEntry, match="^the probe 'lazy' is registered as") as caught:
                PROBES.get("lazy")
            assert refusal in str(caught.value) and "\n" not in str(caught.value)
    finally:
        PROBES.unregister("lazy")


def first_token(patterns, tokens):
    """A probe as docs/extending.md writes one: each layer's mean attention on the first token, per head."""
    return [pattern[:, :, :, 0].mean(dim=(0, 2)) for pattern in patterns]


def test_an_installed_plugin_is_loaded_from_its_entry_point_before_the_command_line_parses(tmp_path, monkeypatch):
    module = f"issue50_entry_point_{next(NUMBERS)}"
    probe = "entry_point_first_token"
    source = (
        "from induction_probes import PROBES\n"
        "from induction_probes.probes.attention.scores import previous_token\n\n\n"
        "def first_token(patterns, tokens):\n    return previous_token(patterns, tokens)\n\n\n"
        f"PROBES.register({probe!r}, first_token)\n"
    )
    installed_plugin(tmp_path, module, source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(PLUGINS_VARIABLE, raising=False)  # not named anywhere but in its distribution
    assert probe not in PROBES
    assert main(["frobnicate"]) == 2  # refused as a command, after the plugins were loaded
    try:
        assert probe in PROBES and PROBES.get(probe).__module__ == module
    finally:
        PROBES.unregister(probe)  # the other tests of this process see the package's probes only


@pytest.mark.parametrize(
    "source, value, message",
    [
        ("raise RuntimeError('boom')\n", None, "failed while being imported: RuntimeError: boom"),
        ("", "no_such_module_of_theirs", "cannot be imported: No module named 'no_such_module_of_theirs'"),
        ("", "my module", "which is not a module name"),
    ],
)
def test_a_broken_entry_point_is_one_line_naming_its_distribution(
    source, value, message, tmp_path, monkeypatch, capsys
):
    module = f"issue50_broken_entry_point_{next(NUMBERS)}"
    installed_plugin(tmp_path, module, source, value)
    monkeypatch.syspath_prepend(str(tmp_path))
    err = refused(capsys)
    assert f"the entry point 'mine' of the distribution '{module.replace('_', '-')}'" in err and message in err
