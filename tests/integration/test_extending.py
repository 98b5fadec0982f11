"""A task, its recipe and a probe defined here, outside the package, and registered with one call for the task
and its recipe and one for the probe: the package trains, probes, sweeps and reports them through its public API
and its command line, with no edit.

The task: sequences of uniform tokens over k symbols, and at every position the target is the sequence's first
token. Its best predictor attends to position 0 and copies it (accuracy 1, loss 0); a model that has not
learned that is right 1/k of the time. The probe: each head's attention on the first token, averaged over
queries and sequences.
"""

from __future__ import annotations

import base64
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import torch

import induction_probes
from induction_probes import PROBES, TASK_KINDS, Recipe, RecipeEntry, TaskConfig, TaskKind
from induction_probes.circuits.config import nested, option
from induction_probes.circuits.recipes.task_kinds import recipe_entry, recipe_names
from induction_probes.cli import main


@dataclass(frozen=True)
class FirstTokenSet:
    inputs: torch.Tensor  # [batch, pos]

    def metrics(self, outputs: torch.Tensor) -> dict:
        targets = self.inputs[:, :1].expand_as(self.inputs)
        loss = torch.nn.functional.cross_entropy(outputs.flatten(0, 1).double(), targets.flatten()).item()
        return {"eval_loss": loss, "accuracy": (outputs.argmax(-1) == targets).double().mean().item()}


@dataclass(frozen=True)
class FirstTokenTask(TaskConfig):
    """Uniform tokens; predict the sequence's first token at every position."""

    k: int = option(4, "number of symbols")
    seq_len: int = option(8, "tokens per sequence")

    name: ClassVar[str] = "first-token"

    def numbers_per_sequence(self) -> int:
        return self.seq_len * (self.k + self.seq_len)

    def describe(self) -> str:
        return f"first-token k={self.k}, T={self.seq_len}"

    def draw(self, n_seqs: int, generator: torch.Generator) -> torch.Tensor:
        return torch.randint(self.k, (n_seqs, self.seq_len), generator=generator)

    def stream(self, seed: int):
        from induction_probes.circuits.tasks.streams import GeneratorStream

        return GeneratorStream(self.draw, seed)

    def inputs_and_targets(self, tokens):
        return tokens, tokens[:, :1].expand_as(tokens)

    def loss(self, outputs, targets):
        return torch.nn.functional.cross_entropy(outputs.flatten(0, 1), targets.flatten())

    def eval_set(self, n_seqs: int, seed: int) -> FirstTokenSet:
        return FirstTokenSet(self.draw(n_seqs, torch.Generator().manual_seed(seed)))

    def progress(self, metrics: dict) -> str:
        return f"accuracy {metrics['accuracy']:.3f}"


@dataclass(frozen=True, kw_only=True)
class FirstTokenRecipe(Recipe):
    """A one-layer, two-head attention-only transformer on the first-token task, Adam."""

    task: FirstTokenTask = nested(FirstTokenTask, has_default=True)
    d_model: int = option(16, "residual width")
    steps: int = option(6, "optimiser steps")
    batch_size: int = option(32, "sequences per step")
    lr: float = option(1e-2, "learning rate")
    eval_seqs: int = option(64, "evaluation sequences")
    n_checkpoints: int = option(3, "checkpoints on the schedule")

    name: ClassVar[str] = "first-token"

    def model_config(self):
        from induction_probes import HookedTransformerConfig

        return HookedTransformerConfig(
            n_layers=1,
            d_model=self.d_model,
            n_heads=2,
            n_ctx=self.task.seq_len,
            d_vocab=self.task.k,
            positional="standard",
            seed=self.model_seed,
        )

    def make_optimizer(self, model):
        return torch.optim.Adam(model.parameters(), lr=self.lr), [self.lr]


def first_token(patterns, tokens):
    """Each head's attention on key 0, averaged over queries and sequences: one [head] tensor per layer."""
    return [pattern[..., 0].mean(dim=(0, 2)) for pattern in patterns]


FIRST_TOKEN = TaskKind(FirstTokenTask, (RecipeEntry(FirstTokenRecipe, "copy the first token (a test's task)"),))


