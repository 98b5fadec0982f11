"""Training on ICL-MC: fresh sequences every batch, a checkpoint schedule, exact resume.

Three seeds are kept apart: ``model_seed`` (initial weights and dropout), ``data_seed`` (training
sequences) and ``eval_seed`` (the fixed evaluation set). Same config ⇒ byte-identical run files, and a
run stopped early and continued with ``resume=True`` writes the same files as one that never stopped:
the optimiser state, both random generators and the running loss are saved in ``resume/`` at every
checkpoint and at the stop.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, fields
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from safetensors import safe_open
from safetensors.torch import load_file
from tqdm.auto import tqdm

from circuits.checkpoint import (
    CheckpointError,
    Run,
    build_model,
    checkpoint_file,
    model_class_name,
    read_json,
    save_tensors,
    write_atomic,
    write_json,
)
from circuits.minimal import MinimalConfig
from circuits.model import HookedTransformerConfig
from circuits.tasks.gaussian import induction_head, mixed_target, relative_mse, sample_sequences
from circuits.tasks.markov import MarkovEvalSet, sample_markov, validate_task
from circuits.validation import require_int, require_positive

RESUME_FILE = "resume/state.safetensors"


class FromDict:
    """``from_dict`` for the training configs: keys of a saved config.json that the class no longer
    has are dropped, so older runs still open."""

    @classmethod
    def from_dict(cls, values: dict):
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in known})


@dataclass(frozen=True)
class MarkovTrainConfig(FromDict):
    """The ICL-MC recipe. Defaults: the paper's model (2 layers, 1 head each, relative positions,
    width 16, AdamW β = (0.9, 0.95), weight decay 0.1 on matrices, batch 64, T = 100); the rest is
    the recipe measured to show the phases best on a 2-core CPU (README, "Training")."""

    k: int
    architecture: str = "transformer"  # or "minimal": Edelman's eq. 6 model (circuits/minimal.py)
    first_layer: str = "softmax"  # minimal model only: "softmax" or "linear" (eq. 6 as written)
    lr_v: float = 1.0  # minimal model only: SGD rate of the positional vector v (W uses lr)
    seq_len: int = 100
    n: int = 2
    alpha: float = 1.0
    steps: int = 4000
    batch_size: int = 64
    lr: float = 1e-3
    lr_schedule: str = "cosine"  # or "constant"
    weight_decay: float = 0.1
    d_model: int = 16
    layer_norm: bool = True
    dropout: float = 0.0
    model_seed: int = 0
    data_seed: int = 1
    eval_seed: int = 2
    eval_seqs: int = 2000
    n_checkpoints: int = 150

    def __post_init__(self) -> None:
        validate_task(self.k, self.seq_len, self.n, self.alpha)
        for name in ("steps", "batch_size", "d_model", "eval_seqs", "n_checkpoints"):
            require_int(name, getattr(self, name), 1)
        for name in ("model_seed", "data_seed", "eval_seed"):
            require_int(name, getattr(self, name), 0)
        require_positive("lr", self.lr)
        require_positive("lr_v", self.lr_v)
        if self.architecture not in ("transformer", "minimal"):
            raise ValueError(f"architecture must be transformer or minimal, got {self.architecture!r}")
        if self.architecture == "minimal" and self.n != 2:
            raise ValueError("the minimal model is for bigram chains: n must be 2")
        if self.lr_schedule not in ("cosine", "constant"):
            raise ValueError(f"lr_schedule must be cosine or constant, got {self.lr_schedule!r}")
        if self.weight_decay < 0 or not 0 <= self.dropout < 1:
            raise ValueError("weight_decay must be >= 0 and dropout in [0, 1)")

    def model_config(self) -> HookedTransformerConfig | MinimalConfig:
        """n − 1 first-layer heads for an n-gram task (one per look-back distance), 1 head after."""
        if self.architecture == "minimal":
            return MinimalConfig(d_vocab=self.k, n_ctx=self.seq_len, first_layer=self.first_layer)
        first_layer_heads = max(self.n - 1, 1)
        return HookedTransformerConfig(
            n_layers=2,
            d_model=self.d_model * first_layer_heads,
            d_head=self.d_model,
            n_ctx=self.seq_len,
            d_vocab=self.k,
            layer_heads=(first_layer_heads, 1),
            positional="relative",
            normalization="LN" if self.layer_norm else None,
            dropout=self.dropout,
            seed=self.model_seed,
        )

    task_name = "markov"

    def make_task(self) -> MarkovTask:
        return MarkovTask(self)

    def make_optimizer(self, model) -> torch.optim.Optimizer:
        """The transformer: AdamW with weight decay on the linear maps only, as the authors' minGPT
        trainer does (not on embeddings, relative positions, LayerNorm gains or biases). The minimal
        model: plain SGD with its own rate for v, as in the authors' code (W 1e-2, v 1.0)."""
        if self.architecture == "minimal":
            return torch.optim.SGD([{"params": [model.W], "lr": self.lr}, {"params": [model.v], "lr": self.lr_v}])
        return adamw_on_linear_maps(model, self)

    def base_rates(self) -> list[float]:
        """The initial rate of each of :meth:`make_optimizer`'s parameter groups, in order."""
        return [self.lr, self.lr_v] if self.architecture == "minimal" else [self.lr, self.lr]

    def progress(self, metrics: dict) -> str:
        return f"{metrics['last_token_kl']['true']:.4f}"

    def eval_set(self) -> MarkovEvalSet:
        """The run's fixed evaluation set, redrawn from ``eval_seed``."""
        return MarkovEvalSet.draw(
            self.k, self.seq_len, n=self.n, alpha=self.alpha, n_seqs=self.eval_seqs, seed=self.eval_seed
        )


