"""Every induction probe of one language model (:func:`probe`), and the same over a training run's checkpoints,
loaded one at a time, on the same repeated random tokens at every step (one seed; the vocabulary is the same
across a run's checkpoints)."""

from __future__ import annotations

import html
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from induction_probes.circuits.defaults import LM_PROBE_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.language_models import as_hooked, load_bridge
from induction_probes.circuits.interop.model_sources import ModelSource, Series
from induction_probes.circuits.names import head_label
from induction_probes.circuits.threads import thread_policy
from induction_probes.circuits.workers.worker_start import drop_current_folder
from induction_probes.probes.attention.patterns import run_with_patterns
from induction_probes.probes.lm.losses import Overflow
from induction_probes.probes.lm.measure import HeadScores, evaluate
from induction_probes.probes.lm.progress_bars import progress_bar
from induction_probes.probes.lm.protocols import LOSSES, InductionLoss, RepeatedTokens, repeated_random_tokens
from induction_probes.probes.lm.ray_series import check_backend, each_checkpoint, one_model_series
from induction_probes.probes.lm.roles import (
    THRESHOLD,
    Composition,
    HeadRole,
    compositions,
    head_roles,
    heads_labelled,
)
from induction_probes.probes.tidy import Tidy, crossing_step, first_reached, frame, per_head, row
from induction_probes.probes.views.explorer import AttentionExample, rounded

if TYPE_CHECKING:
    from induction_probes.circuits.interop.language_models import ModelLike
    from induction_probes.circuits.models.hooked_model import HookedModel


CROSSING_COLUMNS = ["measure", "layer", "head", "threshold", "step", "step_low", "step_high", "first_reached"]
HEAD_SCORES = ("content", "induction", "control", "previous_token", "copying", "positional_share")


@dataclass(frozen=True, eq=False)
class StepProbes(Tidy):
    """Every probe of one checkpoint on repeated random tokens: scores, losses, each head's role and the
    composition check of the induction heads found. ``to_frame()``: one row per (head, score) and per loss, with
    its 95 % interval over sequences (:mod:`induction_probes.probes.tidy`)."""

    step: int | None
    repeated: RepeatedTokens
    scores: HeadScores
    loss: InductionLoss
    threshold: float
    roles: list[HeadRole]
    compositions: list[Composition]
    attention: AttentionExample | None = None  # every head on one sequence: CircuitsVis's explorer, in a notebook

    def _repr_html_(self) -> str:
        return self.attention._repr_html_() if self.attention is not None else f"<pre>{html.escape(repr(self))}</pre>"

    @property
    def induction_heads(self) -> list[tuple[int, int]]:
        return heads_labelled(self.roles, "induction", self.scores, "content")

    @property
    def previous_token_heads(self) -> list[tuple[int, int]]:
        return heads_labelled(self.roles, "previous-token", self.scores, "previous_token")

    def best(self, score: str) -> tuple[int, int, float]:
        return self.scores.ranked(score)[0]

    def to_json(self) -> dict:
        heads = [
            {"head": head_label(r.layer, r.head), "layer": r.layer, "index": r.head}
            | self.scores.to_json(r.layer, r.head)
            | r.to_json()
            for r in self.roles
        ]
        return {
            "step": self.step,
            "lengths": list(self.repeated.length_range),
            "induction_heads": [head_label(*h) for h in self.induction_heads],
            "previous_token_heads": [head_label(*h) for h in self.previous_token_heads],
            "heads": heads,
            "compositions": [c.to_json() for c in self.compositions],
            **self.loss.to_json(),
        }

    def to_records(self, sequences_seen: int | None = None) -> list[dict]:
        rows = []
        for name in HEAD_SCORES:
            estimate = getattr(self.scores, name)
            bounds = list(zip(estimate.low.tolist(), estimate.high.tolist()))  # per layer: its heads' lows, highs
            rows += per_head(self.step, sequences_seen, name, estimate.value.tolist(), intervals=bounds)
        for measure, name in LOSSES.items():
            e = self.loss.interval(name)
            rows.append(row(self.step, sequences_seen, None, None, measure, e.value, e.low, e.high))
        return rows


