"""What ``ablate SERIES --all-steps`` shows for a language model's checkpoint series: every head's ablation at every
checkpoint (:func:`~induction_probes.probes.lm.ablate_series.ablate_series`) as a head × step table of the share of
the gap removed, each head's formation step, and with ``plot`` a step × head heatmap; with ``as_json`` one row per
step and head, each with its interval."""

from __future__ import annotations

from pathlib import Path

from induction_probes.circuits.interop.model_sources import Series
from induction_probes.circuits.names import head_label
from induction_probes.probes.lm.ablate_series import SeriesAblation
from induction_probes.probes.report.lm_views import TABLE_ROWS, figures_module, header, protocol_json
from induction_probes.probes.report.tables import figure_lines, format_table
from induction_probes.probes.views.movie_page import spread

SHOWN_STEPS = 10  # checkpoints a text table lists (every one is in the JSON)


def series_ablation_view(
    source: Series, result: SeriesAblation, protocol: dict, threshold: float, plot: Path | None, as_json: bool
) -> str | dict:
    """The text (or JSON) of :func:`~induction_probes.probes.lm.ablate_series.ablate_series`'s answer;
    ``protocol``: length, n_seqs and seed as given."""
    figures = atlas_figures(source, result, plot)
    formation = result.formation(threshold)
    if as_json:
        return header(source, None, protocol_json(**protocol)) | {
            "mode": result.mode,
            "threshold": threshold,
            "baselines": [{"step": r.step} | r.baseline.to_json() for r in result],
            "rows": result.rows(),
            "formation": [{"heads": name, "step": step} for name, step in formation.items()],
            "figures": [str(f) for f in figures],
        }
    return "\n".join(series_lines(source, result, protocol, threshold, formation) + figure_lines(figures))


def series_lines(source: Series, result: SeriesAblation, protocol: dict, threshold: float, formation: dict) -> list:
    low, high = result.results[0].length_range
    columns = spread(list(range(len(result.steps))), SHOWN_STEPS)
    shown = shown_heads(result, formation)
    shares, rises = result.shares(), result.rises()
    gaps = ["gap", *(gap_cell(result.results[j].baseline) for j in columns)]
    rows = [gaps] + [
        [head_label(*result.heads[i]) + (" *" if formation[head_label(*result.heads[i])] is not None else "")]
        + [share_cell(shares[i][j], rises[i][j]) for j in columns]
        for i in shown
    ]
    formed = [f"{name} from step {step}" for name, step in formation.items() if step is not None]
    return [
        f"series {source.name}: {result.mode} ablation of each of {len(result.heads)} heads at {len(result.steps)} "
        f"checkpoints, on {protocol['n_seqs']} sequences of repeated random tokens (|R| from {low} to {high}, seed "
        f"{protocol['seed']}); share of the clean model's gap each ablation removes (intervals in the JSON)",
        format_table(["heads", *(f"step {result.steps[j]}" for j in columns)], rows),
        f"shown: the {len(shown)} heads that remove the most at any step and {len(columns)} of the "
        f"{len(result.steps)} checkpoints (all in the JSON); (+x): the step's gap has 0 in its interval, so no share "
        "of it: the rise of the repeated copy's loss in nats instead",
        f"* removes >= {100 * threshold:.0f}% of the gap at every step from: " + (", ".join(formed) or "none"),
    ]


def shown_heads(result: SeriesAblation, formation: dict) -> list[int]:
    """The heads a table lists: those that form, then the largest shares at any step, up to :data:`TABLE_ROWS`."""
    shares, rises = result.shares(), result.rises()
    peak = [
        (max((v for v in values if v is not None), default=float("-inf")), max(rise))
        for values, rise in zip(shares, rises)
    ]
    order = sorted(range(len(peak)), key=lambda i: (-peak[i][0], -peak[i][1]))
    formed = [i for i in order if formation[head_label(*result.heads[i])] is not None]
    rest = [i for i in order if i not in formed]
    return sorted(formed + rest[: max(0, TABLE_ROWS - len(formed))], key=lambda i: result.heads[i])


def gap_cell(baseline) -> str:
    return f"{baseline.gap:.3g}" + ("" if baseline.has_gap else " (0 in)")


def share_cell(share: float | None, rise: float) -> str:
    return f"({rise:+.3f})" if share is None else f"{100 * share:.0f}%"


def atlas_figures(source: Series, result: SeriesAblation, plot: Path | None) -> list[Path]:
    """The step × head heatmap, written into ``plot`` (none without it)."""
    if not plot:
        return []
    name = Path(source.name).name.replace("/", "_") or "series"
    path = plot / f"{name}_ablation_{result.mode}_all_steps.png"
    title = f"{name}: {result.mode} ablation of each head over training"
    return [figures_module().plot_ablation_atlas(result, title, path)]
