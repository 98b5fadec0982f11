"""The movie and the attention explorer in a real browser: Debian's Chromium (``apt-get install chromium``),
driven by Playwright through its executable path, never a browser Playwright downloads. Each page loads with no
console error and no request beyond its own file, the slider moves the step, the patterns and the markers, the
explorer shows a head's attention on hover and click, and the screenshots are not blank. Skipped, saying so,
where Chromium or Playwright is missing."""

import io
import shutil

import pytest
from lm_models import save_model
from PIL import Image, ImageStat

from induction_probes import Run, probe_run
from induction_probes.probes.report.movie_run import write_movie
from induction_probes.probes.run_level.all_probes import probe_eval_set
from induction_probes.probes.views.charts import Curve
from induction_probes.probes.views.movie_page import Chart, Frame, Movie, write_movie_page

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra has it)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH (apt-get install -y chromium): the browser tests are skipped"
)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        # --no-sandbox: CI and containers run as root, where Chromium's sandbox refuses to start
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


def open_page(browser, path):
    """The page at ``path`` and the list of what went wrong there: console errors, uncaught exceptions, and any
    request for something other than the page itself (aborted: nothing may be fetched)."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    problems = []
    page.on("console", lambda message: message.type == "error" and problems.append(f"console: {message.text}"))
    page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))

    def only_the_page(route):
        if route.request.url == path.as_uri():
            return route.continue_()
        problems.append(f"request: {route.request.url[:120]}")
        return route.abort()

    page.route("**/*", only_the_page)
    page.goto(path.as_uri())
    page.wait_for_function("document.body.dataset.step !== undefined || document.querySelector('canvas') !== null")
    return page, problems


def spread(png: bytes) -> float:
    """The standard deviation of a screenshot's grey levels: 0 for a blank one."""
    return ImageStat.Stat(Image.open(io.BytesIO(png)).convert("L")).stddev[0]


def marker_x(page) -> float:
    return float(page.get_attribute("svg.chart .step-marker", "x1"))


def small_movie(tmp_path):
    steps = [0, 50, 100]
    patterns = {s: [[[1.0, 0.0], [1 - s / 100, s / 100]]] for s in steps}  # the head moves to the previous token
    frames = [Frame(s, f"step {s}", "before" if s < 50 else "after", patterns[s]) for s in steps]
    curve = Curve("L0H0", steps, [0.0, 0.5, 1.0], [0.0, 0.4, 0.9], [0.1, 0.6, 1.0])
    movie = Movie("a small movie", ["a", "b"], ["L0H0"], frames, [Chart("L0H0", "score", [curve], 0.5)])
    return write_movie_page(movie, tmp_path)


def test_the_movie_script_moves_the_step_the_patterns_and_the_markers(browser, tmp_path):
    page, problems = open_page(browser, small_movie(tmp_path))
    assert page.inner_text("#step-label") == "step 100" and page.inner_text("#phase-label") == "after"
    last = page.locator("#movie-heads canvas").first.screenshot()
    right = marker_x(page)
    page.focus("#step-slider")
    page.keyboard.press("Home")  # the slider's own input event, as a reader's key gives it
    assert page.inner_text("#step-label") == "step 0" and page.inner_text("#phase-label") == "before"
    assert page.locator("#movie-heads canvas").first.screenshot() != last
    assert marker_x(page) < right
    page.click("#play")
    page.wait_for_function("document.body.dataset.step === '100'", timeout=5000)  # played to the end
    assert page.inner_text("#play") == "play" and problems == []


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    root = tmp_path_factory.mktemp("series")
    for step in (0, 60, 120):
        save_model("gpt2", root / f"step_{step}", seed=step)
    return root


@pytest.mark.parametrize("source", ["markov-k3", "gaussian-ih2", "series"])
def test_every_movie_loads_offline_and_its_slider_changes_what_is_shown(source, series, browser, tmp_path):
    made = write_movie(series if source == "series" else source, tmp_path, frames=3, n_seqs=8)
    page, problems = open_page(browser, made.path)
    before = page.inner_text("#step-label")
    patterns = page.locator("#movie-heads canvas").first.screenshot()
    edges = page.locator("#movie-edges tr")
    assert edges.count() == (13 if source == "markov-k3" else 0)  # a header and 12 edges: ICL-MC runs only
    if source == "markov-k3":  # the circuit's rows in bold, the key edge among them
        assert "L0H0 -> L1H0.k" in " ".join(page.locator("#movie-edges tr.circuit").all_inner_texts())
    page.focus("#step-slider")
    page.keyboard.press("Home")
    assert page.inner_text("#step-label").startswith("step 0") and before != page.inner_text("#step-label")
    assert page.locator("#movie-heads canvas").first.screenshot() != patterns
    assert spread(page.screenshot(full_page=True)) > 20 and spread(patterns) > 5
    assert problems == []


def test_the_explorer_shows_a_heads_attention_on_hover_and_on_click(browser, tmp_path):
    run = Run.open("markov-k3")
    path = tmp_path / "explorer.html"
    shown = probe_run(run, probe_eval_set(run, 10, 0), steps=[4000]).attention().html()
    path.write_text(f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{shown}</body></html>')
    page, problems = open_page(browser, path)
    assert page.get_by_text("L0H0 Zoomed").is_visible()
    thumbnail = page.locator("h4", has_text="L1H0").first
    thumbnail.hover()
    assert page.get_by_text("L1H0 Zoomed").is_visible()
    thumbnail.click()  # locked: it stays when the pointer leaves
    page.mouse.move(5, 5)
    assert page.get_by_text("L1H0 Zoomed").is_visible()
    assert spread(page.locator("canvas").nth(2).screenshot()) > 5  # the enlarged pattern, drawn
    assert problems == []


def test_three_notebook_views_share_one_bundle_and_a_view_without_it_says_so(browser, tmp_path, monkeypatch):
    """Issue 65: a notebook's outputs share one page; the first view carries the bundle, the later ones render with
    it, and a view whose page lacks it (the first output cleared, a static export) says so instead of a blank."""
    from induction_probes.probes.views import explorer

    monkeypatch.setattr(explorer, "NOTEBOOK", explorer.NotebookBundle())
    view = Run.open("markov-k3")
    example = probe_run(view, probe_eval_set(view, 10, 0), steps=[4000]).attention()
    shown = [example._repr_html_() for _ in range(3)]

    def page_of(outputs: list[str], name: str):
        path = tmp_path / name
        body = "".join(f"<div class='output'>{html}</div>" for html in outputs)
        path.write_text(f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{body}</body></html>')
        return path

    page, problems = open_page(browser, page_of(shown, "notebook.html"))
    assert page.get_by_text("L0H0 Zoomed").count() == 3 and problems == []
    cleared = browser.new_page()  # no canvas will come: open_page would wait for one
    errors = []
    cleared.on("pageerror", lambda error: errors.append(str(error)))
    cleared.goto(page_of(shown[1:2], "cleared.html").as_uri())
    assert cleared.get_by_text("needs the CircuitsVis bundle").is_visible() and errors == []
