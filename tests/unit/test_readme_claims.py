"""Every number in the README's results table is read from a shipped file (issue 21: numbers a referee
would accept). tests/readme_claims.toml lists each number with its file and JSON path; these tests check
each against its file, and check that the table prints no number the list does not cover.

The files were written on another machine, but the printed numbers are rounded far coarser than float32,
so the tolerance is the printing's own: half a unit in the last printed digit (0.0435 matches a value in
[0.04345, 0.04355]); a claims entry may not be looser than that."""

import json
import re
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = tomllib.loads((ROOT / "tests" / "readme_claims.toml").read_text())["claim"]
NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")  # 38,784 and 0.0435, not "5," of "5, 6"
# Numbers that name a condition rather than report a result: "layer 0 clamped", "batch 128"
LABEL = re.compile(r"\b(?:layer|batch) \d+\b")


@cache
def shipped(file: str):
    path = ROOT / file
    assert path.is_file() and not path.is_symlink(), f"{file} is not a shipped file"
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.loads(path.read_text())


def lookup(value, path: str):
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def results_table() -> dict[str, list[str]]:
    """The README's results table: first cell → the row's cells."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header, body = rows[0], rows[2:]  # rows[1] is the | --- | line
    assert [c.strip() for c in header.strip("|").split("|")] == ["result", "numbers", "file", "wall time"]
    table = {}
    for line in body:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        table[cells[0]] = cells
    return table


def printed_numbers(cell: str) -> list[str]:
    return NUMBER.findall(LABEL.sub("", cell))


def number(printed: str) -> float:
    return float(printed.replace(",", ""))


def half_unit(printed: str) -> float:
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return 0.5 * 10.0**-decimals


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c['row'][:30]}: {c['printed']}")
def test_each_claim_is_the_shipped_value_as_printed(claim):
    assert claim["tolerance"] <= half_unit(claim["printed"]) * (1 + 1e-9), "looser than the printed digits"
    value = lookup(shipped(claim["file"]), claim["path"])
    assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{claim['path']} is {value!r}"
    shown = value / claim["scale"]
    assert abs(shown - number(claim["printed"])) <= claim["tolerance"], (
        f"{claim['claim']}: the README prints {claim['printed']}, {claim['file']} holds {shown:.6g}"
    )


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c['row'][:30]}: {c['printed']}")
def test_each_claim_is_in_its_readme_row_and_names_the_rows_file(claim):
    table = results_table()
    assert claim["row"] in table, f"no README results row {claim['row']!r}"
    _, numbers, files, _ = table[claim["row"]]
    assert claim["printed"] in printed_numbers(numbers), f"row {claim['row']!r} does not print {claim['printed']}"
    named = re.findall(r"`([^`]+)`", files)
    assert any(f"/{name}/" in claim["file"] for name in named), f"{claim['file']} is not among {named}"


def test_the_results_table_prints_no_number_without_a_claim():
    table = results_table()
    assert len(table) >= 10
    covered = {(c["row"], c["printed"]) for c in CLAIMS}
    untraced = [(row, n) for row, cells in table.items() for n in printed_numbers(cells[1]) if (row, n) not in covered]
    assert not untraced, f"numbers in the README's results table with no entry in tests/readme_claims.toml: {untraced}"


def test_the_scan_sees_the_numbers_a_reader_sees():
    # the scanner itself: thousands separators, k suffixes, intervals and fractions, and condition labels
    cell = "transition 39.6k [35.0k, 44.1k]; 38,784 sequences; 0/5 seeds; 6.72k with layer 0 clamped; 10, 104; batch 32"
    assert printed_numbers(cell) == ["39.6", "35.0", "44.1", "38,784", "0", "5", "6.72", "10", "104"]
