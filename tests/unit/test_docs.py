"""The documentation works: the site builds with every link and anchor resolved, it fetches nothing from
outside, and the code of the README and of every docs page runs as written.

Code blocks run page by page, in order, in one namespace, from the repository root, with one torch thread
(the suite's conftest sets it). A block preceded by ``<!-- skip: reason -->`` is not run and its reason is
reported as a warning; a ```sh block preceded by ``<!-- run -->`` has each ``induction-probes`` line run,
and where a plain ``` block follows it, that block's lines must appear in the output, in order.

The code of the pages and of the tutorial imports from the package's face only (``from induction_probes import
...``; ``induction_probes.lm`` is the language models' face): what a reader copies must not name a folder."""

import ast
import json
import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

from induction_probes.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!--\s*(skip|run)\s*(?::\s*(.*?))?\s*-->")
COMMAND = Path(sys.executable).with_name("induction-probes")
TUTORIAL = ROOT / "docs" / "tutorial.py"
TOP = "induction_probes"


@dataclass
class Block:
    page: Path
    line: int  # 1-indexed line of the opening fence
    language: str
    code: str
    marker: str | None  # "skip" or "run"
    reason: str | None


def blocks_of(page: Path) -> list[Block]:
    """The fenced blocks of a page that start at the left margin, with the marker comment just above."""
    lines = page.read_text().splitlines()
    found, i, marker, reason = [], 0, None, None
    while i < len(lines):
        line = lines[i]
        if match := MARKER.fullmatch(line.strip()):
            marker, reason = match.group(1), match.group(2)
        elif line.startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            found.append(Block(page, i + 1, line[3:].strip(), "\n".join(lines[i + 1 : end]), marker, reason))
            marker, reason, i = None, None, end
        elif line.strip():
            marker, reason = None, None  # a marker applies only to the block right below it
        i += 1
    return found


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_pages_have_the_code_blocks_this_test_expects():
    blocks = [b for page in PAGES for b in blocks_of(page)]
    assert sum(b.language == "python" for b in blocks) >= 8, "the docs lost their Python examples"
    assert any(b.language == "sh" and b.marker == "run" for b in blocks), "no runnable shell block left"
    for b in blocks:
        assert b.language in ("", "python", "sh", "toml", "json"), (
            f"{page_id(b.page)}:{b.line} unknown language {b.language!r}"
        )
        if b.language == "json":  # shown output: it must at least be JSON
            json.loads(b.code)
        if b.marker == "skip":
            assert b.reason, f"{page_id(b.page)}:{b.line}: a skipped block must say why"
        assert b.marker != "run" or b.language == "sh", f"{page_id(b.page)}:{b.line}: only sh blocks are marked run"


def runs_code(page: Path) -> bool:
    return any(b.language == "python" or b.marker == "run" for b in blocks_of(page))


@pytest.mark.parametrize("page", [p for p in PAGES if runs_code(p)], ids=page_id)
def test_the_code_of_each_page_runs_in_the_pages_order(page, monkeypatch, capsys):
    """Python blocks and runnable shell blocks together, in the page's order: a command may read what a Python
    block above it wrote (language-models.md's checkpoint series). Run by two tests, they raced across the
    suite's two workers, and a fresh clone's command found no series."""
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": "__docs__"}
    blocks = blocks_of(page)
    for i, block in enumerate(blocks):
        where = f"{page_id(page)}:{block.line}"
        if block.language == "python" and block.marker == "skip":
            warnings.warn(f"{where}: block not run: {block.reason}", stacklevel=1)
        elif block.language == "python":
            exec(compile(block.code, where, "exec"), namespace)  # noqa: S102 - the docs are our own code
        elif block.marker == "run":
            shown = blocks[i + 1] if i + 1 < len(blocks) and blocks[i + 1].language == "" else None
            run_shell_block(block, shown, capsys)


def imports_below_the_top(code: str) -> list[str]:
    """What Python code takes from inside the package rather than from its face: ``from induction_probes.x import
    y``, ``import induction_probes.x``, ``induction_probes.x`` or ``from induction_probes import x`` for an x the
    face does not export."""
    import induction_probes

    face = set(induction_probes.__all__) | {"lm"}
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"{TOP}."):
            found.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.ImportFrom) and node.module == TOP:
            found += [f"line {node.lineno}: {a.name} is not exported" for a in node.names if a.name not in face]
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name.startswith(f"{TOP}.")]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == TOP:
            found += [f"line {node.lineno}: {TOP}.{node.attr} is not exported"] if node.attr not in face else []
    return found


def code_of(source: Path) -> list[tuple[str, str]]:
    """(where, code) for each Python block of a page, skipped ones included (a reader copies them too), each
    shell block's Python commands, or the whole tutorial script."""
    if source.suffix == ".py":
        return [(page_id(source), source.read_text())]
    found = []
    for block in blocks_of(source):
        where = f"{page_id(source)}:{block.line}"
        if block.language == "python":
            found.append((where, block.code))
        elif block.language == "sh":
            found.append((where, python_in_shell(block.code)))
    return found


