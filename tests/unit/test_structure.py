"""The layout's promises: files and functions stay small, the command line parses without torch, few imports
are deferred and each says why, the registries stay four, every model and run parameter is typed, and the
repository stands on its own. Which way imports go is tests/unit/test_layers.py's."""

import ast
import importlib
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from induction_probes.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for package in ("circuits", "probes", "face") for p in (ROOT / package).rglob("*.py"))


def test_no_source_file_over_400_lines_and_no_function_over_60():
    assert len(SOURCES) > 20
    for path in SOURCES:
        text = path.read_text()
        assert text.count("\n") <= 400, f"{path.relative_to(ROOT)} has {text.count(chr(10))} lines"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                assert length <= 60, f"{path.relative_to(ROOT)}:{node.lineno} {node.name} has {length} lines"


def test_nothing_in_the_repository_points_outside_it():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    outside = ("DESIGN" + ".md", "reference" + "/")  # split so that this file does not name them itself
    for name in tracked:
        path = ROOT / name
        if path.suffix in (".py", ".md", ".toml", ".txt", "") and path.is_file():
            text = path.read_text(errors="replace")
            assert not any(word in text for word in outside), f"{name} names a file outside the repository"


@pytest.mark.parametrize("argv", [["--help"], ["frobnicate"], ["--frobnicate"], []])
def test_the_command_list_and_a_mistyped_command_import_no_command_module_and_no_torch(argv):
    # nor numpy or jaxtyping (which imports numpy): together they cost --help about 0.4 s; the list is the table's
    code = (
        "import sys\nfrom induction_probes.cli import COMMANDS, main\n"
        "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as stop:\n    code = stop.code\n"
        "heavy = [m for m in ('torch', 'numpy', 'jaxtyping') if m in sys.modules]\n"
        "heavy += [c.module for c in COMMANDS if f'induction_probes.cli.{c.module}' in sys.modules]\n"
        "assert not heavy, f'imported while parsing: {heavy}'\nprint('exit', code)"
    )
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("exit 0" if "--help" in argv else "exit 2")
    if argv == ["--help"]:  # every command of the table is listed with its summary
        summaries = " ".join(result.stdout.split())
        assert all(f"{c.name} {c.summary.replace('%%', '%')}" in summaries for c in COMMANDS), result.stdout


def test_the_command_table_names_every_command_module_and_what_each_builds():
    """Each command's module fills exactly the parsers the table gives it, and every module of the command line
    but its shared ones is some command's."""
    by_module: dict[str, set[str]] = {}
    for command in COMMANDS:
        by_module.setdefault(command.module, set()).add(command.name)
    for module, names in by_module.items():
        assert set(importlib.import_module(f"induction_probes.cli.{module}").PARSERS) == names, module
    modules = {path.stem for path in (ROOT / "face" / "cli").glob("*.py")} - {"__init__", "common"}
    assert modules == set(by_module)


def declared_python_floor() -> tuple[int, int]:
    floor = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert floor.startswith(">="), floor
    major, minor = floor[2:].split(".")[:2]
    return int(major), int(minor)


def top_level_imports() -> dict[str, Path]:
    """Every top-level module a source file imports, lazy imports inside functions included."""
    found = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], path)
    return found


# Standard-library modules that appeared after 3.11; none may be imported while 3.11 is the declared floor.
STDLIB_AFTER_3_11 = {"annotationlib", "compression"}


def test_the_code_imports_only_what_the_declared_oldest_python_has_and_pyproject_declares():
    """requires-python names the oldest Python the code runs on (3.11: tomllib, for sweep specs); the suite
    runs on one at least that old, and every other import is this package or a declared requirement."""
    assert sys.version_info[:2] >= declared_python_floor() == (3, 11)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    declared = {re.split(r"[<>=!~ \[;]", r)[0].lower().replace("-", "_") for r in requirements}
    distributions = importlib.metadata.packages_distributions()
    for name, path in sorted(top_level_imports().items()):
        where = path.relative_to(ROOT)
        if name in sys.stdlib_module_names or name == "__future__":
            assert name not in STDLIB_AFTER_3_11, f"{where} imports {name}, which Python 3.11 lacks"
            continue
        if name == "induction_probes":
            continue
        providers = {d.lower().replace("-", "_") for d in distributions.get(name, [name])}
        assert providers & declared, (
            f"{where} imports {name} ({', '.join(providers)}), which pyproject does not declare"
        )


