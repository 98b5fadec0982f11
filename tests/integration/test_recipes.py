"""Every recipe through the API and the command line: the same arguments make the same run, --resume
needs nothing but --out, the architecture options build what they say, and the shipped runs' recipes
still train the shipped weights."""

import json
from pathlib import Path

import pytest

from induction_probes.circuits.recipes.gaussian_recipes import GaussianRecipe, ToyRecipe
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe, MinimalRecipe
from induction_probes.circuits.recipes.task_kinds import recipe_from_json
from induction_probes.circuits.runs.reader import Run
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.training.toy_training import train_toy
from induction_probes.circuits.training.train_loop import train_run
from induction_probes.cli import main

# The same run given as Python arguments and as command-line arguments, with non-default options.
SAME_RUNS = {
    "markov": (
        MarkovRecipe(
            task=MarkovTask(k=3, n=3, seq_len=16),
            heads=(2, 1),
            steps=12,
            batch_size=8,
            lr=2e-3,
            layer_norm=False,
            eval_seqs=30,
            n_checkpoints=5,
            data_seed=5,
        ),
        [
            "--k",
            "3",
            "--n",
            "3",
            "--seq-len",
            "16",
            "--heads",
            "2,1",
            "--steps",
            "12",
            "--batch-size",
            "8",
            "--lr",
            "2e-3",
            "--no-layer-norm",
            "--eval-seqs",
            "30",
            "--n-checkpoints",
            "5",
            "--data-seed",
            "5",
        ],
    ),
    "markov-mixture": (
        MarkovRecipe(
            task=MarkovTask(k=4, seq_len=16, prior="mixture", p=0.75, eval_prior="dirichlet"),
            steps=12,
            batch_size=8,
            eval_seqs=30,
            n_checkpoints=5,
        ),
        [
            "--k",
            "4",
            "--seq-len",
            "16",
            "--prior",
            "mixture",
            "--p",
            "0.75",
            "--eval-prior",
            "dirichlet",
            "--steps",
            "12",
            "--batch-size",
            "8",
            "--eval-seqs",
            "30",
            "--n-checkpoints",
            "5",
        ],
    ),
    "minimal": (
        MinimalRecipe(
            task=MarkovTask(k=3, seq_len=16),
            first_layer="linear",
            steps=12,
            batch_size=8,
            lr_v=0.5,
            eval_seqs=30,
            n_checkpoints=5,
        ),
        [
            "--k",
            "3",
            "--seq-len",
            "16",
            "--first-layer",
            "linear",
            "--steps",
            "12",
            "--batch-size",
            "8",
            "--lr-v",
            "0.5",
            "--eval-seqs",
            "30",
            "--n-checkpoints",
            "5",
        ],
    ),
    "gaussian": (
        GaussianRecipe(
            task=GaussianTask(target="ihn", n=3, d=1, seq_len=10, boolean=True),
            heads=3,
            steps=12,
            batch_size=16,
            eval_seqs=30,
            n_checkpoints=5,
        ),
        [
            "--target",
            "ihn",
            "--n",
            "3",
            "--d",
            "1",
            "--seq-len",
            "10",
            "--boolean",
            "--heads",
            "3",
            "--steps",
            "12",
            "--batch-size",
            "16",
            "--eval-seqs",
            "30",
            "--n-checkpoints",
            "5",
        ],
    ),
}


def run_files(path: Path) -> dict[str, bytes]:
    """Every file of a run, its resume state included (nothing in it depends on the clock)."""
    files = sorted(f for f in path.rglob("*") if f.is_file())
    return {str(f.relative_to(path)): f.read_bytes() for f in files}


@pytest.mark.parametrize("name", SAME_RUNS)
def test_api_and_command_line_make_the_same_run(name, tmp_path):
    recipe, argv = SAME_RUNS[name]
    api = train_run(recipe, tmp_path / "api", progress=False)
    assert main(["train", name.split("-")[0], *argv, "--out", str(tmp_path / "cli")]) == 0
    cli = Run.open(tmp_path / "cli")
    assert (api.path / "config.json").read_bytes() == (cli.path / "config.json").read_bytes()
    assert run_files(api.path) == run_files(cli.path)
    assert cli.recipe == recipe and cli.task == recipe.task


