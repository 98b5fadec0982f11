"""The ``induction-probes`` command: the installed entry point as a user runs it (no standard input),
and the many bad-input cases in-process through ``main``, which is what the entry point calls."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from induction_probes.circuits.runs.reader import Run
from induction_probes.cli import main

COMMAND = Path(sys.executable).with_name("induction-probes")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(COMMAND), *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)


def test_baselines_json_has_the_documented_keys_and_values(capsys):
    assert main(["baselines", "markov", "--k", "3", "--seq-len", "100", "--n-seqs", "20000", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"k", "seq_len", "alpha", "n_seqs", "last_token_kl", "mean_ce"} <= data.keys()
    assert set(data["last_token_kl"]) == {"uniform", "unigram", "bigram"}
    assert set(data["mean_ce"]) == {"true", "uniform", "unigram", "bigram"}
    assert abs(data["last_token_kl"]["bigram"] - 0.0265) < 0.003
    assert abs(data["mean_ce"]["true"] - 0.821) < 0.01


def test_baselines_table_is_readable(capsys):
    assert main(["baselines", "markov", "--k", "2", "--n-seqs", "500"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("ICL-MC strategy baselines: k=2")
    assert [line.split()[0] for line in lines[3:]] == ["true", "uniform", "unigram", "bigram"]


def test_the_baselines_command_prints_what_the_report_returns_from_python(capsys):
    from induction_probes import MarkovTask, baselines_report
    from induction_probes.probes.report.tables import json_text

    task = MarkovTask(k=2, seq_len=30)
    for flags, as_json in (([], False), (["--json"], True)):
        assert main(["baselines", "markov", "--k", "2", "--seq-len", "30", "--n-seqs", "300", *flags]) == 0
        shown = baselines_report(task, 300, 0, as_json=as_json)
        assert capsys.readouterr().out == (json_text(shown) if as_json else shown) + "\n"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--k", "1"], "k must be an integer >= 2"),
        (["--k", "3", "--seq-len", "1"], "seq_len must be an integer >= 2"),
        (["--k", "3", "--alpha", "0"], "alpha must be a finite number > 0"),
        (["--k", "3", "--alpha", "nan"], "alpha must be a finite number > 0"),
        (["--k", "3", "--n", "0"], "n must be an integer >= 1"),
        (["--k", "3", "--n-seqs", "-5"], "argument --n-seqs: must be an integer >= 1"),
        (["--k", "2.5"], "invalid int value: '2.5'"),
        (["--k", "three"], "invalid int value: 'three'"),
        ([], "--k is required"),
    ],
)
def test_bad_input_gives_one_line_and_status_2(args, message, capsys):
    assert main(["baselines", "markov", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("induction-probes: error: ") and message in err


def test_installed_command_reports_bad_input_in_one_line():
    for args in (["baselines", "markov", "--k", "1"], ["frobnicate"]):
        result = run(*args)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_probe_json_has_the_documented_keys(capsys):
    assert main(["probe", "markov-k3", "--n-seqs", "200", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["checkpoints"][0]
    assert {"previous_token", "bigram_matching", "last_token_kl"} <= data.keys()
    assert len(data["previous_token"]) == 2 and len(data["previous_token"][0]) == 1  # [layer][head]
    assert set(data["last_token_kl"]) == {"true", "uniform", "unigram", "bigram"}


def test_ablate_json_has_the_documented_keys(capsys):
    assert main(["ablate", "markov-k3", "--n-seqs", "200", "--mode", "mean", "--heads", "0.0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"baseline", "ablations"} <= data.keys()
    (ablation,) = data["ablations"]
    assert {"heads", "mode", "last_token_kl", "loss", "icl_score", "closest_strategy"} <= ablation.keys()
    assert ablation["heads"] == ["L0H0"] and ablation["mode"] == "mean"


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["probe", "markov-k3", "--step", "4001"],
            "step 4001 is not saved in run markov-k3; the nearest saved step is 4000",
        ),
        (["probe", "markov-k3", "--step", "0", "--all-steps"], "give --step or --all-steps, not both"),
        (["ablate", "markov-k3", "--heads", "0.3"], "head 0.3 is out of range"),
        (["ablate", "markov-k3", "--heads", "x"], "heads must look like L.H"),
        (["ablate", "markov-k3", "--mode", "shuffle"], "invalid choice: 'shuffle'"),
        (["probe", "markov-k3", "--n-seqs", "0"], "argument --n-seqs: must be an integer >= 1"),
    ],
)
def test_probe_and_ablate_bad_input(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_probing_a_run_of_another_task_is_refused(tmp_path, capsys):
    run = tmp_path / "other"
    shutil.copytree(Run.open("markov-k3").path, run)
    config = json.loads((run / "config.json").read_text())
    config["task"] = {"name": "some-other-task"}
    (run / "config.json").write_text(json.dumps(config))
    assert main(["probe", str(run)]) == 2
    assert "not a known task description" in capsys.readouterr().err
    assert main(["llc", "gaussian-ih2"]) == 2  # a next-token loss: ICL-MC runs only
    assert "is not an ICL-MC run" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--seq-len", "3"], "need 4 <= L and n <= L - 1"),
        (["--target", "ihn", "--n", "30"], "need 4 <= L and n <= L - 1"),
        (["--d", "0"], "d must be an integer >= 1"),
    ],
)
def test_train_gaussian_bad_input(args, message, tmp_path, capsys):
    assert main(["train", "gaussian", "--out", str(tmp_path / "run"), *args]) == 2
    assert message in capsys.readouterr().err


def test_gaussian_run_info_and_probe(capsys):
    assert main(["info", "gaussian-ih2"]) == 0
    assert "MSE / target variance" in capsys.readouterr().out
    assert main(["probe", "gaussian-ih2", "--n-seqs", "200", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["checkpoints"][0]
    assert data["induction"][0] > 0.9 and data["previous_token"][0][0] > 0.9


def test_ablating_either_head_of_gaussian_ih2_destroys_it(capsys):
    assert main(["ablate", "gaussian-ih2", "--n-seqs", "300", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baseline"]["relative_mse"] < 0.05
    assert all(a["relative_mse"] > 0.5 for a in data["ablations"])
    assert [a["heads"] for a in data["ablations"]] == [["L0H0"], ["L1H0"]]


def test_experiment_ih4_reports_the_three_models(capsys):
    assert main(["experiment", "ih4", "--steps", "10", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["heads"], r["d_model"]) for r in rows] == [(1, 8), (6, 4), (6, 8)]
    assert all(0 < r["relative_mse"] < 1.5 for r in rows)


def test_a_missing_step_names_the_nearest_saved_ones(capsys):
    assert main(["probe", "markov-k3", "--step", "1000", "--n-seqs", "10"]) == 2
    assert (
        "step 1000 is not saved in run markov-k3; the nearest saved steps are 970 and 1010" in capsys.readouterr().err
    )


def test_a_bare_command_shows_its_usage_and_a_closed_pipe_is_no_traceback():
    bare = run()
    assert bare.returncode == 2 and "usage: induction-probes" in bare.stderr and "sweep" in bare.stderr
    piped = subprocess.run(
        f"{COMMAND} probe markov-k3 --n-seqs 50 --json | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.stdout.strip() == "{" and "Traceback" not in piped.stderr


def test_training_into_a_log_writes_a_progress_line_per_tenth_of_the_work(tmp_path, capsys):
    # in process, stderr is captured, not a terminal, as in a log
    argv = [
        "train",
        "markov",
        "--k",
        "3",
        "--seq-len",
        "8",
        "--steps",
        "200",
        "--batch-size",
        "4",
        "--eval-seqs",
        "5",
        "--n-checkpoints",
        "20",
        "--out",
        str(tmp_path / "run"),
    ]
    assert main(argv) == 0
    stderr = capsys.readouterr().err
    progress_lines = [line for line in stderr.replace("\r", "\n").splitlines() if line.startswith("train run")]
    assert 2 <= len(progress_lines) <= 12


@pytest.mark.parametrize(
    "argv,steps",
    [
        (["probe", "markov-k3", "--n-seqs", "40", "--seed", "5"], [4000]),
        (["ablate", "markov-k3", "--n-seqs", "40", "--seed", "5", "--step", "1010"], [1010]),
        (["verify", "prop21", "--against", "markov-k3", "--n-seqs", "40", "--seed", "5"], [4000]),
        (["probe", "gaussian-ih2", "--n-seqs", "40", "--seed", "5"], [600]),
    ],
)
def test_json_answers_say_which_run_checkpoints_and_sequences(argv, steps, capsys):
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run"].endswith(argv[1] if argv[0] != "verify" else "markov-k3")
    assert data["steps"] == steps and data["n_seqs"] == 40 and data["seed"] == 5


def test_report_json_names_its_run_and_evaluation_set(capsys):
    assert main(["report", "markov-k3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run"].endswith("markov-k3") and data["n_seqs"] == 2000 and data["seed"] == 2
    assert data["steps"][0] == 0 and data["steps"][-1] == 4000


def test_gaussian_probe_and_ablate_write_the_figures_they_are_asked_for(tmp_path, capsys):
    assert main(["probe", "gaussian-ih2", "--n-seqs", "100", "--plot", str(tmp_path)]) == 0
    assert main(["ablate", "gaussian-ih2", "--n-seqs", "100", "--mode", "mean", "--plot", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    names = sorted(path.name for path in tmp_path.glob("*.png"))
    assert names == ["gaussian-ih2_ablation_mean_step600.png", "gaussian-ih2_scores_step600.png"]
    assert all(f"figure: {tmp_path / name}" in out for name in names)


def test_json_never_prints_a_number_that_could_not_be_computed(capsys):
    for json_option in (["--json"], []):
        assert main(["verify", "prop21", "--k", "3", "--c", "1e155", "--n-seqs", "20", *json_option]) == 2
        out, err = capsys.readouterr()
        assert out == "" and "c = 1e+155 is too large to compute" in err and err.count("\n") == 1


def test_report_of_a_gaussian_run_shows_its_error_over_training(capsys, tmp_path):
    assert main(["report", "gaussian-ih2", "--plot", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    final = Run.open("gaussian-ih2").metrics()[-1]["relative_mse"]
    assert "MSE / target variance" in out and f"{final:.4f}" in out
    assert (tmp_path / "gaussian-ih2_error.png").stat().st_size > 10_000
    assert main(["report", "gaussian-ih2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["run"].endswith("gaussian-ih2") and report["metrics"][-1]["relative_mse"] == final
    assert main(["report", "gaussian-ih2", "--html", str(tmp_path)]) == 2  # the page follows the ICL-MC argument


@pytest.mark.parametrize("raised", [ValueError("deep inside: math domain error"), TypeError("a bug"), KeyError("k")])
def test_an_error_that_is_no_bad_input_is_a_bug_status_1_with_its_traceback_kept(raised, monkeypatch, capsys):
    # issue 52 (item 5): any ValueError from deep inside was reported as bad input, status 2
    from induction_probes.cli import baselines

    def broken(args):
        raise raised

    monkeypatch.setattr(baselines, "run_baselines", broken)
    assert main(["baselines", "markov", "--k", "3"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("induction-probes: error: internal error (a bug, not your input)")
    log = Path(err.rsplit("the traceback is in ", 1)[1].strip())
    assert "Traceback" in log.read_text() and "broken" in log.read_text()
    log.unlink()


def test_bad_input_of_the_api_is_one_class_and_still_a_value_error():
    from induction_probes.circuits.errors import BadInput
    from induction_probes.circuits.sweeps.sweep_spec import SpecError
    from induction_probes.circuits.untrusted import CheckpointError

    assert (
        issubclass(BadInput, ValueError) and issubclass(SpecError, BadInput) and issubclass(CheckpointError, BadInput)
    )
    assert main(["baselines", "markov", "--k", "1"]) == 2  # the recipe's own check, raised as BadInput