def test_every_folder_of_the_package_is_a_listed_package():
    """pyproject lists the packages by hand (package-dir maps folders that setuptools' find cannot see): a folder
    left out is missing from the wheel and from the strict editable install (probes/circuit/ was, until a
    `circuit` import failed under the latter)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {
        ".".join([package, *init.parent.relative_to(ROOT / folder).parts])
        for package, folder in setuptools["package-dir"].items()
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert found == set(setuptools["packages"]), (sorted(found - set(setuptools["packages"])), "not listed")


def test_every_runtime_requirement_is_imported_by_the_package():
    """A declared requirement nothing imports only costs installs (einops was declared and never used)."""
    requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {re.split(r"[<>=!~ \[;]", r)[0].lower().replace("-", "_") for r in requirements}
    distributions = importlib.metadata.packages_distributions()
    imported = {d.lower().replace("-", "_") for name in top_level_imports() for d in distributions.get(name, [name])}
    assert declared <= imported, f"declared but never imported: {sorted(declared - imported)}"


# The jaxtyping dimension names of the package, one name per meaning: an axis named "seq" in some functions
# and "pos" in others reads as two different axes.
DIMENSIONS = {
    "batch": "sequences (or chains) in a batch",
    "pos": "token positions",
    "pos_1": "positions but the last",
    "pos_plus_one": "positions and the one after",
    "new_pos": "generated positions",
    "length": "steps of a walk",
    "query_pos": "an attention pattern's query positions",
    "key_pos": "its key positions",
    "head": "heads of a layer",
    "d_model": "residual width",
    "d_head": "head width",
    "d_vocab": "vocabulary",
    "d_in": "a linear map's input width",
    "d_out": "its output width",
    "width": "a residual block's width",
    "k": "ICL-MC states",
    "contexts": "(n − 1)-token contexts",
    "state": "states of a lifted n-gram chain",
    "windows": "n-token windows",
    "distance": "look-back distances",
    "resample": "bootstrap resamples",
    "variant": "an attribution's variants: AtP*, then with each layer's gradient dropped (GradDrop)",
    "d": "the Gaussian task's dimensions",
    "chain": "SGLD chains",
    "draw": "SGLD draws",
    "n": "points of a fit",
    "token": "a vocabulary's tokens",
    "byte": "a text's bytes, in order",
    "layer": "layers of a model",
    "edge": "edges of a model's circuit graph (sender, receiver, input)",
    "sender": "what writes into the residual stream: the embedding, each head, each MLP",
    "receiver": "what reads an edge: a head's query, key or value input, or the logits",
    "row": "rows of a matrix a function is given",
    "k_1": "the k − 1 directions orthogonal to all-ones",
    "history": "(n − 1)·d: the previous n − 1 vectors of IH_n side by side",
    "rng_state": "a random generator's state, as bytes",
    "...": "any leading axes",
    "2": "the two states of a k = 2 chain",
}


def test_every_tensor_annotation_names_its_axes_from_one_vocabulary():
    unknown = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("Float", "Int", "Bool", "Shaped")
                and isinstance(node.slice, ast.Tuple)
                and isinstance(node.slice.elts[-1], ast.Constant)
                and isinstance(node.slice.elts[-1].value, str)  # not Float[Tensor, ...]
            ):
                for dim in node.slice.elts[-1].value.split():
                    if dim not in DIMENSIONS:
                        unknown.setdefault(dim, f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not unknown, f"axis names outside the vocabulary (add one with its meaning, or use one): {unknown}"


def public_functions(tree: ast.Module):
    """Module-level functions and the methods of module-level classes whose names do not start with _."""
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for member in members:
            if isinstance(member, ast.FunctionDef) and not member.name.startswith("_"):
                yield member


def test_no_public_function_returns_a_bare_tensor():
    """A return type of plain ``Tensor`` says nothing of its axes; the reader then has to run the code."""
    bare = [
        f"{path.relative_to(ROOT)}:{function.lineno} {function.name}"
        for path in SOURCES
        for function in public_functions(ast.parse(path.read_text()))
        if function.returns is not None and ast.unparse(function.returns) in ("Tensor", "torch.Tensor")
    ]
    assert not bare, f"public functions returning a bare Tensor (give its axes): {bare}"


def test_the_probe_set_defaults_are_written_once():
    """The probe seed and the probe set's size live in circuits/defaults.py; a second literal 12345
    (it was in 15 places) would let two commands drift apart. Docstrings and comments may quote it."""
    home = ROOT / "circuits" / "defaults.py"
    seeds = [p for p in SOURCES if p != home and re.search(r"(?<![\w.])12345(?![\w.])", code_only(p))]
    assert seeds == [], "the probe seed written outside circuits/defaults.py"


def code_only(path: Path) -> str:
    """A module's source without its comments and docstrings (which may quote the value)."""
    import io
    import tokenize

    strings = {
        (node.lineno, node.col_offset)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    kept = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        if token.type != tokenize.COMMENT and not (token.type == tokenize.STRING and token.start in strings)
    ]
    return " ".join(kept)


