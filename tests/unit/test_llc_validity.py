"""The LLC command never prints a diverged or frozen sampler's numbers as a result (issue 26): chains
whose losses are NaN or infinite, estimates that overflow, chains that never moved give one line and
status 1; and it runs on every shipped ICL-MC run, the minimal model's included."""

import pytest
from induction_probes.cli import main
from induction_probes.probes.llc_estimator import LLCSettings

FAST = ["--checkpoints", "1", "--chains", "2", "--draws", "4", "--burn-in", "2", "--batch-size", "4", "--n-seqs", "8"]


def one_line(argv, capsys, status) -> str:
    assert main(argv) == status
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("induction-probes: error: "), err
    return err


def test_fewer_than_three_draws_have_no_settling_test():
    with pytest.raises(ValueError, match="at least 3"):
        LLCSettings(n_beta=1.0, localization=1.0, lr=1.0, burn_in=0, draws=1)


@pytest.mark.parametrize("option, why", [(["--lr", "1e6"], "diverged"), (["--n-beta", "1e300"], "diverged"),
                                         (["--lr", "1e-300"], "never moved")])
def test_the_command_says_why_instead_of_printing_a_number(option, why, capsys):
    for json_flag in ([], ["--json"]):
        assert why in one_line(["llc", "markov-k2", *FAST, *option, *json_flag], capsys, 1)


def test_the_minimal_models_run_has_an_llc(capsys):
    assert main(["llc", "minimal-k3", *FAST]) == 0  # devinterp passed it print_details, which it did not take
    out = capsys.readouterr().out
    assert "Prop. 2.1" in out and "nan" not in out