SHELL_IMPORT = re.compile(rf"\b(?:from\s+{TOP}\.[\w.]+\s+import\s+\w+|import\s+{TOP}\.[\w.]+)")


def python_in_shell(code: str) -> str:
    """The package imports a shell block's ``python -c "..."`` lines make, one per line, as Python."""
    return "\n".join(SHELL_IMPORT.findall(code))


@pytest.mark.parametrize("source", [*PAGES, TUTORIAL], ids=lambda source: page_id(source))
def test_the_code_of_the_pages_imports_from_the_top_only(source):
    below = [f"{where} {problem}" for where, code in code_of(source) for problem in imports_below_the_top(code)]
    assert not below, "import these from induction_probes (add them to its EXPORTS):\n" + "\n".join(below)


def test_an_import_below_the_top_is_found():
    code = (
        "import induction_probes\nfrom induction_probes import Run, lm, frobnicate\n"
        "from induction_probes.probes.run_level.research_questions import phases\nimport induction_probes.cli\n"
        "induction_probes.probes.run_level.all_probes.probe_run, induction_probes.Run\n"
    )
    assert imports_below_the_top(code) == [
        "line 2: frobnicate is not exported",
        "line 3: from induction_probes.probes.run_level.research_questions import ...",
        "line 4: import induction_probes.cli",
        "line 5: induction_probes.probes is not exported",
    ]
    shell = (
        'python -c "from induction_probes.probes.run_level.all_probes import probe_run; import induction_probes.cli"'
    )
    assert imports_below_the_top(python_in_shell(shell)) == [
        "line 1: from induction_probes.probes.run_level.all_probes import ...",
        "line 2: import induction_probes.cli",
    ]


def cli_commands() -> set[str]:
    result = subprocess.run([str(COMMAND), "--help"], capture_output=True, text=True, timeout=60, check=True)
    return set(re.search(r"\{([\w,-]+)\}", result.stdout).group(1).split(","))  # argparse's {a,b,...}


def test_every_documented_command_exists():
    known = cli_commands()
    assert {"train", "probe", "ablate", "verify", "sweep", "summarize"} <= known
    for page in PAGES:
        for block in blocks_of(page):
            for line in block.code.splitlines():
                words = line.strip().lstrip("$ ").split()
                if block.language in ("sh", "") and words[:1] == ["induction-probes"] and len(words) > 1:
                    assert words[1] in known, f"{page_id(page)}:{block.line}: unknown command {words[1]!r}"


def run_shell_block(block: Block, shown: Block | None, capsys) -> None:
    """Each ``induction-probes`` line of ``block``, in process through what the entry point calls (the output is
    the point here, and a process per line would pay the imports again; the entry point itself is tested in
    test_cli.py); the lines of ``shown`` must appear in what they print, in order."""
    capsys.readouterr()  # what the blocks above printed is not this block's output
    output = ""
    for line in block.code.splitlines():
        words = line.split("#")[0].split()
        if words[:1] != ["induction-probes"]:
            continue
        status = main(words[1:])
        printed = capsys.readouterr()
        assert status == 0, f"{line!r} failed: {printed.err[-2000:]}"
        output += printed.out
    if shown is not None:
        printed = [" ".join(line.split()) for line in output.splitlines()]
        position = 0
        for expected in (" ".join(line.split()) for line in shown.code.splitlines() if line.strip()):
            assert expected in printed[position:], f"{page_id(block.page)}:{shown.line} shows {expected!r}, not printed"
            position = printed.index(expected, position) + 1


def test_the_site_builds_strictly_and_fetches_nothing_from_outside(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (make test installs it)")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,  # the status is asserted below, with stderr
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    pages = list(site.rglob("*.html"))
    assert len(pages) >= 10
    for html in pages:
        text = html.read_text()
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, f"{html.name} loads web fonts"
        remote = re.findall(r"<(?:script|link|img)[^>]+(?:src|href)=\"(https?:[^\"]+)\"", text)
        assert not remote, f"{html.name} fetches {remote[:3]}"


def test_the_index_links_every_page_and_the_site_lists_them_all():
    """docs/index.md is the map of the docs: a page it does not link is a page nobody finds; mkdocs.yml's
    nav is the site's, and lists the same pages."""
    import re

    docs = ROOT / "docs"
    pages = {path.name for path in docs.glob("*.md")} - {"index.md"}
    linked = set(re.findall(r"\]\(([\w-]+\.md)[#)]", (docs / "index.md").read_text(encoding="utf-8")))
    assert pages - linked == set(), "pages docs/index.md does not link"
    nav = set(re.findall(r":\s*([\w-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M))
    assert pages | {"index.md"} == nav
