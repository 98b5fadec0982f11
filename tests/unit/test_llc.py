"""The LLC estimator through devinterp: calibrated where the answer is known, and the command around it."""

import json
from dataclasses import replace

import pytest
import torch

from induction_probes.circuits.model import HookedTransformer
from induction_probes.circuits.recipes import MarkovRecipe
from induction_probes.circuits.tasks import MarkovTask
from induction_probes.cli import main
from induction_probes.cli.llc import log_spread
from induction_probes.probes.llc import SamplerSettings, estimate_llc


def test_a_regular_two_dimensional_minimum_has_llc_one():
    """Only the unembedding bias is sampled, at its optimum: the loss is quadratic there in the two
    directions that change the softmax and flat in the third (a shift of every logit), so λ = 2/2 = 1
    when nβ·h ≫ γ (here nβ = 1000, γ = 1, h ≈ 0.2)."""
    task = MarkovTask(k=3, seq_len=20)
    model = HookedTransformer(replace(MarkovRecipe(task=task).model_config(), use_bias=True, init_range=0.3))
    tokens = task.eval_set(512, 5).inputs
    optimiser = torch.optim.LBFGS([model.unembed.b_U], max_iter=200, tolerance_grad=1e-10, tolerance_change=1e-12)

    def closure():
        optimiser.zero_grad()
        loss = model(tokens, return_type="loss")
        loss.backward()
        return loss

    optimiser.step(closure)
    assert model.unembed.b_U.grad.abs().max() < 1e-6
    settings = SamplerSettings(lr=1e-4, localization=1.0, n_beta=1000.0, draws=400)
    estimate = estimate_llc(model, tokens, settings, param_masks={"unembed.b_U": None})
    assert 0.7 < estimate.llc < 1.3
    assert estimate.loss_rise == pytest.approx(estimate.llc / 1000.0, rel=1e-4)


def test_checkpoints_are_spread_in_log_sequences_with_step_0():
    steps = list(range(0, 1001, 10))
    sequences = [64 * s for s in steps]
    assert log_spread(steps, sequences, 2) == [0, 1000]
    assert log_spread(steps, sequences, 4) == [0, 10, 100, 1000]  # 100 is the log-midpoint of 10 and 1000
    with pytest.raises(ValueError, match="at least 1"):
        log_spread(steps, sequences, 0)


def test_llc_command_reports_settings_diagnostics_and_references(capsys, tmp_path):
    status = main(["llc", "markov-k3", "--checkpoints", "2", "--draws", "4", "--chains", "2", "--n-seqs", "128", "--json",
                   "--plot", str(tmp_path)])
    assert status == 0
    assert (tmp_path / "markov-k3_llc.png").stat().st_size > 10_000
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] == [0, 4000] and out["n_seqs"] == 128 and out["run"].endswith("markov-k3")
    assert out["settings"]["n_beta"] == pytest.approx(64 / torch.log(torch.tensor(64.0)).item(), rel=1e-6)
    for estimate in out["checkpoints"] + [out["construction"]]:
        assert {"llc", "llc_std", "per_chain", "init_loss", "loss_rise", "drift", "chain_spread"} <= estimate.keys()
        assert len(estimate["per_chain"]) == 2


@pytest.mark.parametrize("option", [["--lr", "0"], ["--chains", "0"], ["--localization", "nan"], ["--n-beta", "-1"]])
def test_llc_command_refuses_bad_settings_in_one_line(capsys, option):
    assert main(["llc", "markov-k3", *option]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err
