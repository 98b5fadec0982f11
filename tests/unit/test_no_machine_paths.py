"""No shipped data file records a path of the machine that wrote it: every tracked JSON, JSON-lines and TOML
file is parsed and each of its strings (keys too) searched for an absolute path."""

import json
import re
import subprocess
import tomllib
from pathlib import Path

from induction_probes.circuits.paths import portable

ROOT = Path(__file__).resolve().parents[2]
# a POSIX path of two or more components not preceded by a word, a dot, a glob's "*" or a URL's "://", or a
# Windows drive
ABSOLUTE = re.compile(r"(?<![\w.~:/*-])/(?:[\w.+-]+/)+[\w.+-]*|\b[A-Za-z]:\\")


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def parsed(path: Path):
    text = path.read_text()
    if path.suffix == ".toml":
        return [tomllib.loads(text)]
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return [json.loads(text)]


def test_the_pattern_finds_absolute_paths_and_nothing_else():
    assert ABSOLUTE.search("/work/main/checkpoints/markov-k3") and ABSOLUTE.search("run at /home/x/y")
    assert ABSOLUTE.search("C:\\Users\\x")
    for fine in (
        "experiments/runs/clamps",
        "KL(true || model) / n",
        "https://example.org/a/b",
        "1/2",
        "a/b/c",
        "*/checkpoints/*.safetensors",
    ):
        assert not ABSOLUTE.search(fine), fine


def test_no_tracked_data_file_records_an_absolute_path():
    tracked = subprocess.run(
        ["git", "ls-files", "*.json", "*.jsonl", "*.toml"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert any(name.endswith("llc.json") for name in tracked) and len(tracked) > 10
    for name in tracked:
        for document in parsed(ROOT / name):
            found = [s for s in strings(document) if ABSOLUTE.search(s)]
            assert not found, f"{name} records {found[:3]}"


def test_portable_paths_are_relative_inside_the_working_directory_and_names_outside(tmp_path, monkeypatch):
    (tmp_path / "runs" / "a").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert portable(tmp_path / "runs" / "a") == "runs/a"
    assert portable("runs/a") == "runs/a"
    assert portable("/elsewhere/sweeps/b") == "b"
