"""Head ablation in a language model, measured on repeated random tokens: how much of what induction buys
(the gap between the first copy's loss and the repeated copy's) goes when a head's output is removed.

A head's output z (``hook_z``) becomes zero, its mean over every reference sequence and position, or its z on a
reference sequence drawn once per probed sequence (resample), as in
:mod:`~induction_probes.probes.ablation.head_ablation`. Heads are the outer loop: each head set's result is final
before the next begins, so that a journal (:mod:`.ablation_journal`) can keep it and a rerun resume. The head sets
that start at one layer are stacked along the batch and resumed there from the clean residual stream.

Every effect is paired: the ablated and the clean model read the same sequences, and the effect is the
per-sequence difference (ablated − clean) with its Student-t interval; the share of the gap removed is a ratio
of means with a percentile-bootstrap interval that resamples the sequences for both at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from induction_probes.circuits.defaults import PROBE_SEED
from induction_probes.circuits.devices import model_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.language_models import as_hooked
from induction_probes.circuits.interop.resume import resid_pre_hook, resumes_at_layer, run_from_layer
from induction_probes.circuits.limits import require_seed
from induction_probes.circuits.names import head_label, heads_label
from induction_probes.circuits.threads import thread_policy
from induction_probes.probes.ablation.head_ablation import check_heads, check_mode, heads_in_layer, reference_z, z_hook
from induction_probes.probes.attention.patterns import run_with_captures
from induction_probes.probes.intervals import Estimate, bootstrap_ratio_interval, mean_interval
from induction_probes.probes.lm.ablation_journal import AblationJournal
from induction_probes.probes.lm.losses import pass_loss
from induction_probes.probes.lm.measure import chunk_size, chunked
from induction_probes.probes.lm.progress_bars import progress_bar
from induction_probes.probes.lm.protocols import (
    LOSSES,
    InductionLoss,
    RepeatedTokens,
    estimate_json,
    induction_loss,
)
from induction_probes.probes.lm.weights import widths
from induction_probes.probes.tidy import Tidy, row

# Tokens a pass holds. GPT-2 small's blocks ran fastest per token at about 500 to 2,000 tokens on this machine's
# 2 cores, and slower beyond, once the activations leave the cache: stacking more variants costs time.
PASS_TOKENS = 1024
RESIDUAL_NUMBERS = 1 << 26  # numbers of clean residual stream held at once (256 MiB of float32)

if TYPE_CHECKING:
    from induction_probes.circuits.interop.language_models import ModelLike
    from induction_probes.circuits.models.hooked_model import HookedModel


@dataclass(frozen=True)
class HeadAblation(Tidy):
    """The induction loss with ``heads`` ablated, against the clean model's ``baseline`` on the same sequences.
    ``to_frame()``: one row per loss and effect with its interval, ``ablated`` and ``mode`` beside it (a single
    ablated head is also the row's layer and head)."""

    heads: list[tuple[int, int]]
    mode: str
    loss: InductionLoss
    baseline: InductionLoss

    @property
    def increase(self) -> Estimate:
        """How much the repeated copy's loss rose, paired per sequence, with its interval."""
        return mean_interval(self.loss.repeated_half_per_sequence - self.baseline.repeated_half_per_sequence)

    @property
    def loss_increase(self) -> float:
        return self.increase.value

    @property
    def share(self) -> Estimate:
        """The rise as a share of the clean model's gap (1: the repeat becomes as hard as the first copy),
        with its bootstrap interval; None bounds where the clean model has no gap to remove. Reported only where
        the gap's interval lies above 0 (:attr:`InductionLoss.has_gap`)."""
        rise = self.loss.repeated_half_per_sequence - self.baseline.repeated_half_per_sequence
        return bootstrap_ratio_interval(rise, self.baseline.gap_per_sequence)

    @property
    def gap_removed(self) -> float:
        return self.share.value if self.baseline.has_gap else float("nan")

    def to_records(self, sequences_seen: int | None = None) -> list[dict]:
        layer, head = self.heads[0] if len(self.heads) == 1 else (None, None)
        estimates = {measure: self.loss.interval(name) for measure, name in LOSSES.items()}
        estimates |= {"loss_increase": self.increase} | ({"gap_removed": self.share} if self.baseline.has_gap else {})
        extra = {"ablated": heads_label(self.heads, ","), "mode": self.mode}
        return [row(None, sequences_seen, layer, head, m, e.value, e.low, e.high) | extra for m, e in estimates.items()]

    def to_json(self) -> dict:
        return {
            "heads": [head_label(layer, head) for layer, head in self.heads],
            "mode": self.mode,
            **self.loss.to_json(),
            "loss_increase": estimate_json(self.increase),
            "gap_removed": estimate_json(self.share) if self.baseline.has_gap else None,
        }


def ablated_losses(
    model: HookedModel,
    repeated: RepeatedTokens,
    head_sets: list[list[tuple[int, int]]],
    replacements: Replacements,
    bar: tqdm,
    journal: AblationJournal | None = None,
) -> list[InductionLoss]:
    """:class:`InductionLoss` of the clean model, then of each head set ablated together. Head set by head set:
    each is final (and journaled) before the next starts. Each head set's passes resume at its lowest layer from
    the clean residual stream there (:func:`~induction_probes.circuits.interop.resume.run_from_layer`): the layers
    below are not run again. The head sets that start at one layer are stacked along the batch where a pass of
    PASS_TOKENS holds more than one of them. Memory holds the clean residual stream at a few layers, one pass's
    activations, and for resample every reference sequence's z at the ablated layers (:class:`Replacements`)."""
    tokens, scored = repeated.tokens.to(model_device(model)), repeated.scored()
    baseline = induction_loss(clean_per_token(model, tokens, scored), repeated)
    done = {} if journal is None else journal.start(baseline)
    bar.update(sum(1 for heads in head_sets if key(heads) in done))
    pending = by_layer([heads for heads in dict.fromkeys(map(key, head_sets)) if heads not in done])
    per_pass = max(1, PASS_TOKENS // tokens.numel())
    for layer, residual in clean_residuals(model, tokens, sorted(pending)):
        sets = pending[layer]
        for group in (sets[first : first + per_pass] for first in range(0, len(sets), per_pass)):
            bar.set_postfix_str("; ".join(heads_label(list(heads), ",") for heads in group))
            losses = variant_losses(model, tokens, scored, residual, layer, group, replacements)
            for heads, per_token in zip(group, losses):
                done[heads] = induction_loss(per_token, repeated)
                if journal is not None:
                    journal.record(heads, done[heads])
            bar.update(len(group))
    return [baseline, *(done[key(heads)] for heads in head_sets)]


def key(heads: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """A head set as a dictionary key (the same heads in the same order)."""
    return tuple((int(layer), int(head)) for layer, head in heads)


def by_layer(head_sets: list) -> dict[int, list]:
    """The head sets grouped by the layer their ablation starts at (their lowest), in their order."""
    grouped: dict[int, list] = {}
    for heads in head_sets:
        grouped.setdefault(min(layer for layer, _ in heads), []).append(heads)
    return grouped


def clean_per_token(
    model: HookedModel, tokens: Int[Tensor, "batch pos"], scored: Bool[Tensor, "batch pos_1"]
) -> Float[Tensor, "batch pos_1"]:
    """The clean model's per-token loss on every sequence, PASS_TOKENS a pass (the ``scored`` entries at least)."""

    def loss(rows: slice) -> Tensor:
        forward = lambda hooks: model.run_with_hooks(tokens[rows], fwd_hooks=hooks)  # noqa: E731
        return pass_loss(model, tokens[rows], forward, scored[rows])

    with torch.no_grad():
        return chunked(loss, len(tokens), max(1, PASS_TOKENS // tokens.shape[1]))


def clean_residuals(model: HookedModel, tokens: Tensor, layers: list[int]) -> Iterator[tuple[int, Tensor | None]]:
    """(layer, the clean residual stream entering it for every sequence) for each of ``layers`` in order, None
    at layer 0 or where the model cannot resume (its ablated passes start from the tokens). The layers are
    captured a few at a time from one pass each, as many as RESIDUAL_NUMBERS holds, each pass stopped at the
    highest."""
    resumable = [layer for layer in layers if layer > 0 and resumes_at_layer(model)]
    yield from ((layer, None) for layer in layers if layer not in resumable)
    if not resumable:  # a model that cannot resume (the minimal model) may have no residual width to read
        return
    d_model = widths(model, "resuming a pass at a layer").d_model
    at_once = max(1, RESIDUAL_NUMBERS // (tokens.numel() * d_model))
    for first in range(0, len(resumable), at_once):
        names = [resid_pre_hook(layer) for layer in resumable[first : first + at_once]]

        def capture(rows: slice, names: list[str] = names) -> Tensor:
            captured = run_with_captures(model, tokens[rows], names, output=False)[1]
            return torch.stack([captured[name] for name in names], 1)  # [batch, layer, pos, d_model]

        residuals = chunked(capture, len(tokens), chunk_size(model, tokens.shape[1]))
        yield from zip(resumable[first : first + at_once], residuals.unbind(1))


def variant_losses(
    model: HookedModel,
    tokens: Tensor,
    scored: Tensor,
    residual: Tensor | None,
    layer: int,
    group: list,
    replacements: Replacements,
) -> list[Float[Tensor, "batch pos_1"]]:
    """The per-token loss of every sequence with each head set of ``group`` ablated (all starting at ``layer``):
    the variants stacked along the batch, PASS_TOKENS a pass; the ``scored`` entries at least."""
    rows_per_pass = max(1, PASS_TOKENS // (tokens.shape[1] * len(group)))
    parts: list[list[Tensor]] = [[] for _ in group]
    for first in range(0, len(tokens), rows_per_pass):
        part = tokens[first : first + rows_per_pass]
        rows = range(first, first + len(part))
        stacked = part.repeat(len(group), 1)
        resumed = None if residual is None else residual[first : rows.stop].repeat(len(group), 1, 1).to(part.device)
        hooks = replacements.hooks(group, rows)

        def forward(extra: list, stacked=stacked, resumed=resumed, hooks=hooks) -> Tensor:
            return run_from_layer(model, stacked, resumed, layer, hooks + extra)

        losses = pass_loss(model, stacked, forward, scored[first : rows.stop].repeat(len(group), 1))
        for parts_of_one, losses_of_one in zip(parts, losses.split(len(part))):
            parts_of_one.append(losses_of_one)
    return [torch.cat(one) for one in parts]


class Replacements:
    """What an ablated head's z becomes (``hook_z``), for every probed sequence: zero; the head's mean over every
    reference sequence and position (``mean``); or its z on a reference sequence drawn for each probed sequence
    (``resample``), at the same position. The draw is made once, with ``seed``, and serves every head and layer,
    so that a head's result depends neither on the heads beside it in a pass nor on how sequences are chunked."""

    def __init__(
        self, model: HookedModel, mode: str, reference: RepeatedTokens | None, seed: int, n: int, layers: set[int]
    ):
        self.mode = mode
        self.z: dict[int, Tensor] = {}
        self.picks: Tensor | None = None
        if mode == "zero":
            return
        assert reference is not None  # ablate, the one caller, refuses mean and resample without one first
        tokens = reference.tokens.to(model_device(model))
        chunks = [reference_z(model, part, layers) for part in tokens.split(chunk_size(model, tokens.shape[1]))]
        self.z = {layer: torch.cat([chunk[layer] for chunk in chunks]) for layer in layers}
        if mode == "mean":
            self.z = {layer: z.mean(dim=(0, 1)) for layer, z in self.z.items()}  # [head, d_head]
        else:
            generator = torch.Generator().manual_seed(seed)
            self.picks = torch.randint(0, len(reference.tokens), (n,), generator=generator)

    def rows(self, layer: int, heads: list[int], rows: range, z: Tensor) -> Float[Tensor, "batch pos head d_head"]:
        """The replacement of ``heads``' z at ``layer`` for the probed sequences ``rows``, shaped as ``z`` there."""
        shape = (len(rows), z.shape[1], len(heads), z.shape[3])
        if self.mode == "zero":
            return z.new_zeros(shape)
        if self.mode == "mean":
            return self.z[layer][heads].to(z).expand(shape)
        assert self.picks is not None  # drawn in __init__ for resample, the one mode left
        return self.z[layer][self.picks[rows.start : rows.stop]][:, : z.shape[1], heads].to(z)

    def hooks(self, group: list, rows: range) -> list[tuple[str, object]]:
        """``hook_z`` hooks for a pass of the variants of ``group`` stacked along the batch, each of ``rows``'
        sequences: variant i's rows get its heads replaced."""
        by_layer: dict[int, list[tuple[int, list[int]]]] = {}
        for variant, heads in enumerate(group):
            for layer in sorted({layer for layer, _ in heads}):
                in_layer = [head for lay, head in heads if lay == layer]
                by_layer.setdefault(layer, []).append((variant, in_layer))

        def replace(layer: int):
            def hook(z: Tensor, hook) -> Tensor:
                z = z.clone()  # never write into a tensor that a cache or caller may hold
                for variant, heads in by_layer[layer]:
                    block = slice(variant * len(rows), (variant + 1) * len(rows))
                    z[block, :, heads] = self.rows(layer, heads, rows, z)
                return z

            return hook

        return [(z_hook(layer), replace(layer)) for layer in sorted(by_layer)]


def ablate(
    model: ModelLike,
    repeated: RepeatedTokens,
    head_sets: list[list[tuple[int, int]]],
    mode: str = "zero",
    reference: RepeatedTokens | None = None,
    seed: int = PROBE_SEED,
    progress: bool = False,
    journal: str | os.PathLike | None = None,
    threads: int | None = None,
) -> tuple[InductionLoss, list[HeadAblation]]:
    """The clean model's :class:`InductionLoss` and each head set's ablation, in the order of ``head_sets``.
    ``reference`` (mean, resample): other repeated random sequences of the same shape, e.g. the same protocol
    with another seed. ``progress``: a bar on stderr (a terminal's) naming the heads being ablated and the time
    left. ``journal``: a file that keeps each head set's result as soon as it is final
    (:class:`~induction_probes.probes.lm.ablation_journal.AblationJournal`): the same call after an interrupt
    resumes where it stopped, and the file can be read while it runs. ``threads``: torch threads (default: the
    policy of :mod:`~induction_probes.circuits.threads`)."""
    check_mode(mode)
    require_seed("the seed", seed)
    model = as_hooked(model)
    if not isinstance(repeated, RepeatedTokens):
        raise TypeError("ablate reads a RepeatedTokens (lm.repeated_random_tokens), not plain tokens")
    if isinstance(head_sets, (str, bytes)) or not head_sets:
        raise BadInput("give at least one head set, a list of (layer, head) pairs")
    for heads in head_sets:
        check_heads(heads, model.cfg.n_layers, lambda layer: heads_in_layer(model.cfg, layer))
    if mode != "zero" and reference is None:
        raise BadInput(f"{mode} ablation needs reference sequences")
    if reference is not None and reference.tokens.shape != repeated.tokens.shape:
        raise BadInput("the reference sequences must have the probed sequences' shape")
    settings = {"mode": mode, "seed": seed, "tokens": repeated, "reference": reference if mode != "zero" else None}
    with ExitStack() as stack:
        stack.enter_context(thread_policy(model, threads))
        log = None if journal is None else stack.enter_context(AblationJournal.open(journal, settings))
        bar = stack.enter_context(progress_bar(len(head_sets), f"{mode} ablation", progress, unit="head", leave=True))
        layers = {layer for heads in head_sets for layer, _ in heads}
        replacements = Replacements(model, mode, reference, seed, len(repeated.tokens), layers)
        baseline, *losses = ablated_losses(model, repeated, head_sets, replacements, bar, log)
    return baseline, [HeadAblation(list(heads), mode, loss, baseline) for heads, loss in zip(head_sets, losses)]
