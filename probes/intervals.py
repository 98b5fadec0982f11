"""How sure a score is: a confidence interval over evaluation sequences.

Every behavioural score here is a mean over independent evaluation sequences of one number per sequence
(its loss, its last-token KL, its ICL score), so its uncertainty is that of a sample mean: with n
sequences, mean x̄ and sample standard deviation s, the two-sided interval at ``level`` is

    x̄ ± t_{(1 + level)/2, n − 1} · s / √n        (Student's t; n ≥ 2)

It measures the noise of the evaluation set only (another draw of n sequences from the same task), not
that of training (another seed); one sequence has no interval (``low`` and ``high`` are None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jaxtyping import Float
from scipy.stats import t as student_t
from torch import Tensor

LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A mean over ``n`` sequences and its interval at ``level`` (None bounds when n = 1)."""

    value: float
    low: float | None
    high: float | None
    n: int
    level: float = LEVEL

    @property
    def half_width(self) -> float | None:
        return None if self.low is None else (self.high - self.low) / 2

    def to_json(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n, "level": self.level}


def mean_interval(per_sequence: Float[Tensor, " batch"], level: float = LEVEL) -> Estimate:
    """The mean of ``per_sequence`` with its Student-t interval (module docstring)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    values = per_sequence.double().flatten()
    n = values.numel()
    if n == 0:
        raise ValueError("no sequences to average")
    mean = values.mean().item()
    if n == 1:
        return Estimate(mean, None, None, 1, level)
    half = float(student_t.ppf((1 + level) / 2, n - 1)) * values.std().item() / math.sqrt(n)
    return Estimate(mean, mean - half, mean + half, n, level)
