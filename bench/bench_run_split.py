"""Where a default training run's wall time goes: training steps, evaluation at checkpoints, writes.

Trains the default ICL-MC recipe (k = 3: 4,000 steps, 150 checkpoints, 2,000 evaluation sequences) twice
in one process: with the evaluation as it is now (chunks under inference_mode, KL at the last position)
and as it was (one forward of all 2,000 sequences under no_grad, the KL at every position), the second
restored here by patching two methods. It checks that both wrote the same metrics.jsonl and prints each
run's split and the ratios. One torch thread, as the command line uses.

    .venv/bin/python bench/bench_run_split.py            # the default run (a few minutes per path)
    .venv/bin/python bench/bench_run_split.py --steps 400  # a shorter run with the same checkpoints
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch

from induction_probes.circuits.checkpoint import RunWriter
from induction_probes.circuits.recipes import MarkovRecipe
from induction_probes.circuits.tasks import MarkovTask
from induction_probes.circuits.tasks.markov import MarkovEvalSet
from induction_probes.circuits.train import Trainer, train_run

PARTS = {"steps": (Trainer, "train_step"), "evaluation": (Trainer, "evaluate"),
         "writes": (RunWriter, "add_checkpoint"), "resume writes": (Trainer, "save_resume_state")}


@contextmanager
def timed(seconds: dict[str, float]):
    """Accumulate the time spent in each of PARTS's methods into ``seconds``."""
    originals = {name: getattr(owner, method) for name, (owner, method) in PARTS.items()}

    def wrap(name, function):
        def timed_call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start
        return timed_call

    for name, (owner, method) in PARTS.items():
        setattr(owner, method, wrap(name, originals[name]))
    try:
        yield
    finally:
        for name, (owner, method) in PARTS.items():
            setattr(owner, method, originals[name])


def one_batch_outputs(self) -> torch.Tensor:
    """The evaluation forward before chunking: all sequences at once, under no_grad."""
    with torch.no_grad():
        return self.forward(self.eval_inputs).cpu()


def every_position_metrics(self, logits) -> dict:
    """The metrics before: per_position's KL at every position, its last entry kept."""
    loss, kl = self.per_position(logits)
    return {"eval_loss": loss.mean().item(), "last_token_kl": {name: v[-1].item() for name, v in kl.items()}}


@contextmanager
def evaluation_as_before():
    saved = Trainer.eval_outputs, MarkovEvalSet.metrics
    Trainer.eval_outputs, MarkovEvalSet.metrics = one_batch_outputs, every_position_metrics
    try:
        yield
    finally:
        Trainer.eval_outputs, MarkovEvalSet.metrics = saved


def measure(recipe, out: Path, before: bool) -> dict[str, float]:
    seconds: dict[str, float] = {}
    with timed(seconds), (evaluation_as_before() if before else nullcontext()):
        start = time.perf_counter()
        train_run(recipe, out, progress=False)
        seconds["total"] = time.perf_counter() - start
    # add_checkpoint runs inside evaluate's caller, not inside evaluate: the parts do not overlap
    seconds["writes"] += seconds.pop("resume writes")
    seconds["other"] = seconds["total"] - seconds["steps"] - seconds["evaluation"] - seconds["writes"]
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4000, help="training steps (default 4000, the default run's)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    recipe = MarkovRecipe(task=MarkovTask(k=3), steps=args.steps)
    with tempfile.TemporaryDirectory() as scratch:  # a warm-up first: lazy imports would land in "other"
        train_run(MarkovRecipe(task=MarkovTask(k=3), steps=1, n_checkpoints=1), Path(scratch) / "warm", progress=False)
        now = measure(recipe, Path(scratch) / "now", before=False)
        before = measure(recipe, Path(scratch) / "before", before=True)
        same = (Path(scratch) / "now/metrics.jsonl").read_bytes() == (Path(scratch) / "before/metrics.jsonl").read_bytes()
    print(f"default ICL-MC recipe, k=3, {args.steps} steps, {recipe.n_checkpoints} checkpoints on the schedule, "
          f"{recipe.eval_seqs} evaluation sequences; one torch thread")
    print(f"{'part':<12}{'before (s)':>12}{'now (s)':>10}{'before/now':>12}{'share now':>11}")
    for part in ("steps", "evaluation", "writes", "other", "total"):
        print(f"{part:<12}{before[part]:>12.1f}{now[part]:>10.1f}{before[part] / now[part]:>12.2f}"
              f"{now[part] / now['total']:>11.1%}")
    print(f"evaluation + writes: {(before['evaluation'] + before['writes']) / before['total']:.1%} of the run before, "
          f"{(now['evaluation'] + now['writes']) / now['total']:.1%} now; end to end {before['total'] / now['total']:.2f}x "
          f"faster; metrics.jsonl {'identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
