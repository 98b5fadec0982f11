"""The LLC command never prints a diverged or frozen sampler's numbers as a result (issue 26): chains
whose losses are NaN or infinite, estimates that overflow, chains that never moved; and it runs on every
shipped ICL-MC run, the minimal model's included."""

import math

import pytest
import torch

from induction_probes.cli import main
from induction_probes.probes.llc import SamplerSettings, summarise

FAST = ["--checkpoints", "1", "--chains", "2", "--draws", "4", "--batch-size", "4", "--n-seqs", "8"]


def one_line(argv, capsys, status) -> str:
    assert main(argv) == status
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("induction-probes: error: "), err
    return err


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_trace_that_is_not_finite_is_a_divergence(bad):
    trace = torch.tensor([[1.0, 1.1, 1.2, 1.3], [1.0, bad, 1.2, 1.3]], dtype=torch.float64)
    with pytest.raises(FloatingPointError, match="diverged"):
        summarise(7, trace, [2.0, 3.0], 1.0)
    with pytest.raises(FloatingPointError, match="diverged"):
        summarise(7, trace.nan_to_num(2.0), [2.0, bad], 1.0)


def test_an_overflowing_mean_or_chains_that_never_moved_are_refused():
    trace = torch.tensor([[1.0, 1.1, 1.2, 1.3]], dtype=torch.float64)
    with pytest.raises(FloatingPointError, match="diverged"):
        summarise(0, trace.repeat(2, 1), [1.7e308, 1.7e308], 1.0)  # each finite, their sum is not
    with pytest.raises(FloatingPointError, match="never moved"):
        summarise(0, trace.repeat(2, 1), [0.0, 0.0], 1.0)
    estimate = summarise(0, trace, [2.5], 1.0)  # a healthy chain still gives its numbers
    assert estimate.loss_rise == pytest.approx(0.15) and estimate.llc == 2.5


def test_fewer_than_four_draws_have_no_drift_to_report():
    with pytest.raises(ValueError, match="at least 4"):
        SamplerSettings(draws=1)


@pytest.mark.parametrize("option, why", [(["--lr", "1e6"], "diverged"), (["--n-beta", "1e300"], "diverged"),
                                         (["--lr", "1e-300"], "never moved")])
def test_the_command_says_why_instead_of_printing_a_number(option, why, capsys):
    for json_flag in ([], ["--json"]):
        assert why in one_line(["llc", "markov-k2", *FAST, *option, *json_flag], capsys, 1)


def test_the_minimal_models_run_has_an_llc(capsys):
    assert main(["llc", "minimal-k3", *FAST]) == 0  # devinterp passed it print_details, which it did not take
    out = capsys.readouterr().out
    assert "Prop. 2.1" in out and "nan" not in out
