"""The llc command on top of the estimator: its answer carries the settings, the calibration at the same
settings, each checkpoint's diagnostics and the construction's refusal or estimate."""

import json
import sys

import pytest

from induction_probes.circuits.limits import MAX_BURN_IN, MAX_CHAINS, MAX_DRAWS
from induction_probes.cli import main
from induction_probes.probes.llc.calibration import CASES
from induction_probes.probes.llc.estimator import LLCError, LLCSettings
from induction_probes.probes.llc.sampling import MissingExtra
from induction_probes.probes.report.llc_text import whole_text
from induction_probes.probes.report.llc_views import llc_report, log_spread


def test_checkpoints_are_spread_in_log_sequences_with_step_0():
    steps = list(range(0, 1001, 10))
    sequences = [64 * s for s in steps]
    assert log_spread(steps, sequences, 2) == [0, 1000]
    assert log_spread(steps, sequences, 4) == [0, 10, 100, 1000]  # 100 is the log-midpoint of 10 and 1000
    with pytest.raises(ValueError, match="at least 1"):
        log_spread(steps, sequences, 0)


def test_llc_command_reports_settings_calibration_diagnostics_and_the_construction(capsys, tmp_path):
    status = main(
        [
            "llc",
            "markov-k3",
            "--steps",
            "4000",
            "--draws",
            "6",
            "--burn-in",
            "3",
            "--chains",
            "2",
            "--n-seqs",
            "64",
            "--json",
            "--plot",
            str(tmp_path),
        ]
    )
    assert status == 0
    assert (tmp_path / "markov-k3_llc.png").stat().st_size > 10_000
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == [4000] and out["n_seqs"] == 64 and out["run"].endswith("markov-k3")
    assert not out["run"].startswith("/")
    assert out["settings"] == {"draws": 6, "burn_in": 3, "chains": 2, "seed": 12345}
    assert out["calibration"]["settings"] == out["settings"]
    assert [case["name"] for case in out["calibration"]["cases"]] == list(CASES)
    for estimate in out["checkpoints"] + list(out["construction"].values()):
        keys = {"llc", "llc_std", "per_chain", "init_loss", "loss_rise", "problems", "flags", "diagnostics"}
        assert keys <= estimate.keys()
        assert estimate["settings"]["draws"] == 6 and estimate["settings"]["n_beta"] > 0
        assert (estimate["llc"] is None) == bool(estimate["problems"])
    best = out["construction"]["best_scales"]
    assert best["loss_after"] <= best["loss_before"]  # the fitted scales lower the construction's loss
    for estimate in out["checkpoints"]:  # every value carries its own sampler seed (issue 64)
        assert len(set(estimate["chain_seeds"])) == len(estimate["per_chain"])
    # the text, from the same answer: 100 columns at most, the diagnostics only with --verbose (issue 64)
    for verbose in (False, True):
        shown = whole_text(
            "markov-k3", out["settings"], out["checkpoints"], out["construction"], out["calibration"], verbose
        )
        assert max(map(len, shown.splitlines())) <= 100
        assert ("diagnostics:" in shown) == verbose


