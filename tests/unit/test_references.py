"""Every cross-reference a reader follows resolves: each ``:mod:``, ``:func:``, ``:class:``, ``:meth:``, ``:attr:``
and ``:data:`` in the package's docstrings names something that imports (Sphinx's order: as written, then in the
module, its package, or one of the module's classes; a leading dot is relative to the package), and each path of
the repository that the README and docs/ write in backticks exists. A rename leaves no stale name behind."""

import ast
import importlib
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r":(mod|func|class|meth|attr|data|exc):`([^`]+)`")
REPOSITORY_PATH = re.compile(
    r"`((?:circuits|probes|induction_probes|tests|bench|docs|experiments|checkpoints)/[^`\s]*)`"
)
PLACEHOLDER = re.compile(r"[<>*{}$]|XXX")  # `experiments/results/<name>/`, `step_XXXXXXXX`: a pattern, not a path


def package_folders() -> dict[str, str]:
    """Folder -> package name, as pyproject's package-dir installs them."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return {folder: package for package, folder in mapping.items() if folder != "checkpoints"}


def module_name(path: Path, folders: dict[str, str]) -> str:
    relative = path.relative_to(ROOT)
    parts = list(relative.with_suffix("").parts[1:])
    return ".".join([folders[relative.parts[0]], *(parts[:-1] if parts[-1] == "__init__" else parts)])


def resolves(dotted: str) -> bool:
    """Whether the longest importable prefix of ``dotted`` has the rest as attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def candidates(target: str, module: str, package: str, classes: list[str]) -> list[str]:
    target = re.sub(r"\s+", "", target).lstrip("~").removesuffix("()")  # a reference may break across lines
    if target.startswith("."):
        base = package
        for _ in range(len(target) - len(target.lstrip(".")) - 1):
            base = base.rpartition(".")[0]
        return [f"{base}.{target.lstrip('.')}"]
    return [target, f"{module}.{target}", f"{package}.{target}", *(f"{module}.{c}.{target}" for c in classes)]


def test_every_docstring_reference_names_something_that_imports():
    folders, stale = package_folders(), []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            text, module = path.read_text(), module_name(path, folders)
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            classes = [node.name for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ClassDef)]
            for found in REFERENCE.finditer(text):
                if not any(resolves(name) for name in candidates(found.group(2), module, package, classes)):
                    stale.append(f"{path.relative_to(ROOT)}: {found.group(0)}")
    assert not stale, "references to nothing:\n" + "\n".join(stale)


def test_every_repository_path_in_the_docs_exists():
    missing = [
        f"{doc.relative_to(ROOT)}: {found.group(1)}"
        for doc in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
        for found in REPOSITORY_PATH.finditer(doc.read_text())
        if not PLACEHOLDER.search(found.group(1)) and not (ROOT / found.group(1).split("::")[0]).exists()
    ]
    assert not missing, "paths to nothing:\n" + "\n".join(missing)
