"""Training any minibatch recipe (:mod:`induction_probes.circuits.recipes`): fresh batches every step, a checkpoint
schedule, exact resume.

Same recipe ⇒ byte-identical run files, and a run stopped early and continued with ``resume=True``
writes the same files as one that never stopped: the optimiser state, the data stream's state, the
global random generator (dropout) and the running loss are saved in ``resume/`` at every checkpoint and
at the stop. Nothing about the machine or the clock is saved, so equal recipes give equal bytes anywhere.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file
from torch import Tensor
from tqdm.auto import tqdm
from transformer_lens import HookedRootModule

from induction_probes.circuits.devices import Device, device_kind, resolve_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.model_classes import build_model
from induction_probes.circuits.recipes.recipe import Recipe
from induction_probes.circuits.recipes.task_kinds import recipe_from_json
from induction_probes.circuits.runs.layout import RESUME_FILE
from induction_probes.circuits.runs.reader import Run, read_json, read_manifest
from induction_probes.circuits.runs.writer import RunWriter, refuse_a_used_folder, run_config, save_tensors, write_json
from induction_probes.circuits.tasks.task_config import EvalSet, Stream
from induction_probes.circuits.threads import spare_core
from induction_probes.circuits.training.checkpoint_queue import WAITING_BYTES, CheckpointQueue
from induction_probes.circuits.training.interrupts import TrainingInterrupted, interrupts_between_steps
from induction_probes.circuits.training.run_lock import only_writer
from induction_probes.circuits.untrusted import CheckpointError, refuse_links
from induction_probes.circuits.validation import require_int


def checkpoint_schedule(steps: int, n_checkpoints: int) -> list[int]:
    """About ``n_checkpoints`` steps from 0 to ``steps``: a third log-spaced over the first 5% of
    training (where the loss first moves fast), the rest evenly spaced; always 0 and ``steps``."""
    n_log = n_checkpoints // 3
    early = np.geomspace(1, max(steps / 20, 1), n_log).round() if n_log else []
    even = np.linspace(0, steps, n_checkpoints - n_log).round()
    return sorted({0, steps, *map(int, early), *map(int, even)})


# Numbers one evaluation forward pass may hold per tensor: 2^19 float32 (2 MiB), so that a chunk's
# [chunk, head, query, key] attention tensors stay near a core's L2 cache. Measured on the default run's model
# after 1,500 training steps, 15 interleaved rounds, on a CPU with 1 MiB of L2 a core: the median evaluation took
# 0.144 s at 45 sequences a chunk (2^19), about the same from 32 to 64, 0.189 s at 90 (2^20, the earlier choice);
# all 2,000 sequences in one forward took 0.89 s (an untrained model, against 0.15 s in chunks of 90).
EVAL_CHUNK_NUMBERS = 1 << 19


def eval_chunk_size(model_config, n_seqs: int, device: torch.device | None = None) -> int:
    """How many evaluation sequences go through the model at once: on the CPU as many as fit in
    :data:`EVAL_CHUNK_NUMBERS` (at least one), on a GPU all of them (its memory and parallelism are wide)."""
    if device is not None and device.type != "cpu":
        return n_seqs
    return max(1, min(n_seqs, EVAL_CHUNK_NUMBERS // model_config.numbers_per_sequence()))


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpoint writes, taken at its step: the weights, the mean training loss since the last checkpoint
    (None if no step trained since: the evaluation loss stands in), and the resume state's tensors and numbers."""

    step: int
    train_loss: float | None
    weights: dict[str, Tensor]
    resume: dict[str, Tensor]
    resume_info: dict[str, Any]