@pytest.mark.parametrize(
    "option",
    [
        ["--lr", "0"],
        ["--chains", "0"],
        ["--localization", "nan"],
        ["--n-beta", "-1"],
        ["--draws", "2"],
        ["--steps", "5,x"],
        ["--steps", "5000"],
    ],
)
def test_llc_command_refuses_bad_settings_in_one_line(capsys, option):
    assert main(["llc", "markov-k3", *option]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err


def test_llc_per_head_command_answers_each_block_with_its_calibration_and_figure(capsys, tmp_path):
    """``llc --per-head``: one row per (step, block) with an interval around its estimate (flagged where it leaves
    [0, d/2]), the block calibration at the same settings, the progress measures' crossings, and the figure; its
    JSON is the API's."""
    from induction_probes.probes.report.llc_heads import per_head_report

    options = ["--steps", "4000", "--draws", "6", "--burn-in", "3", "--chains", "2", "--n-seqs", "32"]
    status = main(
        ["llc", "markov-k3", "--per-head", "--blocks", "L1H0,embed", *options, "--json", "--plot", str(tmp_path)]
    )
    assert status == 0
    assert (tmp_path / "markov-k3_llc_per_head.png").stat().st_size > 10_000
    out = json.loads(capsys.readouterr().out)
    assert [(r["step"], r["block"]) for r in out["rows"]] == [(4000, "L1H0"), (4000, "embed")]
    for row in out["rows"]:
        assert row["settings"]["draws"] == 6 and row["n_params"] > 0
        if row["interval"] is not None:  # the estimate inside its interval; outside [0, d/2] only when flagged
            assert row["interval"][0] <= row["llc"] <= row["interval"][1]
            ranges = [flag for flag in row["flags"] if flag.startswith(("beyond d/2", "below 0"))]
            assert bool(ranges) != (0 <= row["interval"][0] <= row["interval"][1] <= row["n_params"] / 2)
    assert out["calibration"]["settings"] == {"draws": 6, "burn_in": 3, "chains": 2, "seed": 12345}
    assert {"case", "blocks", "sum_of_blocks"} <= out["calibration"]["cases"][0].keys()
    assert out["progress_thresholds"]["previous_token_match"]["first_step"] is not None
    settings = {"draws": 6, "burn_in": 3, "chains": 2}
    api = per_head_report("markov-k3", steps=[4000], blocks=["L1H0", "embed"], n_seqs=32, as_json=True, **settings)
    assert [r["llc"] for r in api["rows"]] == [r["llc"] for r in out["rows"]]  # the same seeds, the same draws


@pytest.mark.parametrize(
    "option, says",
    [(["--blocks", "L1H0"], "give --per-head"), (["--per-head", "--blocks", "L9H9"], "unknown blocks")],
)
def test_llc_per_head_refuses_unknown_blocks_in_one_line(capsys, option, says):
    assert main(["llc", "markov-k3", "--steps", "4000", *option]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err


def one_line_refusal(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("induction-probes: error: "), err
    return err


@pytest.mark.parametrize("per_head", [[], ["--per-head"]])
def test_llc_without_the_llc_extra_names_its_install_command_in_one_line(per_head, monkeypatch, capsys):
    # issue 52 (B6): without devinterp, a 32-line ModuleNotFoundError; None in sys.modules makes its import fail
    monkeypatch.setitem(sys.modules, "devinterp", None)
    monkeypatch.setitem(sys.modules, "devinterp.optim", None)
    err = one_line_refusal(["llc", "markov-k3", "--steps", "4000", *per_head], capsys)
    assert "needs devinterp (the llc extra): pip install 'induction-probes[llc]'" in err
    with pytest.raises(MissingExtra, match=r"pip install 'induction-probes\[llc\]'"):  # the API, before any work
        llc_report("markov-k3", steps=[4000])


def test_llc_per_head_refuses_a_block_named_twice_in_one_line(capsys):
    # issue 52 (B10): L0H0,L0H0 sampled the same block twice
    options = ["--steps", "4000", "--per-head", "--blocks", "L0H0,L1H0,L0H0"]
    err = one_line_refusal(["llc", "markov-k3", *options], capsys)
    assert "blocks names L0H0 more than once: name each block once" in err


@pytest.mark.parametrize(
    "option, says",
    [
        (["--chains", "1000000000"], "chains = 1000000000 is above the limit of 64"),
        (["--draws", "1000000000000"], "draws = 1000000000000 is above the limit of 100,000"),
        (["--burn-in", "100001"], "burn_in = 100001 is above the limit of 100,000"),
    ],
)
def test_llc_chains_draws_and_burn_in_above_their_limits_are_refused_in_one_line(option, says, capsys):
    # issue 52 (B11): no limit before; the limits are circuits/limits.py's, checked by the API too
    assert says in one_line_refusal(["llc", "markov-k3", "--steps", "4000", *option], capsys)
    name = option[0][2:].replace("-", "_")
    with pytest.raises(LLCError, match=f"^{says}"):
        llc_report("markov-k3", steps=[4000], **{name: int(option[1])})
    at_limit = {"chains": MAX_CHAINS, "draws": MAX_DRAWS, "burn_in": MAX_BURN_IN}[name]
    settings = LLCSettings(n_beta=1.0, localization=1.0, lr=1.0, **({"burn_in": 1, "draws": 3} | {name: at_limit}))
    assert getattr(settings, name) == at_limit
