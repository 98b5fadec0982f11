"""Head scores and losses of a language model on the protocol's tokens, a chunk of sequences at a time, one
value per sequence so that every score carries its interval over sequences.

Any hooked model with ``blocks.{l}.attn.hook_pattern``, ``hook_z``, ``hook_resid_post``, ``ln_final``, ``W_O``
and ``W_U`` works: a ``TransformerBridge`` (what a path, a cache name or a Hugging Face model becomes,
:func:`~induction_probes.circuits.interop.language_models.as_hooked`) or one of our own models.

The scores of each head, per sequence (A is the head's attention pattern, i a query of the second R, L that
sequence's |R|), then averaged over sequences with a percentile-bootstrap interval (they are bounded):

- ``induction``: A[i, i − L + 1] on R + R, the token that followed the current token's first occurrence
  (Olsson et al.'s prefix matching);
- ``control``: the same offset on the control, R + R' (nothing to match: what position or chance gives);
- ``content``: induction − control, paired: the part of the score that needs the repeat;
- ``previous_token``: A[i, i − 1] over every query i ≥ 1 of R + R;
- ``positional_share`` at ``positional_offset`` d: on the control, the attention d tokens back, at the d ≥ 1
  where the head puts the most (the head's favourite distance whatever the tokens);
- ``copying`` (a t interval: logits are unbounded): Olsson et al.'s copying, measured on the direct path. At
  each query the head's output o = z W_O is removed from the final residual r, and the logit it added to the
  token it attends to most, minus the mean logit it added over the vocabulary, is
  (ln_final(r) − ln_final(r − o)) · (W_U[:, t] − mean_v W_U[:, v]): positive where the head raises the logit
  of what it looks at.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from induction_probes.circuits.devices import model_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.language_models import as_hooked
from induction_probes.probes.attention.patterns import (
    pattern_hook,
    previous_token_per_sequence,
    run_with_captures,
)
from induction_probes.probes.intervals import bootstrap_mean_interval, mean_interval
from induction_probes.probes.lm.losses import per_token_loss
from induction_probes.probes.lm.protocols import (
    TEXT_EARLY,
    TEXT_LATE,
    InductionLoss,
    RepeatedTokens,
    TextICL,
    bos_id,
    from_tokens,
    induction_loss,
    repeated_random_tokens,
)
from induction_probes.probes.lm.weights import weighted

if TYPE_CHECKING:
    from induction_probes.circuits.interop.language_models import ModelLike
    from induction_probes.circuits.models.hooked_model import HookedModel, WeightedModel

CHUNK_NUMBERS = 1 << 25  # numbers one chunk's patterns and logits may hold (128 MiB of float32)
BOUNDED_SCORES = ("previous_token", "induction", "control", "content", "positional_share")


@dataclass(frozen=True, eq=False)
class HeadEstimate:
    """One score of every head, [layer, head]: the mean over sequences and its interval."""

    value: Tensor
    low: Tensor
    high: Tensor

    @classmethod
    def bootstrap(cls, per_sequence: Float[Tensor, "batch layer head"]) -> HeadEstimate:
        return cls(*bootstrap_mean_interval(per_sequence))

    @classmethod
    def student_t(cls, per_sequence: Float[Tensor, "batch layer head"]) -> HeadEstimate:
        estimates = [[mean_interval(column) for column in layer.T] for layer in per_sequence.double().permute(1, 0, 2)]

        def as_tensor(part: str) -> Tensor:  # no interval (one sequence): NaN bounds, as the bootstrap gives
            values = [[getattr(e, part) for e in row] for row in estimates]
            return torch.tensor([[math.nan if v is None else v for v in row] for row in values], dtype=torch.float64)

        return cls(as_tensor("value"), as_tensor("low"), as_tensor("high"))

    def at(self, layer: int, head: int) -> tuple[float, float, float]:
        return self.value[layer, head].item(), self.low[layer, head].item(), self.high[layer, head].item()

    def to_json(self, layer: int, head: int) -> dict:
        """{value, low, high}: null bounds where there is no interval (one sequence: NaN bounds)."""
        value, low, high = self.at(layer, head)
        no_interval = math.isnan(low) or math.isnan(high)
        return {"value": value, "low": None if no_interval else low, "high": None if no_interval else high}


@dataclass(frozen=True, eq=False)
class HeadScores:
    """Every head's scores (module docstring), each a :class:`HeadEstimate` over sequences, and the induction
    score of every sequence (for paired comparisons on the same sequences, such as the composition check)."""

    previous_token: HeadEstimate
    induction: HeadEstimate
    control: HeadEstimate
    content: HeadEstimate
    copying: HeadEstimate
    positional_share: HeadEstimate
    positional_offset: Int[Tensor, "layer head"]
    induction_per_sequence: Float[Tensor, "batch layer head"]

    @property
    def shape(self) -> tuple[int, int]:
        layers, heads = self.induction.value.shape
        return layers, heads

    def heads(self) -> list[tuple[int, int]]:
        n_layers, n_heads = self.shape
        return [(layer, head) for layer in range(n_layers) for head in range(n_heads)]

    def ranked(self, score: str = "content") -> list[tuple[int, int, float]]:
        """(layer, head, score) from the highest score down."""
        values = getattr(self, score).value
        return sorted(((l, h, values[l, h].item()) for l, h in self.heads()), key=lambda item: -item[2])

    def above(self, threshold: float, score: str = "content") -> list[tuple[int, int]]:
        """The heads whose ``score`` reaches ``threshold``, highest first."""
        return [(layer, head) for layer, head, value in self.ranked(score) if value >= threshold]

    def to_json(self, layer: int, head: int) -> dict:
        """One head's scores, each {value, low, high}."""
        names = ("induction", "control", "content", "previous_token", "copying", "positional_share")
        scores = {name: getattr(self, name).to_json(layer, head) for name in names}
        return scores | {"positional_offset": int(self.positional_offset[layer, head])}


