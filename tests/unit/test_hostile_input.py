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


@pytest.mark.parametrize(
    "argv",
    [
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
    ],
)
def test_sizes_above_the_limits_are_refused_before_anything_is_written(argv, tmp_path, capsys):
    out = tmp_path / "run"
    writes = ["--out", str(out)] if argv[0] in ("train", "toy") else []
    assert "(circuits/limits.py)" in refused([*argv, *writes], capsys)
    assert not out.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["baselines", "markov", "--k", "3"],
        ["train", "markov", "--k", "3", "--out", "unused"],
        ["probe", "markov-k3"],
        ["ablate", "markov-k3"],
        ["verify", "prop21", "--k", "3"],
        ["verify", "wang-ih2"],
        ["verify", "wang-ihn", "--n", "3"],
    ],
)
@pytest.mark.parametrize("value", ["-1", "1e3", str(2**64)])
def test_every_command_that_takes_a_seed_refuses_the_same_seeds(argv, value, capsys):
    assert "argument --seed: a seed" in refused([*argv, "--seed", value], capsys)


def test_a_path_that_is_not_utf8_is_refused_before_training(tmp_path, capsys):
    out = tmp_path / "run\udcff"  # what Python makes of the byte 0xff in a command-line argument
    assert "is not UTF-8 text" in refused(["train", "markov", "--k", "3", "--out", str(out)], capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv", [["verify", "wang-ihn", "--n", "3", "--heads", ""], [*TRAIN, "--heads", "", "--out", "x"]]
)
def test_empty_heads_are_refused(argv, capsys):
    refused(argv, capsys)


@pytest.mark.parametrize("c", ["1e155", "inf"])
def test_a_scale_that_cannot_be_computed_is_refused_not_printed_as_nan(c, capsys):
    message = refused(["verify", "prop21", "--k", "3", "--c", c, "--n-seqs", "10"], capsys)
    assert "too large to compute" in message or "finite number" in message
    assert "too large to compute" in refused(
        ["verify", "prop21", "--against", "markov-k3", "--c", "1e100", "--n-seqs", "10"], capsys
    )


def test_a_small_alpha_computes_its_baselines(capsys):
    assert main(["baselines", "markov", "--k", "3", "--alpha", "0.03", "--seq-len", "20", "--n-seqs", "4000"]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()[3:]}
    assert float(rows["bigram"][0]) < float(rows["unigram"][0]) < float(rows["uniform"][0])  # finite and ordered


def test_an_unwritable_place_or_a_full_stdout_is_one_line_with_status_1(tmp_path, capsys):
    import subprocess
    import sys
    from pathlib import Path

    afile = tmp_path / "a-file"
    afile.write_text("")
    assert main([*TRAIN, "--steps", "2", "--out", str(afile / "run")]) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Not a directory" in err
    command = [
        str(Path(sys.executable).with_name("induction-probes")),
        "baselines",
        "markov",
        "--k",
        "2",
        "--n-seqs",
        "10",
    ]
    with open("/dev/full", "w") as full:
        result = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 1 and result.stderr == "induction-probes: error: No space left on device\n"


@pytest.mark.parametrize(
    "argv",
    [
        [*TRAIN, "--out", ""],
        ["report", "markov-k3", "--plot", ""],
        ["toy", "--out", ""],
        *([command, ""] for command in ("probe", "ablate", "info", "report", "llc")),  # the run: no place either
        ["verify", "prop21", "--against", ""],
    ],
)
def test_an_empty_path_is_refused_not_taken_for_the_current_directory(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "an empty path names no place" in refused(argv, capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv, option",
    [
        (["summarize", "no-such-sweep", "--probe-seqs", "0"], "--probe-seqs"),
        (["summarize", "no-such-sweep", "--probe-seqs", "-3"], "--probe-seqs"),
    ],
)
def test_a_count_below_one_names_the_option_not_the_parameter(argv, option, capsys):
    assert f"argument {option}: must be an integer >= 1" in refused(argv, capsys)


def every_option(parser, name: str):
    """Each option called ``name`` in the parser and its sub-commands, at any depth."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                yield from every_option(subparser, name)
        elif name in action.option_strings:
            yield action


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "1.5"])
def test_every_threshold_is_refused_while_parsing_when_it_is_no_share(value):
    import argparse

    from induction_probes.cli import COMMANDS, build_parser

    found = list(every_option(build_parser([command.name for command in COMMANDS]), "--threshold"))
    assert found  # probe and ablate today: a new one is checked too
    for action in found:
        with pytest.raises(argparse.ArgumentTypeError, match="a threshold must be a number in"):
            action.type(value)


@pytest.mark.parametrize(
    "command",
    [
        ["probe", "markov-k3"],
        ["ablate", "markov-k3"],
        ["llc", "markov-k3"],
        ["verify", "prop21", "--k", "3"],
        ["verify", "wang-ih2"],
        ["verify", "wang-ihn", "--n", "3"],
        ["baselines", "markov", "--k", "3"],
    ],
)
def test_a_sequence_count_below_one_names_the_option(command, capsys):
    """Every --n-seqs is refused while parsing, by its own name (it named the parameter, n_seqs, before)."""
    message = "induction-probes: error: argument --n-seqs: must be an integer >= 1, got 0\n"
    assert refused([*command, "--n-seqs", "0"], capsys) == message
