"""The movie's curves as inline SVG: lines over a linear step axis, a band wherever a curve has an interval, a
dashed threshold where one applies, every drawn line named in a legend beside the plot (never over the data),
and a vertical marker that movie.js moves to the step shown. The step axis is the same in every chart of a page,
and each ``<svg>`` carries it (``data-step0``, ``data-step1``, ``data-left``, ``data-right``), so that the
script places the marker from a step alone."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import TypeGuard

WIDTH, HEIGHT = 520, 180
LEFT, RIGHT, TOP, BOTTOM = 52, 12, 10, 30
# colour-blind-safe (Okabe and Ito), one colour per head or curve, in order
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]


@dataclass(frozen=True)
class Curve:
    """One line: its values at ``steps``, with an interval (``low``, ``high``) where known (None or NaN where not)."""

    name: str
    steps: list[int]
    values: list[float]
    low: list[float | None] | None = None
    high: list[float | None] | None = None
    color: str = ""


@dataclass(frozen=True)
class Axis:
    """The step axis every chart of a page shares."""

    first: int
    last: int

    def x(self, step: float) -> float:
        span = max(self.last - self.first, 1)
        return LEFT + (step - self.first) / span * (WIDTH - LEFT - RIGHT)

    def attributes(self) -> str:
        return f'data-step0="{self.first}" data-step1="{self.last}" data-left="{LEFT}" data-right="{WIDTH - RIGHT}"'


def finite(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value)


def y_range(curves: list[Curve], threshold: float | None) -> tuple[float, float]:
    values = [v for c in curves for part in (c.values, c.low or [], c.high or []) for v in part if finite(v)]
    values += [threshold] if threshold is not None else []
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (high - low) * 0.05 or 0.5
    return low - pad, high + pad


def ticks(low: float, high: float, n: int = 4) -> list[float]:
    step = 10 ** math.floor(math.log10((high - low) / n or 1))
    step *= next(m for m in (1, 2, 5, 10) if (high - low) / (step * m) <= n + 1)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def axes_svg(axis: Axis, y0: float, y1: float, y_label: str, y) -> list[str]:
    bottom = HEIGHT - BOTTOM
    parts = [f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="#444"/>']
    parts.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="#444"/>')
    for value in ticks(y0, y1):
        parts.append(f'<text x="{LEFT - 4}" y="{y(value) + 4:.1f}" text-anchor="end">{value:g}</text>')
    for step in ticks(axis.first, axis.last, 5):
        x = axis.x(step)
        parts.append(f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{step:g}</text>')
    parts.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 2}" text-anchor="end">step</text>')
    label = html.escape(y_label)
    parts.append(
        f'<text transform="translate(11,{(TOP + bottom) / 2}) rotate(-90)" text-anchor="middle">{label}</text>'
    )
    return parts


def band_svg(curve: Curve, axis: Axis, y, color: str) -> str:
    """The interval as one shaded polygon per run of points that have both bounds."""
    if curve.low is None or curve.high is None:
        return ""
    runs, current = [], []
    for step, low, high in zip(curve.steps, curve.low, curve.high):
        if finite(low) and finite(high):
            current.append((axis.x(step), y(low), y(high)))
        elif current:
            runs.append(current)
            current = []
    runs += [current] if current else []
    polygons = []
    for run in runs:
        points = [f"{x:.1f},{hi:.1f}" for x, _, hi in run] + [f"{x:.1f},{lo:.1f}" for x, lo, _ in reversed(run)]
        polygons.append(f'<polygon class="band" points="{" ".join(points)}" fill="{color}" fill-opacity="0.22"/>')
    return "".join(polygons)


def line_chart(title: str, axis: Axis, curves: list[Curve], y_label: str, threshold: float | None = None) -> str:
    """A titled chart of ``curves`` with their bands, a ``threshold`` line if given, its legend and the marker."""
    y0, y1 = y_range(curves, threshold)

    def y(value: float) -> float:
        return TOP + (y1 - value) / (y1 - y0) * (HEIGHT - TOP - BOTTOM)

    parts = axes_svg(axis, y0, y1, y_label, y)
    legend = []
    for i, curve in enumerate(curves):
        color = curve.color or PALETTE[i % len(PALETTE)]
        parts.append(band_svg(curve, axis, y, color))
        points = " ".join(f"{axis.x(s):.1f},{y(v):.1f}" for s, v in zip(curve.steps, curve.values) if finite(v))
        parts.append(f'<polyline class="curve" points="{points}" fill="none" stroke="{color}" stroke-width="1.6"/>')
        banded = curve.low is not None and any(finite(v) for v in curve.low)
        legend.append(legend_item(color, curve.name + (" (band: 95 % interval)" if banded else "")))
    if threshold is not None:
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(threshold):.1f}" y2="{y(threshold):.1f}" '
            'stroke="#777" stroke-dasharray="5,4"/>'
        )
        legend.append(legend_item("#777", f"threshold {threshold:.3g}", dashed=True))
    parts.append(marker_svg())
    svg = f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" {axis.attributes()}>'
    body = svg + "".join(parts) + "</svg>"
    return chart_box(title, body, legend)


def marker_svg() -> str:
    return f'<line class="step-marker" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" stroke="#c00"/>'


def legend_item(color: str, text: str, dashed: bool = False) -> str:
    style = "dashed" if dashed else "solid"
    return f'<li><span class="swatch" style="border-top: 3px {style} {color}"></span>{html.escape(text)}</li>'


def chart_box(title: str, svg: str, legend: list[str]) -> str:
    return (
        f'<figure class="chart-box"><figcaption>{html.escape(title)}</figcaption>{svg}'
        f'<ul class="legend">{"".join(legend)}</ul></figure>'
    )


def phase_strip(title: str, axis: Axis, phases: list[tuple[str, int, int]]) -> str:
    """(name, first step, last step) per phase as coloured stretches of the step axis, each name in the legend
    with its colour, and the marker."""
    names = list(dict.fromkeys(name for name, _, _ in phases))
    colors = {name: PALETTE[(i + 2) % len(PALETTE)] for i, name in enumerate(names)}
    parts = []
    for i, (name, first, last) in enumerate(phases):
        end = phases[i + 1][1] if i + 1 < len(phases) else last
        x0, x1 = axis.x(first), axis.x(end)
        parts.append(
            f'<rect x="{x0:.1f}" y="{TOP}" width="{max(x1 - x0, 1):.1f}" height="24" fill="{colors[name]}">'
            f"<title>{html.escape(name)}: steps {first}-{last}</title></rect>"
        )
    height = TOP + 24 + 4
    marker = f'<line class="step-marker" x1="{LEFT}" x2="{LEFT}" y1="2" y2="{height}" stroke="#c00" stroke-width="2"/>'
    svg = (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" {axis.attributes()}>'
        + "".join(parts)
        + marker
        + "</svg>"
    )
    return chart_box(title, svg, [legend_item(colors[name], name) for name in names])
