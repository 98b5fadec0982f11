"""Where a default training run's wall time goes: training steps, evaluation at checkpoints, writes.

Trains the default ICL-MC recipe (k = 3, 2,000 evaluation sequences) twice in one process, in lockstep:
one trainer with the evaluation as it is now (chunks under inference_mode, the KL at the last position),
one with the evaluation as it was (one forward of all sequences under no_grad, the KL at every position),
restored on that trainer alone; a step of one, then the same step of the other, and so for every
checkpoint, so that a shared machine's changing load falls on both alike. It checks that both wrote the
same metrics.jsonl and prints each path's split and the ratios. Then it trains the new path once more, alone,
for the share of a run that evaluation and writes take with no other trainer's tensors in the caches. One
torch thread, as the command line uses.

    .venv/bin/python bench/bench_run_split.py                       # the default run: 4000 steps, 150 checkpoints
    .venv/bin/python bench/bench_run_split.py --steps 400 --checkpoints 15   # the same shape, a tenth as long
"""

from __future__ import annotations

import argparse
import tempfile
import time
import types
from pathlib import Path

import torch

from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.training.train_loop import checkpoint_schedule, start_or_continue

PARTS = ("steps", "evaluation", "writes")


def one_batch_outputs(self, model=None, step=None) -> torch.Tensor:
    """The evaluation forward before chunking: all sequences at once, under no_grad."""
    with torch.no_grad():
        return self.forward(self.eval_inputs, model, step).cpu()


def every_position_metrics(self, logits) -> dict:
    """The metrics before: per_position's KL at every position, its last entry kept."""
    loss, kl = self.per_position(logits)
    return {"eval_loss": loss.mean().item(), "last_token_kl": {name: v[-1].item() for name, v in kl.items()}}


def evaluating_as_before(trainer):
    """``trainer`` with the evaluation of before (on this trainer and its evaluation set only)."""
    trainer.eval_outputs = types.MethodType(one_batch_outputs, trainer)
    object.__setattr__(trainer.eval_set, "metrics", types.MethodType(every_position_metrics, trainer.eval_set))
    return trainer


def timed(seconds: dict[str, float], part: str, function, *args):
    start = time.perf_counter()
    result = function(*args)
    seconds[part] += time.perf_counter() - start
    return result


def checkpoint(trainer, seconds: dict[str, float]) -> None:
    """What train_run does at a checkpoint, timed by part: evaluate, then write the weights, metrics,
    manifest and resume state."""
    metrics = timed(seconds, "evaluation", trainer.evaluate)
    step, weights = trainer.step, trainer.model.state_dict()
    timed(seconds, "writes", trainer.writer.add_checkpoint, step, step * trainer.recipe.batch_size, weights, metrics)
    timed(seconds, "writes", trainer.save_resume_state)


def lockstep(recipe, scratch: Path, paths: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Seconds per part for each of ``paths`` ("now", "before"), trained step by step side by side."""
    seconds = {path: dict.fromkeys(PARTS, 0.0) for path in paths}
    trainers = {path: start_or_continue(recipe, scratch / path, False, torch.device("cpu")) for path in seconds}
    if "before" in trainers:
        evaluating_as_before(trainers["before"])
    for path, trainer in trainers.items():  # start_or_continue evaluated step 0 the new way: again, timed
        trainer.writer = type(trainer.writer).reopen(trainer.out, -1)
        checkpoint(trainer, seconds[path])
        trainer.model.train()
    schedule = set(checkpoint_schedule(recipe.steps, recipe.n_checkpoints))
    for _ in range(recipe.steps):
        for path, trainer in trainers.items():
            timed(seconds[path], "steps", trainer.train_step)
            if trainer.step in schedule:
                checkpoint(trainer, seconds[path])
    for run in seconds.values():
        run["total"] = sum(run[part] for part in PARTS)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4000, help="training steps (default 4000, the default run's)")
    parser.add_argument("--checkpoints", type=int, default=150, help="checkpoints on the schedule (default 150)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    recipe = MarkovRecipe(task=MarkovTask(k=3), steps=args.steps, n_checkpoints=args.checkpoints)
    with tempfile.TemporaryDirectory() as scratch:
        seconds = lockstep(recipe, Path(scratch) / "lockstep", ("now", "before"))
        same = len({(Path(scratch) / "lockstep" / path / "metrics.jsonl").read_bytes() for path in seconds}) == 1
        # the share of a run is a property of one run: measured again with nothing beside it, since in lockstep
        # the other trainer's [2000, 100, 100] tensors pass through the same caches
        alone = lockstep(recipe, Path(scratch) / "alone", ("now",))["now"]
    n_saved = len(checkpoint_schedule(recipe.steps, recipe.n_checkpoints))
    print(
        f"default ICL-MC recipe, k=3, {recipe.steps} steps, {n_saved} checkpoints, {recipe.eval_seqs} evaluation "
        "sequences; one torch thread; the two paths trained in lockstep, then the new one alone"
    )
    print(
        f"{'part':<12}{'before (s)':>12}{'now (s)':>10}{'before/now':>12}{'share now':>11}{'alone (s)':>11}{'share':>8}"
    )
    before, now = seconds["before"], seconds["now"]
    for part in (*PARTS, "total"):
        print(
            f"{part:<12}{before[part]:>12.1f}{now[part]:>10.1f}{before[part] / now[part]:>12.2f}"
            f"{now[part] / now['total']:>11.1%}{alone[part]:>11.1f}{alone[part] / alone['total']:>8.1%}"
        )
    share = {
        name: (run["evaluation"] + run["writes"]) / run["total"] for name, run in (seconds | {"alone": alone}).items()
    }
    print(
        f"evaluation + writes: {share['before']:.1%} of the run before, {share['now']:.1%} now, {share['alone']:.1%} "
        f"now alone; end to end {before['total'] / now['total']:.2f}x faster; "
        f"metrics.jsonl {'identical' if same else 'DIFFERENT'}"
    )


if __name__ == "__main__":
    main()
