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
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def exported_names() -> dict[str, str]:
    """``EXPORTS`` (name -> defining module) as induction_probes/__init__.py writes it."""
    tree = ast.parse((ROOT / "induction_probes" / "__init__.py").read_text())
    assignment = next(n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "EXPORTS")
    return ast.literal_eval(assignment.value)


def installed_layout(site: Path) -> None:
    """The package as a wheel lays it out, as links into this tree: pyproject's package-dir puts circuits/ and
    probes/ under induction_probes, which the editable install's import hook does at run time but pyright, which
    reads folders, cannot see."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    top = site / "induction_probes"
    top.mkdir(parents=True)
    for item in (ROOT / package_dir["induction_probes"]).iterdir():
        (top / item.name).symlink_to(item)
    for package, folder in package_dir.items():
        if package != "induction_probes":
            (site / package.replace(".", "/")).symlink_to(ROOT / folder)


def verify_types(site: Path) -> dict:
    bin_dir = Path(sys.executable).parent
    env = os.environ | {
        "PYTHONPATH": str(site),
        # verifytypes resolves imports with the `python` first on PATH (it ignores --pythonpath): this environment's,
        # or torch's classes would be unknown and every nn.Module with them
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1",  # the wrapper asks PyPI for nothing
    }
    done = subprocess.run(
        [bin_dir / "pyright", "--verifytypes", "induction_probes", "--ignoreexternal", "--outputjson"],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
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
    installed_layout(tmp_path)
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
