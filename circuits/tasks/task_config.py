"""What a task is: the protocols a task, its training stream and its evaluation set follow, and the base class of
the task configs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from induction_probes.circuits.config import Config

if TYPE_CHECKING:
    from jaxtyping import Float, Shaped, UInt8
    from torch import Tensor


class EvalSet(Protocol):
    """A fixed set of sequences with what a model's outputs on them are compared against."""

    @property
    def inputs(self) -> Shaped[Tensor, "batch ..."]: ...  # read only: a field or a property

    # positional only: each task names the model's outputs for what they are (ICL-MC's logits, the Gaussian
    # task's vectors), and every caller passes them by position
    def metrics(self, outputs: Tensor, /) -> dict[str, Any]: ...


class Stream(Protocol):
    """Training sequences, drawn in order; its state goes into a run's resume file."""

    def take(self, n_seqs: int) -> Any: ...

    def get_state(self) -> UInt8[Tensor, " rng_state"]: ...

    def set_state(self, state: Tensor) -> None: ...


class Task(Protocol):
    name: ClassVar[str]

    def stream(self, seed: int) -> Stream: ...

    def inputs_and_targets(self, sample: Any) -> tuple[Tensor, Tensor]: ...

    def loss(self, outputs: Tensor, targets: Tensor) -> Float[Tensor, ""]: ...

    def eval_set(self, n_seqs: int, seed: int) -> EvalSet: ...

    def progress(self, metrics: dict[str, Any]) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


class TaskConfig(Config):
    """The base of every task config (a frozen dataclass): what training, evaluation and the commands call on a
    task. Each task defines these methods; one it does not define says so when called."""

    name: ClassVar[str]
    seq_len: int  # tokens per sequence: a field of every task

    def numbers_per_sequence(self) -> int:
        """What one sequence's forward pass holds, for the recipe's size limits."""
        raise self.undefined("numbers_per_sequence")

    def describe(self) -> str:
        raise self.undefined("describe")

    def stream(self, seed: int) -> Stream:
        raise self.undefined("stream")

    def inputs_and_targets(self, sample: Any) -> tuple[Tensor, Tensor]:
        raise self.undefined("inputs_and_targets")

    def loss(self, outputs: Tensor, targets: Tensor) -> Float[Tensor, ""]:
        raise self.undefined("loss")

    def eval_set(self, n_seqs: int, seed: int) -> EvalSet:
        raise self.undefined("eval_set")

    def progress(self, metrics: dict[str, Any]) -> str:
        """The training progress bar's figure, from an evaluation's metrics."""
        raise self.undefined("progress")

    def undefined(self, method: str) -> NotImplementedError:
        return NotImplementedError(f"the task {type(self).__name__} defines no {method}()")
