"""Wang et al.'s toy model: its limit is the target, and its phases scale as the paper says."""

import math

import pytest
import torch

from induction_probes.circuits.models.toy_model import ToyConfig, ToyModel, fit_plateau, toy_phases
from induction_probes.circuits.recipes.gaussian_recipes import ToyRecipe
from induction_probes.circuits.tasks.gaussian.sequences import induction_head, sample_sequences
from induction_probes.circuits.training.toy_training import train_toy
from induction_probes.cli import main


def test_the_toy_model_reaches_the_mixed_target_in_its_limit():
    x = sample_sequences(500, 12, 1, generator=torch.Generator().manual_seed(0))
    model = ToyModel(ToyConfig())
    with torch.no_grad():
        model.params.copy_(torch.tensor([40.0, 40.0, 2.0, 1.0, 1.5, 1.0], dtype=torch.float64))  # w_K·w_Q = w* = 1.5
    g, i = model.parts(x)
    assert torch.allclose(g, 2.0 * x[:, -3], atol=1e-12)
    assert torch.allclose(i, induction_head(x, 2, torch.tensor([[1.5]], dtype=torch.float64)), atol=1e-12)


def plateau(length: int, sigma: float) -> int:
    history = train_toy(ToyRecipe(seq_len=length, sigma=sigma, n_seqs=512, steps=3500, log_every=20))
    phases = toy_phases(history)
    assert 0 < phases.end_of_I < phases.end_of_II < phases.end_of_III
    assert history[-1]["loss_induction"] < 0.05 * history[0]["loss_induction"]
    return phases.plateau


def test_plateau_grows_with_length_and_with_log_one_over_sigma():
    base = plateau(10, 1e-2)
    assert plateau(20, 1e-2) > 1.3 * base
    assert plateau(10, 1e-4) > 1.3 * base


def test_fit_plateau_recovers_an_exact_line():
    rows = [(L, s, 3.0 * L * math.log(1 / s) + 50) for L in (10, 20) for s in (1e-2, 1e-3)]
    slope, intercept, r2 = fit_plateau(rows)
    assert slope == pytest.approx(3.0) and intercept == pytest.approx(50.0) and r2 == pytest.approx(1.0)


@pytest.mark.parametrize(
    "args,message",
    [(["--sigma", "0"], "sigma must be a finite number > 0"), (["--seq-len", "3"], "seq_len must be an integer >= 4")],
)
def test_toy_bad_input(args, message, capsys):
    assert main(["toy", *args]) == 2
    assert message in capsys.readouterr().err


def test_layerwise_training_moves_layer_1_first_then_freezes_it():
    history = train_toy(ToyRecipe(seq_len=10, sigma=1e-2, n_seqs=256, steps=200, layerwise_steps=100, log_every=10))
    first, switch, last = history[0], history[10], history[-1]
    assert switch["p1"] != first["p1"]
    assert all(switch[name] == first[name] for name in ("p2", "w_V1", "w_K", "w_Q", "w_V2"))
    assert last["p1"] == switch["p1"] and last["w_V1"] != switch["w_V1"]
