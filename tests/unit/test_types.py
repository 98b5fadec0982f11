"""The public names are fully typed: every name of ``induction_probes.EXPORTS`` is a symbol whose type pyright's
``--verifytypes`` reports as known, its signature and, for a class, every public member, down to the types they
name (a ``Run`` is known only when its task's and recipe's classes are).

The check is scoped to the exported names: verifytypes also counts every public symbol of every submodule (about
3,400, a quarter of them unknown), which the package does not promise to users. Names that are unknown are named
in the failure, each with the first reasons pyright gives for its own members."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def exported_names() -> dict[str, str]:
    """``EXPORTS`` (name -> defining module) as the face's __init__.py writes it."""
    tree = ast.parse((ROOT / "face" / "__init__.py").read_text())
    assignment = next(n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "EXPORTS")
    return ast.literal_eval(assignment.value)


def pyright(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """This environment's pinned pyright, run in ``cwd``, resolving imports as an editor would from it: the package
    as installed here (make's strict editable install: a tree of links pyright follows)."""
    bin_dir = Path(sys.executable).parent
    env = os.environ | {
        # pyright resolves imports with the `python` first on PATH: this environment's
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1",  # the wrapper asks PyPI for nothing
    }
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [bin_dir / "pyright", *arguments], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def verify_types(cwd: Path) -> dict:
    done = pyright(["--verifytypes", "induction_probes", "--ignoreexternal", "--outputjson"], cwd)
    assert done.stdout.startswith("{"), done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout)


def reasons(symbols: list[dict], prefix: str, limit: int = 5) -> list[str]:
    """The first diagnostics of the unknown symbols at or under ``prefix`` (a name and its members)."""
    found = []
    for symbol in symbols:
        if symbol["isTypeKnown"] or not (symbol["name"] + ".").startswith(prefix + "."):
            continue
        for diagnostic in symbol["diagnostics"]:
            first = diagnostic["message"].replace("\xa0", " ").splitlines()[0]
            if "docstring" not in first:
                found.append(f"    {symbol['name']}: {first}")
    return found[:limit]


def test_every_exported_name_is_known_to_pyright(tmp_path):
    report = verify_types(tmp_path)
    completeness = report["typeCompleteness"]
    assert completeness.get("pyTypedPath"), report["generalDiagnostics"]  # the package was found, with its py.typed
    symbols = completeness["symbols"]
    by_name = {symbol["name"]: symbol for symbol in symbols}
    exports = exported_names()
    missing = sorted(name for name in exports if f"induction_probes.{name}" not in by_name)
    assert not missing, f"exported names verifytypes did not see: {missing}"
    unknown = sorted(name for name in exports if not by_name[f"induction_probes.{name}"]["isTypeKnown"])
    lines = []
    for name in unknown:
        state = "ambiguous" if by_name[f"induction_probes.{name}"]["isTypeAmbiguous"] else "unknown"
        lines += [f"  {name} ({state})", *reasons(symbols, f"{exports[name]}.{name}")]
    counts = completeness["exportedSymbolCounts"]
    assert not unknown, (
        f"{len(unknown)} of {len(exports)} exported names are not fully typed (whole package: {counts}):\n"
        + "\n".join(lines)
    )


@pytest.mark.parametrize("inside", [True, False])
def test_pyright_resolves_the_package_from_this_environment_inside_the_checkout_and_out(inside, tmp_path):
    """Issue 66: under the default editable install, pyright could not follow package-dir's mapping, and
    ``Run.open`` was Unknown; from inside the checkout, its face folder shadowed the package."""
    folder = ROOT / "tests" if inside else tmp_path
    probe = folder / f"pyright_resolves_{os.getpid()}.py"
    probe.write_text(
        "import induction_probes.circuits.runs\n"
        "from induction_probes import Run\n"
        "reveal_type(Run.open)\n"
        "reveal_type(induction_probes.circuits.runs)\n"
    )
    try:
        done = pyright(["--outputjson", probe.name], folder)
    finally:
        probe.unlink()
    report = json.loads(done.stdout)
    messages = [d["message"] for d in report["generalDiagnostics"]]
    assert not [d for d in report["generalDiagnostics"] if d["severity"] == "error"], messages
    assert 'Type of "Run.open" is "(run: str | PathLike[str]) -> Run"' in messages
    assert 'Type of "induction_probes.circuits.runs" is "Module("induction_probes.circuits.runs")"' in messages
