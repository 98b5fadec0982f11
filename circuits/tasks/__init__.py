"""The tasks as objects: what a model is trained and probed on, built from task parameters alone.

A task draws training batches from a ``torch.Generator``, computes the training loss, and draws a
fixed evaluation set (with a seed of its own) that scores a model's outputs; probes draw their inputs
the same way, with another seed. ``to_json`` describes the task in a run's ``config.json``, and
:func:`task_from_json` reads it back. The maths lives beside them, in ``markov.py`` and ``gaussian.py``.

The task classes import torch only inside their methods, so that the command line, which builds its
options from their fields, parses without loading torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from induction_probes.circuits.config import Config, option
from induction_probes.circuits.limits import require_numbers, require_power, require_seed, require_sequences
from induction_probes.circuits.validation import require_int, require_positive

if TYPE_CHECKING:
    import torch
    from torch import Tensor


class EvalSet(Protocol):
    """A fixed set of sequences with what a model's outputs on them are compared against."""

    inputs: Tensor

    def metrics(self, outputs: Tensor) -> dict: ...


class Stream(Protocol):
    """Training sequences, drawn in order; its state goes into a run's resume file."""

    def take(self, n_seqs: int) -> Any: ...

    def get_state(self) -> Tensor: ...

    def set_state(self, state: Tensor) -> None: ...


class Task(Protocol):
    name: ClassVar[str]

    def stream(self, seed: int) -> Stream: ...

    def inputs_and_targets(self, sample: Any) -> tuple[Tensor, Tensor]: ...

    def loss(self, outputs: Tensor, targets: Tensor) -> Tensor: ...

    def eval_set(self, n_seqs: int, seed: int) -> EvalSet: ...

    def progress(self, metrics: dict) -> str: ...

    def to_json(self) -> dict: ...


class TaskConfig(Config):
    name: ClassVar[str]


PRIOR_NAMES = ("dirichlet", "doubly-stochastic", "unigram", "spectrum", "mixture")  # see tasks/priors.py
SIMPLE_PRIOR_NAMES = PRIOR_NAMES[:3]


def prior_pair(text: str) -> tuple[str, str]:
    """'doubly-stochastic,unigram' → the two priors of a mixture."""
    return tuple(item.strip() for item in text.split(","))


