"""``induction-probes movie``: how a circuit forms, as one offline page
(:mod:`~induction_probes.probes.views.movie_page`) for a run of ours or a language model's checkpoint series
(:mod:`~induction_probes.probes.report.movie_lm`).

For a run, at each checkpoint shown: the chosen heads' patterns on one probe sequence (an ICL-MC run's chain
states, a Gaussian-task run's positions); each chosen head's score over the probe set with its interval over
sequences where the probe has one, against its threshold; the loss over every checkpoint (its evaluation set's
mean: no interval is recorded); and the phase: for ICL-MC the strategy closest to the model (its last-token KL,
:func:`~induction_probes.circuits.tasks.markov.strategies.closest_strategy`) at every checkpoint, for other tasks
which chosen heads have reached their threshold."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from induction_probes.circuits.defaults import MOVIE_FRAMES, PAGE_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.model_sources import ModelSource, Series, find_source
from induction_probes.circuits.names import head_label
from induction_probes.circuits.runs.reader import Run, RunOrPath
from induction_probes.circuits.tasks.gaussian.gaussian_task import GaussianTask
from induction_probes.circuits.tasks.markov.strategies import closest_strategy
from induction_probes.probes.ablation.head_ablation import heads_in_layer, parse_heads
from induction_probes.probes.attention.patterns import chance_scores
from induction_probes.probes.attention.probe_registry import attention_probes
from induction_probes.probes.attention.scores import score_intervals
from induction_probes.probes.behaviour.icl_behaviour import strategy_phases
from induction_probes.probes.circuit.edges import THRESHOLD
from induction_probes.probes.report.movie_edges import edge_rows, edges_chart, frame_edges
from induction_probes.probes.report.movie_lm import series_movie
from induction_probes.probes.report.run_views import probed_run
from induction_probes.probes.run_level.attention_example import example_sequence, head_patterns
from induction_probes.probes.run_level.checkpoint_probes import probe_gaussian
from induction_probes.probes.run_level.run_probes import probe_calibration
from induction_probes.probes.views.charts import Curve
from induction_probes.probes.views.movie_page import (
    Chart,
    Frame,
    Movie,
    around,
    by_change,
    frames_note,
    movie_folder,
    subsample,
    threshold_phases,
    write_movie_page,
)

if TYPE_CHECKING:
    from induction_probes.circuits.devices import Device

MAX_FRAMES = 200
EDGES_NOTE = [
    "Below the patterns: each edge's share of the in-context gap at the step shown, by path patching on the same "
    f"sequences (each context from another chain; the circuit's edges, at {THRESHOLD:g} or more, in bold)."
]
SCORE_NAMES = {"previous_token": "previous-token score", "bigram_matching": "bigram-matching score"}


@dataclass(frozen=True)
class MovieFile:
    path: Path
    shown: list[int]
    total: int
    heads: list[str]

    def summary(self) -> str:
        size = self.path.stat().st_size / 1e6
        return (
            f"movie: {self.path} ({len(self.shown)} of {self.total} checkpoints, heads {', '.join(self.heads)}, "
            f"{size:.1f} MB, offline)"
        )


def write_movie(
    source: RunOrPath | Series,
    out: str | os.PathLike[str],
    frames: int = MOVIE_FRAMES,
    heads: str | None = None,
    n_seqs: int | None = None,
    seed: int = PROBE_SEED,
    device: Device = None,
    around: int | None = None,
) -> MovieFile:
    """``out/movie.html`` for a run of ours (a Run, its folder or a shipped name) or a language model's checkpoint
    series (a folder of ``step_N/`` checkpoints or a cache name with ``stepN`` revisions): at most ``frames``
    checkpoints; ``heads`` as ``L0H0,L1H0`` (default: the previous-token and induction heads the
    probes find at the last checkpoint); ``n_seqs`` probe sequences drawn with ``seed``; ``around``: a step whose
    neighbourhood the frames show (a run's frames are otherwise spread by the loss's change)."""
    if not isinstance(frames, int) or not 2 <= frames <= MAX_FRAMES:
        raise BadInput(f"frames must be an integer from 2 to {MAX_FRAMES}, got {frames!r}")
    out = movie_folder(out)  # refused before any checkpoint is probed
    # a run, a series, a language model's source, or else a run's folder or shipped name
    found = source if isinstance(source, (Run, Series)) else find_source(os.fspath(source)) or source
    if isinstance(found, ModelSource):
        raise BadInput(f"{found.describe()} is one model, not a checkpoint series: a movie needs checkpoints")
    if isinstance(found, Series):
        movie, total = series_movie(found, frames, heads, n_seqs, seed, device, around)
    else:
        movie, total = run_movie(probed_run(found), frames, heads, n_seqs or PAGE_SEQS, seed, device, around)
    path = write_movie_page(movie, out)
    return MovieFile(path, [f.step for f in movie.frames], total, movie.heads)


def chosen_heads(run: Run, text: str | None, last: dict) -> list[tuple[int, int]]:
    """``text`` parsed against the run's shape, or the layer-0 head with the highest previous-token score and the
    last layer's head with the highest induction score (``last``: per score name, per layer, [heads])."""
    if text is not None:
        return given_heads(run, text)
    induction = "induction" if "induction" in last else "bigram_matching"
    first = (0, int(max(range(len(last["previous_token"][0])), key=lambda h: last["previous_token"][0][h])))
    top = len(last[induction]) - 1
    second = (top, int(max(range(len(last[induction][top])), key=lambda h: last[induction][top][h])))
    return list(dict.fromkeys([first, second]))