@pytest.mark.parametrize("name", SAME_RUNS)
def test_resume_with_only_out_finishes_the_run(name, tmp_path, capsys):
    recipe, argv = SAME_RUNS[name]
    whole = train_run(recipe, tmp_path / "whole", progress=False)
    name = name.split("-")[0]
    assert main(["train", name, *argv, "--out", str(tmp_path / "split"), "--stop-after", "5"]) == 0
    assert Run.open(tmp_path / "split").steps[-1] <= 5
    assert main(["train", name, "--out", str(tmp_path / "split"), "--resume"]) == 0
    assert run_files(tmp_path / "split") == run_files(whole.path)
    capsys.readouterr()
    assert main(["train", name, "--out", str(tmp_path / "split"), "--resume", "--steps", "99"]) == 2
    assert "drop --steps" in capsys.readouterr().err


def test_resume_under_another_recipe_is_refused(tmp_path, capsys):
    recipe, argv = SAME_RUNS["minimal"]
    train_run(recipe, tmp_path / "run", stop_after=3, progress=False)
    assert main(["train", "gaussian", "--out", str(tmp_path / "run"), "--resume"]) == 2
    assert "is a minimal run: continue it with 'train minimal --resume'" in capsys.readouterr().err


def test_two_first_layer_heads_and_a_single_layer(tmp_path, capsys):
    base = ["train", "markov", "--k", "3", "--seq-len", "20", "--eval-seqs", "30", "--steps", "20"]
    assert main([*base, "--n", "3", "--heads", "2,1", "--out", str(tmp_path / "trigram")]) == 0
    assert "heads 2,1, d_model 32, d_head 16" in capsys.readouterr().out
    model = Run.open(tmp_path / "trigram").load()
    assert [block.attn.W_Q.shape[0] for block in model.blocks] == [2, 1]
    assert main([*base, "--n-layers", "1", "--out", str(tmp_path / "one")]) == 0
    assert main(["info", str(tmp_path / "one")]) == 0
    assert "model: HookedTransformer: 1 layers, heads 1," in capsys.readouterr().out
    assert Run.open(tmp_path / "one").load().cfg.n_layers == 1


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--k", "3", "--heads", "2,1,1"], "layer_heads has 3 entries for 2 layers"),
        (["--k", "3", "--positional", "relative,sideways"], "positional must be one of"),
        (["--k", "3", "--heads", "two"], "invalid int_tuple value"),
        (["--n", "3"], "--k is required"),
    ],
)
def test_bad_architecture_is_one_line_before_anything_is_written(argv, message, tmp_path, capsys):
    assert main(["train", "markov", *argv, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "run").exists()


def test_schedule_steps_keeps_a_longer_runs_rates_and_leaves_other_configs_as_they_were(tmp_path, capsys):
    # issue 52: a short sweep of the default recipe may keep the default's cosine rates, cut where it stops
    task = MarkovTask(k=3)
    default, short = MarkovRecipe(task=task), MarkovRecipe(task=task, steps=800, schedule_steps=4000)
    assert [short.lr_factor(s) for s in range(800)] == [default.lr_factor(s) for s in range(800)]
    assert MarkovRecipe(task=task, steps=800).lr_factor(400) == pytest.approx(0.5)  # rescaled: cos(π/2) half-way
    assert "schedule_steps" not in default.to_json()  # unset: every earlier run's config.json stays as it was
    assert recipe_from_json(short.to_json(), task.to_json()) == short
    base = ["train", "markov", "--k", "3", "--seq-len", "20", "--eval-seqs", "30", "--steps", "20"]
    assert main([*base, "--schedule-steps", "10", "--out", str(tmp_path / "short")]) == 2
    assert "schedule_steps 10 is less than steps 20" in capsys.readouterr().err
    assert not (tmp_path / "short").exists()
    assert main([*base, "--schedule-steps", "40", "--out", str(tmp_path / "kept")]) == 0
    assert Run.open(tmp_path / "kept").recipe.schedule_steps == 40


FLOAT32_EPS = 2.0**-23
# Retraining a shipped run on another machine cannot be bit for bit: float32 kernels (matmul blocking,
# vectorised reductions) round differently from one CPU to the next, and each step's update carries that
# rounding forward. Adam normalises the gradient, so a relative change of a few eps in a gradient reaches
# the update nearly whole; the gap then grows at most about linearly in the steps. The bound is
# DRIFT_PER_STEP float32 eps of the weights' largest entry per step trained. Measured on one AVX-512 + AMX
# machine under ATEN_CPU_CAPABILITY=default, avx2, avx512 and MKL_ENABLE_INSTRUCTIONS=AVX2 (worst of the
# four, against the bound): markov-k3 1.2e-7 after 30 steps (bound 2.4e-4), minimal-k3 1.5e-8 (1.8e-5),
# gaussian-ih2 1.75e-6 after 20 steps (5.6e-5). A real change in the maths (an init, a schedule, a loss)
# moves the weights by 1e-3 or more within these steps, far past the bound.
DRIFT_PER_STEP = 64


def weight_gap(shipped: Run, again: Run, step: int) -> tuple[float, float]:
    """The largest weight difference at ``step`` and the shipped weights' largest magnitude."""
    old, new = shipped.load(step=step).state_dict(), again.load(step=step).state_dict()
    gap = max((old[key] - new[key]).abs().max().item() for key in old)
    return gap, max(tensor.abs().max().item() for tensor in old.values())


@pytest.mark.parametrize("name,steps", [("markov-k3", 30), ("minimal-k3", 30), ("gaussian-ih2", 20)])
def test_the_shipped_recipes_still_train_the_shipped_weights(name, steps, tmp_path):
    """Retrained from its recipe here, every checkpoint matches the shipped one (made on another machine)
    within float32 rounding carried over the steps trained, and every metric that decides a phase makes
    the same decision."""
    shipped = Run.open(name)
    again = train_run(shipped.recipe, tmp_path / name, stop_after=steps, progress=False)
    assert len(again.manifest) > 10
    for entry in again.manifest:
        gap, scale = weight_gap(shipped, again, entry["step"])
        bound = DRIFT_PER_STEP * FLOAT32_EPS * scale * max(entry["step"], 1)
        assert gap <= bound, f"step {entry['step']}: weights differ by {gap:.3g}, float32 rounding allows {bound:.3g}"
    for old, new in zip(shipped.metrics(), again.metrics()):
        assert old["step"] == new["step"]
        assert new["eval_loss"] == pytest.approx(old["eval_loss"], rel=1e-4)  # weights within 1e-5: loss to 1e-4
        if "last_token_kl" in old:  # ICL-MC: the closest strategy is the decision; compare it where it is clear
            kl_old, kl_new = old["last_token_kl"], new["last_token_kl"]
            assert max(abs(kl_old[s] - kl_new[s]) for s in kl_old) <= 1e-4  # KLs of order 0.1: 1e-3 relative
            ranked = sorted((kl_old[s], s) for s in kl_old if s != "true")
            if ranked[1][0] - ranked[0][0] > 2e-4:  # a margin twice the KLs' own tolerance decides the same
                assert min((kl_new[s], s) for s in kl_new if s != "true")[1] == ranked[0][1], old["step"]


def test_a_toy_run_is_a_standard_run_directory(tmp_path):
    recipe = ToyRecipe(seq_len=10, n_seqs=256, steps=200, log_every=10)
    history = train_toy(recipe, tmp_path / "toy")
    run = Run.open(tmp_path / "toy")
    assert run.recipe == recipe and run.task == recipe.task
    assert run.metrics() == history and len(history) == 21
    assert run.steps == [0, 100, 200]
    assert run.load().params.tolist() == [history[-1][p] for p in ("p1", "p2", "w_V1", "w_K", "w_Q", "w_V2")]
    config = json.loads((run.path / "config.json").read_text())
    assert config["model_class"] == "ToyModel" and config["recipe"]["name"] == "toy"


def test_probing_the_minimal_model_is_one_line_and_ablating_it_works(capsys):
    assert main(["probe", "minimal-k3", "--n-seqs", "50"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "MinimalModel has no hook point blocks.1.attn.hook_pattern" in err
    assert main(["ablate", "minimal-k3", "--n-seqs", "200", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baseline"]["closest_strategy"] == "bigram"
    # Either layer zeroed leaves the output at 0: uniform predictions, loss log 3.
    assert all(a["loss"] == pytest.approx(1.0986, abs=1e-3) for a in data["ablations"])


def test_a_toy_run_whose_phases_did_not_all_appear_is_a_result_with_its_figure(tmp_path, capsys):
    assert main(["toy", "--steps", "300", "--n-seqs", "512", "--plot", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "the four phases did not all appear in 300 steps" in out
    (figure,) = tmp_path.glob("toy_*.png")
    assert figure.stat().st_size > 10_000
    assert main(["toy", "--steps", "300", "--n-seqs", "512", "--json"]) == 0
    assert "plateau did not end" in json.loads(capsys.readouterr().out)["phases"]["missing"]
