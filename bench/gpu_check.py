"""On a CUDA machine: does the default ICL-MC run on the GPU tell the same story as on the CPU, and how fast?

Trains the default recipe (k = 3, the shipped markov-k3's) on the CPU and on the GPU with the same seeds,
then the 10-seed seed-variance sweep (experiments/seed-variance.toml) on the GPU with --gpus-per-cell
0.25 and four workers, timing each. The GPU run passes if its phases (the closest strategy over training,
each lasting two checkpoints or more) are the CPU run's, and its transition step and final KL(true ‖ model)
are within two standard deviations over the sweep's seeds of the CPU run's: the same seeds on two devices
differ by float rounding only, far less than one seed differs from another. Then every command that runs a
model (probe, ablate, verify, report, llc) runs on the GPU over the shipped runs and must finish with status
0. Exit status 1 if not.

Without CUDA it says so in one line and exits 0.

    .venv/bin/python bench/gpu_check.py
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent


def lasting_phases(metrics: list[dict], minimum: int = 2) -> list[str]:
    """The closest strategy over training, each run of at least ``minimum`` checkpoints once, in order
    (a one-checkpoint flicker near a tie is rounding, not a phase)."""
    from induction_probes.circuits.tasks.markov.strategies import closest_strategy

    closest = [closest_strategy(m["last_token_kl"]) for m in metrics]
    runs: list[list] = []
    for name in closest:
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    phases: list[str] = []
    for name, length in runs:
        if length >= minimum and phases[-1:] != [name]:
            phases.append(name)
    return phases


def transition_step(metrics: list[dict], target: str = "bigram") -> int | None:
    """The first step from which on the target strategy stays the closest (None: never)."""
    from induction_probes.circuits.tasks.markov.strategies import closest_strategy
    from induction_probes.probes.sweeps.summary import transition_index

    index = transition_index([closest_strategy(m["last_token_kl"]) for m in metrics], target)
    return None if index is None or index == len(metrics) else metrics[index]["step"]


def spread(values: list[float]) -> float:
    """The sample standard deviation (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def compare(cpu: list[dict], gpu: list[dict], seeds: list[list[dict]]) -> list[str]:
    """What differs between the CPU run's and the GPU run's metrics beyond two standard deviations over
    the seeds' runs (``seeds``: each seed's metrics); empty when they agree."""
    problems = []
    if lasting_phases(cpu) != lasting_phases(gpu):
        problems.append(f"phases differ: cpu {lasting_phases(cpu)}, gpu {lasting_phases(gpu)}")
    steps = [transition_step(metrics) for metrics in seeds]
    cpu_step, gpu_step = transition_step(cpu), transition_step(gpu)
    if (cpu_step is None) != (gpu_step is None):
        problems.append(f"transition: cpu at {cpu_step}, gpu at {gpu_step}")
    elif cpu_step is not None:
        noise = 2 * spread([float(s) for s in steps if s is not None])
        if abs(cpu_step - gpu_step) > noise:
            problems.append(f"transition: cpu at step {cpu_step}, gpu at {gpu_step}, more than {noise:.0f} steps apart")
    noise = 2 * spread([metrics[-1]["last_token_kl"]["true"] for metrics in seeds])
    cpu_kl, gpu_kl = (metrics[-1]["last_token_kl"]["true"] for metrics in (cpu, gpu))
    if abs(cpu_kl - gpu_kl) > noise:
        problems.append(f"final KL: cpu {cpu_kl:.4f}, gpu {gpu_kl:.4f}, more than {noise:.4f} apart")
    return problems


# Every command that runs a model, on the GPU, over the shipped runs: each must finish with status 0. These
# paths were written without a GPU (tensors made on the CPU beside a model on the GPU fail only there).
COMMANDS_ON_CUDA = [
    ["probe", "markov-k3", "--step", "0"],
    ["probe", "gaussian-ih2"],
    ["ablate", "markov-k3"],
    ["verify", "prop21", "--k", "3", "--against", "markov-k3"],
    ["report", "markov-k3"],
    ["llc", "markov-k3", "--checkpoints", "2", "--chains", "1", "--draws", "20", "--burn-in", "20", "--n-seqs", "512"],
]


def failing_commands(out: Path, device: str = "cuda", commands: list[list[str]] = COMMANDS_ON_CUDA) -> list[str]:
    """The ``commands`` that do not finish with status 0 on ``device``, each with its last line, run in ``out``."""
    import subprocess

    program = Path(sys.executable).with_name("induction-probes")
    failed = []
    for words in commands:
        result = subprocess.run([program, *words, "--device", device], capture_output=True, text=True, cwd=out)
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
            failed.append(f"induction-probes {' '.join(words)} --device {device}: status {result.returncode}: {last}")
    return failed


def timed_run(recipe, out: Path, device: str):
    from induction_probes.circuits.training.train_loop import train_run

    start = time.perf_counter()
    run = train_run(recipe, out, progress=False, device=device)
    return run, time.perf_counter() - start


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: this machine has no CUDA GPU; nothing to check (run it where one is)")
        return 0
    from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
    from induction_probes.circuits.runs.reader import Run
    from induction_probes.circuits.sweeps.sweep_runner import read_spec, run_sweep
    from induction_probes.circuits.tasks.markov.markov_task import MarkovTask

    torch.set_num_threads(1)
    recipe = MarkovRecipe(task=MarkovTask(k=3))
    with tempfile.TemporaryDirectory() as scratch:
        gpu, gpu_seconds = timed_run(recipe, Path(scratch) / "gpu", "cuda")
        cpu, cpu_seconds = timed_run(recipe, Path(scratch) / "cpu", "cpu")
        spec = read_spec(REPOSITORY / "experiments" / "seed-variance.toml")
        start = time.perf_counter()
        results = run_sweep(spec, Path(scratch) / "sweep", workers=4, gpus_per_cell=0.25, report=lambda line: None)
        sweep_seconds = time.perf_counter() - start
        seeds = [Run.open(Path(scratch) / "sweep" / r["cell"]).metrics() for r in results if r["status"] != "failed"]
        problems = compare(cpu.metrics(), gpu.metrics(), seeds) + failing_commands(Path(scratch))
    print(
        f"default ICL-MC run ({recipe.steps} steps): cpu {cpu_seconds:.1f} s, {torch.cuda.get_device_name()} "
        f"{gpu_seconds:.1f} s ({cpu_seconds / gpu_seconds:.2f}x)"
    )
    print(
        f"seed-variance sweep, {len(spec.seeds)} seeds, --gpus-per-cell 0.25, 4 workers: {sweep_seconds:.1f} s "
        f"({len(seeds)} finished)"
    )
    print(
        "\n".join(problems)
        if problems
        else "the GPU run's phases, transition and final KL match the CPU run's "
        f"within two standard deviations over seeds; {len(COMMANDS_ON_CUDA)} commands ran on cuda"
    )
    return 1 if problems or len(seeds) < len(spec.seeds) else 0


if __name__ == "__main__":
    sys.exit(main())