def test_the_probes_root_holds_at_most_ten_modules():
    """probes/ is cut by what it measures (attention, behaviour, ablation, progress, comparison, run_level); a
    module left at its root is one a reader has to place by hand. 19 sat there before the cut."""
    modules = sorted(p.name for p in (ROOT / "probes").glob("*.py"))
    assert len(modules) <= 10, f"probes/ holds {len(modules)} modules at its root: {modules}"


def module_registries() -> dict[str, object]:
    """Every registry the package's modules define at their top level, by ``module.NAME``."""
    from induction_probes.circuits.registry import Registry

    found = {}
    for path in SOURCES:
        if "Registry(" not in path.read_text():
            continue
        module = importlib.import_module(module_name(path))
        found |= {f"{module.__name__}.{k}": v for k, v in vars(module).items() if isinstance(v, Registry)}
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(parts if parts[0] == "induction_probes" else ("induction_probes", *parts))


def test_at_most_four_registries_and_one_of_them_keyed_by_the_task_name():
    """Seven registries, four keyed by the same task name and tied by strings, made a trace of ``probe`` cross
    all seven; a task is now one entry (a TaskKind), and probes, priors and model classes keep their own."""
    from induction_probes import TASK_KINDS

    registries = module_registries()
    assert len(registries) <= 4, f"{len(registries)} registries: {sorted(registries)}"
    task_names = set(TASK_KINDS.names())
    keyed_by_task = [name for name, registry in registries.items() if task_names & set(registry.names())]
    assert keyed_by_task == ["induction_probes.circuits.recipes.task_kinds.TASK_KINDS"]


def test_every_public_model_and_run_parameter_is_typed():
    """A ``model`` is a HookedModel (circuits/models/hooked_model.py), an ``nn.Module`` where any module will
    do (the LLC, the optimisers), or a language model's source; a ``run`` is a Run, or RunOrPath where a folder
    or shipped name opens one. 73 untyped models and 46 untyped runs left the reader to guess."""
    untyped = [
        f"{path.relative_to(ROOT)}:{function.lineno} {function.name}({arg.arg})"
        for path in SOURCES
        for function in public_functions(ast.parse(path.read_text()))
        for arg in function.args.posonlyargs + function.args.args + function.args.kwonlyargs
        if arg.arg in ("model", "run") and arg.annotation is None
    ]
    assert not untyped, f"untyped model or run parameters: {untyped}"


def deferred_imports() -> list[tuple[Path, int, str, bool]]:
    """Every import made inside a function, and every ``lazy_module`` declaration: (file, line, what, whether it
    says why, in a comment on its line, on the line above, or on the first line of the run it belongs to)."""
    found = []
    for path in SOURCES:
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        nodes = [
            node
            for function in ast.walk(tree)
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
            for node in ast.walk(function)
            if isinstance(node, (ast.Import, ast.ImportFrom))
        ]
        nodes += [
            node
            for node in tree.body
            if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "lazy_module"
        ]
        for node in sorted(set(nodes), key=lambda n: n.lineno):
            first = node.lineno - 1
            while first > 0 and is_deferred_line(lines[first - 1]):  # the run of imports or declarations it is in
                first -= 1
            said = "#" in lines[node.lineno - 1] or "#" in lines[first] or lines[first - 1].strip().startswith("#")
            found.append((path, node.lineno, ast.unparse(node), said))
    return found


