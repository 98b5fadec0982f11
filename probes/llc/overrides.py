"""The estimator's settings a user may give in place of its rule's (:mod:`.estimator`'s module docstring):
the ``llc`` command's options and the keyword arguments of ``llc_report`` and ``per_head_report``. Torch-free,
so that the command line builds its options from it while it parses."""

from __future__ import annotations

from dataclasses import dataclass

from induction_probes.circuits.config import Config, option, option_names

RULE = "(default: the estimator's rule, see docs/learning-coefficient.md)"


@dataclass(frozen=True)
class LLCOverrides(Config):
    """Each setting left at None follows the rule; the estimator checks the ones given."""

    lr: float | None = option(None, f"SGLD step size {RULE}")
    localization: float | None = option(None, f"pull towards the checkpoint, gamma {RULE}")
    n_beta: float | None = option(None, f"inverse temperature n*beta {RULE}")
    chains: int | None = option(None, "SGLD chains (default 4)")
    draws: int | None = option(None, f"draws per chain after the burn-in {RULE}")
    burn_in: int | None = option(None, f"SGLD steps per chain before the draws {RULE}")
    batch_size: int | None = option(None, "sequences per SGLD step (default min(n, 256))")


OVERRIDES = tuple(option_names(LLCOverrides))  # the rule's settings a caller may give
