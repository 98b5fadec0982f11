"""A stream of training sequences drawn from one ``torch.Generator``: what a trainer draws its batches from,
with a state that a run's resume file keeps, so that a continued run sees exactly the sequences an
uninterrupted one would. Dir(α) chains and the Gaussian task use it (the stream every run used before other
priors existed); ICL-MC's counted and mixture streams are in
:mod:`induction_probes.circuits.tasks.markov.markov_streams`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from jaxtyping import UInt8
from torch import Tensor


class GeneratorStream:
    """Samples drawn by ``draw(n, generator)`` from one generator seeded with ``seed``."""

    def __init__(self, draw: Callable[[int, torch.Generator], Any], seed: int):
        self.draw: Callable[[int, torch.Generator], Any] = draw
        self.generator: torch.Generator = torch.Generator().manual_seed(seed)

    def take(self, n_seqs: int) -> Any:
        return self.draw(n_seqs, self.generator)

    def get_state(self) -> UInt8[Tensor, " rng_state"]:
        return self.generator.get_state()

    def set_state(self, state: Tensor) -> None:
        self.generator.set_state(state)
