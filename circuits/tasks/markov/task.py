"""The ICL-MC task as a config: its parameters (checked by :mod:`~induction_probes.circuits.tasks.markov.parameters`),
its training stream, loss and evaluation set.

Imports no torch at module level: the command line builds its options from these fields before torch is loaded,
so the methods that draw sequences import the samplers where they run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from induction_probes.circuits.common.config import option
from induction_probes.circuits.common.limits import require_numbers, require_power, require_seed, require_sequences
from induction_probes.circuits.common.validation import require_int, require_positive
from induction_probes.circuits.tasks.base import TaskConfig
from induction_probes.circuits.tasks.markov.parameters import PRIOR_NAMES, SIMPLE_PRIOR_NAMES

if TYPE_CHECKING:
    from torch import Tensor


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
        from induction_probes.circuits.tasks.markov.chains import sample_markov
        from induction_probes.circuits.tasks.markov.streams import CountedStream, MixtureStream
        from induction_probes.circuits.tasks.streams import GeneratorStream

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
        """A :class:`~induction_probes.circuits.tasks.markov.strategies.MarkovEvalSet` of the evaluation prior's chains: the truth and
        every strategy, computed once."""
        from induction_probes.circuits.tasks.markov.strategies import MarkovEvalSet

        require_int("n_seqs", n_seqs, 1)
        require_seed("seed", seed)
        require_sequences("n_seqs", n_seqs, self.numbers_per_sequence())
        return MarkovEvalSet.from_sample(self.eval_task().stream(seed, purpose="eval").take(n_seqs), self.alpha)
