"""Absurd arguments: every size is checked against circuits/limits.py before anything is allocated or
written, and every refusal is one line with status 2."""

import pytest

from induction_probes.cli import main

TRAIN = ["train", "markov", "--k", "3"]


def refused(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("induction-probes: error: "), err
    return err


@pytest.mark.parametrize("argv", [
    ["baselines", "markov", "--k", "100000"],
    ["baselines", "markov", "--k", "50", "--n", "5"],
    ["baselines", "markov", "--k", "3", "--n-seqs", "1000000000"],
    [*TRAIN, "--n-layers", "1000000"],
    [*TRAIN, "--batch-size", "1000000000"],
    [*TRAIN, "--d-model", "1000000"],
    [*TRAIN, "--seq-len", "10000000"],
    [*TRAIN, "--n-checkpoints", "1000000000"],
    [*TRAIN, "--steps", "1000000000000000000000"],
    [*TRAIN, "--heads", "100000,1"],
    ["train", "gaussian", "--seq-len", "100000"],
    ["verify", "wang-ihn", "--n", "3", "--heads", "100000000"],
    ["verify", "wang-ih2", "--d", "100000000"],
    ["verify", "prop21", "--k", "100000"],
    ["verify", "prop21", "--k", "3", "--n-seqs", "1000000000"],
    ["toy", "--n-seqs", "1000000000"],
    ["toy", "--steps", "1000000000000"],
])
def test_sizes_above_the_limits_are_refused_before_anything_is_written(argv, tmp_path, capsys):
    out = tmp_path / "run"
    writes = ["--out", str(out)] if argv[0] in ("train", "toy") else []
    assert "(circuits/limits.py)" in refused([*argv, *writes], capsys)
    assert not out.exists()
