"""The layer contract: the import graph of the installed package, read from its source (imports inside
functions included, ``if TYPE_CHECKING:`` blocks left out, since they never run), has no circle among modules
or folders and points only down the layers, so each folder can be read knowing only the folders below it."""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import pytest

# Bottom first. A module belongs to the longest entry it equals or lies under; it may import its own layer
# (sideways) and the layers below it, never one above. Why this order:
# - circuits/*.py, the modules directly in circuits/ (configs, limits, checks, errors, paths, names, metrics,
#   devices, the registry class, plugins, lazy_module): every folder uses them and they import only one another.
# - tasks: the task configs and their maths, on circuits/*.py alone.
# - models: the model classes; a recipe's model config and every probe need them, they need no task.
# - constructions and recipes, side by side: hand-made weights for a model; the training recipes,
#   which hold a task and build a model. Neither needs the other.
# - runs: a run directory rebuilds its recipe and its model class by name (models.model_classes).
# - interop and training, side by side: language models refuse the names of shipped runs (runs.shipped);
#   training writes runs. Neither needs the other.
# - workers: what a worker process may import, how it starts and dies, and the Ray session; sweeps and the
#   language-model series (probes) both start workers.
# - sweeps: many trainings. The top of circuits.
# - views: HTML from plain numbers (CircuitsVis's attention explorer, the formation movie's page), below every
#   measurement, so that a probe result can show itself in a notebook (``_repr_html_``); it loads no run itself.
# - probes: measurements on models and runs (their subfolders in an order of their own, below), then the
#   statistics of sweeps, the LLC and the figures, then language-model probes (their figures use the figures
#   layer), then the papers' page and the report (the text, figures and HTML of probe, ablate, report and
#   verify: it reads runs and probes them and never trains, so it is a probes layer; the command line above it
#   only parses, calls and prints).
# - the face (induction_probes.__init__ and .lm) and, last, the command line.
LAYERS: list[list[str]] = [
    ["induction_probes.circuits"],
    ["induction_probes.circuits.tasks"],
    ["induction_probes.circuits.models"],
    ["induction_probes.circuits.constructions", "induction_probes.circuits.recipes"],
    ["induction_probes.circuits.runs"],
    ["induction_probes.circuits.interop", "induction_probes.circuits.training"],
    ["induction_probes.circuits.workers"],
    ["induction_probes.circuits.sweeps"],
    ["induction_probes.probes.views"],
    # probes/, bottom first: the intervals and the long form (probes/intervals.py, tidy.py); what one pass
    # measures (attention patterns and scores, behaviour on sequences); the measures built on them (progress
    # from the weights, ablations); comparisons with the constructions (they read the progress measures); the
    # run level, which gathers all of these for a run
    ["induction_probes.probes"],
    ["induction_probes.probes.attention", "induction_probes.probes.behaviour"],
    ["induction_probes.probes.ablation", "induction_probes.probes.progress"],
    ["induction_probes.probes.comparison"],
    ["induction_probes.probes.run_level"],
    ["induction_probes.probes.llc", "induction_probes.probes.sweeps"],
    ["induction_probes.probes.figures"],
    ["induction_probes.probes.lm"],
    ["induction_probes.probes.circuit"],  # path patching: of our runs and of language models (it reads lm/)
    # both papers' page, and the report (what probe, ablate, report and verify show), side by side: each
    # draws on every measurement and figure above, neither needs the other
    ["induction_probes.probes.paper", "induction_probes.probes.report"],
    ["induction_probes", "induction_probes.lm"],
    ["induction_probes.cli"],
]


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    where: str  # file:line

    def __str__(self) -> str:
        return f"{self.where}: {self.importer} imports {self.imported}"


