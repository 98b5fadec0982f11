"""The formation movie and the attention explorer without a browser: one self-contained file for a run of ours
and for a language model's series, what it shows, the checkpoints it keeps, and bad input in one line
(tests/integration/test_views_browser.py opens the pages in Chromium)."""

import json
import re
from pathlib import Path

import pytest
from lm_models import save_model

from induction_probes import Run, lm, probe_run
from induction_probes.cli import main
from induction_probes.probes.report.movie_run import write_movie
from induction_probes.probes.run_level.all_probes import probe_eval_set
from induction_probes.probes.views.explorer import circuitsvis_script, explorer_html, inline_script
from induction_probes.probes.views.movie_page import around, by_change, subsample


def page_data(path: Path) -> dict:
    text = path.read_text()
    found = re.search(r'<script type="application/json" id="movie-data">(.*?)</script>', text, re.S)
    return json.loads(found.group(1))


def self_contained(text: str) -> bool:
    """No element that loads anything: no script, image, frame or style sheet from a file or an address."""
    return not re.search(r"<(script|img|iframe|link|source)\b[^>]*\b(src|href)=", text, re.I)


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    root = tmp_path_factory.mktemp("series")
    for step in (0, 40, 80, 120):
        save_model("gpt2", root / f"step_{step}", seed=step)
    return root


def test_a_markov_movie_is_one_offline_file_with_the_phases_and_the_checkpoints_it_keeps(tmp_path):
    made = write_movie("markov-k3", tmp_path / "out", frames=3, n_seqs=20)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["movie.html"]
    text = made.path.read_text()
    assert self_contained(text) and "unpkg" not in text
    data = page_data(made.path)
    # the middle frame halves the checkpoints and the loss's change together: the loss falls most early on
    assert [f["step"] for f in data["frames"]] == made.shown == [0, 566, 4000]
    assert data["heads"] == ["L0H0", "L1H0"] and set(data["tokens"]) == {"0", "1", "2"}  # the chain's states
    assert data["frames"][0]["phase"] == "uniform closest" and data["frames"][-1]["phase"] == "bigram closest"
    assert len(data["frames"][0]["patterns"][0]) == len(data["tokens"]) == 30
    assert "Showing 3 of the run's 137 checkpoints" in text and "3 of 137 checkpoints" in made.summary()
    assert text.count('class="step-marker"') == 5  # the phase strip, two heads' scores, the loss, the edges
    last = {row["edge"]: row for row in data["frames"][-1]["edges"]}
    assert len(last) == 12 and last["L0H0 -> L1H0.k"]["circuit"] and not last["L0H0 -> L1H0.q"]["circuit"]
    assert last["L0H0 -> L1H0.k"]["low"] > 0 and "share of the in-context gap at the step shown" in text
    assert 'class="band"' in text  # the token probes' intervals over sequences


def test_a_gaussian_movie_shows_positions_and_phases_by_threshold(tmp_path):
    made = write_movie("gaussian-ih2", tmp_path, frames=3, n_seqs=20)
    data = page_data(made.path)
    assert data["tokens"][:2] == ["x0", "x1"] and made.shown == [0, 154, 600]
    assert all(frame["edges"] == [] for frame in data["frames"])  # no corruption is defined for this task
    assert data["frames"][0]["phase"] == "no chosen head at its threshold"
    assert data["frames"][-1]["phase"].startswith("formed: ")


def test_a_language_model_series_has_its_movie_with_loss_bands(series, tmp_path):
    made = write_movie(series, tmp_path, frames=3, n_seqs=4)
    data = page_data(made.path)
    assert made.shown == [0, 80, 120] and made.total == 4  # spread evenly, the last kept
    assert all(re.fullmatch(r"L[01]H[0-3]", head) for head in data["heads"])
    assert len(data["frames"][0]["patterns"]) == len(data["heads"])
    text = made.path.read_text()
    assert "loss on repeated random tokens" in text and 'class="band"' in text and self_contained(text)


def test_subsampling_keeps_the_first_and_the_last_and_at_most_the_number_asked():
    steps = list(range(0, 1000, 7))
    kept = subsample(steps, 10)
    assert len(kept) == 10 and kept[0] == 0 and kept[-1] == steps[-1] and kept == sorted(kept)
    assert subsample([0, 5], 24) == [0, 5]


@pytest.fixture
def fresh_notebook(monkeypatch):
    """A kernel that has shown no view yet (the bundle not sent), as every test of the notebook views needs."""
    from induction_probes.probes.views import explorer

    monkeypatch.setattr(explorer, "NOTEBOOK", explorer.NotebookBundle())
    return explorer.NOTEBOOK


