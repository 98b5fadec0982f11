"""The LLC command never prints a diverged or frozen sampler's numbers as a result (issue 26): chains
whose losses are NaN or infinite, estimates that overflow, chains that never moved give one line and
status 1; and it runs on every shipped ICL-MC run, the minimal model's included."""

import pytest

from induction_probes.cli import main
from induction_probes.probes.llc.estimator import LLCSettings

FAST = ["--checkpoints", "1", "--chains", "2", "--draws", "4", "--burn-in", "2", "--batch-size", "4", "--n-seqs", "8"]


def one_line(argv, capsys, status) -> str:
    assert main(argv) == status
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("induction-probes: error: "), err
    return err


def test_fewer_than_three_draws_have_no_settling_test():
    with pytest.raises(ValueError, match="at least 3"):
        LLCSettings(n_beta=1.0, localization=1.0, lr=1.0, burn_in=0, draws=1)


@pytest.mark.parametrize(
    "option, why",
    [
        (["--lr", "1e6"], "diverged"),
        (["--n-beta", "1e300", "--lr", "1e-3"], "diverged"),
        (["--lr", "1e-30"], "never moved"),
    ],
)
def test_the_command_says_why_instead_of_printing_a_number(option, why, capsys):
    for json_flag in ([], ["--json"]):
        assert why in one_line(["llc", "markov-k2", *FAST, *option, *json_flag], capsys, 1)


@pytest.mark.filterwarnings("error::UserWarning")  # torch warned of a float() of the fitted scales' tensor
def test_the_minimal_models_run_has_an_llc_and_says_nothing_else(capsys):
    assert main(["llc", "minimal-k3", *FAST]) == 0  # devinterp passed it print_details, which it did not take
    out, err = capsys.readouterr()
    assert "Prop. 2.1" in out and "nan" not in out and err == ""


@pytest.mark.parametrize(
    "option, why",
    [
        (["--lr", "1e-320"], "smallest normal"),  # found by a drawn example
        (["--lr", "1e-300"], "smallest normal"),
        (["--n-beta", "1e300"], "the rule's step size"),
        (["--lr", "1e-30"], "steps per e-fold"),
    ],
)
def test_a_step_too_small_to_sample_with_is_bad_input(option, why, capsys):
    """A subnormal step made the rule's burn-in 1 / (εγ) overflow, a traceback; a step below float32's smallest
    normal number cannot move a float32 weight; 1e-30 with the rule's burn-in would sample about 1e32 steps.
    Each is refused in one line with status 2, before any chain runs."""
    at = FAST.index("--burn-in")
    without_burn_in = FAST[:at] + FAST[at + 2 :]
    assert why in one_line(["llc", "markov-k2", *without_burn_in, *option], capsys, 2)


@pytest.mark.parametrize(
    "option, named, innocent",
    [
        (["--localization", "1e300"], "localization 1e+300", "n_beta"),
        (["--n-beta", "1e300"], "n_beta 1e+300", "localiz"),
    ],
)
def test_a_rule_step_too_small_names_the_setting_that_made_it_so(option, named, innocent, capsys):
    at = FAST.index("--burn-in")
    message = one_line(["llc", "markov-k2", *FAST[:at], *FAST[at + 2 :], *option], capsys, 2)
    assert f"{named} gives the rule's step size" in message and innocent not in message


def test_the_rules_burn_in_is_kept_below_its_cap_and_given_steps_are_not_capped():
    from induction_probes.probes.llc.estimator import MAX_RULE_STEPS, LLCError, default_settings

    at_cap = default_settings(100, 1.0, lr=1.0 / MAX_RULE_STEPS, localization=1.0)
    assert at_cap.burn_in == at_cap.draws == MAX_RULE_STEPS
    with pytest.raises(LLCError, match="steps per e-fold"):
        default_settings(100, 1.0, lr=0.5 / MAX_RULE_STEPS, localization=1.0)
    given = default_settings(100, 1.0, lr=1e-30, localization=1.0, burn_in=0, draws=3)
    assert (given.burn_in, given.draws) == (0, 3)
