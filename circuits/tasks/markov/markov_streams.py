"""The streams of ICL-MC's other priors, whose state a run's resume file keeps:

- :class:`CountedStream`: sequence i of a prior is a function of (seed, prior, i) alone, drawn by seeded
  blocks (:func:`induction_probes.circuits.tasks.markov.priors.block_seed`); its state is the count i.
- :class:`MixtureStream`: round(p·B) sequences of one counted stream, then the rest from another.
- :class:`CurriculumStream`: a prior schedule; the first N sequences of one counted stream, then another stream.
"""

from __future__ import annotations

import torch
from jaxtyping import UInt8
from torch import Tensor

from induction_probes.circuits.tasks.markov.chains import MarkovSample, walk
from induction_probes.circuits.tasks.markov.prior_registry import draw_table
from induction_probes.circuits.tasks.markov.priors import BLOCK, block_seed


class CountedStream:
    """The sequences of one prior (``task.prior``, not a mixture), numbered from 0, in seeded blocks."""

    def __init__(self, task, seed: int, purpose: str = "train"):
        self.task, self.seed, self.purpose, self.count = task, seed, purpose, 0
        self._block: tuple[int, MarkovSample] | None = None

    def block(self, index: int) -> MarkovSample:
        if self._block is None or self._block[0] != index:
            task = self.task
            generator = torch.Generator().manual_seed(block_seed(self.seed, task.prior, index, self.purpose))
            table = draw_table(task.prior, BLOCK, task.k, task.n - 1, task.alpha, task.p, generator)
            uniforms = torch.rand(BLOCK, task.seq_len + 1, generator=generator, dtype=torch.float64)
            self._block = (index, walk(table, uniforms, task.n))
        return self._block[1]

    def take(self, n_seqs: int) -> MarkovSample:
        parts, needed = [], n_seqs
        while needed > 0:
            start = self.count % BLOCK
            stop = min(BLOCK, start + needed)
            parts.append(self.block(self.count // BLOCK)[start:stop])
            self.count, needed = self.count + stop - start, needed - (stop - start)
        return MarkovSample.concat(parts)

    def get_state(self) -> UInt8[Tensor, " rng_state"]:
        return torch.tensor([self.count], dtype=torch.int64)

    def set_state(self, state: Tensor) -> None:
        self.count = int(state[0])


class MixtureStream:
    """Every batch of B sequences: round(p·B) from the ``first`` stream, then B − round(p·B) from ``second``."""

    def __init__(self, first: CountedStream, second: CountedStream, p: float):
        self.first, self.second, self.p = first, second, p

    def split(self, n_seqs: int) -> tuple[int, int]:
        n_first = round(self.p * n_seqs)
        return n_first, n_seqs - n_first

    def take(self, n_seqs: int) -> MarkovSample:
        n_first, n_second = self.split(n_seqs)
        parts = [stream.take(n) for stream, n in ((self.first, n_first), (self.second, n_second)) if n]
        return MarkovSample.concat(parts)

    def get_state(self) -> UInt8[Tensor, " rng_state"]:
        return torch.cat([self.first.get_state(), self.second.get_state()])

    def set_state(self, state: Tensor) -> None:
        self.first.set_state(state[:1])
        self.second.set_state(state[1:])


class CurriculumStream:
    """The first ``switch`` sequences from ``early`` (a batch that straddles the switch takes its first rows from
    ``early``, the rest from ``rest``), then ``rest``'s, from its first. A counted component of ``rest`` of
    ``early``'s prior (a mixture holding it) goes on from sequence ``switch``, so no chain is seen twice. Its
    state: the sequences taken, then ``rest``'s state (as int64; ``early``'s count follows from the first)."""

    def __init__(self, early: CountedStream, rest, switch: int):
        self.early, self.rest, self.switch, self.taken = early, rest, switch, 0
        parts = (rest.first, rest.second) if isinstance(rest, MixtureStream) else (rest,)
        for part in parts:
            if isinstance(part, CountedStream) and part.task.prior == early.task.prior:
                part.count = switch

    def take(self, n_seqs: int) -> MarkovSample:
        n_early = min(n_seqs, max(self.switch - self.taken, 0))
        parts = [self.early.take(n_early)] if n_early else []
        if n_seqs > n_early:
            parts.append(self.rest.take(n_seqs - n_early))
        self.taken += n_seqs
        return MarkovSample.concat(parts)

    def get_state(self) -> UInt8[Tensor, " rng_state"]:
        rest = self.rest.get_state().to(torch.int64)  # a generator's bytes, 0..255, go through int64 unchanged
        return torch.cat([torch.tensor([self.taken], dtype=torch.int64), rest])

    def set_state(self, state: Tensor) -> None:
        self.taken = int(state[0])
        self.early.count = min(self.taken, self.switch)
        self.rest.set_state(state[1:].to(self.rest.get_state().dtype))
