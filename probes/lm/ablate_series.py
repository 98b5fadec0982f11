"""Every head ablated at every checkpoint of a language model's training series: since when in-context learning
depends on each head. Each checkpoint is :func:`~.ablate_heads.ablate` of every head alone, on the same repeated
random tokens (one seed; a series' checkpoints share the vocabulary), so a head's row over the steps compares like
with like. With a journal folder each checkpoint journals its heads to ``step_N.jsonl`` there
(:mod:`.ablation_journal`): the same call resumes where it stopped, a finished checkpoint costing one clean pass.
On Ray each checkpoint is one task (:mod:`.ray_series`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from induction_probes.circuits.defaults import LM_PROBE_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.language_models import load_bridge
from induction_probes.circuits.interop.model_sources import ModelSource, Series
from induction_probes.circuits.names import head_label
from induction_probes.circuits.workers.worker_start import drop_current_folder
from induction_probes.probes.ablation.head_ablation import check_mode, single_heads
from induction_probes.probes.lm.ablate_heads import HeadAblation, ablate
from induction_probes.probes.lm.protocols import InductionLoss, repeated_random_tokens
from induction_probes.probes.lm.ray_series import checked_series, each_checkpoint
from induction_probes.probes.tidy import Tidy, crossing_step


@dataclass(frozen=True)
class StepAblation:
    """One checkpoint's clean loss and every head's ablation."""

    step: int | None  # a series' checkpoint always has one
    baseline: InductionLoss
    ablations: tuple[HeadAblation, ...]
    length_range: tuple[int, int]  # |R| of the repeated random tokens


@dataclass(frozen=True, eq=False)
class SeriesAblation(Tidy):
    """:func:`ablate_series`'s answer: ``results`` in step order. ``to_frame()``: one row per step, head and
    measure (the repeated copy's loss, its paired rise and the share of the gap removed, each with its 95 %
    interval over sequences)."""

    name: str
    mode: str
    results: tuple[StepAblation, ...]

    def __iter__(self) -> Iterator[StepAblation]:
        return iter(self.results)

    @property
    def steps(self) -> list[int | None]:
        return [r.step for r in self.results]

    @property
    def heads(self) -> list[tuple[int, int]]:
        return [a.heads[0] for a in self.results[0].ablations]

    def to_records(self, sequences_seen: int | None = None) -> list[dict]:
        return [
            record | {"step": result.step}
            for result in self.results
            for ablation in result.ablations
            for record in ablation.to_records(sequences_seen)
        ]

    def rows(self) -> list[dict]:
        """One JSON row per step and head: ``step``, ``heads``, the rise and the share of the gap with their
        intervals (the share null at a step whose gap's interval includes 0)."""
        return [{"step": result.step} | ablation.to_json() for result in self.results for ablation in result.ablations]

    def shares(self) -> list[list[float | None]]:
        """[head][step]: the share of the gap each head's ablation removes (None where the step has no gap)."""
        return [
            [r.ablations[i].share.value if r.baseline.has_gap else None for r in self.results]
            for i in range(len(self.heads))
        ]

    def rises(self) -> list[list[float]]:
        """[head][step]: the paired rise of the repeated copy's loss."""
        return [[r.ablations[i].increase.value for r in self.results] for i in range(len(self.heads))]

    def formation(self, threshold: float) -> dict[str, int | None]:
        """Each head's first step from which its ablation removes at least ``threshold`` of the gap at every later
        checkpoint (:func:`~induction_probes.probes.tidy.crossing_step`; a step without a gap counts as below)."""
        steps = [-1 if step is None else step for step in self.steps]
        return {
            head_label(*head): crossing_step(steps, [-1.0 if v is None else v for v in values], threshold)
            for head, values in zip(self.heads, self.shares())
        }


def ablate_series(
    series: Series | str | os.PathLike,
    mode: str = "zero",
    length: int | tuple[int, int] | None = None,
    n_seqs: int = LM_PROBE_SEQS,
    seed: int = PROBE_SEED,
    journal: str | os.PathLike | None = None,
    device: str = "cpu",
    progress: bool = False,
    backend: str = "local",
    address: str | None = None,
    threads: int | None = None,
) -> SeriesAblation:
    """Every head alone ablated (``mode``: zero, mean or resample) at every checkpoint of ``series`` (a folder of
    ``step_N/`` checkpoints, a cache name with ``stepN`` revisions, or a ``Series``), on the same repeated random
    tokens. ``journal``: a folder that keeps each checkpoint's heads as they finish (``step_N.jsonl``); the same
    call resumes from it. ``backend="ray"``: one Ray task per checkpoint, on one thread, at ``address`` or on a
    local instance. A series needs two checkpoints or more: one is an ``ablate`` of one model."""
    check_mode(mode)
    series, on_this_process = checked_series(series, backend, address, threads, "ablates")
    folder = journal_folder(journal)  # made once the series and the options are known good
    settings = {"mode": mode, "length": length, "n_seqs": n_seqs, "seed": seed, "folder": folder}
    here = lambda source: ablate_checkpoint(source, device, settings | on_this_process, progress)  # noqa: E731
    found = each_checkpoint(
        series.checkpoints, here, backend, address, progress, ablate_on_worker, device, settings | {"threads": 1}
    )
    return SeriesAblation(series.name, mode, tuple(found))


def ablate_on_worker(source: ModelSource, device: str, settings: dict) -> StepAblation:
    """:func:`ablate_checkpoint` as a Ray task runs it: on one thread, as the command line computes, so that its
    numbers are a local run's."""
    drop_current_folder()  # before the model's code is imported (circuits/workers/worker_start.py)
    return ablate_checkpoint(source, device, settings)


def ablate_checkpoint(source: ModelSource, device: str, settings: dict, progress: bool = False) -> StepAblation:
    """One checkpoint's every head ablated, journaled to ``folder/step_N.jsonl`` where a folder is given."""
    bridge = load_bridge(source, device)
    tokens = repeated_random_tokens(bridge, settings["length"], settings["n_seqs"], settings["seed"])
    reference = repeated_random_tokens(bridge, tokens.length_range, settings["n_seqs"], settings["seed"] + 1)
    folder = settings["folder"]
    journal = None if folder is None else Path(folder) / f"step_{source.step}.jsonl"
    baseline, found = ablate(
        bridge,
        tokens,
        single_heads(bridge),
        settings["mode"],
        reference,
        settings["seed"],
        progress,
        journal,
        settings["threads"],
    )
    return StepAblation(source.step, baseline, tuple(found), tokens.length_range)


def journal_folder(journal: str | os.PathLike | None) -> str | None:
    """The journal folder as an absolute path (a Ray task elsewhere writes there too), made if missing; a link or
    something that is not a folder is refused."""
    if journal is None:
        return None
    path = Path(os.path.abspath(journal))
    if path.is_symlink():
        raise BadInput(f"{path} is a symbolic link: the journal folder is never followed through one")
    if path.exists() and not path.is_dir():
        raise BadInput(f"{path} is not a folder: with --all-steps, --out names a folder of step_N.jsonl journals")
    path.mkdir(parents=True, exist_ok=True)
    return str(path)