@dataclass
class Trainer:
    """One run: the model, optimiser, data stream and the run directory they are saved in."""

    recipe: Recipe
    writer: RunWriter
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    base_rates: list[float]
    data: Stream
    eval_set: EvalSet
    device: torch.device = torch.device("cpu")
    step: int = 0
    loss_sum: float = 0.0
    loss_count: int = 0
    eval_chunk: int | None = None  # sequences per evaluation forward pass; None: eval_chunk_size's
    queue: CheckpointQueue[Checkpoint] | None = None  # evaluates and writes checkpoints on a spare core, if any

    @classmethod
    def create(
        cls,
        recipe: Recipe,
        writer: RunWriter,
        device: Device = None,
        eval_chunk: int | None = None,
        background: bool | None = False,
    ) -> Trainer:
        """The trainer at step 0. Weights, data and the evaluation set are drawn on the CPU from the seeds
        (the same on every device), then the model and the evaluation inputs move to ``device``. ``background``:
        checkpoints are evaluated and written on a spare core (None: where :func:`spare_core` finds one)."""
        device = resolve_device(device)
        torch.manual_seed(recipe.model_seed)  # dropout draws from the global generator(s)
        model = build_model(recipe.model_config()).to(device)
        optimizer, base_rates = recipe.make_optimizer(model)
        data = recipe.task.stream(recipe.data_seed)
        eval_set = recipe.task.eval_set(recipe.eval_seqs, recipe.eval_seed)
        background = spare_core(model, device) if background is None else background
        trainer = cls(recipe, writer, model, optimizer, base_rates, data, eval_set, device, eval_chunk=eval_chunk)
        trainer.queue = CheckpointQueue(trainer.write_copy, trainer.copies_that_fit()) if background else None
        return trainer

    def __post_init__(self) -> None:
        self.eval_inputs = self.eval_set.inputs.to(self.device)  # moved once, read at every checkpoint
        self.evaluated_copy: torch.nn.Module | None = None  # the background's model, built at its first checkpoint

    @property
    def out(self) -> Path:
        return self.writer.path

    def forward(self, inputs, model: torch.nn.Module | None = None, step: int | None = None):
        """The output of ``model`` (default the trained one), with the recipe's hooks (a clamp) in place for
        ``step`` (default this step) if it has any."""
        model = self.model if model is None else model
        hooks = self.recipe.training_hooks(inputs, self.step if step is None else step)
        if not hooks:
            return model(inputs)
        if not isinstance(model, HookedRootModule):
            raise BadInput(f"the recipe {self.recipe.name} hooks its model, but a {type(model).__name__} has no hooks")
        return model.run_with_hooks(inputs, fwd_hooks=hooks)

    def train_step(self) -> None:
        recipe = self.recipe
        inputs, targets = recipe.task.inputs_and_targets(self.data.take(recipe.batch_size))
        inputs, targets = inputs.to(self.device), targets.to(self.device)  # drawn on the CPU, moved once
        loss = recipe.task.loss(self.forward(inputs), targets)
        for group, rate in zip(self.optimizer.param_groups, self.base_rates):
            group["lr"] = rate * recipe.lr_factor(self.step)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"training loss became {loss.item()} at step {self.step + 1}; lower --lr")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.step += 1
        self.loss_sum += loss.item()
        self.loss_count += 1

    def eval_outputs(self, model: torch.nn.Module | None = None, step: int | None = None) -> Float[Tensor, "batch ..."]:
        """The outputs of ``model`` (default the trained one) on the evaluation set, ``eval_chunk`` sequences per
        forward pass (any chunk gives the same outputs, to the bit: each sequence's arithmetic does not depend on
        its batch)."""
        inputs = self.eval_inputs
        chunk = self.eval_chunk or eval_chunk_size(self.model.cfg, len(inputs), self.device)
        with torch.inference_mode():
            outputs = [
                self.forward(inputs[start : start + chunk], model, step) for start in range(0, len(inputs), chunk)
            ]
        return torch.cat(outputs).cpu()  # scored on the CPU, in float64, whatever device ran the model

    def evaluate(self, model: torch.nn.Module | None = None, step: int | None = None) -> dict[str, Any]:
        """The evaluation set's metrics of ``model`` (default the trained one) at ``step`` (default this one)."""
        model = self.model if model is None else model
        was_training = model.training
        model.eval()
        metrics = self.eval_set.metrics(self.eval_outputs(model, step))
        model.train(was_training)
        return metrics

    def save_checkpoint(self) -> dict[str, Any] | None:
        """Evaluate and write the checkpoint of this step, then the resume state; in the background if the trainer
        has one, while the next steps train. The metrics of the last checkpoint written (None before the first)."""
        if self.queue is None:
            return self.write_checkpoint(self.take_checkpoint(copy=False), self.model)
        return self.queue.put(self.take_checkpoint(copy=True))

    def finish_checkpoints(self) -> None:
        """Wait until every checkpoint taken is written (at once, without a background)."""
        if self.queue is not None:
            self.queue.finish()

    def take_checkpoint(self, copy: bool) -> Checkpoint:
        """This step's checkpoint; with ``copy``, of copies that the next steps leave as they are."""
        train_loss = self.loss_sum / self.loss_count if self.loss_count else None
        self.loss_sum, self.loss_count = 0.0, 0
        resume, info = self.resume_state(copy)
        weights = {name[len("model.") :]: t for name, t in resume.items() if name.startswith("model.")}
        return Checkpoint(self.step, train_loss, weights, resume, info)

    def write_checkpoint(self, checkpoint: Checkpoint, model: torch.nn.Module) -> dict[str, Any]:
        """Evaluate ``model``, which holds the checkpoint's weights, and write the checkpoint and its resume state."""
        step = checkpoint.step
        metrics = self.evaluate(model, step)
        train_loss = metrics["eval_loss"] if checkpoint.train_loss is None else checkpoint.train_loss
        batch = self.recipe.batch_size
        metrics = {"step": step, "sequences_seen": step * batch, "train_loss": train_loss} | metrics
        self.writer.add_checkpoint(step, step * batch, checkpoint.weights, metrics)
        self.write_resume_state(checkpoint.resume, checkpoint.resume_info)
        return metrics

    def copies_that_fit(self) -> int:
        """How many checkpoint copies may wait for the background within :data:`WAITING_BYTES` (at least 1): each
        holds the weights and the optimiser's state, counted as Adam's, two numbers a weight."""
        weights = sum(t.numel() * t.element_size() for t in self.model.state_dict().values())
        return max(1, WAITING_BYTES // (3 * weights))

    def write_copy(self, checkpoint: Checkpoint) -> dict[str, Any]:
        """:meth:`write_checkpoint` in the background, on a second model loaded with the checkpoint's weights."""
        copy = self.evaluated_copy
        if copy is None:
            copy = self.evaluated_copy = build_model(self.recipe.model_config()).to(self.device).requires_grad_(False)
        copy.load_state_dict(checkpoint.weights)
        return self.write_checkpoint(checkpoint, copy)

    # --- resume ------------------------------------------------------------------------------------

    def resume_state(self, copy: bool = False) -> tuple[dict[str, Tensor], dict[str, Any]]:
        """The tensors and numbers a run continues from, at this step; with ``copy``, copies of the live tensors."""
        tensors = {f"model.{name}": t.detach() for name, t in self.model.state_dict().items()}
        optim = self.optimizer.state_dict()
        for index, state in optim["state"].items():
            tensors |= {f"optim.{index}.{key}": value for key, value in state.items()}
        tensors = {name: t.clone() if copy else t for name, t in tensors.items()}
        tensors["rng.data"] = self.data.get_state()
        tensors["rng.torch"] = torch.get_rng_state()
        if self.device.type == "cuda":  # dropout on a GPU draws from its own generator
            tensors["rng.cuda"] = torch.cuda.get_rng_state(self.device)
        info = {
            "step": self.step,
            "loss_sum": self.loss_sum,
            "loss_count": self.loss_count,
            "param_groups": optim["param_groups"],  # packed anew by state_dict: numbers only
        }
        return tensors, info

    def save_resume_state(self) -> None:
        self.write_resume_state(*self.resume_state())

    def write_resume_state(self, tensors: dict[str, Tensor], info: dict[str, Any]) -> None:
        tensors = {name: t.cpu() for name, t in tensors.items()}
        # one metadata key: safetensors writes several in no fixed order, and equal runs must give equal bytes
        state = json.dumps(info | {"sha256": state_digest(json.dumps(info), tensors)})
        save_tensors(self.out / RESUME_FILE, tensors, metadata={"state": state})

    def load_resume_state(self) -> None:
        path = self.out / RESUME_FILE
        refuse_links(path, path.parent)
        if not path.is_file():
            raise CheckpointError(f"run {self.out} has no resume state to continue from")
        try:
            with safe_open(path, "pt") as handle:
                metadata = handle.metadata() or {}
            tensors = load_file(path)
            info = json.loads(metadata["state"])
            checksum = info.pop("sha256", None)
        except (OSError, ValueError, KeyError, AttributeError, SafetensorError) as error:
            raise CheckpointError(f"{path} is not a readable resume state ({type(error).__name__})") from None
        if checksum != state_digest(json.dumps(info), tensors):
            raise CheckpointError(f"{path} does not match its checksum (damaged, or written before version 0.3)")
        self.model.load_state_dict({k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")})
        state: dict[int, dict] = {}
        for key, value in tensors.items():
            if key.startswith("optim."):
                _, index, name = key.split(".", 2)
                state.setdefault(int(index), {})[name] = value
        self.optimizer.load_state_dict({"state": state, "param_groups": info["param_groups"]})
        self.data.set_state(tensors["rng.data"])
        torch.set_rng_state(tensors["rng.torch"])
        if self.device.type == "cuda" and "rng.cuda" in tensors:  # saved on a GPU: exact; else a fresh stream
            torch.cuda.set_rng_state(tensors["rng.cuda"], self.device)
        self.step, self.loss_sum, self.loss_count = info["step"], info["loss_sum"], info["loss_count"]
        self.writer = RunWriter.reopen(self.out, self.step)


def state_digest(state: str, tensors: dict[str, torch.Tensor]) -> str:
    """sha256 of a resume state's JSON and of every tensor's name, dtype, shape and bytes, in name order:
    stored inside the file, so one flipped byte anywhere is caught before a run resumes from it."""
    digest = hashlib.sha256(state.encode())
    for name in sorted(tensors):
        tensor = tensors[name].detach().contiguous()
        digest.update(f"{name}/{tensor.dtype}/{tuple(tensor.shape)}".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def saved_recipe(out: Path) -> Recipe:
    """The recipe of the run in ``out``, to continue it."""
    config = read_json(out / "config.json")
    if not isinstance(config, dict) or "recipe" not in config or "task" not in config:
        raise CheckpointError(f"{out} is not a training run of this version (its config.json has no recipe)")
    try:
        return recipe_from_json(config["recipe"], config["task"])
    except ValueError as error:
        raise CheckpointError(f"invalid recipe in {out / 'config.json'}: {error}") from None


def start_or_continue(recipe: Recipe | None, out: Path, resume: bool, device: torch.device, **options) -> Trainer:
    """The trainer of a new run, or of the saved one with ``resume`` (on any device: the weights, the
    optimiser and the data stream continue exactly; dropout continues exactly on the device it began on).
    A run that crashed before its first resume state was written holds at most its step-0 checkpoint: it
    starts over, losing nothing."""
    if resume:
        recipe = saved_recipe(out)
        manifest = read_manifest(out) if (out / "manifest.json").is_file() else []
        if (out / RESUME_FILE).is_file() or any(entry["step"] != 0 for entry in manifest):
            trainer = Trainer.create(recipe, RunWriter(out, manifest=[]), device, **options)
            trainer.load_resume_state()
            record_device(out, device)
            return trainer
    if recipe is None:
        raise BadInput(f"{out}: a new run needs its recipe (only resume reads it from the run)")
    config = run_config(recipe) | {"devices": [device_kind(device)]}
    trainer = Trainer.create(recipe, RunWriter.create(out, config, restart=resume), device, **options)
    trainer.save_checkpoint()
    return trainer


def record_device(out: Path, device: torch.device) -> None:
    """Add the device a resumed run continues on to its config's ``devices``, if it is another kind than
    the last one (a run continued on the same kind of device keeps its config.json byte for byte)."""
    config = read_json(out / "config.json")
    if not isinstance(config, dict):  # saved_recipe read it as one a moment ago
        raise CheckpointError(f"{out / 'config.json'} is not a JSON object")
    devices = config.get("devices", ["cpu"])  # runs of earlier versions trained on the CPU
    if devices[-1:] != [device_kind(device)]:
        write_json(out / "config.json", config | {"devices": [*devices, device_kind(device)]})


def progress_bar(total: int, initial: int, description: str, enabled: bool):
    """A tqdm bar; into a log (stderr not a terminal) it writes at most one line per 10 % of the work."""
    into_log = (
        {}
        if sys.stderr.isatty()
        else {"miniters": max(1, total // 10), "mininterval": 0, "maxinterval": float("inf"), "ascii": True}
    )
    return tqdm(total=total, initial=initial, desc=description, disable=not enabled, unit="step", **into_log)


def train_run(
    recipe: Recipe | None,
    out: str | Path,
    *,
    resume: bool = False,
    stop_after: int | None = None,
    progress: bool = True,
    device: Device = None,
    eval_chunk: int | None = None,
    background: bool | None = None,
) -> Run:
    """Train (or, with ``resume``, continue) a run in ``out`` and return it opened.

    ``stop_after`` ends training early at that step, as an interruption would, leaving a resumable run.
    With ``resume`` the recipe is the one saved in the run; ``recipe`` may be None. Ctrl-C stops after the
    step in progress, saves the run there and raises :class:`TrainingInterrupted`. ``device`` (default
    cpu) is where the model trains; a resumed run may continue on another one. ``eval_chunk`` is how many
    evaluation sequences go through the model at once (default: :func:`eval_chunk_size`); it changes
    the memory and the time an evaluation takes, never its numbers. ``background`` evaluates and writes the
    checkpoints on a spare core while training goes on (None: where :func:`spare_core` finds one); it changes the
    time a run takes, never its files.
    """
    out = Path(out)
    device = resolve_device(device)  # a device this machine lacks is refused before anything is written
    if eval_chunk is not None:
        require_int("eval_chunk", eval_chunk, 1)
    if stop_after is not None:
        require_int("stop_after", stop_after, 0)  # before anything is written
    if resume and not (out / "config.json").is_file():
        raise CheckpointError(f"there is no run in {out} to continue")
    if not resume:
        refuse_a_used_folder(out)  # before the lock: a refused run leaves the folder exactly as it was
    with only_writer(out):
        trainer = start_or_continue(recipe, out, resume, device, eval_chunk=eval_chunk, background=background)
        recipe = trainer.recipe
        last = recipe.steps if stop_after is None else min(stop_after, recipe.steps)
        schedule = set(checkpoint_schedule(recipe.steps, recipe.n_checkpoints))
        trainer.model.train()
        bar = progress_bar(last, trainer.step, f"train {out.name}", enabled=progress)
        try:
            with interrupts_between_steps() as interrupted:
                while trainer.step < last and not interrupted():
                    trainer.train_step()
                    bar.update(1)
                    if trainer.step in schedule and (metrics := trainer.save_checkpoint()) is not None:
                        bar.set_postfix_str(recipe.task.progress(metrics), refresh=False)
        finally:
            bar.close()
            trainer.finish_checkpoints()  # every checkpoint taken is written, whatever stopped the loop
        trainer.save_resume_state()
    if trainer.step < last:
        raise TrainingInterrupted(trainer.step, out)
    return Run.open(out)
