"""The residual stream of a hand-made construction as named blocks of one width (tracr's residual spaces,
in their simplest form), and the maps between blocks that the constructions' weights are made of.

Maps follow the row-vector convention of the papers and of TransformerLens: ``x @ W`` reads the rows of
``W`` and writes its columns, so the entry (``read``, ``write``) of a map moves block ``read`` into block
``write``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.errors import BadInput


@dataclass(frozen=True)
class ResidualLayout:
    """Blocks ``names`` of ``width`` dimensions each, in this order along d_model."""

    names: tuple[str, ...]
    width: int

    def __post_init__(self) -> None:
        if len(set(self.names)) != len(self.names):
            raise BadInput(f"residual block names repeat: {self.names}")

    @property
    def d_model(self) -> int:
        return len(self.names) * self.width

    def __getitem__(self, name: str) -> slice:
        index = self.names.index(name)
        return slice(index * self.width, (index + 1) * self.width)

    def identity(self) -> Float[Tensor, "width width"]:
        return torch.eye(self.width, dtype=torch.float64)

    def map(self, *entries: tuple[str, str, float | Tensor]) -> Float[Tensor, "d_model d_model"]:
        """A d_model × d_model map, zero but for each (``read``, ``write``, value): value times the identity
        (a number) or a width × width matrix, moving block ``read`` into block ``write``."""
        matrix = torch.zeros(self.d_model, self.d_model, dtype=torch.float64)
        for read, write, value in entries:
            matrix[self[read], self[write]] = value * self.identity() if isinstance(value, float | int) else value
        return matrix

    def embedding(self, block: str) -> Float[Tensor, "width d_model"]:
        """The input written into ``block``, the rest left zero."""
        return self.map((block, block, 1.0))[self[block]]

    def readout(self, block: str) -> Float[Tensor, "d_model width"]:
        """``block`` read out, the rest ignored."""
        return self.map((block, block, 1.0))[:, self[block]]
