"""How many torch threads a computation uses: one policy for the API and the command line.

- The project's own models (a few thousand parameters) run on one thread: on the 2-core machine two threads were
  3 to 10 times slower (bench/bench_model.py), since each operation is too small to split.
- A model of at least ``LARGE_MODEL_PARAMETERS`` parameters (a language model such as GPT-2 small, 124 M) runs at
  torch's default, the thread count the process had when this module was first imported: its matrix products
  are large enough for every core.
- ``threads`` (the API's argument, the command line's ``--threads``) overrides both.

Sweeps keep their own rule, one thread per worker (:mod:`~induction_probes.circuits.sweeps.cells`), as does a Ray
task probing one checkpoint of a series.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch
from torch import nn

from induction_probes.circuits.validation import require_int

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

LARGE_MODEL_PARAMETERS = 10_000_000  # GPT-2 small has 124 M; the largest model of ours has about 100,000
DEFAULT_THREADS = torch.get_num_threads()  # torch's default, before the command line sets one thread


def policy_threads(model: nn.Module | HookedModel, threads: int | None = None) -> int:
    """The thread count the policy (module docstring) gives ``model``, or ``threads`` where given (>= 1)."""
    if threads is not None:
        return require_int("threads", threads, 1)
    return DEFAULT_THREADS if is_large(model) else 1


def is_large(model: nn.Module | HookedModel) -> bool:
    """Whether ``model`` has at least :data:`LARGE_MODEL_PARAMETERS` parameters."""
    return sum(parameter.numel() for parameter in model.parameters()) >= LARGE_MODEL_PARAMETERS


def one_thread_for_the_process() -> None:
    """The command line's default: our models are small. Calling it through this module loads the module first,
    so that :data:`DEFAULT_THREADS` holds torch's own count, which a large model's policy gives back."""
    torch.set_num_threads(1)


@contextmanager
def thread_policy(model: nn.Module | HookedModel, threads: int | None = None) -> Iterator[int]:
    """Run the block at :func:`policy_threads`' count, and give the thread count back as it was after it."""
    chosen, before = policy_threads(model, threads), torch.get_num_threads()
    torch.set_num_threads(chosen)
    try:
        yield chosen
    finally:
        torch.set_num_threads(before)


def spare_core(model: nn.Module, device: torch.device) -> bool:
    """Whether a second computation can run beside this process's torch work on a core of its own: a small model
    (one thread by the policy) computing on the CPU, with fewer torch threads than the cores the process may use."""
    return device.type == "cpu" and not is_large(model) and torch.get_num_threads() < usable_cores()


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system tells it, as in a container)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1
