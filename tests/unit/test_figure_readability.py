"""Figures that carry their intervals and can be read (issue 51, item 3): every figure whose data hold intervals
draws them, no key sits on a panel, the heads keep one colour across figures, the language-model figures have a
linear step axis with the threshold marked, and text is at least 10 px wide where the paper page shows it. Each
figure is caught as the matplotlib object ``save`` lays out and writes, so the layout checked is the shipped one."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import matplotlib.legend
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text

from induction_probes.circuits.metrics import mse_over_variance
from induction_probes.circuits.runs.reader import Run
from induction_probes.probes.ablation.ablation_study import relative_mse
from induction_probes.probes.figures import plots, plots_circuit, plots_progress
from induction_probes.probes.intervals import Estimate, mean_interval
from induction_probes.probes.lm import series_plots as lm_plots
from induction_probes.probes.lm.markov import markov_plots
from induction_probes.probes.paper.page import figure_class
from induction_probes.probes.progress.progress_measures import progress_measures, threshold_crossings

UNUSED = Path("unused.png")


@pytest.fixture
def caught(monkeypatch):
    """The figures ``save`` lays out, in order; nothing is written."""
    figures, plain = [], plots.as_plain_text
    monkeypatch.setattr(plots, "as_plain_text", lambda fig: figures.append(fig) or plain(fig))
    monkeypatch.setattr(plots, "write_atomic", lambda path, data: None)
    return figures


def drawn(fig):
    """The renderer of ``fig`` once drawn, for the artists' boxes in pixels."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def legends(fig) -> list:
    return [child for ax in fig.axes for child in ax.get_children() if isinstance(child, matplotlib.legend.Legend)]


def assert_keys_off_the_data(fig) -> None:
    """No legend overlaps any panel's data area, and every legend lies inside the figure (none cut off)."""
    renderer = drawn(fig)
    frame = fig.bbox
    for legend in legends(fig):
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent(renderer)), [t.get_text() for t in legend.get_texts()]
        assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1 and frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1


def assert_readable(fig) -> None:
    """Every visible text of ``fig`` at least 10 px where the paper page shows it (its width there, over the
    figure's width in inches, times the size in points over 72)."""
    drawn(fig)
    small = {
        (t.get_text(), round(plots.displayed_px(fig, t.get_fontsize()), 1))
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and plots.displayed_px(fig, t.get_fontsize()) < 10
    }
    assert not small


def metrics() -> list[dict]:
    return Run.open("markov-k3").metrics()


def behaviour(kl: float, closest: str, half: float = 0.01):
    interval = Estimate(kl, kl - half, kl + half, 100)
    return SimpleNamespace(
        last_token_kl={"true": kl}, closest_strategy=closest, intervals={"last_token_kl.true": interval}
    )


def test_the_ablation_bars_carry_their_intervals_and_their_keys_sit_beside_them(caught):
    results = [
        SimpleNamespace(heads=[(0, 0)], behaviour=behaviour(0.19, "unigram")),
        SimpleNamespace(heads=[(1, 0)], behaviour=behaviour(0.27, "uniform", half=0.03)),
    ]
    baselines = {"uniform": 0.28, "unigram": 0.17, "bigram": 0.03}
    plots_circuit.plot_ablation_bars(behaviour(0.04, "bigram"), results, baselines, "markov-k3", UNUSED)
    (ax,) = caught[0].axes
    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    caps = bars.lines[2][0].get_segments()
    assert [pytest.approx(s[1][1] - s[0][1]) for s in caps] == [0.02, 0.02, 0.06]  # each bar its own interval
    assert_keys_off_the_data(caught[0])
    assert_readable(caught[0])


def test_the_gaussian_ablation_bars_carry_an_interval_that_stays_at_or_above_zero(caught):
    generator = torch.Generator().manual_seed(0)
    target = torch.randn(300, 2, generator=generator)
    noisy = target + 0.5 * torch.randn(300, 2, generator=generator)
    ablated, exact = relative_mse(noisy, target), relative_mse(target, target)
    assert float(ablated) == mse_over_variance(noisy, target)  # the number every reader took is unchanged
    assert 0 < ablated.low < ablated < ablated.high and exact.low == exact == exact.high == 0  # an MSE is ≥ 0
    plots_circuit.plot_error_bars([("none", exact), ("L0H0", ablated)], "gaussian", UNUSED)
    (ax,) = caught[0].axes
    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    spans = [s[1][1] - s[0][1] for s in bars.lines[2][0].get_segments()]
    assert spans == [0, pytest.approx(ablated.high - ablated.low)]
    assert_keys_off_the_data(caught[0])
    assert_readable(caught[0])