@pytest.fixture
def registered():
    """Two registration calls, the task kind (the task with its recipe) and the probe, undone afterwards so that
    no other test sees them."""
    induction_probes.register_task(FIRST_TOKEN)
    PROBES.register("first_token", first_token)
    assert TASK_KINDS.get("first-token").task is FirstTokenTask
    assert recipe_entry("first-token").recipe is FirstTokenRecipe
    yield
    induction_probes.unregister_task(FIRST_TOKEN)
    PROBES.unregister("first_token")
    assert "first-token" not in TASK_KINDS and "first-token" not in recipe_names()


def assert_png(data: bytes) -> None:
    """A whole PNG that decodes to an image of a figure's size (not an empty or truncated file)."""
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    image.load()  # decodes every pixel: a truncated file fails here
    assert image.format == "PNG" and min(image.size) >= 300, image.size


def cli(capsys, *argv) -> str:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert status == 0, err
    return out


SPEC = 'recipe = "first-token"\nseeds = [0, 1]\n[base]\nsteps = 4\nk = 3\n'


def test_a_task_and_a_probe_from_outside_train_probe_sweep_and_report(registered, tmp_path, capsys):
    # train through the API: the run's config names the task and the recipe by their registered names
    run = induction_probes.train_run(FirstTokenRecipe(), tmp_path / "api", progress=False)
    config = json.loads((run.path / "config.json").read_text())
    assert config["task"] == {"name": "first-token", "k": 4, "seq_len": 8}
    assert config["recipe"]["name"] == "first-token" and run.steps[-1] == 6
    assert induction_probes.Run.open(run.path).recipe == FirstTokenRecipe()  # read back through the registries

    # probe through the API: the registered probe beside the package's, and the same as computed by hand
    probe_set = run.task.eval_set(50, 12345)
    probes = induction_probes.probe_run(run, probe_set)
    model = run.load()
    _, patterns = model.run_with_cache(probe_set.inputs, names_filter=lambda name: name.endswith("hook_pattern"))
    by_hand = patterns["blocks.0.attn.hook_pattern"][..., 0].mean(dim=(0, 2))
    assert torch.equal(probes[-1].scores["first_token"][0], by_hand)  # one chunk of 50: the same forward, exactly
    assert {"first_token", "previous_token", "bigram_matching"} <= set(probes[-1].scores)
    table = probes.to_frame()
    rows = table[(table.measure == "first_token") & (table.step == 6)]
    assert sorted(rows["head"].tolist()) == [0, 1]
    assert rows["value"].tolist() == probes[-1].scores["first_token"][0].tolist()
    assert 0.0 <= probes[-1].metrics["accuracy"] <= 1.0

    # the command line: train, probe, ablate and report the task it was never told of
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "copy the first token (a test's task)" in capsys.readouterr().out
    out = cli(capsys, "train", "first-token", "--k", 3, "--steps", 4, "--out", tmp_path / "cli")
    assert "task: first-token k=3" in out and "accuracy" in out  # the info text, with the task's own metrics
    answer = json.loads(cli(capsys, "probe", tmp_path / "api", "--json", "--n-seqs", 50))
    assert answer["checkpoints"][-1]["first_token"] == [probes[-1].scores["first_token"][0].tolist()]
    assert any(r["measure"] == "first_token" for r in answer["records"])
    assert "first_token" in cli(capsys, "probe", tmp_path / "cli", "--n-seqs", 20)
    ablated = json.loads(cli(capsys, "ablate", tmp_path / "api", "--json", "--n-seqs", 50, "--heads", "0.0,0.1"))
    assert ablated["baseline"]["accuracy"] == pytest.approx(probes[-1].metrics["accuracy"])  # one probe set
    report = cli(capsys, "report", tmp_path / "api")
    assert "first_token" in report and "accuracy" in report

    # figures and the one-page report, drawn from what every task has: the probes per head, its own metrics
    figures = tmp_path / "figures"
    out = cli(capsys, "probe", tmp_path / "api", "--all-steps", "--n-seqs", 50, "--plot", figures)
    assert "best first_token" in out  # the table over training
    out += cli(capsys, "ablate", tmp_path / "api", "--n-seqs", 50, "--plot", figures)
    out += cli(capsys, "report", tmp_path / "api", "--plot", figures)
    written = [Path(line.removeprefix("figure: ")) for line in out.splitlines() if line.startswith("figure: ")]
    probed = "api_probes_steps" + "-".join(map(str, run.steps)) + ".png"  # probe and report both draw it
    assert {p.name for p in written} == {probed, "api_ablation_zero_step6.png", "api_metrics.png"}
    assert {p.name for p in written} == {p.name for p in figures.iterdir()}
    for path in written:
        assert_png(path.read_bytes())
    page = induction_probes.html_report(run, tmp_path / "html")
    assert page == tmp_path.resolve() / "html" / "api_report.html"
    assert f"report: {page}" in cli(capsys, "report", tmp_path / "api", "--html", tmp_path / "html")
    text = page.read_text()
    embedded = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]+)"', text)
    assert sorted(name for _, name in embedded) == sorted({p.name for p in written})  # every figure, in the page
    for data, _ in embedded:
        assert_png(base64.b64decode(data))
    assert "first_token" in text and "accuracy" in text and "zero-ablated" in text

    # sweep through the API (a spawned worker registers the same three) and summarize both seeds
    from induction_probes.circuits.sweeps.sweep_runner import parse_spec, run_sweep
    from induction_probes.probes.sweeps.summary import summarize_sweep

    results = run_sweep(parse_spec(SPEC), tmp_path / "sweep", report=lambda line: None)
    assert [r["status"] for r in results] == ["trained", "trained"], results
    summary = summarize_sweep(tmp_path / "sweep", probe_seqs=40)
    condition = summary["conditions"]["base"]
    assert condition["seeds"] == [0, 1] and condition["probes"]["first_token_layer0"]["n"] == 2
    assert [r["seed"] for r in condition["runs"]] == [0, 1]
    # and through the command line: the finished cells are found again, and the summary reads the same
    (tmp_path / "spec.toml").write_text(SPEC)
    assert "2 skipped" in cli(capsys, "sweep", tmp_path / "spec.toml", "--out", tmp_path / "sweep")
    assert json.loads(cli(capsys, "summarize", tmp_path / "sweep", "--json", "--probe-seqs", 40)) == json.loads(
        json.dumps(summary)
    )
    assert "best first_token_layer0" in cli(capsys, "summarize", tmp_path / "sweep", "--probe-seqs", 40)