def given_heads(run: Run, text: str) -> list[tuple[int, int]]:
    cfg = run.model_config
    return parse_heads(text, cfg.n_layers, lambda layer: heads_in_layer(cfg, layer))


def checkpoint_scores(run: Run, step: int, probe_set, device: Device) -> dict:
    """Per score: per layer, [heads] values and (low, high) lists (None where the probe gives no interval)."""
    if isinstance(run.task, GaussianTask):
        result = probe_gaussian(run, step, device=device, probe_set=probe_set)
        induction = [[None] * len(result.previous_token[0]), result.induction]  # layer 1's heads only
        return {"previous_token": (result.previous_token, None), "induction": (induction, None)}
    _, scores, _ = attention_probes(run.load(step=step, device=device), probe_set.inputs)
    found = {}
    for name in ("previous_token", "bigram_matching"):
        bounds = [(low.tolist(), high.tolist()) for low, high in score_intervals(scores[name])]
        found[name] = ([layer.tolist() for layer in scores[name].values], bounds)
    return found


def run_movie(
    run: Run, frames: int, heads: str | None, n_seqs: int, seed: int, device: Device = None, around: int | None = None
) -> tuple[Movie, int]:
    """The movie of a run's checkpoints (at most ``frames``), and how many checkpoints the run has."""
    metrics = {m["step"]: m for m in run.metrics()}
    steps = frame_steps(run.steps, frames, around, [metrics.get(s, {}).get("eval_loss") for s in run.steps])
    if heads is not None:
        given_heads(run, heads)  # refused before any checkpoint is probed
    probe_set = run.task.eval_set(n_seqs, seed)
    example, tokens = example_sequence(run, probe_set.inputs)
    scores = {step: checkpoint_scores(run, step, probe_set, device) for step in steps}
    last = {name: values for name, (values, _) in scores[steps[-1]].items()}
    chosen = chosen_heads(run, heads, last)
    patterns = {step: head_patterns(run, step, example, chosen, device)[1] for step in steps}
    shown = {"previous_token"} | {name for name in scores[steps[-1]] if name != "previous_token"}
    thresholds = {k: v for k, v in score_thresholds(run, probe_set, scores[steps[0]], chosen).items() if k in shown}
    charts, reached = head_charts(chosen, steps, scores, thresholds)
    charts.append(loss_chart(run))
    edges = frame_edges(run, steps, probe_set, device)
    charts += [edges_chart(edges, steps)] if edges else []
    if "last_token_kl" in metrics[steps[-1]]:
        phase = {step: closest_strategy(metrics[step]["last_token_kl"]) + " closest" for step in steps}
        stretches = [(p.strategy, p.first_step, p.last_step) for p in strategy_phases(list(metrics.values()))]
    else:
        names, stretches = threshold_phases(steps, reached)
        phase = dict(zip(steps, names))
    frame_list = [Frame(s, step_label(metrics[s]), phase[s], patterns[s], edge_rows(edges.get(s))) for s in steps]
    labels = [head_label(*h) for h in chosen]
    notes = movie_notes(run, steps, n_seqs, seed, thresholds, around) + (EDGES_NOTE if edges else [])
    return Movie(f"{run.path.name}: formation movie", tokens, labels, frame_list, charts, stretches, notes), len(
        run.steps
    )