@dataclass(frozen=True)
class MarkovTask(TaskConfig):
    """ICL-MC (Edelman et al. 2024): each sequence from a fresh Markov chain over k states, drawn from a
    prior over transition tables (by default independent Dirichlet(α) rows); next-token cross-entropy
    at every position."""

    k: int = option(help="number of states (>= 2)")
    seq_len: int = option(100, "input tokens per sequence (>= 2)")
    n: int = option(2, "chains of order n-1 (2: the bigram task)")
    alpha: float = option(1.0, "Dirichlet parameter of the rows (dirichlet, unigram priors) and the strategies' pseudo-count")
    prior: str = option("dirichlet", "prior of the training chains: " + ", ".join(PRIOR_NAMES), choices=PRIOR_NAMES)
    p: float | None = option(None, "mixture: share of its first prior in each batch; spectrum: the family's p")
    mixture: tuple[str, str] | None = option(
        None, "the two priors of a mixture (default doubly-stochastic,unigram)", type=prior_pair
    )
    eval_prior: str | None = option(
        None, "prior of the evaluation and probe chains (default: the training prior)", choices=SIMPLE_PRIOR_NAMES
    )

    name: ClassVar[str] = "markov"

    def __post_init__(self) -> None:
        require_int("k", self.k, 2)
        require_int("seq_len", self.seq_len, 2)
        require_int("n", self.n, 1)
        require_positive("alpha", self.alpha)
        if self.n > self.seq_len:
            raise ValueError(f"n must be <= seq_len: an n-gram needs n tokens, got n={self.n}, seq_len={self.seq_len}")
        self.check_prior()
        # one sequence's n-gram counts, its chain lifted to (n-1)-tuples, one attention pattern over it
        require_power("the n-gram counts of one sequence (k^n per position)", self.k, self.n, factor=self.seq_len)
        require_power("the lifted transition matrix of one chain (k^(2(n-1)))", self.k, 2 * (self.n - 1))
        require_numbers("one attention pattern (seq_len^2)", self.seq_len**2)

    def numbers_per_sequence(self) -> int:
        """About how many numbers one sequence costs in sampling, evaluating and probing it."""
        return self.seq_len * self.k**self.n + self.k ** (2 * (self.n - 1)) + self.seq_len**2

    def check_prior(self) -> None:
        if self.prior not in PRIOR_NAMES:
            raise ValueError(f"prior must be one of {', '.join(PRIOR_NAMES)}; got {self.prior!r}")
        if self.eval_prior is not None and self.eval_prior not in SIMPLE_PRIOR_NAMES:
            raise ValueError(f"eval_prior must be one of {', '.join(SIMPLE_PRIOR_NAMES)}; got {self.eval_prior!r}")
        needs_p = self.prior in ("spectrum", "mixture")
        if needs_p != (self.p is not None):
            raise ValueError(f"p is for the spectrum and mixture priors only (and required by them); prior is {self.prior}")
        if needs_p and not (isinstance(self.p, (int, float)) and 0.0 <= self.p <= 1.0):
            raise ValueError(f"p must be a number in [0, 1], got {self.p!r}")
        if self.mixture is not None and self.prior != "mixture":
            raise ValueError("mixture names the components of --prior mixture only")
        if self.prior == "mixture" and (len(set(self.components)) != 2 or not set(self.components) <= set(SIMPLE_PRIOR_NAMES)):
            raise ValueError(f"a mixture mixes two different priors of {', '.join(SIMPLE_PRIOR_NAMES)}; got {self.mixture!r}")
        orders = {prior: self.n for prior in (self.prior, *self.components)}
        if orders.get("doubly-stochastic", 2) != 2 or orders.get("spectrum", 2) != 2:
            raise ValueError(f"the {self.prior} prior is for bigram chains: n must be 2")
        if self.prior == "spectrum" and self.k != 2:
            raise ValueError("the spectrum prior is a family of 2-state chains: k must be 2")

    @property
    def components(self) -> tuple[str, ...]:
        """The priors a mixture mixes, first one first; empty for other priors."""
        if self.prior != "mixture":
            return ()
        return self.mixture if self.mixture is not None else ("doubly-stochastic", "unigram")

    def with_prior(self, prior: str) -> MarkovTask:
        """This task with the chains of one parameter-free prior."""
        return MarkovTask(self.k, self.seq_len, self.n, self.alpha, prior=prior)

    def sequences_per_batch(self, batch_size: int) -> dict[str, int]:
        """How many sequences of each prior a training batch holds."""
        if self.prior != "mixture":
            return {self.prior: batch_size}
        n_first = round(self.p * batch_size)
        return {self.components[0]: n_first, self.components[1]: batch_size - n_first}

    def progress(self, metrics: dict) -> str:
        """The evaluation figure a training progress bar shows."""
        return f"KL(true||model) {metrics['last_token_kl']['true']:.4f}"

    def describe_prior(self) -> str:
        if self.prior == "mixture":
            first, second = self.components
            return f"{self.p:g} {first} + {1 - self.p:g} {second}"
        return f"spectrum p={self.p:g}" if self.prior == "spectrum" else self.prior

    def describe(self) -> str:
        text = f"ICL-MC k={self.k}, n={self.n}, T={self.seq_len}, alpha={self.alpha:g}, {self.describe_prior()} chains"
        return text if self.eval_prior is None else f"{text} (evaluated on {self.eval_prior})"

    def stream(self, seed: int, purpose: str = "train"):
        """The training (or, with ``purpose="eval"``, evaluation) sequences of ``seed``: a stream whose
        ``take(n)`` gives a :class:`MarkovSample` (see ``circuits/tasks/streams.py`` for why other priors
        are counted, not drawn from one generator)."""
        from induction_probes.circuits.tasks.markov import sample_markov
        from induction_probes.circuits.tasks.streams import CountedStream, GeneratorStream, MixtureStream

        if self.prior == "dirichlet":
            draw = lambda n_seqs, generator: sample_markov(  # noqa: E731
                n_seqs, self.k, self.seq_len, n=self.n, alpha=self.alpha, generator=generator
            )
            return GeneratorStream(draw, seed)
        if self.prior == "mixture":
            first, second = (CountedStream(self.with_prior(prior), seed, purpose) for prior in self.components)
            return MixtureStream(first, second, self.p)
        return CountedStream(self, seed, purpose)

    def inputs_and_targets(self, sample) -> tuple[Tensor, Tensor]:
        return sample.inputs, sample.targets

    def loss(self, outputs: Tensor, targets: Tensor) -> Tensor:
        from torch.nn.functional import cross_entropy

        return cross_entropy(outputs.flatten(0, 1), targets.flatten())

    def eval_task(self) -> MarkovTask:
        """The task evaluation and probe sequences come from: the training one unless ``eval_prior``."""
        return self if self.eval_prior is None else self.with_prior(self.eval_prior)

    def eval_set(self, n_seqs: int, seed: int):
        """A :class:`~induction_probes.circuits.tasks.markov.MarkovEvalSet` of the evaluation prior's chains: the truth and
        every strategy, computed once."""
        from induction_probes.circuits.tasks.markov import MarkovEvalSet

        require_int("n_seqs", n_seqs, 1)
        require_seed("seed", seed)
        require_sequences("n_seqs", n_seqs, self.numbers_per_sequence())
        return MarkovEvalSet.from_sample(self.eval_task().stream(seed, purpose="eval").take(n_seqs), self.alpha)


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
            raise ValueError(f"target must be ih2, ihn or mixed, got {self.target!r}")
        for name in ("n", "d", "seq_len"):
            require_int(name, getattr(self, name), 1)
        if self.order > self.seq_len - 1 or self.seq_len < 4:
            raise ValueError(f"need 4 <= L and n <= L - 1, got L={self.seq_len}, n={self.order}")
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

    def progress(self, metrics: dict) -> str:
        return f"MSE/var {metrics['relative_mse']:.2e}"

    def describe(self) -> str:
        return f"Gaussian induction task {self.target} (n={self.order}), d={self.d}, L={self.seq_len}"

    def W_star(self) -> Tensor:
        import torch

        return self.w_star * torch.eye((self.order - 1) * self.d, dtype=torch.float64)

    def target_of(self, x: Tensor) -> Tensor:
        from induction_probes.circuits.tasks.gaussian import induction_head, mixed_target

        if self.target == "mixed":
            return mixed_target(x, self.alpha_star, self.W_star())
        return induction_head(x, self.order, self.W_star())

    def sample(self, n_seqs: int, generator: torch.Generator) -> Tensor:
        """Sequences of this task, float64."""
        from induction_probes.circuits.tasks.gaussian import sample_sequences

        return sample_sequences(n_seqs, self.seq_len, self.d, generator=generator, boolean=self.boolean)

    def stream(self, seed: int):
        """The training sequences of ``seed``, from one generator."""
        from induction_probes.circuits.tasks.streams import GeneratorStream

        return GeneratorStream(self.sample, seed)

    def inputs_and_targets(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return x.float(), self.target_of(x).float()

    def loss(self, outputs: Tensor, targets: Tensor) -> Tensor:
        from torch.nn.functional import mse_loss

        return mse_loss(outputs[:, -1], targets)

    def eval_set(self, n_seqs: int, seed: int):
        """A :class:`~induction_probes.circuits.tasks.gaussian.GaussianEvalSet` of ``n_seqs`` sequences and their targets."""
        import torch

        from induction_probes.circuits.tasks.gaussian import GaussianEvalSet

        require_int("n_seqs", n_seqs, 1)
        require_seed("seed", seed)
        require_sequences("n_seqs", n_seqs, self.numbers_per_sequence())
        x = self.sample(n_seqs, torch.Generator().manual_seed(seed))
        return GaussianEvalSet(x=x, targets=self.target_of(x))


TASKS: dict[str, type[TaskConfig]] = {task.name: task for task in (MarkovTask, GaussianTask)}


def task_from_json(values: Any) -> TaskConfig:
    """The task a run's ``config.json`` describes (``{"name": ..., parameters}``)."""
    if not isinstance(values, dict) or values.get("name") not in TASKS:
        raise ValueError(f"not a known task description (tasks: {', '.join(TASKS)}): {values!r}")
    parameters = {key: value for key, value in values.items() if key != "name"}
    return TASKS[values["name"]].from_dict(parameters)
