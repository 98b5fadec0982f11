"""Where a run trains and how it is evaluated: chunked evaluation gives the same bytes, ``--device cpu``
gives the same files as no option, and a device this machine lacks is refused before anything is written."""

from dataclasses import replace

import pytest
import torch

from induction_probes.circuits.devices import DeviceError, parse_device, resolve_device
from induction_probes.circuits.recipes.gaussian_recipes import GaussianRecipe
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe, MinimalRecipe
from induction_probes.circuits.runs.reader import Run
from induction_probes.circuits.sweeps.sweep_runner import SpecError, check_placement, place_cells
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.training.train_loop import Trainer, eval_chunk_size, train_run
from induction_probes.cli import main

TINY = MarkovRecipe(task=MarkovTask(k=3, seq_len=20), steps=30, batch_size=16, eval_seqs=100, n_checkpoints=7)
RECIPES = {
    "markov": TINY,
    "minimal": MinimalRecipe(task=MarkovTask(k=3, seq_len=20), steps=20, batch_size=16, eval_seqs=100, n_checkpoints=5),
    "gaussian": GaussianRecipe(task=GaussianTask(seq_len=10), steps=20, batch_size=32, eval_seqs=100, n_checkpoints=5),
}


@pytest.fixture
def tiny_run(trained_once) -> Run:
    """TINY's run, trained once for the session: the tests given it only read it."""
    return trained_once(TINY)


def run_files(path) -> dict[str, bytes]:
    files = [path / name for name in ("config.json", "manifest.json", "metrics.jsonl")]
    files += sorted((path / "checkpoints").iterdir())
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
    assert 25 <= chunk <= 100  # the default run: 2^19 numbers / (100^2 + 100·16) per sequence, 45
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


def test_device_cpu_gives_the_same_files_as_no_device(tmp_path, tiny_run):
    default = tiny_run
    cpu = train_run(TINY, tmp_path / "cpu", progress=False, device="cpu")
    assert run_files(default.path) == run_files(cpu.path)
    assert (
        main(
            [
                "train",
                "markov",
                "--k",
                "3",
                "--seq-len",
                "20",
                "--steps",
                "30",
                "--batch-size",
                "16",
                "--eval-seqs",
                "100",
                "--n-checkpoints",
                "7",
                "--device",
                "cpu",
                "--out",
                str(tmp_path / "cli"),
            ]
        )
        == 0
    )
    assert run_files(tmp_path / "cli") == run_files(default.path)
    assert Run.open(default.path).config["devices"] == ["cpu"]


def test_a_model_knows_its_device(tiny_run):
    run = tiny_run
    model = run.load(device="cpu")
    assert model.cfg.device == "cpu" and next(model.parameters()).device.type == "cpu"
    assert run.load(step=0).cfg is not model.cfg  # each model owns its config, so moving one moves no other
    trainer = Trainer.create(TINY, writer=None, device="cpu")
    assert trainer.eval_inputs.device.type == "cpu"
    moved = model.to("meta")  # every machine has torch's meta device: the same bookkeeping as a GPU's
    assert moved.cfg.device == "meta" and run.load().cfg.device == "cpu"


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


@pytest.mark.parametrize(
    "name, message", [("gpu", "not a device"), ("xla", "only cpu, cuda and mps"), ("", "not a device")]
)
def test_a_device_torch_does_not_know_is_refused(name, message):
    with pytest.raises(DeviceError, match=message):
        resolve_device(name)
    with pytest.raises(DeviceError, match=message):  # nor on a Ray cluster, whose nodes are not checked from here
        parse_device(name)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_cluster_may_have_the_gpu_this_machine_lacks():
    assert parse_device("cuda:3") == torch.device("cuda:3")  # a Ray cluster's node decides
    with pytest.raises(DeviceError, match="no CUDA GPU"):
        resolve_device("cuda:3")