def package_modules() -> dict[str, Path]:
    """Every module of the installed package and its source file, found from the package's own spec:
    ``induction_probes`` and the folders pyproject maps into it (``circuits/``, ``probes/``)."""
    modules = {}
    for package in ("induction_probes", "induction_probes.circuits", "induction_probes.probes"):
        spec = importlib.util.find_spec(package)  # imports only the (torch-free) parents
        assert spec is not None and spec.submodule_search_locations, f"{package} is not installed as a package"
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if all((root.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
                name = ".".join([package, *(p for p in parts if p != "__init__")])
                modules.setdefault(name, path)
    return modules


def is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def import_nodes(tree: ast.AST):
    """Every import statement, at any depth (functions included), outside ``if TYPE_CHECKING:`` blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if is_type_checking(node):
            yield from (n for child in node.orelse for n in import_nodes(ast.Module(body=[child], type_ignores=[])))
            continue
        yield from import_nodes(node)


def owner(name: str, modules) -> str | None:
    """The module of ``modules`` that importing ``name`` runs last: ``name`` itself or its nearest parent."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def lazy_declarations(tree: ast.AST):
    """Every ``lazy_module("package.module")`` call (circuits/lazy.py): an import made on first use,
    an edge of the graph like any other."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "lazy_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            yield node


def imports_of(name: str, source: str, modules, where: str) -> list[Import]:
    package = name if where.endswith("__init__.py") else name.rpartition(".")[0]
    found = []
    tree = ast.parse(source)
    for node in [*import_nodes(tree), *lazy_declarations(tree)]:
        targets = []
        if isinstance(node, ast.Call):
            targets = [node.args[0].value]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:  # a relative import, resolved against the importer's package
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}".rstrip(".")
            # `from pkg import sub` imports the module pkg.sub when there is one, else a name of pkg
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            imported = owner(target, modules)
            edge = Import(name, imported, f"{where}:{node.lineno}")
            if imported is not None and imported != name and edge not in found:
                found.append(edge)
    return found


def import_graph(modules: dict[str, Path] | None = None) -> list[Import]:
    modules = package_modules() if modules is None else modules
    root = Path(__file__).resolve().parents[2]
    edges = []
    for name, path in sorted(modules.items()):
        where = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        edges += imports_of(name, path.read_text(), modules, where)
    return edges


def circles(edges: list[Import]) -> list[list[Import]]:
    """The strongly connected components of more than one module (Tarjan), each as the imports inside it."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, set()).add(edge.imported)
        graph.setdefault(edge.imported, set())
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v: str) -> None:  # iterative depth-first search: no recursion limit on a deep graph
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = len(index)
        stack.append(v), on_stack.add(v)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.add(w)
                        if w == node:
                            break
                    if len(component) > 1:
                        components.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child), on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [[e for e in edges if e.importer in c and e.imported in c] for c in components]


def folder_circles(edges: list[Import], modules: dict[str, Path]) -> list[list[Import]]:
    """Circles among folders, each module collapsed to its package: a layer's folders may import one another
    sideways, so two could import each other through different modules with no module circle."""
    parents = {name.rpartition(".")[0] for name in modules}
    folder = {m: m if m in parents or p.name == "__init__.py" else m.rpartition(".")[0] for m, p in modules.items()}
    between = [e for e in edges if folder[e.importer] != folder[e.imported]]
    collapsed = [Import(folder[e.importer], folder[e.imported], e.where) for e in between]
    inside = [{e.importer for e in circle} for circle in circles(collapsed)]
    return [[e for e in between if folder[e.importer] in c and folder[e.imported] in c] for c in inside]


def layer_of(module: str, layers: list[list[str]]) -> int:
    matches = [
        (len(entry), i)
        for i, layer in enumerate(layers)
        for entry in layer
        if module == entry or module.startswith(entry + ".")
    ]
    assert matches, f"{module} is in no layer of the contract: add its folder to LAYERS"
    return max(matches)[1]


def upward(edges: list[Import], layers: list[list[str]]) -> list[Import]:
    return [e for e in edges if layer_of(e.imported, layers) > layer_of(e.importer, layers)]


def forbidden(edges: list[Import]) -> list[Import]:
    """circuits never imports probes; probes never train; nothing outside the command line imports it."""

    def under(module: str, package: str) -> bool:
        return module == package or module.startswith(package + ".")

    names = ("circuits", "probes", "circuits.training", "cli")
    circuits, probes, training, cli = (f"induction_probes.{name}" for name in names)
    walls = [
        lambda e: under(e.importer, circuits) and under(e.imported, probes),
        lambda e: under(e.importer, probes) and under(e.imported, training),
        lambda e: under(e.imported, cli) and not under(e.importer, cli),
    ]
    return [e for e in edges if any(wall(e) for wall in walls)]


def report(what: str, imports: list[Import]) -> str:
    return f"{what}:\n  " + "\n  ".join(map(str, imports))


@pytest.fixture(scope="module")
def modules() -> dict[str, Path]:
    return package_modules()


@pytest.fixture(scope="module")
def edges(modules) -> list[Import]:
    return import_graph(modules)


def test_the_graph_covers_the_whole_package_lazy_imports_included(edges):
    modules = package_modules()
    expected = {f"induction_probes.{m}" for m in ("cli", "circuits.runs.reader", "probes.figures.plots")}
    assert expected <= modules.keys()
    assert all(layer_of(module, LAYERS) >= 0 for module in modules)
    # a function-level import counts: the command line resolves its commands' modules inside handlers
    cli, probes = "induction_probes.cli.", "induction_probes.probes"
    assert any(e.importer.startswith(cli) and e.imported.startswith(probes) for e in edges)


def test_no_import_circle(edges):
    found = circles(edges)
    assert not found, "\n".join(report("an import circle", c) for c in found)


def test_no_folder_imports_a_folder_that_imports_it(edges, modules):
    found = folder_circles(edges, modules)
    assert not found, "\n".join(report("a circle among folders", c) for c in found)


def test_every_import_points_down_or_sideways(edges):
    bad = upward(edges, LAYERS)
    assert not bad, report("imports up the layers (order: tests/unit/test_layers.py LAYERS)", bad)


def test_circuits_never_imports_probes_probes_never_train_and_nothing_imports_the_command_line(edges):
    bad = forbidden(edges)
    assert not bad, report("imports across a wall", bad)


