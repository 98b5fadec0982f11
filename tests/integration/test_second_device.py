"""Probes and training on a model that is not on the CPU, on a machine without a GPU: tests/second_device.py
stands in for one, raising where an operation mixes the model's device with the CPU, as CUDA does. Everything
must run there and give the CPU's numbers to the bit (the same CPU kernels compute both)."""

import copy
import dataclasses
import json

import pytest
import torch
from second_device import Elsewhere, second_device

from induction_probes import Run, ablation_study, compare_with_prop21, probe_eval_set, probe_model, single_heads
from induction_probes.circuits.interop.transformer_lens_io import to_bridge
from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.runs import reader
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.training import train_loop as train
from induction_probes.circuits.training.train_loop import train_run
from induction_probes.probes.ablation.ablation_study import gaussian_ablation_study
from induction_probes.probes.llc.calibration import linear_regression, squared_error
from induction_probes.probes.llc.curvature import curvature, gradient_shift
from induction_probes.probes.run_level.checkpoint_probes import probe_gaussian

MARKOV = Run.open("markov-k3")
EVAL_SET = probe_eval_set(MARKOV, n_seqs=40, seed=0)


def same_numbers(a, b) -> bool:
    """Equal results, tensors compared on the CPU to the bit, through dataclasses, dicts and lists."""
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and same_numbers(dataclasses.asdict(a), dataclasses.asdict(b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a.cpu(), b.cpu())
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_numbers(a[key], b[key]) for key in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same_numbers(x, y) for x, y in zip(a, b))
    return a == b or (a != a and b != b)  # NaN where both have it


def accept_stand_in(monkeypatch, module, device) -> None:
    """Let ``module``'s device check, which asks this machine, pass the stand-in device too."""
    check = module.resolve_device
    monkeypatch.setattr(module, "resolve_device", lambda name: device if name == device else check(name))


def test_the_stand_in_raises_where_cuda_would_and_computes_where_it_would_not():
    with second_device() as device:
        x = torch.arange(6.0).reshape(2, 3).to(device)
        assert isinstance(x, Elsewhere) and x.device == device
        with pytest.raises(RuntimeError, match="same device"):
            x + torch.ones(3)
        assert (x * torch.tensor(2.0)).cpu().tolist() == [[0, 2, 4], [6, 8, 10]]  # a CPU scalar may mix
        assert x[:, [0, 2]].cpu().tolist() == [[0, 2], [3, 5]]  # CPU indices may too
        with pytest.raises(RuntimeError):
            x.numpy()
        assert type(x.cpu()) is torch.Tensor and x.sum().item() == 15
        layer = torch.nn.Linear(3, 1).to(device)
        layer(x).sum().backward()
        assert layer.weight.grad.device == device


@pytest.fixture
def model_elsewhere():
    with second_device() as device:
        yield MARKOV.load(index=-1).to(device)


def test_a_model_there_knows_it_and_probes_give_the_cpu_s_numbers(model_elsewhere):
    here = MARKOV.load(index=-1)
    assert model_elsewhere.cfg.device == "meta" and isinstance(model_elsewhere.W_Q, Elsewhere)
    assert same_numbers(probe_model(model_elsewhere, EVAL_SET), probe_model(here, EVAL_SET))
    tokens = EVAL_SET.sample.inputs
    assert same_numbers(compare_with_prop21(model_elsewhere, tokens, k=3), compare_with_prop21(here, tokens, k=3))
    for mode in ("Q", "K", "V"):
        assert same_numbers(model_elsewhere.all_composition_scores(mode), here.all_composition_scores(mode))


def test_a_bridge_of_a_model_there_runs_there():
    here = HookedTransformer(
        HookedTransformerConfig(
            n_layers=2, d_model=16, n_ctx=20, d_vocab=3, n_heads=1, d_head=16, positional="standard"
        )
    )
    tokens = EVAL_SET.sample.inputs[:4, :20]
    with second_device() as device:
        there = to_bridge(copy.deepcopy(here).to(device))
        assert next(there.parameters()).device == device
        assert torch.equal(there(tokens.to(device)).cpu(), to_bridge(here)(tokens))  # the bridge takes its own device's