def test_around_a_step_the_movie_shows_its_neighbours_and_says_so(tmp_path):
    made = write_movie("markov-k3", tmp_path, frames=5, n_seqs=20, around=606)
    assert made.shown[0] == 0 and made.shown[-1] == 4000 and 606 in made.shown and len(made.shown) == 5
    assert "those nearest step 606" in made.path.read_text()
    assert main(["movie", "markov-k3", "--out", str(tmp_path / "b"), "--around", "9000", "--frames", "3"]) == 2


def test_frames_spread_by_change_crowd_the_transition_and_around_a_step_surround_it():
    """A loss flat but for one drop between steps 60 and 70 of 100: half the frames follow the change, so about
    half of 24 fall in the drop, where an even spread puts 3."""
    steps = list(range(100))
    loss = [2.0 if s <= 60 else 1.0 if s >= 70 else 2.0 - (s - 60) / 10 for s in steps]
    chosen = by_change(steps, loss, 24)
    assert chosen[0] == 0 and chosen[-1] == 99 and len(chosen) == 24
    inside = [s for s in chosen if 60 <= s <= 70]
    assert len(inside) >= 10 and len([s for s in subsample(steps, 24) if 60 <= s <= 70]) <= 3
    assert by_change(steps, [1.0] * 100, 24) == subsample(steps, 24)  # no change: an even spread
    assert around(steps, 50, 6) == [0, 48, 49, 50, 51, 99]
    with pytest.raises(Exception, match="--around 150 lies outside the checkpoints, steps 0 to 99"):
        around(steps, 150, 6)


def test_probe_results_show_the_explorer_offline_in_a_notebook(series, fresh_notebook):
    run = Run.open("markov-k3")
    shown = probe_run(run, probe_eval_set(run, 10, 0), steps=[4000])._repr_html_()
    assert "CircuitsVis.AttentionHeads" in shown and circuitsvis_script()[:200] in shown and self_contained(shown)
    assert '"attentionHeadNames": ["L0H0", "L1H0"]' in shown
    step = lm.probe(series / "step_120", length=5, batch=4)
    assert step.attention.heads[:2] == ["L0H0", "L0H1"] and len(step.attention.tokens) == 10  # R + R, |R| = 5
    assert "CircuitsVis.AttentionHeads" in step._repr_html_()


def test_a_notebook_with_three_views_holds_the_bundle_once(fresh_notebook):
    """Issue 65: each view carried the 1.3 MB bundle. The first view of a kernel carries it, later ones call the
    global it defined, and say in one line where the page has none; .html() always carries it."""
    from induction_probes.probes.views.explorer import NO_BUNDLE, AttentionExample, embed_bundle_in_every_view

    view = AttentionExample(["a", "b"], ["L0H0"], [[[1.0, 0.0], [0.5, 0.5]]])
    shown = [view._repr_html_() for _ in range(3)]
    bundle = circuitsvis_script()[:200]
    assert [bundle in html for html in shown] == [True, False, False]
    assert all(NO_BUNDLE in html and "CircuitsVis.AttentionHeads" in html for html in shown)
    assert bundle in view.html() and self_contained(view.html())  # a page on disk stands alone
    embed_bundle_in_every_view()
    assert bundle in view._repr_html_()
    embed_bundle_in_every_view(False)
    assert bundle not in view._repr_html_()


def test_nothing_in_a_token_can_end_the_script_it_is_written_in():
    fragment = explorer_html([[[1.0]]], ["</script><b>x"], ["L0H0"], bundle=False)
    assert fragment.count("</script>") == 1 and "\\u003c/script>" in fragment
    assert inline_script("a = '</SCRIPT>'") == "<script>a = '<\\/SCRIPT>'</script>"
    with pytest.raises(ValueError, match="every pattern must be 2 x 2"):
        explorer_html([[[1.0]]], ["a", "b"], ["L0H0"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["movie", "no-such-run", "--out", "OUT"], "no run directory or shipped run named 'no-such-run'"),
        (["movie", "markov-k3", "--out", "FILE"], "exists and is not a folder"),
        (["movie", "markov-k3", "--out", "OUT", "--frames", "1"], "frames must be an integer from 2 to 200"),
        (["movie", "markov-k3", "--out", "OUT", "--heads", "L7H0"], "layer 7"),
        (["movie", "MODEL", "--out", "OUT"], "is one model, not a checkpoint series"),
        (["movie", "markov-k3"], "the following arguments are required: --out"),
    ],
)
def test_bad_input_gives_one_line_and_status_2(args, message, series, tmp_path, capsys):
    (tmp_path / "FILE").write_text("not a folder")
    places = {"OUT": str(tmp_path / "out"), "FILE": str(tmp_path / "FILE"), "MODEL": str(series / "step_0")}
    assert main([places.get(a, a) for a in args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out" / "movie.html").exists()
