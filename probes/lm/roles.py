"""What each head of a language model is, from its scores (:mod:`.measure`), and whether a reported induction
head is part of a circuit.

The rule, with ``threshold`` t (default 0.4) on scores that are attention shares in [0, 1]:

- **induction**: the content-based score (repeat − control at the induction offset, paired per sequence)
  reaches t and its interval's lower end is above 0. A head that looks L − 1 back by position scores the same
  on the control as on the repeat, so its content-based score is about 0 whatever |R| is.
- **positional, not induction**: not induction, yet its score on the repeat reaches t: that much of its
  attention lands on the induction offset without the repeat (the control's score says how much).
- **positional** (shown as ``positional(d)``): on the control it puts at least t of its attention on one
  distance d ≥ 2, whatever the tokens.
- **previous-token**: its previous-token score reaches t.

A head holds every label whose test it passes, so a mixture shows both parts: ``induction + positional(5)`` for
a head that spends half its attention on the induction target and, whatever the tokens, most of the rest five
tokens back (a previous-token head is positional at d = 1, which is not repeated).

Evidence that an induction head is a circuit, beside its copying score: **K-composition**, checked
causally (the ablation-conditioned induction score of ARENA's induction-head exercises): the induction
head's score on the repeat with each earlier previous-token head zero-ablated, against its clean score on
the same sequences. A head that reads "which token came before" from a previous-token head loses its
induction score when that head is removed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from induction_probes.circuits.names import head_label, heads_label
from induction_probes.probes.ablation.head_ablation import ablation_hooks
from induction_probes.probes.attention.patterns import pattern_hook, run_with_captures
from induction_probes.probes.intervals import bootstrap_mean_interval
from induction_probes.probes.lm.measure import HeadScores, chunk_size, chunked, offset_scores
from induction_probes.probes.lm.protocols import RepeatedTokens

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

THRESHOLD = 0.4


def interval_text(value: float, low: float | None, high: float | None) -> str:
    """A value and its interval; "no interval" where there is none (one sequence: the bounds are None or NaN)."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return f"{value:.2f} (no interval)"
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


@dataclass(frozen=True)
class HeadRole:
    """A head's labels (module docstring) and, for each, why."""

    layer: int
    head: int
    labels: tuple[str, ...]
    reasons: tuple[str, ...]
    offset: int  # the distance back where the control's attention peaks: the d of positional(d)

    @property
    def name(self) -> str:
        return head_label(self.layer, self.head)

    @property
    def text(self) -> str:
        """The labels as a table shows them: ``induction + positional(5)``, or ``-``."""
        shown = [f"positional({self.offset})" if label == "positional" else label for label in self.labels]
        return " + ".join(shown) or "-"

    def to_json(self) -> dict:
        return {"labels": list(self.labels), "reasons": list(self.reasons)}


def head_role(scores: HeadScores, layer: int, head: int, threshold: float = THRESHOLD) -> HeadRole:
    """The labels of one head under the module's rule, each with its reason in words."""
    content = scores.content.at(layer, head)
    repeat, control = scores.induction.value[layer, head].item(), scores.control.value[layer, head].item()
    offset, share = int(scores.positional_offset[layer, head]), scores.positional_share.value[layer, head].item()
    previous = scores.previous_token.at(layer, head)
    found: list[tuple[str, str]] = []
    if content[0] >= threshold and content[1] > 0:
        found.append(("induction", f"content-based score {interval_text(*content)} >= {threshold}"))
    elif repeat >= threshold:
        found.append(
            (
                "positional, not induction",
                f"attends to the induction offset as much without the repeat: {repeat:.2f} on R + R, "
                f"{control:.2f} on non-repeated tokens at the same offset",
            )
        )
    if offset >= 2 and share >= threshold:
        found.append(("positional", f"puts {share:.2f} of its attention {offset} tokens back whatever the tokens"))
    if previous[0] >= threshold:
        found.append(("previous-token", f"previous-token score {interval_text(*previous)} >= {threshold}"))
    return HeadRole(layer, head, tuple(name for name, _ in found), tuple(reason for _, reason in found), offset)


def head_roles(scores: HeadScores, threshold: float = THRESHOLD) -> list[HeadRole]:
    return [head_role(scores, layer, head, threshold) for layer, head in scores.heads()]


def heads_labelled(roles: list[HeadRole], name: str, scores: HeadScores, score: str) -> list[tuple[int, int]]:
    """The heads holding label ``name``, by ``score`` from the highest down."""
    values = getattr(scores, score).value
    held = [(r.layer, r.head) for r in roles if name in r.labels]
    return sorted(held, key=lambda lh: -values[lh].item())


@dataclass(frozen=True)
class Composition:
    """Induction head ``reader``'s score on the repeat, clean and with ``writer`` (an earlier previous-token
    head) zero-ablated, and the drop (clean − ablated, paired per sequence) with its interval."""

    reader: tuple[int, int]
    writer: tuple[int, int]
    clean: float
    ablated: float
    drop: tuple[float, float, float]

    @property
    def depends(self) -> bool:
        """The drop's interval lies above 0: the reader needs the writer."""
        return self.drop[1] > 0

    def to_json(self) -> dict:
        value, low, high = self.drop
        return {
            "induction_head": head_label(*self.reader),
            "previous_token_head": head_label(*self.writer),
            "clean": self.clean,
            "ablated": self.ablated,
            "drop": {"value": value, "low": low, "high": high},
            "depends": self.depends,
        }


def induction_with_ablated(
    model: HookedModel, repeated: RepeatedTokens, writer: tuple[int, int], layer: int, bar: tqdm | None = None
) -> Float[Tensor, "batch head"]:
    """Per sequence and head of ``layer``, the induction score on the repeat with ``writer`` zero-ablated."""
    hooks = ablation_hooks(model, [writer], "zero")
    name = pattern_hook(layer)

    def scores(rows: slice) -> Tensor:
        part = repeated.rows(rows)
        _, captured = run_with_captures(model, part.tokens, [name], hooks, output=False)
        return offset_scores(captured[name], part)

    return chunked(scores, repeated.tokens.shape[0], chunk_size(model, repeated.tokens.shape[1]), bar)


def compositions(
    model: HookedModel,
    repeated: RepeatedTokens,
    scores: HeadScores,
    induction: list[tuple[int, int]],
    previous: list[tuple[int, int]],
    bar: tqdm | None = None,
) -> list[Composition]:
    """Each induction head against each previous-token head of an earlier layer (module docstring), on the
    sequences ``scores`` were measured on; ``bar`` grows by the passes this takes and advances through them."""
    pairs = [(writer, layer) for writer in previous for layer in sorted({h[0] for h in induction if h[0] > writer[0]})]
    if bar is not None and pairs:
        bar.total += len(pairs) * repeated.tokens.shape[0]
        bar.refresh()
    results = []
    for writer in previous:
        readers = [h for h in induction if h[0] > writer[0]]
        by_layer = {
            layer: induction_with_ablated(model, repeated, writer, layer, bar) for layer in {h[0] for h in readers}
        }
        for reader in readers:
            clean = scores.induction_per_sequence[:, reader[0], reader[1]]
            ablated = by_layer[reader[0]][:, reader[1]]
            value, low, high = bootstrap_mean_interval(clean - ablated)
            results.append(
                Composition(
                    reader, writer, clean.mean().item(), ablated.mean().item(), (value.item(), low.item(), high.item())
                )
            )
    return results


def heads_text(heads: list[tuple[int, int]]) -> str:
    return heads_label(heads, ", ") or "none"
