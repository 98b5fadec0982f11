"""Figures held to one standard (issue 14): titles, labelled axes, a log axis of sequences seen, a key for
every shading and colour, chance levels, rounded annotations, names that say run, step and mode; and the
one-page HTML report. Each figure is caught as a matplotlib object before it is written."""

from __future__ import annotations

import base64
import html
import io
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import matplotlib.image
import matplotlib.legend
import numpy as np
import pytest
import torch

from induction_probes.circuits.runs.reader import Run
from induction_probes.cli import main
from induction_probes.probes.behaviour.icl_behaviour import illustrative_steps, plateau_step, strategy_phases
from induction_probes.probes.figures import (
    plots,
    plots_attention,
    plots_circuit,
    plots_sweep,
    plots_task_sweep,
    plots_toy,
)


@pytest.fixture
def caught(monkeypatch):
    """The figures the plot functions would save, in order, instead of PNG files."""
    figures = []
    monkeypatch.setattr(plots, "save", lambda fig, path: figures.append(fig) or path)
    return figures


def legend_texts(ax) -> list[str]:
    legends = [child for child in ax.get_children() if isinstance(child, matplotlib.legend.Legend)]
    return [text.get_text() for legend in legends for text in legend.get_texts()]


def test_the_strategies_figure_has_a_log_axis_of_sequences_a_phase_key_and_the_models_own_kl(caught):
    metrics = Run.open("markov-k3").metrics()
    plots.plot_distance_to_strategies(metrics, ["uniform", "unigram", "bigram"], "markov-k3", Path("unused.png"))
    (ax,) = caught[0].axes
    assert ax.get_xscale() == "log" and "sequences seen" in ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    keys = legend_texts(ax)
    assert {"closest: uniform", "closest: unigram", "closest: bigram", "KL(true ‖ model)"} <= set(keys)
    x = [m["sequences_seen"] for m in metrics if m["sequences_seen"] > 0]
    low, high = ax.get_xlim()
    assert low < min(x) and high > max(x)  # no curve touches the frame


