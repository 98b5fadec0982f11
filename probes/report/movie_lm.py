"""The formation movie of a language model's checkpoint series (:mod:`~induction_probes.probes.report.movie_run`):
at each checkpoint shown, the probes of :func:`induction_probes.probes.lm.series.probe` on the same repeated
random tokens (scores and losses with their intervals over sequences), and the chosen heads' patterns on one
short repeated sequence, [BOS] + R + R, whose second half an induction head reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from induction_probes.circuits.defaults import LM_PROBE_SEQS
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.language_models import load_bridge
from induction_probes.circuits.interop.model_sources import Series, require_one_model
from induction_probes.circuits.names import head_label
from induction_probes.probes.ablation.head_ablation import parse_heads
from induction_probes.probes.attention.patterns import run_with_patterns
from induction_probes.probes.lm.protocols import repeated_random_tokens
from induction_probes.probes.lm.series import StepProbes, probe, token_texts
from induction_probes.probes.report.lm_views import quiet_transformers
from induction_probes.probes.views.charts import Curve
from induction_probes.probes.views.movie_page import (
    Chart,
    Frame,
    Movie,
    around,
    frames_note,
    subsample,
    threshold_phases,
)

if TYPE_CHECKING:
    from induction_probes.circuits.devices import Device
    from induction_probes.circuits.models.hooked_model import HookedModel

EXAMPLE_LENGTH = 10  # |R| of the sequence whose patterns are shown: [BOS] + 20 tokens


def lm_heads(result: StepProbes, text: str | None, model: HookedModel) -> list[tuple[int, int]]:
    """``text`` parsed against the model's shape, or the previous-token and induction heads the probes find at
    the last checkpoint (two of each at most; the best-scoring head where none is found)."""
    cfg = model.cfg
    if text is not None:
        return parse_heads(text, cfg.n_layers, lambda layer: cfg.n_heads)
    previous = result.previous_token_heads[:2] or [result.best("previous_token")[:2]]
    induction = result.induction_heads[:2] or [result.best("content")[:2]]
    return sorted(dict.fromkeys([*previous, *induction]))


def series_movie(
    series: Series, frames: int, heads: str | None, n_seqs, seed: int, device: Device = None, centre: int | None = None
) -> tuple[Movie, int]:
    """The movie of ``series`` (at most ``frames`` checkpoints, spread evenly, or those nearest ``centre``), and how
    many checkpoints it has."""
    quiet_transformers()  # the command's output is its page and one line: no loading bar per checkpoint
    steps = require_one_model(series).steps
    chosen_steps = subsample(steps, frames) if centre is None else around(steps, centre, frames)
    results, patterns = {}, {}
    model, example, tokens = None, None, None
    for step in chosen_steps:
        model = load_bridge(series.at(step), device or "cpu")
        if example is None:
            example = repeated_random_tokens(model, EXAMPLE_LENGTH, 1, seed).tokens
            tokens = token_texts(model, example[0].tolist())
        results[step] = probe(model, step, batch=n_seqs or LM_PROBE_SEQS, seed=seed)
        patterns[step] = run_with_patterns(model, example)[1]
    if model is None or tokens is None:
        raise BadInput(f"{series.name} has no checkpoint to show")
    last = results[chosen_steps[-1]]
    chosen = lm_heads(last, heads, model)
    charts, reached = lm_charts(chosen, chosen_steps, results)
    names, stretches = threshold_phases(chosen_steps, reached)
    frame_list = [
        Frame(step, f"step {step}", name, [patterns[step][layer][0, head].tolist() for layer, head in chosen])
        for step, name in zip(chosen_steps, names)
    ]
    shown = len(chosen_steps)
    notes = [
        f"Showing {shown} of the series' {len(series.steps)} checkpoints"
        + (", " + frames_note(centre, "spread evenly over them") if shown < len(series.steps) else "")
        + " (the page's size grows with each; --frames sets how many).",
        f"Scores and losses on {n_seqs or LM_PROBE_SEQS} repeated random sequences drawn with seed {seed} (Olsson "
        f"et al. 2022's protocol, docs/language-models.md); bands are 95 % intervals over those sequences. "
        f"Threshold {last.threshold}.",
    ]
    return Movie(
        f"{series.name}: formation movie",
        tokens,
        [head_label(*h) for h in chosen],
        frame_list,
        charts,
        stretches,
        notes,
    ), len(series.steps)


def lm_charts(chosen, steps: list[int], results: dict) -> tuple[list[Chart], list[list[str]]]:
    """The losses on the repeat and on its first copy, then per chosen head its content (induction) and
    previous-token scores with their bands; and per step the heads at or past the threshold on either."""
    losses = []
    for name, label in (("first_half", "first copy of R"), ("repeated_half", "repeat of R (induction loss)")):
        estimates = [results[s].loss.interval(name) for s in steps]
        losses.append(
            Curve(label, steps, [e.value for e in estimates], [e.low for e in estimates], [e.high for e in estimates])
        )
    charts = [Chart("loss on repeated random tokens", "loss (nats/token)", losses)]
    reached = [[] for _ in steps]
    threshold = results[steps[-1]].threshold
    for layer, head in chosen:
        curves = []
        for score, label in (("content", "induction (content-based)"), ("previous_token", "previous-token")):
            parts = [getattr(results[s].scores, score).at(layer, head) for s in steps]
            curves.append(Curve(label, steps, [p[0] for p in parts], [p[1] for p in parts], [p[2] for p in parts]))
            for i, (value, _, _) in enumerate(parts):
                if value >= threshold and head_label(layer, head) not in reached[i]:
                    reached[i].append(head_label(layer, head))
        charts.append(Chart(f"{head_label(layer, head)}: head scores", "score", curves, threshold))
    return charts, reached