@dataclass(frozen=True, eq=False)
class SeriesProbes(Tidy):
    """:func:`probe` of every checkpoint of a series (``results``, in step order), on the same sequences."""

    name: str
    results: tuple[StepProbes, ...]

    def __iter__(self) -> Iterator[StepProbes]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def steps(self) -> list[int | None]:
        return [r.step for r in self.results]

    def _repr_html_(self) -> str:  # the last checkpoint's explorer
        return self.results[-1]._repr_html_() if self.results else "<p>no checkpoint probed</p>"

    def to_records(self, sequences_seen: int | None = None) -> list[dict]:
        return [record for result in self.results for record in result.to_records(sequences_seen)]

    def first_crossings(self, threshold: float = THRESHOLD, scores: tuple[str, ...] = ("content", "previous_token")):
        """At which step each head's score crosses ``threshold`` and stays, as a DataFrame: one row per (score,
        layer, head). ``step``: the first step from which the score stays at or above it to the last checkpoint
        (:func:`~induction_probes.probes.tidy.crossing_step`; empty where the last is below). The bracket from the
        intervals over sequences, each also from where it stays: ``step_low``, from where the interval's top
        reaches the threshold (it may have crossed), and ``step_high``, from where the whole interval lies at or
        above it (it has crossed). Their 95 % is per checkpoint, not over the series: over many checkpoints a
        bound is crossed early by chance more often than 2.5 % of the time. ``first_reached``: the first step at
        or above the threshold at all, earlier than ``step`` where a transient excursion came first."""
        rows = []
        for name in scores:
            estimates = [getattr(r.scores, name) for r in self.results]
            for layer, head in self.results[0].scores.heads():
                first = {
                    column: crossing_step(
                        self.steps, [getattr(e, part)[layer, head].item() for e in estimates], threshold
                    )
                    for column, part in (("step", "value"), ("step_low", "high"), ("step_high", "low"))
                }
                values = [e.value[layer, head].item() for e in estimates]
                first["first_reached"] = first_reached(self.steps, values, threshold)
                rows.append({"measure": name, "layer": layer, "head": head, "threshold": threshold} | first)
        table = frame(rows, CROSSING_COLUMNS)
        return table.astype(
            {"step_low": "Int64", "step_high": "Int64", "first_reached": "Int64"}
        )  # steps that may be missing, as ``step``


def probe_tokens(
    model: ModelLike,
    repeated: RepeatedTokens,
    step: int | None = None,
    threshold: float = THRESHOLD,
    progress: bool = False,
    threads: int | None = None,
) -> StepProbes:
    """Every probe of ``model`` (a path, cache name or model: :func:`as_hooked`) on the sequences ``repeated``;
    ``progress``: a bar on stderr (a terminal's)."""
    model = as_hooked(model)
    if not 0 < threshold <= 1:
        raise BadInput(f"the threshold is a share of attention in (0, 1], got {threshold!r}")
    where = "probing" if step is None else f"probing step {step}"
    with progress_bar(2 * repeated.tokens.shape[0], where, progress) as bar:
        try:
            scores, loss = evaluate(model, repeated, bar)
        except Overflow as error:
            step_said = "" if step is None else f"step {step}: "
            raise Overflow(f"{step_said}{error}{first_overflowing_head(model, repeated)}") from None
        roles = head_roles(scores, threshold)
        induction = heads_labelled(roles, "induction", scores, "content")
        previous = heads_labelled(roles, "previous-token", scores, "previous_token")
        found = compositions(model, repeated, scores, induction, previous, bar)
    return StepProbes(step, repeated, scores, loss, threshold, roles, found, example_attention(model, repeated, step))