def frame_steps(steps: list[int], frames: int, centre: int | None, losses: list[float | None]) -> list[int]:
    """The checkpoints shown: those nearest ``centre`` where one is given, else spread by the loss's change (evenly
    where a checkpoint's loss is missing or not a number)."""
    if centre is not None:
        return around(steps, centre, frames)
    if any(loss is None or not math.isfinite(loss) for loss in losses):
        return subsample(steps, frames)
    return by_change(steps, [float(loss) for loss in losses if loss is not None], frames)


def score_thresholds(run: Run, probe_set, first: dict, chosen) -> dict[str, float]:
    """Each score's threshold: halfway from chance (attention spread evenly over the keys, on the probe set) to 1
    for the token probes; for a Gaussian-task run's, which have no chance level, halfway from the chosen head's
    value at the first checkpoint shown (``first``: per score, its values and bounds) to 1."""
    if not isinstance(run.task, GaussianTask):
        return {name: m.threshold for name, m in probe_calibration(chance_scores(probe_set.inputs)).items()}
    found = {}
    for layer, head in chosen:
        name = "previous_token" if layer == 0 else "induction"
        found.setdefault(name, (first[name][0][layer][head] + 1) / 2)
    return found


def head_charts(chosen, steps: list[int], scores: dict, thresholds: dict) -> tuple[list[Chart], list[list[str]]]:
    """One chart per chosen head: its score (previous-token in layer 0, induction above) with its band; and per
    step, the heads at or past their threshold."""
    charts, reached = [], [[] for _ in steps]
    for layer, head in chosen:
        name = "previous_token" if layer == 0 else next(n for n in scores[steps[0]] if n != "previous_token")
        values = [scores[s][name][0][layer][head] for s in steps]
        bounds = [scores[s][name][1] for s in steps]
        low = None if bounds[0] is None else [b[layer][0][head] for b in bounds]
        high = None if bounds[0] is None else [b[layer][1][head] for b in bounds]
        label = head_label(layer, head)
        title = f"{label}: {SCORE_NAMES.get(name, name.replace('_', ' ') + ' score')}"
        charts.append(Chart(title, "score", [Curve(label, steps, values, low, high)], thresholds.get(name)))
        for i, value in enumerate(values):
            if value is not None and name in thresholds and value >= thresholds[name]:
                reached[i].append(label)
    return charts, reached


def loss_chart(run: Run) -> Chart:
    metrics = run.metrics()
    steps = [m["step"] for m in metrics]
    curve = Curve(
        "evaluation loss (one fixed evaluation set; no interval recorded)", steps, [m["eval_loss"] for m in metrics]
    )
    return Chart("loss at every checkpoint", "loss", [curve])


def step_label(metric: dict) -> str:
    return f"step {metric['step']} ({metric['sequences_seen']:,} sequences)"


def movie_notes(
    run: Run, steps: list[int], n_seqs: int, seed: int, thresholds: dict, centre: int | None = None
) -> list[str]:
    total = len(run.steps)
    how = frames_note(
        centre, "half spread evenly over them, half by how much the loss changes, so that a transition gets its frames"
    )
    shown = (
        f"{len(steps)} of the run's {total} checkpoints: {how}" if len(steps) < total else f"all {total} checkpoints"
    )
    levels = ", ".join(f"{name.replace('_', '-')} {value:.3f}" for name, value in thresholds.items())
    gaussian = isinstance(run.task, GaussianTask)
    bands = "no bands: these scores have no interval" if gaussian else "bands are 95 % intervals over those sequences"
    how = "from the first checkpoint's value" if gaussian else "from chance"
    return [
        f"Showing {shown} (the page's size grows with each; --frames sets how many).",
        f"Scores on {n_seqs} probe sequences drawn with seed {seed}; {bands}. Thresholds, halfway {how} to 1: "
        f"{levels}.",
    ]