def test_without_its_registration_the_task_is_an_unknown_name_that_lists_the_known_ones(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"unknown task 'first-token' \(known: markov, gaussian, text\)"):
        TASK_KINDS.get("first-token")
    assert main(["train", "first-token", "--out", str(tmp_path / "x")]) == 2
    assert "invalid choice: 'first-token'" in capsys.readouterr().err


PLUGIN = """from induction_probes import PROBES, register_task
from test_extending import FIRST_TOKEN, first_token

register_task(FIRST_TOKEN)
PROBES.register("first_token", first_token)
"""


def test_a_shell_command_sees_the_modules_named_in_the_plugins_variable(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "first_token_plugin.py").write_text(PLUGIN)
    command = Path(sys.executable).with_name("induction-probes")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parent)]),
        "INDUCTION_PROBES_PLUGINS": "first_token_plugin",
    }
    out = subprocess.run(
        [str(command), "train", "first-token", "--steps", "2", "--n-checkpoints", "2", "--out", str(tmp_path / "run")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "first-token k=4" in out.stdout and (tmp_path / "run" / "config.json").is_file()
    # issue 52: the run's config names the module that defined its task, and a reader without the plugin says so
    assert json.loads((tmp_path / "run" / "config.json").read_text())["plugin"] == "test_extending"
    bare = {key: value for key, value in env.items() if key != "INDUCTION_PROBES_PLUGINS"}
    out = subprocess.run([str(command), "info", str(tmp_path / "run")], env=bare, capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "plugin module 'test_extending': name it in $INDUCTION_PROBES_PLUGINS" in out.stderr
    beside = {**env, "PYTHONPATH": str(Path(__file__).parent)}  # the plugin's folder not on the path: only the cwd
    out = subprocess.run([str(command), "--help"], env=beside, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "No module named 'first_token_plugin'" in out.stderr  # never the cwd implicitly
    env["INDUCTION_PROBES_PLUGINS"] = "no_such_plugin"
    out = subprocess.run([str(command), "--help"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert (
        "$INDUCTION_PROBES_PLUGINS names a module that cannot be imported: No module named 'no_such_plugin'"
        in out.stderr
    )