def test_the_scores_over_training_draw_the_best_heads_interval_as_a_band(caught):
    def probes(value: float):
        layer = torch.tensor([value, value / 2])
        bounds = (layer - 0.05, layer + 0.05)
        scores = {"previous_token": [layer, layer], "bigram_matching": [layer, layer]}
        return SimpleNamespace(scores=scores, intervals={name: [bounds, bounds] for name in scores})

    every = metrics()
    entries = [every[0], every[len(every) // 2], every[-1]]
    chance = {"previous_token": 0.05, "bigram_matching": 0.4}
    plots.plot_scores_over_training([probes(v) for v in (0.1, 0.5, 0.9)], entries, chance, "run", UNUSED)
    (ax,) = caught[0].axes
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 2  # one per score
    low, high = bands[0].get_paths()[0].vertices[:, 1].min(), bands[0].get_paths()[0].vertices[:, 1].max()
    assert low == pytest.approx(0.45) and high == pytest.approx(0.95)  # step 0 is off the log axis: 0.5 ± 0.05 up
    assert_keys_off_the_data(caught[0])
    assert_readable(caught[0])


@pytest.mark.parametrize("which", ["strategies", "loss"])
def test_the_phase_figures_keys_are_off_the_curves(caught, which):
    if which == "strategies":
        plots.plot_distance_to_strategies(metrics(), ["uniform", "unigram", "bigram"], "markov-k3", UNUSED)
    else:
        plots.plot_loss_against_baselines(metrics(), {"uniform": 0.28, "unigram": 0.17}, "markov-k3", UNUSED)
    assert_keys_off_the_data(caught[0])
    assert_readable(caught[0])


def test_the_progress_figure_keys_every_line_and_says_what_passes_the_construction(caught):
    run = Run.open("markov-k3")
    steps = [0, 283, 970, 4000]
    progress = [progress_measures(run.load(step=s), s) for s in steps]
    entries = {m["step"]: m for m in run.metrics()}
    rows = threshold_crossings(progress, run.model_config, {s: entries[s]["sequences_seen"] for s in steps})
    plots_progress.plot_progress_measures(progress, [entries[s] for s in steps], rows, "markov-k3", UNUSED)
    fig = caught[0]
    bottom = fig.axes[1]
    keyed = {text.get_text() for legend in legends(fig) for text in legend.get_texts()}
    unkeyed = [line for line in bottom.get_lines() if line.get_label() not in keyed]
    assert not unkeyed  # the first-crossing lines too
    crossings = [line for line in bottom.get_lines() if line.get_label().startswith("↳ first at threshold")]
    assert len(crossings) == sum(1 for row in rows.values() if row["first_sequences"])
    composition = (progress[-1].value("composition_K") - rows["composition_K"]["chance"]) / (
        rows["composition_K"]["construction"] - rows["composition_K"]["chance"]
    )
    said = any("above 1: past it" in label for label in keyed)
    assert said == (composition > 1 or "above" in bottom.get_ylabel())  # the rescaling past 1 is said, not hidden
    assert_keys_off_the_data(fig)
    assert_readable(fig)


class LMScores:
    """A language model's head scores at one step: head (l, h) at ``level`` · (l + h + 1) / 8, ± 0.05."""

    def __init__(self, level: float):
        value = level * (torch.arange(4)[:, None] + torch.arange(4)[None, :] + 1) / 8
        for name in ("content", "previous_token"):
            setattr(self, name, SimpleNamespace(value=value, low=value - 0.05, high=value + 0.05))

    def heads(self):
        return [(layer, head) for layer in range(4) for head in range(4)]

    def ranked(self, score):
        value = getattr(self, score).value
        return sorted(((l, h, value[l, h].item()) for l, h in self.heads()), key=lambda row: -row[2])


def lm_results() -> list:
    def loss(step):
        level = 3.0 - 2.0 * min(step / 3000, 1)
        per_sequence = torch.linspace(level - 0.2, level + 0.2, 50)
        return SimpleNamespace(interval=lambda part: mean_interval(per_sequence + (part == "first_half")))

    steps = [0, 500, 1000, 2000, 4000, 8000, 16000, 143000]
    return [SimpleNamespace(step=s, scores=LMScores(min(s / 4000, 1)), loss=loss(s), threshold=0.4) for s in steps]


def test_the_lm_series_has_bands_a_linear_step_axis_and_the_threshold_marked(caught):
    lm_plots.plot_lm_series(lm_results(), "pythia", UNUSED)
    fig = caught[0]
    for ax in fig.axes:
        assert ax.get_xscale() == "linear" and "training step" in ax.get_xlabel()
        assert any(isinstance(c, PolyCollection) for c in ax.collections)  # bands on scores and on the losses
    for ax in fig.axes[:2]:
        (threshold,) = [line for line in ax.get_lines() if "threshold" in line.get_label()]
        assert set(threshold.get_ydata()) == {0.4}
    assert_keys_off_the_data(fig)
    assert_readable(fig)


def markov_series() -> list:
    """Two checkpoints of a language model's ICL-MC probe, enough for its score panels."""

    def head(layer, index, level):
        score = Estimate(level * (layer + index + 1) / 8, 0.0, 1.0, 10)
        return SimpleNamespace(label=f"L{layer}H{index}", bigram_matching=score, previous_token=score)

    return [
        SimpleNamespace(
            step=step,
            heads=[head(layer, index, level) for layer in range(4) for index in range(4)],
            chance={"bigram_matching": 0.3, "previous_token": 0.1},
            threshold=lambda score: 0.5,
        )
        for step, level in ((0, 0.1), (1000, 1.0))
    ]


def test_a_head_has_one_colour_in_the_induction_and_the_markov_figures(caught):
    lm_plots.plot_lm_series(lm_results(), "pythia", UNUSED)
    induction = {line.get_label().removeprefix("head "): line.get_color() for line in caught[0].axes[0].get_lines()}
    fig, ax = plots.subplots(figsize=(6, 4))
    markov_plots.score_panel(ax, markov_series(), "bigram_matching")
    markov = {line.get_label(): line.get_color() for line in ax.get_lines()}
    shared = set(induction) & set(markov) & {f"L{l}H{h}" for l in range(4) for h in range(4)}
    assert shared  # the same best heads in both, by construction
    assert all(induction[label] == markov[label] == plots.head_colour(label) for label in shared)
    assert len({plots.head_colour(f"L{l}H{h}") for l in range(2) for h in range(4)}) == 8  # small models: all apart


def test_the_paper_page_shows_wide_figures_across_the_text(tmp_path, caught):
    lm_plots.plot_lm_series(lm_results(), "pythia", tmp_path / "series.png")
    wide = tmp_path / "series.png"
    caught[0].savefig(wide, dpi=plots.DPI)
    plots.plot_distance_to_strategies(metrics(), ["uniform"], "markov-k3", UNUSED)
    narrow = tmp_path / "strategies.png"
    caught[1].savefig(narrow, dpi=plots.DPI)
    assert figure_class(wide) == ' class="wide"' and figure_class(narrow) == ""
    assert plots.displayed_px(caught[0], 72) == pytest.approx(plots.PAGE_WIDE_PX / caught[0].get_figwidth())


@pytest.mark.parametrize("width, wide", [(16.0, True), (7.0, False)])
def test_save_raises_small_text_to_10_px_at_the_pages_width_and_leaves_larger_text(caught, width, wide):
    fig, (left, right) = plots.subplots(1, 2, figsize=(width, 3))
    left.plot([0, 1], [0, 1], label="a curve")
    left.legend(fontsize=6)
    left.tick_params(labelsize=6)
    right.set_title("a large title", fontsize=20)
    plots.save(fig, UNUSED)
    assert plots.is_wide(width) == wide
    assert right.title.get_fontsize() == 20  # larger than needed: left alone
    assert_readable(fig)  # the ticks made at draw time too, from the axis's settings
    assert min(t.get_fontsize() for t in fig.findobj(Text) if t.get_text()) == pytest.approx(
        10.05 / plots.displayed_px(fig, 1.0)
    )


@pytest.mark.parametrize("which", ["whole", "per head"])
def test_the_llc_figures_keep_their_keys_off_the_data_and_draw_the_quarter_gamma_check(caught, which):
    # the shipped results as the paper page draws them: intervals (error bars), the γ/4 check beside them, and the
    # failing calibration above the panels
    import json

    from induction_probes.probes.figures import plots_llc

    results = Path(__file__).resolve().parents[2] / "experiments" / "results"
    run = Run.open("markov-k3")
    if which == "whole":
        found = json.loads((results / "markov-k3-llc" / "llc.json").read_text())
        mark = found["calibration"]["gate"]["mark"]
        best = found["construction"]["best_scales"]
        plots_llc.plot_llc(found["checkpoints"], run.metrics(), best, "markov-k3", UNUSED, failing=mark)
    else:
        found = json.loads((results / "markov-k3-llc-heads" / "llc_heads.json").read_text())
        mark = found["calibration"]["gate"]["mark"]
        crossings = found["progress_thresholds"]
        plots_llc.plot_per_head_llc(found["rows"], run.metrics(), crossings, "markov-k3", UNUSED, failing=mark)
    fig = caught[0]
    assert_keys_off_the_data(fig)
    assert_readable(fig)
    bottom = fig.axes[1]
    assert any(isinstance(c, ErrorbarContainer) for c in bottom.containers)
    assert any(line.get_marker() == "d" and line.get_linestyle() == ":" for line in bottom.get_lines())
    assert mark and fig._suptitle is not None and fig._suptitle.get_text().replace("\n", " ") == mark