def chunk_size(model: HookedModel, n_pos: int) -> int:
    """Sequences per forward pass: one chunk's patterns (every layer) and logits within CHUNK_NUMBERS."""
    per_sequence = model.cfg.n_layers * model.cfg.n_heads * n_pos * n_pos + n_pos * model.cfg.d_vocab
    return max(1, CHUNK_NUMBERS // per_sequence)


def chunked(
    forward: Callable[[slice], Tensor], n: int, size: int, bar: tqdm | None = None
) -> Float[Tensor, "batch ..."]:
    """``forward(rows)`` on ``size`` sequences at a time, the results joined along the batch; ``bar`` (a
    progress bar) advances by each chunk's sequences."""
    parts = []
    for start in range(0, n, size):
        parts.append(forward(slice(start, start + size)))
        if bar is not None:
            bar.update(min(size, n - start))
    return torch.cat(parts)


def at_queries(pattern: Tensor, positions: Tensor, keys: Tensor) -> Float[Tensor, "batch query_pos head"]:
    """A[s, h, positions[s, q], keys[s, q]] for every sequence s, query q and head h."""
    rows = torch.arange(pattern.shape[0])[:, None]
    return pattern[rows, :, positions, keys]


def masked_mean(
    values: Float[Tensor, "batch query_pos ..."], valid: Bool[Tensor, "batch query_pos"]
) -> Float[Tensor, "batch ..."]:
    """The mean over each sequence's real queries (``valid``), for every trailing entry."""
    weights = valid.double().reshape(*valid.shape, *([1] * (values.dim() - 2)))
    return (values.double() * weights).sum(1) / weights.sum(1)


def offset_scores(pattern: Tensor, repeated: RepeatedTokens) -> Float[Tensor, "batch head"]:
    """Per sequence, the mean over the second R's queries of A[i, i − L + 1]."""
    positions, valid = repeated.second_copy()
    return masked_mean(at_queries(pattern, positions, positions - repeated.lengths[:, None] + 1), valid)


def distance_profile(pattern: Tensor, repeated: RepeatedTokens) -> Float[Tensor, "batch head distance"]:
    """Per sequence, the mean over the second R's queries of A[i, i − d], for d = 0 .. L_max."""
    positions, valid = repeated.second_copy()
    distances = torch.arange(repeated.length_range[1] + 1)
    keys = positions[..., None] - distances  # [batch, query, distance], never below 0 (i >= L_max)
    rows = torch.arange(pattern.shape[0])[:, None, None]
    values = pattern[rows, :, positions[..., None].expand_as(keys), keys]  # [batch, query, distance, head]
    return masked_mean(values, valid).transpose(1, 2)


def unembedding(model: WeightedModel) -> tuple[Float[Tensor, "d_model d_vocab"], Float[Tensor, " d_model"]]:
    """W_U and its mean over the vocabulary, read once per pass (a bridge builds W_U anew at each reading, and
    GPT-2's is 38 M numbers)."""
    W_U = model.W_U.detach().to(model_device(model))
    return W_U, W_U.mean(1)


def copying_per_sequence(
    model: WeightedModel,
    layer: int,
    z: Tensor,
    resid: Tensor,
    pattern: Tensor,
    tokens: Tensor,
    repeated: RepeatedTokens,
    unembed: tuple[Tensor, Tensor],
) -> Float[Tensor, "batch head"]:
    """Per sequence, the direct-path logit each head of ``layer`` adds to the token it attends to most, minus
    the mean it adds over the vocabulary, averaged over the second R's queries (module docstring)."""
    positions, valid = repeated.second_copy()
    rows = torch.arange(tokens.shape[0])[:, None]
    device, dtype = model_device(model), z.dtype
    W_O = model.blocks[layer].attn.W_O.detach().to(device)  # [head, d_head, d_model]
    W_U, mean_logit = unembed
    r = resid[rows, positions].to(device)  # [batch, query, d_model]
    with torch.no_grad():
        normed = model.ln_final(r)
        scores = []
        for head in range(W_O.shape[0]):
            out = z[rows, positions, head].to(device, dtype) @ W_O[head]
            attended = pattern[rows, head, positions].argmax(-1)  # [batch, query]: the key it looks at most
            target = W_U.T[tokens[rows, attended].to(device)] - mean_logit  # a logit less the mean logit
            scores.append(((normed - model.ln_final(r - out)) * target).sum(-1).cpu())
    return masked_mean(torch.stack(scores, -1), valid)


def patterns_and_more(
    model: HookedModel, tokens: Tensor, extra: list[str], with_logits: bool = True
) -> tuple[Tensor | None, list[Tensor], dict[str, Tensor]]:
    """Logits (None without ``with_logits``: the pass stops at the last pattern), every layer's pattern and the
    activations named in ``extra``, from one pass."""
    names = [pattern_hook(layer) for layer in range(model.cfg.n_layers)]
    logits, captured = run_with_captures(model, tokens, names + extra, output=with_logits)
    return logits, [captured[name] for name in names], captured


def repeat_pass(model: HookedModel, repeated: RepeatedTokens, rows: slice) -> Float[Tensor, "batch ..."]:
    """Per sequence of ``rows``: [loss at every token | previous-token, induction, copying per layer and head]. The
    copying score reads the model's weights by TransformerLens's names: a model without them is refused
    (:func:`.weights.weighted`), once its hook points are known to be there."""
    part = repeated.rows(rows)
    last = model.cfg.n_layers - 1
    z_names = [f"blocks.{layer}.attn.hook_z" for layer in range(model.cfg.n_layers)]
    logits, patterns, captured = patterns_and_more(model, part.tokens, z_names + [f"blocks.{last}.hook_resid_post"])
    assert logits is not None  # asked for: patterns_and_more gives None only without with_logits
    resid, weights = captured[f"blocks.{last}.hook_resid_post"], weighted(model, "the copying score")
    per_layer, unembed = [], unembedding(weights)
    for layer, pattern in enumerate(patterns):
        z = captured[z_names[layer]]
        copying = copying_per_sequence(weights, layer, z, resid, pattern, part.tokens, part, unembed)
        per_layer.append(
            torch.stack([previous_token_per_sequence(pattern).double(), offset_scores(pattern, part), copying], -1)
        )
    heads = torch.stack(per_layer, 1)  # [batch, layer, head, score]
    return torch.cat([per_token_loss(logits, part.tokens), heads.flatten(1)], 1)


def control_pass(model: HookedModel, repeated: RepeatedTokens, rows: slice) -> Float[Tensor, "batch layer head ..."]:
    """Per sequence of ``rows`` of the control: [layer, head, 1 + distance]: the induction offset's attention,
    then the distance profile."""
    part = repeated.rows(rows)
    assert part.control is not None  # evaluate, the one caller, refuses tokens without a control first
    _, patterns, _ = patterns_and_more(model, part.control, [], with_logits=False)
    per_layer = [torch.cat([offset_scores(p, part)[..., None], distance_profile(p, part)], -1) for p in patterns]
    return torch.stack(per_layer, 1)


def evaluate(
    model: HookedModel, repeated: RepeatedTokens | Int[Tensor, "batch pos"], bar: tqdm | None = None
) -> tuple[HeadScores, InductionLoss]:
    """Head scores (with their intervals) and induction losses on ``repeated``, a chunk at a time (plain tokens
    as :func:`head_scores` takes them); ``bar`` advances by the sequences through each of the two passes."""
    repeated = repeated if isinstance(repeated, RepeatedTokens) else from_tokens(repeated)
    if repeated.control is None:
        raise BadInput("the content-based score needs a control: give two or more sequences")
    n, n_pos = repeated.tokens.shape
    check_ids(model, repeated.tokens)
    size = chunk_size(model, n_pos)
    repeats = chunked(lambda rows: repeat_pass(model, repeated, rows), n, size, bar)
    controls = chunked(lambda rows: control_pass(model, repeated, rows), n, size, bar)
    loss = induction_loss(repeats[:, : n_pos - 1], repeated)
    heads = repeats[:, n_pos - 1 :].reshape(n, model.cfg.n_layers, model.cfg.n_heads, 3)
    previous, induction, copying = heads.unbind(-1)
    control, profile = controls[..., 0], controls[..., 2:]  # distances 1 .. L_max (0 is the query itself)
    offset = profile.mean(0).argmax(-1)  # [layer, head]
    share = profile.gather(-1, offset.expand(n, -1, -1)[..., None]).squeeze(-1)
    scores = HeadScores(
        previous_token=HeadEstimate.bootstrap(previous),
        induction=HeadEstimate.bootstrap(induction),
        control=HeadEstimate.bootstrap(control),
        content=HeadEstimate.bootstrap(induction - control),
        copying=HeadEstimate.student_t(copying),
        positional_share=HeadEstimate.bootstrap(share),
        positional_offset=offset + 1,
        induction_per_sequence=induction,
    )
    return scores, loss


def head_scores(
    model: ModelLike,
    tokens: Int[Tensor, "batch pos"] | RepeatedTokens | list[list[int]] | None = None,
) -> HeadScores:
    """Every head's scores (module docstring), each with its interval over sequences.

    ``model``: a model directory or a name in the local Hugging Face cache, a Hugging Face model, a
    ``TransformerBridge`` or a hooked model. ``tokens``: sequences [batch, 2L] (or one [2L], given a batch
    dimension) whose second half repeats the first, a :class:`RepeatedTokens` (which may carry a BOS prefix
    and lengths that vary), or None for :func:`~induction_probes.probes.lm.protocols.repeated_random_tokens`'s
    defaults."""
    model = as_hooked(model)
    if tokens is None:
        tokens = repeated_random_tokens(model)
    elif not isinstance(tokens, (Tensor, RepeatedTokens)):  # nested lists of ids, as a notebook writes them
        tokens = torch.as_tensor(tokens)
    return evaluate(model, tokens)[0]


def check_ids(model: HookedModel, tokens: Tensor) -> None:
    if tokens.shape[1] > model.cfg.n_ctx:
        raise BadInput(f"{tokens.shape[1]} positions exceed the model's context of {model.cfg.n_ctx}")
    if tokens.numel() and not 0 <= int(tokens.min()) <= int(tokens.max()) < model.cfg.d_vocab:
        raise BadInput(f"token ids must lie in 0..{model.cfg.d_vocab - 1}, the model's vocabulary")


def text_windows(model: HookedModel, text: str, late: int) -> Int[Tensor, "batch pos"]:
    """The text's tokens in consecutive windows of ``late + 1`` tokens, each opened by the BOS token when
    the model has one (the remainder of the text is dropped)."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise BadInput("this model has no tokenizer: the ICL score on a text needs one")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    start = bos_id(model)
    width = late + 1 - (start is not None)
    if late + 1 > model.cfg.n_ctx:
        raise BadInput(f"the ICL score's late token {late} lies beyond the model's context of {model.cfg.n_ctx}")
    n_windows = len(ids) // width
    if n_windows == 0:
        raise BadInput(f"the text has {len(ids)} tokens; the ICL score at token {late} needs {width}")
    windows = torch.tensor(ids[: n_windows * width], dtype=torch.long).view(n_windows, width)
    if start is not None:
        windows = torch.cat([torch.full((n_windows, 1), start, dtype=torch.long), windows], dim=1)
    return windows


def text_icl_score(
    model: ModelLike,
    text: str,
    early: int = TEXT_EARLY,
    late: int = TEXT_LATE,
) -> TextICL:
    """Loss at token ``late`` minus loss at token ``early`` (0-based, counting a BOS), averaged over the
    text's windows of ``late + 1`` tokens (Olsson et al.: tokens 500 and 50), with its Student-t interval over
    the windows."""
    if not 1 <= early < late:
        raise BadInput(f"the ICL score needs 1 <= early < late, got early {early} and late {late}")
    model = as_hooked(model)
    windows = text_windows(model, text, late).to(model_device(model))

    def losses(rows: slice) -> Tensor:
        with torch.no_grad():
            return per_token_loss(model(windows[rows]), windows[rows]).cpu()

    per_window = chunked(losses, windows.shape[0], chunk_size(model, windows.shape[1]))
    estimate = mean_interval(per_window[:, late - 1] - per_window[:, early - 1])
    return TextICL(
        estimate.value,
        per_window[:, early - 1].mean().item(),
        per_window[:, late - 1].mean().item(),
        windows.shape[0],
        early,
        late,
        estimate.low,
        estimate.high,
    )