def test_the_middle_checkpoint_of_a_figure_is_on_the_plateau_not_at_the_middle_index():
    metrics = Run.open("markov-k3").metrics()
    phases = strategy_phases(metrics)
    steps = [m["step"] for m in metrics]
    unigram = next(p for p in phases if p.strategy == "unigram")
    assert unigram.first_step <= plateau_step(phases, steps) <= unigram.last_step
    first, middle, last = illustrative_steps(phases, steps)
    assert (first, last) == (0, 4000) and middle != steps[len(steps) // 2]  # the index would pick 1253


def test_attention_heatmaps_label_positions_with_their_tokens_and_ring_the_matching_keys(caught):
    tokens = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    pattern = torch.full((1, 1, 8, 8), 0.125)
    plots_circuit.plot_attention_heatmaps(
        {0: [pattern, pattern]}, tokens, {0: "step 0"}, "run", Path("unused.png"), n_pos=8
    )
    layer0, layer1 = caught[0].axes[:2]
    assert [t.get_text() for t in layer1.get_xticklabels()] == ["0", "1", "2", "0", "1", "2", "0", "1"]
    assert "key position" in layer1.get_xlabel() and "query position" in layer1.get_ylabel()
    rings = layer1.collections[0].get_offsets()
    assert len(rings) == 7 and not layer0.collections  # x_{j-1} = x_i, j <= i: queries 3, 4, 5 one each, 6 and 7 two
    assert [1, 3] in rings.tolist() and [4, 6] in rings.tolist()  # (key, query): key 4 follows the 0 at position 3


def test_attention_lines_are_normalised_per_query_and_drawn_as_the_authors_draw_them(caught):
    pattern = torch.tensor(
        [
            [1.0, 0.0, 0.0, 0.0],
            [0.3, 0.7, 0.0, 0.0],
            [0.2, 0.5, 0.3, 0.0],
            [0.1, 0.4, 0.2, 0.3],
        ]
    )
    every = plots_attention.attention_lines(pattern, last_only=False)
    assert len(every) == 1 + 2 + 3 + 4  # no threshold: every causal key of every query, zero weights included
    assert every[1:3] == [(1, 0, pytest.approx(0.3 / 0.7)), (1, 1, 1.0)]
    last = plots_attention.attention_lines(pattern, last_only=True)
    assert last == [(3, 0, pytest.approx(0.25)), (3, 1, 1.0), (3, 2, pytest.approx(0.5)), (3, 3, pytest.approx(0.75))]
    assert plots_attention.attention_lines(torch.zeros(3, 3), last_only=False) == []  # no key, no line

    tokens = torch.tensor([2, 0, 1, 2])
    plots_attention.plot_attention_lines(
        {0: [pattern[None, None], pattern[None, None]]}, tokens, {0: "step 0"}, "run", Path("unused.png")
    )
    layer0, layer1 = caught[0].axes[:2]
    lines0, lines1 = layer0.collections[0], layer1.collections[0]
    weights0 = np.array([a for _, _, a in every])
    assert np.allclose(lines0.get_linewidths(), 3.0 * weights0)
    assert np.allclose(lines0.get_colors()[:, 3], 0.45 * weights0)
    assert [segment[0].tolist() for segment in lines1.get_segments()] == [[3.0, 1.0]] * 4  # from the last query
    assert [text.get_text() for text in layer0.texts][::2] == ["2", "0", "1", "2"]


def test_ablation_bars_name_heads_like_transformer_lens_and_key_their_colours(caught):
    def behaviour(kl, closest):
        return SimpleNamespace(last_token_kl={"true": kl}, closest_strategy=closest)

    results = [
        SimpleNamespace(heads=[(0, 0)], behaviour=behaviour(0.19, "unigram")),
        SimpleNamespace(heads=[(1, 0)], behaviour=behaviour(0.27, "uniform")),
    ]
    baselines = {"uniform": 0.28, "unigram": 0.17, "bigram": 0.03}
    plots_circuit.plot_ablation_bars(behaviour(0.04, "bigram"), results, baselines, "markov-k3", Path("unused.png"))
    (ax,) = caught[0].axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["none", "L0H0", "L1H0"]
    keys = legend_texts(ax)
    assert {"closest: bigram", "closest: unigram", "closest: uniform"} <= set(keys)
    assert any("uniform strategy" in key for key in keys)  # the baselines are drawn and named


def test_figure_names_say_run_what_mode_and_steps():
    assert plots.figure_name("markov-k3", "ablation", [4000], "mean") == "markov-k3_ablation_mean_step4000.png"
    assert plots.figure_name("markov-k3", "attention", [0, 364, 4000]) == "markov-k3_attention_steps0-364-4000.png"
    assert plots.figure_name("markov-k3", "scores", list(range(0, 4001, 10))) == "markov-k3_scores_steps0-4000.png"


def test_error_bars_are_the_distances_to_each_intervals_ends_or_none_where_one_is_missing():
    bars = plots.error_bars([1.0, 2.0], [(0.5, 1.25), (1.0, 4.0)])
    np.testing.assert_array_equal(bars, [[0.5, 1.0], [0.25, 2.0]])  # row 0 down to low, row 1 up to high
    assert plots.error_bars([1.0, 2.0], [(0.5, 1.25), (1.0, None)]) is None  # one bar without an interval: none


@pytest.mark.parametrize(
    "value, scale, text",
    [(1.4e-10, 3333.3, "0"), (3333.3, 3333.3, "3300"), (-0.8123, 1.7, "-0.8"), (0.094, 0.1, "0.09"), (0.0, 0.0, "0")],
)
def test_annotations_are_rounded_to_the_panels_scale(value, scale, text):
    assert plots.meaningful(value, scale) == text


def test_prop21_over_training_draws_every_compared_step_against_sequences(caught):
    def comparison(x):
        return SimpleNamespace(
            attention_tv=[1 - x, 1 - x],
            positional_profile=torch.tensor([0.0, x]),
            diagonal_is_row_max=x,
            ov_top1_diagonal=x,
        )

    results = {0: comparison(0.0), 10: comparison(0.3), 100: comparison(0.9)}
    metrics = [
        {"step": s, "sequences_seen": 64 * s, "last_token_kl": {"uniform": 0.1, "unigram": 0.2, "bigram": 0.3}}
        for s in results
    ]
    plots_circuit.plot_prop21_over_training(results, metrics, 3, "run", Path("unused.png"))
    (ax,) = caught[0].axes
    curves = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(curves) == 5 and ax.get_xscale() == "log"
    assert all(list(line.get_xdata()) == [640, 6400] for line in curves)  # step 0 has no place on a log axis
    assert any("chance" in key for key in legend_texts(ax))


def test_the_minimal_models_v_is_cut_above_the_other_distances_and_each_W_has_a_colour_bar(caught):
    run = Run.open("minimal-k3")
    models = {step: run.load(step=step) for step in (121, 1000)}
    plots_circuit.plot_minimal_parameters(models, {121: "a", 1000: "b"}, "minimal-k3", Path("."), "minimal-k3")
    v_figure, W_figure = caught
    v_1 = models[1000].v[1].item()
    assert v_figure.axes[1].get_ylim()[1] < v_1 / 5  # the odd/even pattern is not squashed by v_1
    assert any("v₁ = 5.60" in text.get_text() for text in v_figure.axes[1].texts)
    assert len(W_figure.axes) == 4  # two panels, each with its colour bar


def test_toy_curves_that_coincide_are_told_apart_and_phases_have_a_key_not_colliding_labels(caught):
    history = [
        {
            "step": s,
            "loss": 1 / (s + 1),
            "loss_4gram": 1 / (s + 1),
            "loss_induction": 0.01,
            **{name: 1.0 for name in ("p1", "p2", "w_V1", "w_K", "w_Q", "w_V2")},
        }
        for s in range(0, 400, 20)
    ]
    phases = SimpleNamespace(end_of_I=20, end_of_II=40, end_of_III=60)
    plots_toy.plot_toy(history, phases, "toy", Path("unused.png"))
    top, bottom = caught[0].axes
    styles = {line.get_label(): (line.get_linestyle(), line.get_linewidth()) for line in bottom.get_lines()}
    assert styles["p1"] != styles["p2"] and styles["w_K"] != styles["w_Q"]
    assert {"I: steps 0–20", "II: steps 20–40", "III: steps 40–60", "IV: steps 60–380"} <= set(legend_texts(top))
    assert not top.texts and bottom.get_xscale() == "log"


class Page(HTMLParser):
    """Every attribute of every tag, and the section headings, of an HTML page."""

    def __init__(self):
        super().__init__()
        self.attributes, self.headings, self._in_h2 = [], [], False

    def handle_starttag(self, tag, attrs):
        self.attributes += [(tag, name, value) for name, value in attrs]
        self._in_h2 = tag == "h2"

    def handle_data(self, data):
        if self._in_h2:
            self.headings.append(data)
            self._in_h2 = False


def test_the_html_report_is_one_offline_page_with_every_figure_embedded(tmp_path, capsys):
    assert main(["report", "markov-k3", "--html", str(tmp_path)]) == 0
    assert f"report: {tmp_path / 'markov-k3_report.html'}" in capsys.readouterr().out
    (page_path,) = tmp_path.iterdir()
    text = page_path.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    sources = [value for tag, name, value in page.attributes if tag == "img" and name == "src"]
    assert len(sources) >= 9  # phases 2, probes 4, ablation 1, construction 2
    for source in sources:
        assert source.startswith("data:image/png;base64,")
        png = base64.b64decode(source.split(",", 1)[1], validate=True)
        image = matplotlib.image.imread(io.BytesIO(png), format="png")
        assert image.shape[0] > 100 and image.shape[1] > 100 and np.ptp(image) > 0  # decodes, not blank
    links = [value for _, name, value in page.attributes if name in ("src", "href")]
    assert all(value.startswith("data:") for value in links)  # nothing fetched from anywhere
    assert not re.search(r"url\(|@import|https?://", text.replace("http://www.w3.org", ""))
    assert [h.split(":")[0] for h in page.headings] == [
        "1. Phases",
        "2. Probes",
        "3. Ablations",
        "4. Against the construction",
    ]
    shown = html.unescape(text)
    assert "progress measures from the weights" in shown and "matches the construction's signatures" in shown


def test_names_are_plain_text_while_log_ticks_keep_their_mathtext(tmp_path):
    """A "$" in a run name must not start a formula, but the log axes' 10^k tick labels are mathtext: with
    math parsing off everywhere they printed as raw '$\\mathdefault{10^{2}}$'."""
    from induction_probes.probes.figures.plots import save, subplots

    fig, ax = subplots(figsize=(4, 3))
    ax.plot([10, 1000], [1, 2])
    ax.set(xscale="log", title="run$_$x: a name")
    save(fig, tmp_path / "figure.png")
    ticks = [label for label in ax.get_xticklabels() if label.get_text()]
    assert ticks and all(label.get_parse_math() for label in ticks)
    assert "mathdefault" in ticks[0].get_text()  # what a tick holds, and what parsing turns into 10^k
    assert not ax.title.get_parse_math()


def test_a_figure_is_drawn_once_when_saved_and_laid_out_as_before(tmp_path):
    """``tight_layout`` leaves a placeholder layout engine on the figure, and savefig draws a figure that has an
    engine twice: a quarter of the paper page's time went to the second draw. The layout stays the tight one."""

    def figure():
        fig, ax = plots.subplots(figsize=(4, 3))
        ax.plot([1, 2], [3, 4])
        ax.set(title="a title", xlabel="x", ylabel="y")
        return fig

    def margins(fig):
        return [getattr(fig.subplotpars, side) for side in ("left", "right", "bottom", "top")]

    saved, draws = figure(), []
    draw = saved.draw
    saved.draw = lambda renderer: (draws.append(renderer), draw(renderer))[1]
    untouched = margins(saved)
    plots.save(saved, tmp_path / "figure.png")
    assert len(draws) == 1
    tight = figure()
    plots.as_plain_text(tight)
    plots.readable_text(tight)
    tight.tight_layout()
    assert margins(saved) == margins(tight) != untouched


def test_the_order_figure_ranks_measures_by_mean_step_then_by_name():
    """Measures that move together tie on their mean step; the order of a set of their names follows the hash
    seed, so the figure changed from one run of ``paper`` to the next."""
    names = [f"moved.W_{letter}_layer1" for letter in "QKVOABCD"]
    runs = [dict.fromkeys(names, 300) | {"eval_loss": 500, "moved.alibi_layer0": 20}] * 2
    assert plots_task_sweep.in_order_of_moving(runs) == ["moved.alibi_layer0", *sorted(names), "eval_loss"]


def test_drawing_a_figure_leaves_the_users_backend_and_pyplot_alone(tmp_path):
    """A notebook's backend and figures are its own: the figures module once switched the backend to Agg
    when imported. In a fresh interpreter whose backend is svg, importing it and writing a figure leaves
    svg chosen and pyplot with no figure open."""
    import subprocess
    import sys

    script = f"""
import matplotlib
matplotlib.use("svg")
import matplotlib.pyplot as plt
from pathlib import Path
from induction_probes.circuits.runs.reader import Run
from induction_probes.probes.figures import plots
run = Run.open("markov-k3")
out = Path({str(tmp_path)!r}) / "kl.png"
plots.plot_distance_to_strategies(run.metrics(), ["uniform", "unigram", "bigram"], "markov-k3", out)
print(matplotlib.get_backend(), plt.get_fignums())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["svg", "[]"]
    assert matplotlib.image.imread(tmp_path / "kl.png").shape[2] in (3, 4)


def test_the_even_odd_figure_shows_each_point_of_each_seed_without_the_spike_at_distance_1(caught):
    from induction_probes.probes.sweeps.summary_statistics import add_statistics

    def profile(lead: float) -> list[float]:
        return [0.5 if d == 1 else 0.01 + lead * (d % 2) for d in range(21)]

    runs = [
        {"seed": s, "positional_layer0": {"profiles": {"transition": profile(0.002 * (s + 1)), "end": profile(0)}}}
        for s in range(3)
    ]
    summary = add_statistics(
        {"sweep": "experiments/runs/demo", "conditions": {"base": {"seeds": [0, 1, 2], "runs": runs}}}
    )
    plots_sweep.plot_even_odd(summary, Path("."))
    plateau, transition, end = caught[0].axes
    assert "plateau (0 seeds)" in plateau.get_title() and "no seed" in plateau.get_title()
    assert "transition (3 seeds)" in transition.get_title() and "+0.004 [" in transition.get_title()  # mean lead
    bars = [patch.get_height() for patch in transition.patches]
    assert len(bars) == 18 and max(bars) < 0.1  # distances 2..19: the 0.5 at distance 1 is not drawn
    assert len(transition.lines) == 3 and "distance" in end.get_xlabel()
