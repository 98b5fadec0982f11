"""The formation movie as one offline HTML file: a step slider (and a play button) over the checkpoints shown,
driving three views together: the chosen heads' attention patterns at that checkpoint (CircuitsVis's explorer),
the loss and head-score curves with their bands and a marker at the step, and the phase the run is in.

Everything is inlined: CircuitsVis's bundle, movie.js (the page's only hand-written JavaScript), the frames as
JSON and the charts as SVG, so the page fetches nothing. :func:`movie_html` takes plain numbers (a
:class:`Movie`); the report layer (:mod:`induction_probes.probes.report.movie_run`) gathers them from a run or a
language model's checkpoint series."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.untrusted import write_atomic
from induction_probes.probes.views.charts import Axis, Curve, line_chart, phase_strip
from induction_probes.probes.views.explorer import circuitsvis_script, inline_script, rounded, script_json

SCRIPT = Path(__file__).with_name("movie.js")
STYLE = """
body { font-family: sans-serif; max-width: 1150px; margin: 1.5em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } .note { color: #555; font-size: 0.9em; margin: 0.2em 0; }
#controls { position: sticky; top: 0; background: #fff; padding: 0.6em 0; z-index: 2; border-bottom: 1px solid #ddd; }
#controls { display: flex; align-items: center; gap: 0.8em; white-space: nowrap; }
#step-slider { flex: 1 1 auto; min-width: 200px; } #step-label { font-weight: bold; }
#phase-label { padding: 0.1em 0.5em; background: #eef; border-radius: 4px; }
#views { display: flex; flex-wrap: wrap; gap: 1.5em; } #movie-heads-box { flex: 1 1 480px; min-width: 420px; }
#charts { flex: 1 1 540px; } .chart-box { margin: 0 0 0.8em 0; } .chart-box figcaption { font-weight: bold; }
svg.chart text { font-size: 11px; fill: #333; } ul.legend { list-style: none; padding: 0; margin: 0.2em 0 0 0; }
ul.legend li { display: inline-block; margin-right: 1.2em; font-size: 12px; }
.swatch { display: inline-block; width: 22px; margin-right: 0.35em; vertical-align: middle; }
#movie-edges table { border-collapse: collapse; font-size: 13px; margin-top: 0.8em; }
#movie-edges td, #movie-edges th { padding: 0.1em 0.6em; text-align: right; }
#movie-edges td:first-child, #movie-edges th:first-child { text-align: left; }
#movie-edges tr.circuit { font-weight: bold; }
"""


@dataclass(frozen=True)
class Frame:
    """One checkpoint shown: its step, the slider's label, the phase at that step, [head, query, key], and where
    the circuit was patched, each edge's share of the in-context gap."""

    step: int
    label: str
    phase: str
    patterns: list
    edges: list[dict] = field(default_factory=list)  # each: edge, value, low, high, circuit (path patching)


@dataclass(frozen=True)
class Chart:
    title: str
    y_label: str
    curves: list[Curve]
    threshold: float | None = None


@dataclass(frozen=True)
class Movie:
    """What a movie page shows. ``phases``: (name, first step, last step), in order, over the whole run."""

    title: str
    tokens: list[str]
    heads: list[str]
    frames: list[Frame]
    charts: list[Chart]
    phases: list[tuple[str, int, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def movie_axis(movie: Movie) -> Axis:
    steps = [f.step for f in movie.frames] + [s for c in movie.charts for curve in c.curves for s in curve.steps]
    steps += [step for _, first, last in movie.phases for step in (first, last)]
    return Axis(min(steps), max(steps))


def frames_json(movie: Movie) -> str:
    frames = [
        {"step": f.step, "label": f.label, "phase": f.phase, "patterns": rounded(f.patterns), "edges": f.edges}
        for f in movie.frames
    ]
    return script_json({"tokens": movie.tokens, "heads": movie.heads, "frames": frames})


GENERATOR = '<meta name="generator" content="induction-probes movie">'  # how a rerun knows its own page


def movie_html(movie: Movie) -> str:
    """The page, self-contained: nothing in it names a file or an address to fetch."""
    if not movie.frames:
        raise BadInput("a movie needs at least one checkpoint to show")
    axis = movie_axis(movie)
    charts = [line_chart(c.title, axis, c.curves, c.y_label, c.threshold) for c in movie.charts]
    if movie.phases:
        charts.insert(0, phase_strip("phase over training", axis, movie.phases))
    last = len(movie.frames) - 1
    controls = (
        '<div id="controls"><button id="play" type="button">play</button> '
        f'<input id="step-slider" type="range" min="0" max="{last}" value="{last}" step="1" '
        'aria-label="checkpoint shown"><span id="step-label"></span>'
        '<span>phase: <span id="phase-label"></span></span></div>'
    )
    notes = "".join(f'<p class="note">{html.escape(note, quote=False)}</p>' for note in movie.notes)
    heads = (
        '<div id="movie-heads-box"><p class="note">Attention of the chosen heads at the step shown: hover or click '
        "a head to enlarge its pattern, hover a token to see where it looks.</p>"
        '<div id="movie-heads"></div><div id="movie-edges"></div></div>'
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            f'<html lang="en"><head><meta charset="utf-8">{GENERATOR}',
            f"<title>{html.escape(movie.title)}</title><style>{STYLE}</style></head><body>",
            f"<h1>{html.escape(movie.title)}</h1>{notes}{controls}",
            f'<div id="views">{heads}<div id="charts">{"".join(charts)}</div></div>',
            inline_script(frames_json(movie), type="application/json", id="movie-data"),
            inline_script(circuitsvis_script()),
            inline_script(SCRIPT.read_text(encoding="utf-8")),
            "</body></html>",
        ]
    )


def subsample(steps: list[int], most: int) -> list[int]:
    """At most ``most`` of ``steps``, spread evenly over their order, the first and the last always among them."""
    if most < 2:
        raise BadInput(f"a movie shows at least 2 checkpoints, got frames={most!r}")
    return spread(steps, most)


def by_change(steps: list[int], values: list[float], most: int) -> list[int]:
    """At most ``most`` of ``steps``, spread by how much ``values`` (one per step: the loss) change between them:
    half the frames evenly over the checkpoints, half over the change, so that a transition gets frames in
    proportion to what happens there, not to how many checkpoints it spans. The first and the last are always
    among them."""
    if len(steps) <= most:
        return list(steps)
    changes = [abs(b - a) for a, b in zip(values, values[1:])]
    total, even = sum(changes), 1 / (len(steps) - 1)
    lengths = [even / 2 + (change / total / 2 if total > 0 else even / 2) for change in changes]
    cumulative = [0.0]
    for length in lengths:
        cumulative.append(cumulative[-1] + length)
    targets = [i * cumulative[-1] / (most - 1) for i in range(most)]
    picks = {min(range(len(steps)), key=lambda i: abs(cumulative[i] - target)) for target in targets}
    for index in spread(list(range(len(steps))), most):  # two targets may fall nearest one checkpoint
        if len(picks) >= most:
            break
        picks.add(index)
    return [steps[i] for i in sorted(picks)]


def around(steps: list[int], centre: int, most: int) -> list[int]:
    """The first and last of ``steps`` and the ``most`` − 2 checkpoints nearest ``centre`` (by their order)."""
    if not steps[0] <= centre <= steps[-1]:
        raise BadInput(f"--around {centre} lies outside the checkpoints, steps {steps[0]} to {steps[-1]}")
    middle = min(range(len(steps)), key=lambda i: abs(steps[i] - centre))
    nearest = sorted(range(len(steps)), key=lambda i: (abs(i - middle), i))[: max(0, most - 2)]
    return [steps[i] for i in sorted({0, len(steps) - 1, *nearest})]


def frames_note(centre: int | None, otherwise: str) -> str:
    """How a movie chose its checkpoints, in words: around ``centre``, or as ``otherwise`` says."""
    return otherwise if centre is None else f"the first, the last and those nearest step {centre}"


def spread(items: list, at_most: int) -> list:
    """At most ``at_most`` (2 or more) of ``items``, evenly spread over their order, the first and the last always
    among them: a movie's frames, a table's columns over many checkpoints."""
    if len(items) <= at_most:
        return list(items)
    picks = sorted({round(i * (len(items) - 1) / (at_most - 1)) for i in range(at_most)})
    return [items[i] for i in picks]


def threshold_phases(steps: list[int], reached: list[list[str]]) -> tuple[list[str], list[tuple[str, int, int]]]:
    """Per step, which heads have reached their threshold (``reached[i]``, the names at ``steps[i]``) as a phase's
    name, and those phases as stretches (name, first step, last step)."""
    names = [("formed: " + ", ".join(heads)) if heads else "no chosen head at its threshold" for heads in reached]
    stretches: list[tuple[str, int, int]] = []
    for step, name in zip(steps, names):
        if stretches and stretches[-1][0] == name:
            stretches[-1] = (name, stretches[-1][1], step)
        else:
            stretches.append((name, step, step))
    return names, stretches


def movie_folder(out) -> Path:
    """``out`` as a Path, if a movie can be written there: not empty, no link, no file, no folder at movie.html."""
    if not isinstance(out, (str, os.PathLike)) or os.fspath(out) == "":
        raise BadInput(f"out must name a folder, got {out!r}")
    out = Path(out)
    if out.is_symlink():
        raise BadInput(f"{out} is a symbolic link: give a folder of its own for the movie")
    if out.exists() and not out.is_dir():
        raise BadInput(f"{out} exists and is not a folder")
    page = out / "movie.html"
    if page.is_dir() and not page.is_symlink():
        raise BadInput(f"{page} is a folder: the movie cannot be written there")
    if page.is_file() and not page.is_symlink() and not written_by_movie(page):
        raise BadInput(f"{page} exists and is not a movie this command wrote: refusing to replace it")
    return out


def written_by_movie(page: Path) -> bool:
    """Whether ``page`` starts as a movie page does (its generator mark within the first KiB)."""
    with page.open("rb") as handle:
        return GENERATOR.encode() in handle.read(1024)


def write_movie_page(movie: Movie, out: str | os.PathLike) -> Path:
    """``out/movie.html`` (``out`` made if missing; a file or a link there is refused, not written through)."""
    out = movie_folder(out)
    text = movie_html(movie)
    out.mkdir(parents=True, exist_ok=True)
    path = out.resolve() / "movie.html"
    write_atomic(path, text.encode("utf-8"))  # a rename: a link planted at the page's name is replaced, not followed
    return path
