"""The tutorial notebook runs from top to bottom and draws its figures, and the notebook is what its
jupytext script says.

docs/tutorial.py (a jupytext percent script) is the source; docs/tutorial.ipynb is generated from it with
`jupytext --to ipynb docs/tutorial.py` and shipped without outputs, so that the repository holds no
images that drift from the code. The notebook's own asserts check its claims while it runs."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT, NOTEBOOK = ROOT / "docs" / "tutorial.py", ROOT / "docs" / "tutorial.ipynb"
FIGURES = 5  # phases, attention patterns, scores over training, ablation bars, token matching


def cells(notebook) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


def test_the_notebook_is_its_script():
    jupytext = pytest.importorskip("jupytext", reason="the test extra is not installed (make test installs it)")
    from_script, shipped = jupytext.read(SCRIPT), jupytext.read(NOTEBOOK)
    assert len(shipped.cells) >= 10
    stale = "docs/tutorial.ipynb is stale: run jupytext --to ipynb docs/tutorial.py"
    assert cells(from_script) == cells(shipped), stale
    # and back: the notebook written as a script is the script, but for the header's version fields
    assert without_header(jupytext.writes(shipped, fmt="py:percent")) == without_header(SCRIPT.read_text())


def without_header(script: str) -> str:
    """The script without its jupytext YAML header (it records jupytext's version, which may differ)."""
    assert script.startswith("# ---\n")
    return script.split("\n# ---\n", 1)[1].strip()


def test_the_notebook_ships_without_outputs():
    nbformat = pytest.importorskip("nbformat", reason="the test extra is not installed (make test installs it)")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


def test_the_notebook_runs_and_draws_its_figures():
    nbformat = pytest.importorskip("nbformat", reason="the test extra is not installed (make test installs it)")
    nbclient = pytest.importorskip("nbclient", reason="the test extra is not installed (make test installs it)")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # timeout per cell: the slowest (probing seven checkpoints) takes a few seconds here
    client = nbclient.NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, if any cell fails
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == FIGURES, f"{len(images)} figures drawn inline, expected {FIGURES}"
    pages = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("CircuitsVis.AttentionHeads" in page and "var CircuitsVis" in page for page in pages)  # inlined
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "closest strategy bigram" in text and "L1H0 zeroed: closest strategy uniform" in text
