"""Path patching of a Hugging Face language model (through TransformerLens's ``TransformerBridge``), at one
checkpoint or at every checkpoint of a ``step_N`` series: the contrast is repeated random tokens against the same
sequences with their first copy of R redrawn (:class:`~.contrasts.RepeatedContrast`), the same sequences at every
checkpoint (a series' checkpoints share the vocabulary). Over a series whose edges are screened, the last
checkpoint is patched first and its circuit's edges are patched exactly at every other checkpoint too, so that each
one's formation bracket reads a number at every step. On Ray each checkpoint is one task
(:mod:`~induction_probes.probes.lm.ray_series`)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from induction_probes.circuits.defaults import LM_CIRCUIT_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.language_models import load_bridge
from induction_probes.circuits.interop.model_sources import ModelSource, Series
from induction_probes.circuits.names import head_label
from induction_probes.circuits.threads import thread_policy
from induction_probes.circuits.workers.worker_start import drop_current_folder
from induction_probes.probes.circuit.contrasts import RepeatedContrast
from induction_probes.probes.circuit.edges import CHECKED_EDGES, THRESHOLD, EdgeEffects, check_settings, edge_effects
from induction_probes.probes.circuit.path_patching import Edge
from induction_probes.probes.lm.protocols import RepeatedTokens, repeated_random_tokens
from induction_probes.probes.lm.ray_series import checked_series, each_checkpoint
from induction_probes.probes.lm.series import probe_tokens

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel


@dataclass(frozen=True)
class CircuitSettings:
    """What every checkpoint of a call is patched with: ``length`` (|R|, or a range), ``n_seqs`` sequences of
    ``seed`` (the first copies are redrawn with ``seed`` + 1), the circuit's ``threshold``, ``checked``: of a
    model whose edges are screened, how many are patched exactly, the torch ``threads`` (None: the policy's), and
    ``marked``: instead of the screen, only the edges among the heads ``probe`` marks on the same sequences."""

    length: int | tuple[int, int] | None = None
    n_seqs: int = LM_CIRCUIT_SEQS
    seed: int = PROBE_SEED
    threshold: float = THRESHOLD
    checked: int = CHECKED_EDGES
    threads: int | None = None
    marked: bool = False  # only the edges among the heads ``probe`` marks, each patched exactly

    def __post_init__(self) -> None:
        check_settings(self.n_seqs, self.threshold)
        if self.checked < 1:
            raise BadInput(f"--checked patches at least one edge exactly, got {self.checked!r}")


def checkpoint_edges(
    source: ModelSource, settings: CircuitSettings, device: str = "cpu", also: Collection[Edge] = ()
) -> EdgeEffects:
    """Every edge of the checkpoint ``source`` patched (:func:`~.edges.edge_effects`) on repeated random tokens;
    ``also``: edges patched exactly wherever the model's edges are screened."""
    model = load_bridge(source, device)
    with thread_policy(model, settings.threads):
        repeated = repeated_random_tokens(model, settings.length, settings.n_seqs, settings.seed)
        contrast = RepeatedContrast.of(model, repeated, settings.seed + 1)
        marked = marked_heads(model, repeated) if settings.marked else None
        return edge_effects(model, contrast, source.step, settings.threshold, settings.checked, also, marked)


def marked_heads(model: HookedModel, repeated: RepeatedTokens) -> list[str]:
    """The previous-token and induction heads ``probe`` marks on ``repeated`` (:mod:`~..lm.roles`)."""
    found = probe_tokens(model, repeated)
    return [head_label(*h) for h in dict.fromkeys(found.previous_token_heads + found.induction_heads)]


def edges_on_worker(source: ModelSource, settings: CircuitSettings, device: str, also: list[Edge]) -> EdgeEffects:
    """:func:`checkpoint_edges` as a Ray task runs it, on one thread as the command line computes."""
    drop_current_folder()  # before the model's code is imported (circuits/workers/worker_start.py)
    return checkpoint_edges(source, settings, device, also)


def series_edges(
    series: Series | str | os.PathLike,
    settings: CircuitSettings,
    device: str = "cpu",
    progress: bool = False,
    backend: str = "local",
    address: str | None = None,
) -> list[EdgeEffects]:
    """:func:`checkpoint_edges` at every checkpoint of ``series``, in step order (the last first: module
    docstring); ``backend="ray"``: one Ray task per checkpoint at ``address`` or on a local instance."""
    series, _ = checked_series(series, backend, address, settings.threads, "patches")  # threads: settings' own
    on_ray = dataclasses.replace(settings, threads=1)
    last = each_checkpoint(
        series.checkpoints[-1:],
        lambda s: checkpoint_edges(s, settings, device),
        backend,
        address,
        False,
        edges_on_worker,
        on_ray,
        device,
        [],
    )[0]
    also = last.circuit if last.screen is not None else []
    rest = each_checkpoint(
        series.checkpoints[:-1],
        lambda source: checkpoint_edges(source, settings, device, also),
        backend,
        address,
        progress,
        edges_on_worker,
        on_ray,
        device,
        also,
    )
    return [*rest, last]
