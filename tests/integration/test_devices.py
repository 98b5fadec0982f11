"""Where a run trains and how it is evaluated: chunked evaluation gives the same bytes, ``--device cpu``
gives the same files as no option, and a device this machine lacks is refused before anything is written."""

from dataclasses import replace

import pytest
import torch

from induction_probes.circuits.checkpoint import Run
from induction_probes.circuits.devices import DeviceError, resolve_device
from induction_probes.circuits.recipes import GaussianRecipe, MarkovRecipe, MinimalRecipe
from induction_probes.circuits.tasks import GaussianTask, MarkovTask
from induction_probes.circuits.train import Trainer, eval_chunk_size, train_run
from induction_probes.cli import main

TINY = MarkovRecipe(task=MarkovTask(k=3, seq_len=20), steps=30, batch_size=16, eval_seqs=100, n_checkpoints=7)
RECIPES = {
    "markov": TINY,
    "minimal": MinimalRecipe(task=MarkovTask(k=3, seq_len=20), steps=20, batch_size=16, eval_seqs=100, n_checkpoints=5),
    "gaussian": GaussianRecipe(task=GaussianTask(seq_len=10), steps=20, batch_size=32, eval_seqs=100, n_checkpoints=5),
}


def run_files(path) -> dict[str, bytes]:
    files = [path / "config.json", path / "manifest.json", path / "metrics.jsonl", *sorted((path / "checkpoints").iterdir())]
    return {str(f.relative_to(path)): f.read_bytes() for f in files}


@pytest.mark.parametrize("kind", RECIPES)
def test_chunked_evaluation_writes_the_same_metrics_bytes_as_one_batch(tmp_path, kind):
    recipe = RECIPES[kind]
    whole = train_run(recipe, tmp_path / "whole", progress=False, eval_chunk=recipe.eval_seqs)
    chunked = train_run(recipe, tmp_path / "chunked", progress=False, eval_chunk=7)  # 14 chunks and a rest of 2
    assert (whole.path / "metrics.jsonl").read_bytes() == (chunked.path / "metrics.jsonl").read_bytes()
    assert run_files(whole.path) == run_files(chunked.path)


def test_the_default_chunk_holds_a_few_megabytes_and_the_gpu_takes_everything():
    cfg = TINY.model_config()
    chunk = eval_chunk_size(replace(TINY, task=MarkovTask(k=3, seq_len=100)).model_config(), 2000)
    assert 50 <= chunk <= 200  # the default run: 2^20 numbers / (100^2 + 100·16) per sequence
    assert eval_chunk_size(cfg, 3) == 3
    assert eval_chunk_size(cfg, 2000, torch.device("meta")) == 2000


def test_the_fast_metrics_are_per_position_s_numbers_to_the_bit():
    """MarkovEvalSet.metrics computes the KL at the last position only; per_position computes it
    everywhere, as the metrics did before. Same machine, same test: exact."""
    for task, n_seqs in ((MarkovTask(k=3, seq_len=30), 300), (MarkovTask(k=4, seq_len=25, n=3), 1)):
        eval_set = task.eval_set(n_seqs, 5)
        for seed in range(5):
            logits = 3 * torch.randn(n_seqs, task.seq_len, task.k, generator=torch.Generator().manual_seed(seed))
            loss, kl = eval_set.per_position(logits)
            before = {"eval_loss": loss.mean().item(), "last_token_kl": {name: v[-1].item() for name, v in kl.items()}}
            assert eval_set.metrics(logits) == before


def test_device_cpu_gives_the_same_files_as_no_device(tmp_path):
    default = train_run(TINY, tmp_path / "default", progress=False)
    cpu = train_run(TINY, tmp_path / "cpu", progress=False, device="cpu")
    assert run_files(default.path) == run_files(cpu.path)
    assert main(["train", "markov", "--k", "3", "--seq-len", "20", "--steps", "30", "--batch-size", "16",
                 "--eval-seqs", "100", "--n-checkpoints", "7", "--device", "cpu", "--out", str(tmp_path / "cli")]) == 0
    assert run_files(tmp_path / "cli") == run_files(default.path)
    assert Run.open(default.path).config["devices"] == ["cpu"]


def test_a_model_knows_its_device(tmp_path):
    run = train_run(TINY, tmp_path / "run", progress=False)
    model = run.load(device="cpu")
    assert model.cfg.device == "cpu" and next(model.parameters()).device.type == "cpu"
    assert run.load(step=0).cfg is not model.cfg  # each model owns its config, so moving one moves no other
    trainer = Trainer.create(TINY, writer=None, device="cpu")
    assert trainer.eval_inputs.device.type == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: cuda is not missing")
@pytest.mark.parametrize("device", ["cuda", "cuda:7"])
def test_a_missing_device_is_one_line_exit_2_and_nothing_is_written(tmp_path, capsys, device):
    out = tmp_path / "run"
    assert main(["train", "markov", "--k", "3", "--steps", "5", "--device", device, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA GPU" in err
    assert not out.exists()
    with pytest.raises(DeviceError, match="no CUDA GPU"):
        train_run(TINY, out, device=device)
    assert not out.exists()


@pytest.mark.parametrize("name, message", [("gpu", "not a device"), ("xla", "only cpu, cuda and mps"), ("", "not a device")])
def test_a_device_torch_does_not_know_is_refused(name, message):
    with pytest.raises(DeviceError, match=message):
        resolve_device(name)
