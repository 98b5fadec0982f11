"""The names and checks of ICL-MC's parameters, torch-free: the task config and the samplers both check through
these, so a sampler called with plain arguments refuses what the config refuses, with the same message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


PRIOR_NAMES = ("dirichlet", "doubly-stochastic", "unigram", "spectrum", "mixture")  # see tasks/priors.py


SIMPLE_PRIOR_NAMES = PRIOR_NAMES[:3]
