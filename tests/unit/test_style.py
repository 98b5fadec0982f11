"""The code is formatted and linted by ruff with the project's settings (pyproject.toml's [tool.ruff]), so a
change that breaks either fails here, not in review."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("command", [["format", "--check"], ["check"]], ids=" ".join)
def test_ruff_passes_on_the_whole_repository(command):
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "."], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
