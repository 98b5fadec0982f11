"""The ICL-MC task as a config: its parameters (checked by :mod:`~induction_probes.circuits.tasks.markov.parameters`),
its training stream, loss and evaluation set. It imports torch; the methods that draw sequences import the
samplers where they run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import torch.nn.functional as F

import induction_probes.circuits.tasks.markov.chains as chains
import induction_probes.circuits.tasks.markov.markov_streams as markov_streams
import induction_probes.circuits.tasks.markov.strategies as strategies
import induction_probes.circuits.tasks.streams as streams
from induction_probes.circuits.config import option
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import require_seed, require_sequences
from induction_probes.circuits.tasks.markov import parameters
from induction_probes.circuits.tasks.markov.prior_registry import PRIORS, SIMPLE_PRIORS
from induction_probes.circuits.tasks.task_config import Stream, TaskConfig
from induction_probes.circuits.validation import require_int

if TYPE_CHECKING:
    from jaxtyping import Float
    from torch import Tensor


def prior_pair(text: str) -> tuple[str, ...]:
    """'doubly-stochastic,unigram' → the priors of a mixture, as many as given (the task refuses all but two)."""
    return tuple(item.strip() for item in text.split(","))


@dataclass(frozen=True)
class MarkovTask(TaskConfig):
    """ICL-MC (Edelman et al. 2024): each sequence from a fresh Markov chain over k states, drawn from a
    prior over transition tables (by default independent Dirichlet(α) rows); next-token cross-entropy
    at every position."""

    k: int = option(help="number of states (>= 2)")
    seq_len: int = option(100, "input tokens per sequence (>= 2)")
    n: int = option(2, "chains of order n-1 (2: the bigram task)")
    alpha: float = option(
        1.0, "Dirichlet parameter of the rows (dirichlet, unigram priors) and the strategies' pseudo-count"
    )
    prior: str = option("dirichlet", "prior of the training chains", choices=PRIORS)
    p: float | None = option(None, "mixture: share of its first prior in each batch; spectrum: the family's p")
    mixture: tuple[str, str] | None = option(
        None, "the two priors of a mixture (default doubly-stochastic,unigram)", type=prior_pair
    )
    eval_prior: str | None = option(
        None, "prior of the evaluation and probe chains (default: the training prior)", choices=SIMPLE_PRIORS
    )
    curriculum: str | None = option(
        None,
        "a prior schedule PRIOR:SEQUENCES, e.g. doubly-stochastic:64000: the first 64,000 training sequences "
        "from that prior, the rest from --prior's (default: none)",
        metavar="PRIOR:N",
    )

    name: ClassVar[str] = "markov"

    def __post_init__(self) -> None:
        parameters.check_chains(self.k, self.seq_len, self.n, self.alpha)
        parameters.check_prior(self.k, self.n, self.prior, self.p, self.mixture, self.eval_prior)
        parameters.check_sizes(self.k, self.seq_len, self.n)
        parameters.check_curriculum(self.n, self.prior, self.curriculum)

    def to_json(self) -> dict[str, Any]:
        """The task's fields; ``curriculum`` only where there is one, so that the config.json of every run
        without a schedule keeps the bytes it had before schedules existed (the shipped runs are verified
        byte for byte)."""
        own = super().to_json()
        return own if self.curriculum is not None else {k: v for k, v in own.items() if k != "curriculum"}

    @property
    def schedule(self) -> tuple[str, int] | None:
        """The curriculum as (prior, sequences), or None."""
        return parameters.parse_curriculum(self.curriculum)

    def numbers_per_sequence(self) -> int:
        """About how many numbers one sequence costs in sampling, evaluating and probing it."""
        return parameters.numbers_per_sequence(self.k, self.seq_len, self.n)

    @property
    def components(self) -> tuple[str, ...]:
        """The priors a mixture mixes, first one first; empty for other priors."""
        return parameters.components(self.prior, self.mixture)

    def first_share(self) -> float:
        """A mixture's share of its first prior in each batch: ``p``, which construction requires of a mixture."""
        if self.p is None:
            raise BadInput(f"the mixture {self.prior} needs p, its first prior's share of each batch")
        return self.p

    def with_prior(self, prior: str) -> MarkovTask:
        """This task with the chains of one parameter-free prior."""
        return MarkovTask(self.k, self.seq_len, self.n, self.alpha, prior=prior)

    def sequences_per_batch(self, batch_size: int) -> dict[str, int]:
        """How many sequences of each prior a training batch holds."""
        if not self.components:
            return {self.prior: batch_size}
        n_first = round(self.first_share() * batch_size)
        return {self.components[0]: n_first, self.components[1]: batch_size - n_first}

    def sequences_of_prior(self, prior: str, n_seen: int, batch_size: int) -> int:
        """How many of the first ``n_seen`` training sequences (whole batches of ``batch_size``) are of ``prior``:
        with a curriculum, its first sequences, then the batch that straddles the switch, whose remainder the
        task's own stream splits as a batch of its own, then whole batches."""
        if self.schedule is None:
            return self.sequences_per_batch(batch_size).get(prior, 0) * (n_seen // batch_size)
        first, switch = self.schedule
        rest = replace(self, curriculum=None)
        early = min(n_seen, switch)
        partial = min(n_seen - early, -switch % batch_size)
        whole = (n_seen - early - partial) // batch_size
        count = early if prior == first else 0
        if partial:
            count += rest.sequences_per_batch(partial).get(prior, 0)
        return count + whole * rest.sequences_per_batch(batch_size).get(prior, 0)

    def progress(self, metrics: dict[str, Any]) -> str:
        """The evaluation figure a training progress bar shows."""
        return f"KL(true||model) {metrics['last_token_kl']['true']:.4f}"

    def describe_prior(self) -> str:
        if self.components:
            first, second = self.components
            share = self.first_share()
            return f"{share:g} {first} + {1 - share:g} {second}"
        return self.prior if self.p is None else f"{self.prior} p={self.p:g}"

    def describe(self) -> str:
        text = f"ICL-MC k={self.k}, n={self.n}, T={self.seq_len}, alpha={self.alpha:g}, {self.describe_prior()} chains"
        if self.schedule is not None:
            text = f"{text}, the first {self.schedule[1]:,} from {self.schedule[0]}"
        return text if self.eval_prior is None else f"{text} (evaluated on {self.eval_prior})"

    def stream(self, seed: int, purpose: str = "train") -> Stream:
        """The training (or, with ``purpose="eval"``, evaluation) sequences of ``seed``: a stream whose
        ``take(n)`` gives a :class:`~.chains.MarkovSample` (see ``circuits/tasks/streams.py`` for why other priors
        are counted, not drawn from one generator). With a curriculum, the first training sequences are those
        of its prior's stream of ``seed``, then the task's own stream of ``seed`` from its start
        (:class:`~induction_probes.circuits.tasks.markov.markov_streams.CurriculumStream`)."""
        if self.schedule is not None and purpose == "train":  # evaluation chains are the task's prior's
            first, switch = self.schedule
            early = markov_streams.CountedStream(self.with_prior(first), seed, purpose)
            return markov_streams.CurriculumStream(early, replace(self, curriculum=None).stream(seed, purpose), switch)
        if self.prior == "dirichlet":
            draw = lambda n_seqs, generator: chains.sample_markov(  # noqa: E731
                n_seqs, self.k, self.seq_len, n=self.n, alpha=self.alpha, generator=generator
            )
            return streams.GeneratorStream(draw, seed)
        if self.components:
            if self.p is None:  # the mixture's share of its first component: checked when the task is made
                raise BadInput("a mixture prior takes p, the share of its first component")
            first, second = (
                markov_streams.CountedStream(self.with_prior(prior), seed, purpose) for prior in self.components
            )
            return markov_streams.MixtureStream(first, second, self.p)
        return markov_streams.CountedStream(self, seed, purpose)

    def inputs_and_targets(self, sample: chains.MarkovSample) -> tuple[Tensor, Tensor]:
        return sample.inputs, sample.targets

    def loss(self, outputs: Tensor, targets: Tensor) -> Float[Tensor, ""]:
        return F.cross_entropy(outputs.flatten(0, 1), targets.flatten())

    def eval_task(self) -> MarkovTask:
        """The task evaluation and probe sequences come from: the training one unless ``eval_prior``."""
        return self if self.eval_prior is None else self.with_prior(self.eval_prior)

    def eval_set(self, n_seqs: int, seed: int) -> strategies.MarkovEvalSet:
        """A :class:`~induction_probes.circuits.tasks.markov.strategies.MarkovEvalSet` of the evaluation prior's
        chains: the truth and every strategy, computed once."""
        require_int("n_seqs", n_seqs, 1)
        require_seed("seed", seed)
        require_sequences("n_seqs", n_seqs, self.numbers_per_sequence())
        return strategies.MarkovEvalSet.from_sample(
            self.eval_task().stream(seed, purpose="eval").take(n_seqs), self.alpha
        )
