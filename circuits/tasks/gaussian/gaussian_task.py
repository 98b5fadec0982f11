"""Wang et al.'s Gaussian induction task as a config: its parameters, training stream, loss and evaluation set.
It imports torch; the methods that draw sequences import the maths
(:mod:`~induction_probes.circuits.tasks.gaussian.sequences`) where they run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.nn.functional as F

import induction_probes.circuits.tasks.gaussian.sequences as sequences
import induction_probes.circuits.tasks.streams as streams
from induction_probes.circuits.config import option
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import require_numbers, require_seed, require_sequences
from induction_probes.circuits.tasks.task_config import TaskConfig
from induction_probes.circuits.validation import quoted, require_int, require_positive

if TYPE_CHECKING:
    import torch
    from jaxtyping import Float
    from torch import Tensor


GAUSSIAN_TARGETS = ("ih2", "ihn", "mixed")


@dataclass(frozen=True)
class GaussianTask(TaskConfig):
    """Wang et al.'s Gaussian induction task (targets of §4): vector tokens x_1..x_L in R^d, a target for the last
    position (IH_2, IH_n or α*·x_{L−2} + IH_2) with W* = w_star·I; MSE at the last position."""

    target: str = option("ih2", "ih2, ihn (with --n) or mixed (alpha_star * x_{L-2} + IH_2)", choices=GAUSSIAN_TARGETS)
    n: int = option(2, "n of IH_n (with --target ihn)")
    d: int = option(2, "token dimension")
    seq_len: int = option(20, "L, tokens per sequence")
    w_star: float = option(1.0, "W* = w_star * I")
    alpha_star: float = option(2.0, "weight of the 4-gram term (with --target mixed)")
    boolean: bool = option(False, "uniform ±1 tokens instead of Gaussian ones")

    name: ClassVar[str] = "gaussian"

    def __post_init__(self) -> None:
        if self.target not in GAUSSIAN_TARGETS:
            raise BadInput(f"target must be ih2, ihn or mixed, got {quoted(self.target)}")
        for name in ("n", "d", "seq_len"):
            require_int(name, getattr(self, name), 1)
        if self.order > self.seq_len - 1 or self.seq_len < 4:
            raise BadInput(f"need 4 <= L and n <= L - 1, got L={self.seq_len}, n={self.order}")
        for name in ("w_star", "alpha_star"):
            require_positive(name, getattr(self, name))
        require_numbers("W* ((n-1)d x (n-1)d)", ((self.order - 1) * self.d) ** 2)
        require_numbers("the windows of one sequence (L n d)", self.seq_len * self.order * self.d)
        require_numbers("one attention pattern (L^2)", self.seq_len**2)

    def numbers_per_sequence(self) -> int:
        """About how many numbers one sequence costs in sampling, evaluating and probing it."""
        return self.seq_len * self.order * self.d + self.seq_len**2

    @property
    def order(self) -> int:
        """The n of the induction head in the target (2 unless ``target="ihn"``)."""
        return self.n if self.target == "ihn" else 2

    def progress(self, metrics: dict[str, Any]) -> str:
        return f"MSE/var {metrics['relative_mse']:.2e}"

    def describe(self) -> str:
        return f"Gaussian induction task {self.target} (n={self.order}), d={self.d}, L={self.seq_len}"

    def W_star(self) -> Float[Tensor, "history history"]:
        return self.w_star * torch.eye((self.order - 1) * self.d, dtype=torch.float64)

    def target_of(self, x: Tensor) -> Float[Tensor, "batch d"]:
        if self.target == "mixed":
            return sequences.mixed_target(x, self.alpha_star, self.W_star())
        return sequences.induction_head(x, self.order, self.W_star())

    def sample(self, n_seqs: int, generator: torch.Generator) -> Float[Tensor, "batch pos d"]:
        """Sequences of this task, float64."""
        return sequences.sample_sequences(n_seqs, self.seq_len, self.d, generator=generator, boolean=self.boolean)

    def stream(self, seed: int) -> streams.GeneratorStream:
        """The training sequences of ``seed``, from one generator."""
        return streams.GeneratorStream(self.sample, seed)

    def inputs_and_targets(self, sample: Tensor) -> tuple[Tensor, Tensor]:
        return sample.float(), self.target_of(sample).float()

    def loss(self, outputs: Tensor, targets: Tensor) -> Float[Tensor, ""]:
        return F.mse_loss(outputs[:, -1], targets)

    def eval_set(self, n_seqs: int, seed: int) -> sequences.GaussianEvalSet:
        """A :class:`~induction_probes.circuits.tasks.gaussian.sequences.GaussianEvalSet` of ``n_seqs`` sequences
        and their targets."""

        require_int("n_seqs", n_seqs, 1)
        require_seed("seed", seed)
        require_sequences("n_seqs", n_seqs, self.numbers_per_sequence())
        x = self.sample(n_seqs, torch.Generator().manual_seed(seed))
        return sequences.GaussianEvalSet(x=x, targets=self.target_of(x))
