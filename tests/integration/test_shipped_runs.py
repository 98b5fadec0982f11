"""The shipped runs: they load by name after a non-editable install, and show what they promise."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from induction_probes.circuits.runs.reader import Run
from induction_probes.circuits.runs.shipped import shipped_run_names
from induction_probes.probes.behaviour.icl_behaviour import strategy_phases

FRESH_SEED = 20_261_130  # not the runs' evaluation seed: fresh sequences


def fresh_final_kl(name: str, n_seqs: int = 5000) -> tuple[float, dict[str, float]]:
    run = Run.open(name)
    eval_set = run.task.eval_set(n_seqs, FRESH_SEED)
    with torch.no_grad():
        metrics = eval_set.metrics(run.load()(eval_set.sample.inputs))
    baselines = {name: kl.mean().item() for name, kl in eval_set.strategy_kl().items()}
    return metrics["last_token_kl"]["true"], baselines


def test_shipped_runs_are_listed():
    assert {"markov-k2", "markov-k3", "minimal-k3", "gaussian-ih2"} <= set(shipped_run_names())


@pytest.mark.parametrize("name,limit", [("markov-k3", 0.045), ("markov-k2", 0.02)])
def test_final_model_is_close_to_the_bigram_baseline_on_fresh_sequences(name, limit):
    kl, baselines = fresh_final_kl(name)
    assert kl <= limit, f"{name}: last-token KL {kl:.4f} > {limit} (bigram baseline {baselines['bigram']:.4f})"
    assert kl < baselines["unigram"] / 2


@pytest.mark.parametrize("name", ["markov-k3", "markov-k2"])
def test_phases_go_uniform_then_unigram_then_bigram(name):
    run = Run.open(name)
    metrics = run.metrics()
    phases = strategy_phases(metrics)
    assert phases[0].strategy == "uniform" and phases[-1].strategy == "bigram"
    first_bigram = next(i for i, p in enumerate(phases) if p.strategy == "bigram")
    plateau = phases[first_bigram - 1]
    assert plateau.strategy == "unigram" and all(p.strategy != "bigram" for p in phases[:first_bigram])
    # A plateau: unigram stays closest over many checkpoints before the drop to the bigram strategy.
    on_plateau = [m for m in metrics if plateau.first_step <= m["step"] <= plateau.last_step]
    assert len(on_plateau) >= 10
    assert phases[-1].last_step == run.steps[-1]


def build_wheel(source: Path, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), "."],
        check=True,
        cwd=source,
        capture_output=True,
    )
    (wheel,) = out.glob("*.whl")
    return wheel


def a_probes_distribution(root: Path) -> Path:
    """A distribution that installs a top-level ``probes``, as PyPI's ``probes`` does (its 0.1.0 sdist does not
    build with current setuptools, so the test builds one of the same shape)."""
    (root / "probes").mkdir(parents=True)
    (root / "probes" / "__init__.py").write_text('WHOSE = "another project"\n')
    (root / "pyproject.toml").write_text(
        '[project]\nname = "probes"\nversion = "0.1.0"\n[tool.setuptools]\npackages = ["probes"]\n'
    )
    return build_wheel(root, root / "dist")


def test_the_wheel_installs_one_name_beside_other_projects_circuits_and_probes(tmp_path):
    """Built as a wheel and installed with no source tree on the path: one top-level name, induction_probes,
    so it overwrites and shadows no other project's ``circuits``, ``probes`` or ``checkpoints``; the shipped
    runs load from inside it; PyPI's ``circuits`` (the test extra installs it) and a ``probes`` installed
    into the same directory still import and work."""
    target, source = tmp_path / "site", tmp_path / "source"
    repo = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    # Build from a copy, so that setuptools' build/ directory never lands in (or is reused from) the clone.
    shutil.copytree(repo, source, ignore=shutil.ignore_patterns(".venv", ".git", "build", "out", "*.egg-info"))
    ours = build_wheel(source, tmp_path / "dist")
    with zipfile.ZipFile(ours) as wheel:
        top = {name.split("/")[0] for name in wheel.namelist()}
    assert {name for name in top if not name.endswith(".dist-info")} == {"induction_probes"}
    theirs = a_probes_distribution(tmp_path / "other")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(theirs),
            str(ours),
        ],
        check=True,
        capture_output=True,
    )
    code = (
        "import circuits, probes\n"
        "from induction_probes.circuits.runs.reader import Run\n"
        "run = Run.open('markov-k3'); run.load()\n"
        "print(run.path); print(circuits.Component.__module__); print(probes.WHOSE)"
    )
    env = os.environ | {"PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    run_path, component, whose = out.stdout.strip().splitlines()
    assert run_path.startswith(str(target / "induction_probes" / "checkpoints"))
    assert component == "circuits.core.components" and whose == "another project"


def test_minimal_model_plateaus_transitions_and_shows_the_odd_even_asymmetry():
    from induction_probes.circuits.models.minimal import odd_even_gap

    run = Run.open("minimal-k3")
    metrics = run.metrics()
    phases = strategy_phases(metrics)
    assert [p.strategy for p in phases][-2:] == ["unigram", "bigram"]
    plateau, drop = phases[-2], phases[-1]
    assert sum(plateau.first_step <= m["step"] <= plateau.last_step for m in metrics) >= 10
    final = metrics[-1]["last_token_kl"]
    assert final["bigram"] < final["unigram"]
    transition = [s for s in run.steps if (plateau.first_step + plateau.last_step) // 2 <= s <= drop.first_step + 50]
    gaps = [odd_even_gap(run.load(step=s).v.detach()) for s in transition]
    assert max(gaps) > 0.05  # odd distances 3, 5, 7 above even 2, 4, 6 while the model switches


def test_gaussian_ih2_learned_the_induction_circuit():
    from induction_probes.probes.run_level.checkpoint_probes import probe_gaussian

    result = probe_gaussian(Run.open("gaussian-ih2"), n_seqs=1000, seed=FRESH_SEED)
    assert result.relative_mse <= 0.05
    assert result.previous_token[0][0] >= 0.9
    assert result.induction[0] >= 0.9