def test_circuits_names_nothing_of_probes_even_for_types():
    """The wall above, for ``if TYPE_CHECKING:`` imports too, which the graph leaves out since they never run: a
    type named from the layer above makes circuits/ readable only with probes/ beside it (issue 66)."""
    modules = package_modules()
    named = [
        f"{path.name}:{node.lineno}"
        for name, path in modules.items()
        if name.startswith("induction_probes.circuits")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("induction_probes.probes")
        or isinstance(node, ast.Import)
        and any(a.name.startswith("induction_probes.probes") for a in node.names)
    ]
    assert not named, named


def test_no_command_module_imports_another(edges):
    """A command module parses, calls the report layer and prints; what two of them share is in cli/common.py.
    The command line's own __init__ builds the parser from all of them."""
    shared = {"induction_probes.cli", "induction_probes.cli.common"}
    between = [
        edge
        for edge in edges
        if edge.importer.startswith("induction_probes.cli.")
        and edge.importer not in shared
        and edge.imported.startswith("induction_probes.cli")
        and edge.imported not in shared
    ]
    assert not between, report("command modules importing each other", between)


# The contract's checks, shown to fail: a synthetic package written in a temporary folder.
def synthetic(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    modules = {}
    for name, source in files.items():
        path = tmp_path / f"{name.replace('.', '_')}.py"
        path.write_text(source)
        modules[name] = path
    return modules


def test_a_circle_is_found_and_named_by_file_and_line_even_through_a_function_level_import(tmp_path):
    modules = synthetic(
        tmp_path,
        {
            "pkg": "",
            "pkg.a": "from pkg.b import f\n",
            "pkg.b": "def f():\n    from pkg.c import g\n",
            "pkg.c": "import pkg.a\n",
            "pkg.d": "from pkg.a import x\n",  # imports into the circle, is not part of it
        },
    )
    (found,) = circles(import_graph(modules))
    assert {e.importer for e in found} == {"pkg.a", "pkg.b", "pkg.c"}
    assert any(str(e).endswith("pkg_b.py:2: pkg.b imports pkg.c") for e in found), found


def test_a_package_init_and_its_module_importing_each_other_is_a_circle(tmp_path):
    modules = synthetic(tmp_path, {"pkg": "from pkg.a import f\n", "pkg.a": "from pkg import CONSTANT\n"})
    (found,) = circles(import_graph(modules))
    assert {(e.importer, e.imported) for e in found} == {("pkg", "pkg.a"), ("pkg.a", "pkg")}


def test_two_folders_importing_each_other_through_different_modules_are_a_folder_circle(tmp_path):
    modules = synthetic(
        tmp_path,
        {
            **{name: "" for name in ("pkg", "pkg.x", "pkg.x.d", "pkg.y")},
            "pkg.x.a": "from pkg.y.b import f\n",
            "pkg.y.b": "from pkg.y.c import g\n",  # inside its folder: not an edge between folders
            "pkg.y.c": "\n\nfrom pkg.x.d import h\n",
            "pkg.z": "import pkg.x.a\n",  # imports into the circle, is not part of it
        },
    )
    edges = import_graph(modules)
    assert not circles(edges)
    (found,) = folder_circles(edges, modules)
    assert [str(e).split(f"{tmp_path}/", 1)[1] for e in found] == [
        "pkg_x_a.py:1: pkg.x.a imports pkg.y.b",
        "pkg_y_c.py:3: pkg.y.c imports pkg.x.d",
    ]
    del modules["pkg.y.c"]  # one way only: no circle
    assert not folder_circles(import_graph(modules), modules)


def test_a_lazy_module_declaration_is_an_import_of_the_graph(tmp_path):
    modules = synthetic(
        tmp_path,
        {"pkg": "", "pkg.a": 'torch = lazy_module("pkg.b")\n', "pkg.b": "import pkg.a\n"},
    )
    (circle,) = circles(import_graph(modules))
    assert {(e.importer, e.imported) for e in circle} == {("pkg.a", "pkg.b"), ("pkg.b", "pkg.a")}


def test_type_checking_imports_are_left_out_and_an_upward_import_is_named(tmp_path):
    modules = synthetic(
        tmp_path,
        {
            "low": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from high import T\n",
            "high": "import low\n",
            "lower": "def f():\n    import high\n",
        },
    )
    edges = import_graph(modules)
    assert not circles(edges)
    layers = [["low", "lower"], ["high"]]
    assert [str(e).split(": ", 1)[1] for e in upward(edges, layers)] == ["lower imports high"]


def test_the_walls_are_enforced(tmp_path):
    modules = synthetic(
        tmp_path,
        {
            "induction_probes.circuits.x": "from induction_probes.probes.y import z\n",
            "induction_probes.probes.y": "from induction_probes.circuits.training.t import train_run\n",
            "induction_probes.circuits.training.t": "",
            "induction_probes.lm": "import induction_probes.cli\n",
            "induction_probes.cli": "",
        },
    )
    assert len(forbidden(import_graph(modules))) == 3