SWEEP_SPEC = (
    'recipe = "markov"\nseeds = [0, 1]\n[base]\nk = 3\nseq_len = 12\nsteps = 4\nbatch_size = 8\n'
    "eval_seqs = 20\nn_checkpoints = 2\n"
)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("backend", ["local", "ray"])
def test_a_sweep_asking_for_a_gpu_without_one_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, backend):
    spec = tmp_path / "spec.toml"
    spec.write_text(SWEEP_SPEC)
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--backend", backend, "--gpus-per-cell", "0.25"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "asks for a GPU, but this machine has no CUDA GPU" in err
    assert not out.exists()
    assert main(["sweep", str(spec), "--out", str(out), "--device", "cuda:1"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize(
    "share, device, message",
    [
        (1.5, None, "a fraction in (0, 1] or a whole number"),
        (-0.25, None, "a fraction"),
        (float("nan"), None, "a fraction"),
        (0.5, "cpu", "cannot go with --device cpu"),
    ],
)
def test_a_gpu_share_that_cannot_be_placed_is_refused(share, device, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_placement(device, share, 1)


def test_the_local_pool_places_cells_on_the_visible_gpus_in_turn():
    cells = [{"path": f"c{i}"} for i in range(5)]
    placed = [c["device"] for c in place_cells(cells, None, 0.25, 2)]
    assert placed == ["cuda:0", "cuda:1", "cuda:0", "cuda:1", "cuda:0"]
    assert [c["device"] for c in place_cells(cells, "cpu", 0.0, 0)] == ["cpu"] * 5
    check_placement("cuda", 2, 4)  # whole GPUs per cell are a share too


def test_on_ray_a_cuda_device_needs_a_share_of_a_gpu():
    with pytest.raises(SpecError, match="needs --gpus-per-cell"):
        check_placement("cuda:1", 0.0, None, ray=True)
    check_placement("cuda", 0.5, None, ray=True)  # Ray schedules the share
    check_placement("cpu", 0.0, None, ray=True)
    check_placement("cuda", 0.0, 1)  # the local pool: every cell on that device, as asked


def test_a_sweep_on_the_cpu_device_writes_the_same_runs_as_one_without(tmp_path):
    from induction_probes.circuits.sweeps.sweep_runner import parse_spec, run_sweep

    spec = parse_spec(SWEEP_SPEC)
    run_sweep(spec, tmp_path / "default", report=lambda line: None)
    run_sweep(spec, tmp_path / "cpu", report=lambda line: None, device="cpu")
    for cell in ("base/seed-0", "base/seed-1"):
        assert run_files(tmp_path / "default" / cell) == run_files(tmp_path / "cpu" / cell)


MODEL_COMMANDS = [
    ["train", "markov"],
    ["train", "minimal"],
    ["train", "gaussian"],
    ["sweep"],
    ["probe"],
    ["ablate"],
    ["verify", "prop21"],
    ["verify", "wang-ih2"],
    ["verify", "wang-ihn"],
    ["llc"],
    ["report"],
    ["experiment", "ih4"],
    ["toy"],
]


@pytest.mark.parametrize("command", MODEL_COMMANDS, ids=" ".join)
def test_every_command_that_runs_a_model_offers_device(command, capsys):
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    assert "--device DEVICE" in capsys.readouterr().out


def test_the_toy_model_on_device_cpu_writes_the_same_run_as_no_device(tmp_path, capsys):
    toy = ["toy", "--steps", "60", "--n-seqs", "64", "--log-every", "5"]
    assert main([*toy, "--out", str(tmp_path / "default")]) == 0
    assert main([*toy, "--device", "cpu", "--out", str(tmp_path / "cpu")]) == 0
    capsys.readouterr()
    assert run_files(tmp_path / "default") == run_files(tmp_path / "cpu")
    assert Run.open(tmp_path / "cpu").config["devices"] == ["cpu"]


def test_a_probe_on_a_missing_device_is_refused_before_it_runs(capsys):
    present = torch.cuda.device_count() > 3
    assert main(["probe", "markov-k3", "--device", "cuda:3", "--n-seqs", "10"]) == (0 if present else 2)
    assert capsys.readouterr().err.count("\n") == (0 if present else 1)


def test_device_cpu_probes_and_verifies_the_same_numbers_as_no_device(capsys):
    for command in (
        ["probe", "markov-k3", "--n-seqs", "50", "--json"],
        ["ablate", "markov-k3", "--n-seqs", "50", "--json"],
        ["verify", "wang-ih2", "--n-seqs", "50", "--json"],
    ):
        assert main(command) == 0
        default = capsys.readouterr().out
        assert main([*command, "--device", "cpu"]) == 0
        assert capsys.readouterr().out == default


def absolute_model(**changes):
    from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(
        **(
            {
                "n_layers": 2,
                "d_model": 16,
                "n_ctx": 40,
                "d_vocab": 5,
                "n_heads": 2,
                "positional": "standard",
                "normalization": "LN",
                "init_range": 0.1,
            }
            | changes
        )
    )
    return HookedTransformer(cfg)


@pytest.mark.parametrize("changes", [{}, {"d_mlp": 32, "use_bias": True}, {"positional": ("none", "relative")}])
def test_the_fused_attention_gives_the_hooked_path_s_logits(monkeypatch, changes):
    """Without hooks a causal layer with no positional term runs torch's fused attention; a hook on the
    pattern (and run_with_cache) forces the eager maths. float32: the two sum in different orders, so they
    agree to rounding: 1e-6 on logits of size ~1 is a few float32 ulps (measured 2.4e-7); a wrong mask or
    scale moves them by orders of magnitude more."""
    model = absolute_model(**changes)
    tokens = torch.randint(0, 5, (8, 40), generator=torch.Generator().manual_seed(0))
    calls = []
    fused = torch.nn.functional.scaled_dot_product_attention
    counted = lambda *args, **kwargs: calls.append(1) or fused(*args, **kwargs)  # noqa: E731
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
    with torch.no_grad():
        fast = model(tokens)
        n_fused = len(calls)
        hooks = [(f"blocks.{layer}.attn.hook_pattern", lambda pattern, hook: None) for layer in range(2)]
        eager = model.run_with_hooks(tokens, fwd_hooks=hooks)
        cached, cache = model.run_with_cache(tokens)
    assert n_fused == sum(model.cfg.layer_positional(layer) == "none" for layer in range(2)) and len(calls) == n_fused
    assert (fast - eager).abs().max() <= 1e-6 and torch.equal(cached, eager)
    assert torch.allclose(cache["pattern", 0].sum(-1), torch.ones(()))


def test_dropout_and_strict_masks_keep_the_eager_maths():
    model = absolute_model(dropout=0.1).train()
    assert not model.blocks[0].attn.fused()
    assert model.eval().blocks[0].attn.fused()
    assert not absolute_model(mask="strict").blocks[0].attn.fused()
    assert not absolute_model(positional="relative").blocks[0].attn.fused()


def test_a_run_resumed_on_another_kind_of_device_records_it(tmp_path):
    """A run started on a GPU (its config says so) and continued on the CPU: the CPU is appended; a run of
    an earlier version (no devices entry: trained on the CPU) continued on the CPU keeps its config bytes."""
    import json

    train_run(TINY, tmp_path / "gpu", stop_after=10, progress=False)
    config = tmp_path / "gpu" / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"devices": ["cuda"]}, indent=2) + "\n")
    train_run(None, tmp_path / "gpu", resume=True, progress=False, device="cpu")
    assert json.loads(config.read_text())["devices"] == ["cuda", "cpu"]
    train_run(TINY, tmp_path / "old", stop_after=10, progress=False)
    config = tmp_path / "old" / "config.json"
    earlier = {key: value for key, value in json.loads(config.read_text()).items() if key != "devices"}
    config.write_text(json.dumps(earlier, indent=2) + "\n")
    before = config.read_bytes()
    train_run(None, tmp_path / "old", resume=True, progress=False)
    assert config.read_bytes() == before