def first_overflowing_head(model: HookedModel, repeated: RepeatedTokens) -> str:
    """Where an overflowing pass first leaves float32's range: the first head whose attention on the first probe
    sequence is not finite ("" where every pattern is, and only the logits overflow)."""
    layers = run_with_patterns(model, repeated.tokens[:1])[1]
    for layer, pattern in enumerate(layers):
        bad = (~torch.isfinite(pattern[0])).flatten(1).any(-1)  # [head]
        if bool(bad.any()):
            return f"; from head {head_label(layer, int(bad.nonzero()[0]))} on, its attention is not a number"
    return ""


def token_texts(model: HookedModel, ids: list[int]) -> list[str]:
    """The tokens as the model's tokenizer writes them, or their ids where it has none."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return [str(i) for i in ids]
    return [str(t) for t in tokenizer.convert_ids_to_tokens(ids)]


def example_attention(model: HookedModel, repeated: RepeatedTokens, step: int | None) -> AttentionExample:
    """Every head's pattern on the probe sequence with the shortest R, on its BOS (if any) and R + R only (the
    filler before them is left out of the view, so its rows need not sum to 1)."""
    row = int(repeated.lengths.argmin())
    n_pos, length = repeated.tokens.shape[1], int(repeated.lengths[row])
    keep = torch.tensor([*range(repeated.prefix), *range(n_pos - 2 * length, n_pos)])
    layers = run_with_patterns(model, repeated.tokens[row : row + 1])[1]
    patterns = [p[0, head][keep][:, keep] for p in layers for head in range(p.shape[1])]
    heads = [head_label(layer, head) for layer, p in enumerate(layers) for head in range(p.shape[1])]
    where = "" if step is None else f"step {step}: "
    bos = "[BOS] + " if repeated.prefix else ""
    caption = f"{where}every head's attention on repeated random tokens, {bos}R + R with |R| = {length}"
    return AttentionExample(token_texts(model, repeated.tokens[row, keep].tolist()), heads, rounded(patterns), caption)


def probe(
    model: ModelLike,
    step: int | None = None,
    length: int | tuple[int, int] | None = None,
    batch: int = LM_PROBE_SEQS,
    seed: int = PROBE_SEED,
    bos: bool | None = None,
    threshold: float = THRESHOLD,
    progress: bool = False,
    threads: int | None = None,
) -> StepProbes:
    """Every probe of one model (a path, cache name or model) on :func:`repeated_random_tokens` (``length``: |R|,
    one value or a range; by default 10..50 within the context); ``progress``: a bar on stderr (a terminal's);
    ``threads``: torch threads (default: :mod:`~induction_probes.circuits.threads`' policy)."""
    model = as_hooked(model)
    repeated = repeated_random_tokens(model, length, batch, seed, bos)
    with thread_policy(model, threads):
        return probe_tokens(model, repeated, step, threshold, progress)


def probe_series(
    series: Series | str | os.PathLike,
    device: str = "cpu",
    progress: bool = False,
    backend: str = "local",
    address: str | None = None,
    **protocol,
) -> SeriesProbes:
    """:func:`probe` of every checkpoint of ``series`` (a folder of ``step_N/`` checkpoints, a name in the local
    Hugging Face cache with ``stepN`` revisions, or a ``Series``) on the same sequences (``protocol``:
    :func:`probe`'s options); ``progress``: a bar over the checkpoints. ``backend="local"`` boots them one at a
    time here; ``"ray"`` runs one Ray task per checkpoint, on the cluster at ``address`` (every node must see the
    series at the same path) or on a local Ray instance, with the numbers of a local run."""
    series = one_model_series(series)
    check_backend(backend, address)
    here = lambda source: probe(load_bridge(source, device), source.step, progress=progress, **protocol)  # noqa: E731
    found = each_checkpoint(series.checkpoints, here, backend, address, progress, probe_checkpoint, device, protocol)
    return SeriesProbes(series.name, tuple(found))


def probe_checkpoint(source: ModelSource, device: str, protocol: dict) -> StepProbes:
    """One checkpoint's probes as a Ray task runs them: on one torch thread, as the command line computes, so
    that its numbers are a local run's."""
    drop_current_folder()  # before the model's code is imported (circuits/workers/worker_start.py)
    return probe(load_bridge(source, device), source.step, **protocol, threads=1)
