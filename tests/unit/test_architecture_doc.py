"""docs/architecture.md draws the layers of tests/unit/test_layers.py's LAYERS for a reader: its numbered list,
bottom first, must be LAYERS layer by layer, so the page cannot drift from the contract the suite enforces.

An item of the list starts with its folders in backticks, as paths (``probes/ablation/``; ``circuits/*.py`` for
the modules directly in a folder; ``face/lm.py`` for a module), then a colon."""

import re
from itertools import zip_longest
from pathlib import Path

import pytest
from test_layers import LAYERS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
SECTION = "## The layers, bottom first"
ITEM = re.compile(r"(\d+)\. ((?:`[^`]+`(?:, )?)+):")
PATH = re.compile(r"[\w/]+/(?:\*\.py|__init__\.py)?|[\w/]+\.py")


def installed_name(path: str) -> str:
    """The module or package a path of the page names: ``probes/ablation/`` is induction_probes.probes.ablation,
    ``circuits/*.py`` is induction_probes.circuits (the entry its modules belong to), ``face/lm.py`` (the face's
    folder, which installs as the package itself) is induction_probes.lm."""
    assert PATH.fullmatch(path), f"{path!r} is not a folder (a/b/), a folder's modules (a/*.py) or a module (a/b.py)"
    name = path.removesuffix("*.py").removesuffix("__init__.py").removesuffix(".py").rstrip("/").replace("/", ".")
    top, _, rest = name.partition(".")
    return ("induction_probes." + rest).rstrip(".") if top == "face" else f"induction_probes.{name}"


def page_layers(text: str) -> list[list[str]]:
    """The layers the page lists: the numbered items of its layers section, in order, numbered from 1."""
    section = text.split(f"\n{SECTION}\n", 1)[1].split("\n## ", 1)[0]
    items = [ITEM.match(line) for line in section.splitlines() if re.match(r"\d+\. ", line)]
    assert all(items), "a numbered item that does not start with its folders in backticks and a colon"
    assert [int(item.group(1)) for item in items] == list(range(1, len(items) + 1)), "the items are not 1, 2, ..."
    return [[installed_name(path) for path in re.findall(r"`([^`]+)`", item.group(2))] for item in items]


def differences(text: str, layers: list[list[str]]) -> list[str]:
    return [
        f"layer {i}: the page lists {page or 'nothing'}, LAYERS holds {contract or 'nothing'}"
        for i, (page, contract) in enumerate(zip_longest(page_layers(text), layers), start=1)
        if page != contract
    ]


def test_the_architecture_page_lists_the_layers_of_the_contract():
    found = differences(PAGE.read_text(encoding="utf-8"), LAYERS)
    assert not found, "docs/architecture.md and tests/unit/test_layers.py's LAYERS differ:\n" + "\n".join(found)


def test_a_page_that_differs_from_the_layers_is_named_layer_by_layer():
    text = PAGE.read_text(encoding="utf-8")
    assert len(page_layers(text)) == len(LAYERS) > 10
    comparison, run_level = ["induction_probes.probes.comparison"], ["induction_probes.probes.run_level"]
    n = LAYERS.index(comparison) + 1
    assert LAYERS[n] == run_level  # the two layers this check swaps on the page, one above the other
    swapped = text.replace(f"{n}. `probes/comparison/`", f"{n}. `probes/run_level/`")
    swapped = swapped.replace(f"{n + 1}. `probes/run_level/`", f"{n + 1}. `probes/comparison/`")
    assert differences(swapped, LAYERS) == [
        f"layer {n}: the page lists {run_level}, LAYERS holds {comparison}",
        f"layer {n + 1}: the page lists {comparison}, LAYERS holds {run_level}",
    ]
    one_folder_short = text.replace("`probes/llc/`, `probes/sweeps/`:", "`probes/llc/`:")
    n = LAYERS.index(["induction_probes.probes.llc", "induction_probes.probes.sweeps"]) + 1
    assert [d.split(":")[0] for d in differences(one_folder_short, LAYERS)] == [f"layer {n}"]
    # a layer added to the contract (a module split out of its folder) and not to the page
    grown = [LAYERS[0], ["induction_probes.circuits.new"], *LAYERS[1:]]
    found = differences(text, grown)
    assert found[0] == f"layer 2: the page lists {LAYERS[1]}, LAYERS holds {grown[1]}"
    assert found[-1] == f"layer {len(grown)}: the page lists nothing, LAYERS holds {LAYERS[-1]}"
    with pytest.raises(AssertionError, match="not 1, 2"):
        page_layers(text.replace("\n3. ", "\n4. ", 1))


def test_the_paths_of_the_page_are_the_installed_names():
    assert installed_name("circuits/*.py") == "induction_probes.circuits"
    assert installed_name("circuits/tasks/") == "induction_probes.circuits.tasks"
    assert installed_name("face/__init__.py") == "induction_probes"
    assert installed_name("face/lm.py") == "induction_probes.lm"
    assert installed_name("face/cli/") == "induction_probes.cli"