def is_deferred_line(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(("import ", "from ")) or "= lazy_module(" in stripped


def test_imports_are_deferred_rarely_and_each_says_why():
    """180 function-local imports hid what a module depends on. What stays deferred is the optional extras (Ray,
    devinterp), the Hugging Face code a language model needs and a run does not, and, declared once at the top
    of each module the command line loads while parsing, what would bring torch into ``--help``."""
    deferred = deferred_imports()
    inside = [item for item in deferred if "lazy_module" not in item[2]]
    assert len(inside) <= 40, f"{len(inside)} imports inside functions: {[f'{p.name}:{n}' for p, n, _, _ in inside]}"
    silent = [f"{path.relative_to(ROOT)}:{line} {what}" for path, line, what, said in deferred if not said]
    assert not silent, f"deferred imports that do not say why: {silent}"


def test_the_command_line_only_parses_calls_and_prints():
    """cli/ held 1,683 lines, 700 of them views a notebook could not call; the views are the report layer's
    now. The command line stays within 1,050 lines (900 until issue 50's table of commands, a line each, and a
    module per command that needs torch or not; 950 until issue 63's ``circuit`` command and issue 62's
    ``--all-steps`` for ``ablate``; 1,000 until ``circuit``'s language-model options and ``movie --around``),
    and each handler (a ``run_*`` function) within 15 lines of code after its docstring: parse, call, print."""
    cli = sorted((ROOT / "face" / "cli").glob("*.py"))
    lines = sum(path.read_text().count("\n") for path in cli)
    assert lines <= 1050, f"face/cli/ has {lines} lines: move what is not parsing to probes/report/"
    long = []
    for path in cli:
        for function in ast.parse(path.read_text()).body:
            if isinstance(function, ast.FunctionDef) and function.name.startswith("run_"):
                body = function.body[1:] if ast.get_docstring(function) else function.body
                if body[-1].end_lineno - body[0].lineno + 1 > 15:
                    long.append(f"{path.name}:{function.name}")
    assert not long, f"handlers longer than 15 lines: {long}"


# --- links between modules that are strings (issue 50) --------------------------------------------------------
MODULE_NAME = re.compile(r"^induction_probes(\.\w+)+(:[\w.]+)?$")  # "induction_probes.x.y" or "...:name"
PREFIXED_NAME = re.compile(r"^\0[\w.]*:[A-Za-z_][\w.]*$")  # f"{_MODULE}.sub:name", the module a variable


def string_links(source: str, where: str) -> list[str]:
    """The places ``source`` links to code by a string a reader or a type checker cannot follow: every
    ``lazy_module("...")``, every registration whose entry is a string, and every other string (an f-string's
    constant parts with its fields as placeholders) that names a module of the package or a module's function.
    Docstrings are prose, and the face's ``EXPORTS`` is the one table such links are meant for (the command
    table names modules by their short names, which this leaves alone too)."""
    tree = ast.parse(source)
    skipped = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPORTS" for t in node.targets):
            skipped |= {id(n) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None)) if isinstance(node, ast.Call) else None
        if name in ("lazy_module", "register") and len(node.args) >= (1 if name == "lazy_module" else 2):
            argument = node.args[0] if name == "lazy_module" else node.args[1]
            if isinstance(argument, (ast.Constant, ast.JoinedStr)):
                found.append(f"{where}:{node.lineno} {ast.unparse(node)[:100]}")
                skipped |= {id(n) for n in ast.walk(node)}
        elif isinstance(node, ast.JoinedStr):
            parts = "".join(v.value if isinstance(v, ast.Constant) else "\0" for v in node.values)
            if MODULE_NAME.match(parts.split("\0")[0] or "-") or PREFIXED_NAME.match(parts):
                found.append(f"{where}:{node.lineno} {ast.unparse(node)[:100]}")
            skipped |= {id(n) for n in ast.walk(node)}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_NAME.match(node.value):
            found.append(f"{where}:{node.lineno} {node.value!r}")
    return found


def test_at_most_15_links_between_modules_are_strings_and_at_most_5_lazy_modules():
    links = [link for path in SOURCES for link in string_links(path.read_text(), str(path.relative_to(ROOT)))]
    assert len(links) <= 15, f"{len(links)} string links between modules:\n" + "\n".join(links)
    lazy = [link for link in links if "lazy_module(" in link]
    assert len(lazy) <= 5, (
        f"{len(lazy)} lazy_module declarations (laziness belongs at the command line):\n" + "\n".join(lazy)
    )


def test_every_kind_of_string_link_is_counted_and_prose_and_the_face_table_are_not():
    source = '''"""A docstring naming induction_probes.circuits.runs and "a:b" is prose."""
torch = lazy_module("torch")
PRIORS.register("dirichlet", "induction_probes.circuits.tasks.markov.priors:draw_dirichlet", simple=True)
PRIORS.register("unigram", f"{_DRAWS}:draw_unigram")
PRIORS.register("real", draw_real)
_DRAWS = "induction_probes.circuits.tasks.markov.priors"
view = f"{_HERE}.task:probe_task"
EXPORTS = {"Run": "induction_probes.circuits.runs.reader"}
ratio = "1:2"
curriculum = "PRIOR:N"
line = f"{where}:{line}"
text = "see circuits/lazy.py"
'''
    found = [link.split(" ", 1)[0] for link in string_links(source, "m.py")]
    assert found == ["m.py:2", "m.py:3", "m.py:4", "m.py:6", "m.py:7"], found


def test_no_two_modules_share_a_file_name():
    """issue 50: 21 file names were repeated (three task.py, four markov.py, two registry.py); a search, a
    traceback or an editor's tab then names the wrong one. A package's __init__.py is the only repeat."""
    by_name: dict[str, list[str]] = {}
    for path in SOURCES:
        if path.name != "__init__.py":
            by_name.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    repeated = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not repeated, f"file names used twice: {repeated}"
