"""The suite's two tiers: every test the slow tier names (tests/conftest.py's SLOW) is still a test of its file,
and `make test` runs the fast tier and then the slow one with the same options, so that CI, which runs
`make test`, runs every test."""

import ast
import re
from pathlib import Path

import pytest
from conftest import SLOW, is_slow

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


def test_every_name_in_the_slow_tier_is_a_test_of_its_file():
    assert SLOW
    for file, names in SLOW.items():
        tree = ast.parse((ROOT / file).read_text())
        tests = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        tests = {name for name in tests if name.startswith("test_")}
        missing = set(names) - {"*"} - tests
        assert tests and not missing, f"{file} has no test named {sorted(missing)}"


def test_make_test_runs_the_fast_tier_then_the_slow_one_with_the_same_options():
    rules = {
        match.group(1): (match.group(2).split(), [line.strip() for line in match.group(3).splitlines()])
        for match in re.finditer(r"^([\w-]+):(.*)\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.MULTILINE)
    }
    assert rules["test-fast"][1] == ['$(PYTEST) -m "not slow" tests']
    assert rules["test"] == (["test-fast"], ["$(PYTEST) -m slow tests"])


def test_a_test_is_slow_by_its_file_and_name(request):
    class Item:  # what is_slow reads of a collected test
        def __init__(self, file: str, name: str):
            self.fspath, self.originalname = ROOT / file, name

    assert is_slow(Item("tests/integration/test_ray_cluster.py", "test_anything"))
    assert is_slow(Item("tests/unit/test_llc_estimator.py", SLOW["tests/unit/test_llc_estimator.py"][0]))
    assert not is_slow(Item("tests/unit/test_llc_estimator.py", "test_defaults_follow_the_documented_rule"))
    assert not is_slow(Item("tests/unit/test_tiers.py", request.node.originalname))


def test_the_slow_tier_imports_only_files_that_can_hold_a_slow_test_and_none_lies_elsewhere(pytester, monkeypatch):
    """A test file that neither SLOW names nor marks a test slow in its text is never imported by ``-m slow``
    (here it would fail at import); a test made slow some other way fails every collection, the fast tier's too,
    so that it cannot silently leave CI."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the inner runs need no installed plugin
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(
        test_marked="import pytest\n\n@pytest.mark.slow\ndef test_long():\n    pass\n\ndef test_short():\n    pass\n",
        test_plain="raise RuntimeError('imported')\n",
    )
    slow = pytester.runpytest("-m", "slow", "-p", "no:cacheprovider")
    slow.assert_outcomes(passed=1, deselected=1)
    pytester.makepyfile(test_hidden="import pytest\n\n@getattr(pytest.mark, 'sl' + 'ow')\ndef test_long():\n    pass\n")
    (pytester.path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    fast = pytester.runpytest("-m", "not slow", "-p", "no:cacheprovider")
    assert fast.ret == pytest.ExitCode.USAGE_ERROR
    fast.stderr.fnmatch_lines(["*test_hidden.py::test_long is slow, but the slow tier would not collect its file*"])