@dataclass
class MarkovTask:
    """ICL-MC for the trainer: next-token cross-entropy at every position, metrics against the strategies."""

    cfg: MarkovTrainConfig

    def __post_init__(self) -> None:
        self.eval_set = self.cfg.eval_set()
        self.eval_inputs = self.eval_set.sample.inputs

    def batch(self, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        cfg = self.cfg
        sample = sample_markov(cfg.batch_size, cfg.k, cfg.seq_len, n=cfg.n, alpha=cfg.alpha, generator=generator)
        return sample.inputs, sample.targets

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    def metrics(self, logits: Tensor) -> dict:
        return self.eval_set.metrics(logits)


@dataclass(frozen=True)
class GaussianTrainConfig(FromDict):
    """Wang et al.'s Gaussian induction task: vector tokens, MSE on the last position's output.

    Defaults follow a measured prototype: width 8, ALiBi in layer 0 only, strict masks, layer 1 keys
    from s = n on (the target's support), Adam with a 10× larger rate for the ALiBi slopes, batch 512.
    W* = w_star · I.
    """

    target: str = "ih2"  # "ih2", "ihn" or "mixed" (α*·x_{L−2} + IH_2)
    n: int = 2  # for ihn
    heads: int = 1  # first-layer heads
    d: int = 2
    d_model: int = 8
    seq_len: int = 20
    w_star: float = 1.0
    alpha_star: float = 2.0  # for mixed
    boolean: bool = False
    optimizer: str = "adam"
    steps: int = 600
    batch_size: int = 512
    lr: float = 1e-2
    slope_lr: float = 1e-1
    lr_schedule: str = "cosine"
    model_seed: int = 0
    data_seed: int = 1
    eval_seed: int = 2
    eval_seqs: int = 2000
    n_checkpoints: int = 60

    task_name = "gaussian"

    def __post_init__(self) -> None:
        if self.target not in ("ih2", "ihn", "mixed"):
            raise ValueError(f"target must be ih2, ihn or mixed, got {self.target!r}")
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer must be adam or sgd, got {self.optimizer!r}")
        for name in ("n", "heads", "d", "d_model", "seq_len", "steps", "batch_size", "eval_seqs", "n_checkpoints"):
            require_int(name, getattr(self, name), 1)
        if self.order > self.seq_len - 1 or self.seq_len < 4:
            raise ValueError(f"need 4 <= L and n <= L - 1, got L={self.seq_len}, n={self.order}")
        for name in ("w_star", "alpha_star", "lr", "slope_lr"):
            require_positive(name, getattr(self, name))

    @property
    def order(self) -> int:
        return self.n if self.target == "ihn" else 2

    def model_config(self) -> HookedTransformerConfig:
        return HookedTransformerConfig(
            n_layers=2, d_model=self.d_model, d_head=self.d_model, layer_heads=(self.heads, 1), n_ctx=self.seq_len,
            d_vocab=self.d, input_type="vectors", positional=("alibi", "none"), mask="strict",
            skip_first_keys=(0, self.order - 1), seed=self.model_seed,
        )

    def W_star(self) -> Tensor:
        width = (self.order - 1) * self.d
        return self.w_star * torch.eye(width, dtype=torch.float64)

    def target_of(self, x: Tensor) -> Tensor:
        if self.target == "mixed":
            return mixed_target(x, self.alpha_star, self.W_star())
        return induction_head(x, self.order, self.W_star())

    def sample(self, n_seqs: int, generator: torch.Generator) -> Tensor:
        """Sequences of this task (float64), e.g. fresh ones for probes."""
        return sample_sequences(n_seqs, self.seq_len, self.d, generator=generator, boolean=self.boolean)

    def make_task(self) -> GaussianTask:
        return GaussianTask(self)

    def make_optimizer(self, model) -> torch.optim.Optimizer:
        slopes = [p for name, p in model.named_parameters() if name.endswith("alibi_slope")]
        rest = [p for name, p in model.named_parameters() if not name.endswith("alibi_slope")]
        groups = [{"params": rest, "lr": self.lr}, {"params": slopes, "lr": self.slope_lr}]
        return torch.optim.Adam(groups) if self.optimizer == "adam" else torch.optim.SGD(groups)

    def base_rates(self) -> list[float]:
        return [self.lr, self.slope_lr]

    def progress(self, metrics: dict) -> str:
        return f"{metrics['relative_mse']:.2e}"


@dataclass
class GaussianTask:
    """The Gaussian task for the trainer: MSE between the last position's output and the target."""

    cfg: GaussianTrainConfig

    def __post_init__(self) -> None:
        generator = torch.Generator().manual_seed(self.cfg.eval_seed)
        self.eval_inputs = self.cfg.sample(self.cfg.eval_seqs, generator)
        self.eval_targets = self.cfg.target_of(self.eval_inputs).float()
        self.eval_inputs = self.eval_inputs.float()

    def batch(self, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        x = self.cfg.sample(self.cfg.batch_size, generator)
        return x.float(), self.cfg.target_of(x).float()

    def loss(self, outputs: Tensor, targets: Tensor) -> Tensor:
        return F.mse_loss(outputs[:, -1], targets)

    def metrics(self, outputs: Tensor) -> dict:
        """MSE at the last position, and the same over the target's variance (1 = predicting the mean)."""
        mse = F.mse_loss(outputs[:, -1].double(), self.eval_targets.double()).item()
        return {"eval_loss": mse, "relative_mse": relative_mse(outputs[:, -1], self.eval_targets)}


TrainConfig = MarkovTrainConfig | GaussianTrainConfig


def checkpoint_schedule(steps: int, n_checkpoints: int) -> list[int]:
    """About ``n_checkpoints`` steps from 0 to ``steps``: a third log-spaced over the first 5% of
    training (where the loss first moves fast), the rest evenly spaced; always 0 and ``steps``."""
    n_log = n_checkpoints // 3
    early = np.geomspace(1, max(steps / 20, 1), n_log).round() if n_log else []
    even = np.linspace(0, steps, n_checkpoints - n_log).round()
    return sorted({0, steps, *map(int, early), *map(int, even)})


def lr_factor(cfg: MarkovTrainConfig, step: int) -> float:
    """Each group's rate for the update after ``step`` steps, as a fraction of its initial rate:
    constant, or a cosine down to 0, which lets the loss settle at the end instead of hovering at
    the noise level of a constant rate."""
    if cfg.lr_schedule == "constant":
        return 1.0
    return 0.5 * (1.0 + math.cos(math.pi * step / cfg.steps))


def adamw_on_linear_maps(model, cfg: MarkovTrainConfig) -> torch.optim.AdamW:
    decayed = ("W_Q", "W_K", "W_V", "W_O", "W_U", "W_in", "W_out")
    groups: dict[bool, list] = {True: [], False: []}
    for name, param in model.named_parameters():
        groups[name.rsplit(".", 1)[-1] in decayed].append(param)
    return torch.optim.AdamW(
        [{"params": groups[True], "weight_decay": cfg.weight_decay}, {"params": groups[False], "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.95),
    )


def package_version() -> str:
    try:
        return version("induction-probes")
    except PackageNotFoundError:
        return "unknown"


@dataclass
class Trainer:
    """One run: the model, optimiser, data generator and the run directory they are saved in."""

    cfg: MarkovTrainConfig
    out: Path
    model: torch.nn.Module  # a HookedTransformer or a MinimalModel
    optimizer: torch.optim.Optimizer
    data: torch.Generator
    task: object  # MarkovTask or GaussianTask: batch(), loss(), metrics(), eval_inputs
    manifest: list[dict]
    step: int = 0
    loss_sum: float = 0.0
    loss_count: int = 0
    elapsed: float = 0.0

    @classmethod
    def create(cls, cfg: TrainConfig, out: Path) -> Trainer:
        torch.manual_seed(cfg.model_seed)  # dropout draws from the global generator
        model = build_model(cfg.model_config())
        data = torch.Generator().manual_seed(cfg.data_seed)
        return cls(cfg, out, model, cfg.make_optimizer(model), data, cfg.make_task(), manifest=[])

    # --- one step and one checkpoint --------------------------------------------------------------

    def train_step(self) -> None:
        cfg = self.cfg
        inputs, targets = self.task.batch(self.data)
        loss = self.task.loss(self.model(inputs), targets)
        for group, rate in zip(self.optimizer.param_groups, cfg.base_rates()):
            group["lr"] = rate * lr_factor(cfg, self.step)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"training loss became {loss.item()} at step {self.step + 1}; lower --lr")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.step += 1
        self.loss_sum += loss.item()
        self.loss_count += 1

    def evaluate(self) -> dict:
        self.model.eval()
        with torch.no_grad():
            metrics = self.task.metrics(self.model(self.task.eval_inputs))
        self.model.train()
        train_loss = self.loss_sum / self.loss_count if self.loss_count else metrics["eval_loss"]
        self.loss_sum, self.loss_count = 0.0, 0
        return {"step": self.step, "sequences_seen": self.step * self.cfg.batch_size, "train_loss": train_loss} | metrics

    def save_checkpoint(self) -> dict:
        """Weights, then the metrics line, then the manifest: each written whole before the next."""
        metrics = self.evaluate()
        file = checkpoint_file(self.step)
        sha = save_tensors(self.out / file, self.model.state_dict())
        with open(self.out / "metrics.jsonl", "a") as handle:
            handle.write(json.dumps(metrics) + "\n")
        self.manifest.append(
            {"step": self.step, "sequences_seen": self.step * self.cfg.batch_size, "file": file, "sha256": sha}
        )
        write_json(self.out / "manifest.json", self.manifest)
        self.save_resume_state()
        return metrics

    # --- resume ------------------------------------------------------------------------------------

    def save_resume_state(self) -> None:
        tensors = {f"model.{name}": t for name, t in self.model.state_dict().items()}
        optim = self.optimizer.state_dict()
        for index, state in optim["state"].items():
            tensors |= {f"optim.{index}.{key}": value for key, value in state.items()}
        tensors["rng.data"] = self.data.get_state()
        tensors["rng.torch"] = torch.get_rng_state()
        info = {
            "step": self.step,
            "loss_sum": self.loss_sum,
            "loss_count": self.loss_count,
            "elapsed_seconds": self.elapsed,
            "param_groups": optim["param_groups"],
        }
        save_tensors(self.out / RESUME_FILE, tensors, metadata={"state": json.dumps(info)})

    def load_resume_state(self) -> None:
        path = self.out / RESUME_FILE
        if not path.is_file():
            raise CheckpointError(f"run {self.out} has no resume state to continue from")
        with safe_open(path, "pt") as handle:
            info = json.loads(handle.metadata()["state"])
        tensors = load_file(path)
        self.model.load_state_dict({k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")})
        state: dict[int, dict] = {}
        for key, value in tensors.items():
            if key.startswith("optim."):
                _, index, name = key.split(".", 2)
                state.setdefault(int(index), {})[name] = value
        self.optimizer.load_state_dict({"state": state, "param_groups": info["param_groups"]})
        self.data.set_state(tensors["rng.data"])
        torch.set_rng_state(tensors["rng.torch"])
        self.step, self.loss_sum, self.loss_count = info["step"], info["loss_sum"], info["loss_count"]
        self.elapsed = info["elapsed_seconds"]
        # Drop anything written after the saved state (a crash between files); it is redone identically.
        self.manifest = [e for e in read_json(self.out / "manifest.json") if e["step"] <= self.step]
        write_json(self.out / "manifest.json", self.manifest)
        lines = (self.out / "metrics.jsonl").read_text().splitlines()
        kept = [line for line in lines if line.strip() and json.loads(line)["step"] <= self.step]
        write_atomic(self.out / "metrics.jsonl", "".join(line + "\n" for line in kept).encode())


def start_run(cfg: TrainConfig, out: Path) -> Trainer:
    if (out / "manifest.json").exists():
        raise CheckpointError(f"{out} already holds a run: continue it with --resume or choose another --out")
    (out / "checkpoints").mkdir(parents=True, exist_ok=True)
    (out / "resume").mkdir(exist_ok=True)
    config = {
        "task": cfg.task_name,
        "package_version": package_version(),
        "seeds": {"model": cfg.model_seed, "data": cfg.data_seed, "eval": cfg.eval_seed},
        "train": asdict(cfg),
        "model_class": model_class_name(cfg.model_config()),
        "model": cfg.model_config().to_dict(),
    }
    write_json(out / "config.json", config)
    write_atomic(out / "metrics.jsonl", b"")
    trainer = Trainer.create(cfg, out)
    trainer.save_checkpoint()
    return trainer


def saved_config(out: Path) -> TrainConfig:
    """The training config of any run, by the task its config.json names."""
    config = read_json(out / "config.json")
    classes = {cls.task_name: cls for cls in (MarkovTrainConfig, GaussianTrainConfig)}
    if not isinstance(config, dict) or config.get("task") not in classes or "train" not in config:
        raise CheckpointError(f"{out} is not a training run of a known task")
    return classes[config["task"]].from_dict(config["train"])


def saved_train_config(out: Path) -> MarkovTrainConfig:
    """The config of an ICL-MC run; refuses runs of other tasks."""
    config = read_json(out / "config.json")
    if not isinstance(config, dict) or config.get("task") != "markov" or "train" not in config:
        raise CheckpointError(f"{out} is not an ICL-MC training run")
    return MarkovTrainConfig.from_dict(config["train"])


def train_run(
    cfg: TrainConfig | None,
    out: str | Path,
    *,
    resume: bool = False,
    stop_after: int | None = None,
    progress: bool = True,
) -> Run:
    """Train (or, with ``resume``, continue) a run in ``out`` and return it opened.

    ``stop_after`` ends training early at that step, as an interruption would, leaving a resumable run.
    With ``resume`` the config is the one saved in the run; ``cfg`` may be None.
    """
    out = Path(out)
    if resume:
        cfg = saved_config(out)
        trainer = Trainer.create(cfg, out)
        trainer.load_resume_state()
    else:
        trainer = start_run(cfg, out)
    last = cfg.steps if stop_after is None else min(require_int("stop_after", stop_after, 0), cfg.steps)
    schedule = set(checkpoint_schedule(cfg.steps, cfg.n_checkpoints))
    trainer.model.train()
    bar = tqdm(total=last, initial=trainer.step, desc=f"train {out.name}", disable=not progress, unit="step")
    started = time.perf_counter()
    try:
        while trainer.step < last:
            trainer.train_step()
            bar.update(1)
            if trainer.step in schedule:
                trainer.elapsed += time.perf_counter() - started
                started = time.perf_counter()
                metrics = trainer.save_checkpoint()
                bar.set_postfix(eval=cfg.progress(metrics))
    finally:
        bar.close()
    trainer.elapsed += time.perf_counter() - started
    trainer.save_resume_state()
    return Run.open(out)