@pytest.mark.parametrize("mode", ["zero", "mean", "resample"])
def test_ablations_there_give_the_cpu_s_numbers(model_elsewhere, mode):
    here = MARKOV.load(index=-1)
    heads, tokens = single_heads(here), EVAL_SET.sample.inputs
    there = ablation_study(model_elsewhere, EVAL_SET, heads, mode, tokens)
    assert same_numbers(there, ablation_study(here, EVAL_SET, heads, mode, tokens))


def test_the_gaussian_probes_and_ablations_there_give_the_cpu_s_numbers(monkeypatch):
    gaussian = Run.open("gaussian-ih2")
    here = probe_gaussian(gaussian, n_seqs=50), gaussian_ablation_study(gaussian, [[(0, 0)]], "zero", n_seqs=50)
    with second_device() as device:
        accept_stand_in(monkeypatch, reader, device)  # Run.load checks its device
        there = (
            probe_gaussian(gaussian, n_seqs=50, device=device),
            gaussian_ablation_study(gaussian, [[(0, 0)]], "zero", n_seqs=50, device=device),
        )
    assert same_numbers(there, here)


def test_the_learning_coefficient_s_curvature_there_gives_the_cpu_s_numbers():
    model, (x, y), _ = linear_regression(4, n=200)
    with torch.no_grad():
        model.w += 0.1  # off the minimum, so that the gradient shift is not zero
    here = curvature(model, squared_error, (x, y))
    with second_device() as device:
        moved = copy.deepcopy(model).to(device)
        there = curvature(moved, squared_error, (x.to(device), y.to(device)))
        shift = gradient_shift(moved, squared_error, there, 30.0, 2.0)
    assert same_numbers(there, here) and here["lambda_max"] > 0
    assert shift == gradient_shift(model, squared_error, here, 30.0, 2.0)


TINY = MarkovRecipe(task=MarkovTask(k=3, seq_len=20), steps=30, batch_size=16, eval_seqs=100, n_checkpoints=7)


def run_files(path) -> dict[str, bytes]:
    """A run's files but its config (which records the devices it trained on)."""
    names = ["manifest.json", "metrics.jsonl", *(f"checkpoints/{f.name}" for f in (path / "checkpoints").iterdir())]
    return {name: (path / name).read_bytes() for name in sorted(names)}


# torch warns that a state loaded into a parameter "on meta" is not copied, and copies it, as the test shows
@pytest.mark.filterwarnings("ignore:for .* copying from a non-meta parameter")
def test_a_run_trained_there_or_resumed_there_writes_the_cpu_s_files(tmp_path, monkeypatch):
    train_run(TINY, tmp_path / "cpu", progress=False)
    train_run(TINY, tmp_path / "switched", progress=False, stop_after=12)  # on the CPU, continued there below
    with second_device() as device:
        monkeypatch.setattr(torch, "inference_mode", torch.no_grad)  # views under inference_mode: beyond the stand-in
        accept_stand_in(monkeypatch, train, device)
        train_run(TINY, tmp_path / "there", progress=False, device=device)
        train_run(None, tmp_path / "switched", resume=True, progress=False, device=device)
    expected = run_files(tmp_path / "cpu")
    assert run_files(tmp_path / "there") == expected  # weights drawn on the CPU, batches moved, metrics on the CPU
    assert run_files(tmp_path / "switched") == expected  # optimiser, data stream and step continue exactly
    devices = {
        name: json.loads((tmp_path / name / "config.json").read_text())["devices"] for name in ("there", "switched")
    }
    assert devices == {"there": ["meta"], "switched": ["cpu", "meta"]}
