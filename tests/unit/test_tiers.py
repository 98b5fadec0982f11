"""The suite's two tiers: every test the slow tier names (tests/conftest.py's SLOW) is still a test of its file,
and `make test` runs the fast tier and then the slow one with the same options, so that CI, which runs
`make test`, runs every test."""

import ast
import re
from pathlib import Path

from conftest import SLOW, is_slow

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
