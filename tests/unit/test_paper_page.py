"""The paper page's parts that need no shipped file: its measures against hand computations, the verdict
rules of an entry, and the HTML (escaped, figures beside it, each shown once)."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import norm

from induction_probes.probes.behaviour.icl_behaviour import Phase
from induction_probes.probes.paper.edelman_figures import (
    AUTHORS_BASELINES,
    baselines_entry,
    chance_z,
    difference_se,
    passes,
)
from induction_probes.probes.paper.entries import (
    AGREE,
    AT_OUR_SETTINGS,
    DIFFER,
    NOT_YET,
    PARTLY,
    RULE_OUTCOME,
    Entry,
    at_our_settings,
    by_parts,
    interval_text,
    not_yet,
)
from induction_probes.probes.paper.page import page_html


@pytest.mark.parametrize(("comparisons", "share", "tolerance"), [(1, 0.05, 0.014), (6, 0.05 / 6, 0.006)])
def test_the_chance_bound_is_crossed_by_its_share_of_chance_differences(comparisons, share, tolerance):
    # brute force: 4000 pairs of means of normal samples (sizes 768 and 2000, sd 0.3); a difference crosses the
    # bound of one comparison 5 % of the time, that of six 5 %/6 (each of six at most, so that all six stay
    # inside 95 % of the time). Tolerances: 4 binomial standard errors of the share over 4000 draws
    rng = np.random.default_rng(0)
    a = rng.normal(0, 0.3, (4000, 768)).mean(1)
    b = rng.normal(0, 0.3, (4000, 2000)).mean(1)
    crossed = np.mean(np.abs(a - b) > chance_z(comparisons) * difference_se(0.3, 2000, 768))
    assert abs(crossed - share) < tolerance


def test_chance_z_is_the_two_sided_bonferroni_quantile():
    assert chance_z(1) == pytest.approx(norm.isf(0.025), abs=1e-12)
    assert chance_z(6) == pytest.approx(norm.isf(0.05 / 12), abs=1e-12)


def facts_at(k3_unigram: float) -> tuple:
    """Two runs whose baselines equal the authors' lines but for k = 3 unigram; spread 0.2, 2,000 sequences."""

    def run(k, unigram):
        lines = dict(AUTHORS_BASELINES[k]) | ({"unigram": unigram} if unigram is not None else {})
        return SimpleNamespace(
            baselines=lines, baseline_sd=dict.fromkeys(lines, 0.2), n_eval=2000, figures={"loss": Path("loss.png")}
        )

    return run(3, k3_unigram), run(2, None)


@pytest.mark.parametrize(("z", "verdict"), [(-2.3, AGREE), (2.6, AGREE), (-2.7, DIFFER)])
def test_the_strategy_lines_differ_only_past_the_bound_of_six(z, verdict):
    unigram = AUTHORS_BASELINES[3]["unigram"] + z * difference_se(0.2, 2000)
    assert baselines_entry(*facts_at(unigram)).verdict == verdict


def phases(*strategies):
    return SimpleNamespace(phases=[Phase(name, i, i, i, i) for i, name in enumerate(strategies)])


def test_passes_needs_the_order_and_the_end():
    assert passes(phases("uniform", "unigram", "bigram"), ("uniform", "unigram", "bigram"))
    assert passes(phases("uniform", "unigram", "uniform", "unigram", "bigram"), ("uniform", "unigram", "bigram"))
    assert not passes(phases("uniform", "bigram"), ("uniform", "unigram", "bigram"))
    assert not passes(phases("uniform", "unigram", "bigram", "unigram"), ("uniform", "unigram", "bigram"))


def test_a_claim_of_parts_agrees_with_all_differs_with_none():
    assert by_parts([True, True, True]) == AGREE
    assert by_parts([True, False, True]) == PARTLY
    assert by_parts([False, False]) == DIFFER


def test_interval_text():
    assert interval_text({"mean": 28441.6, "low": 23836.7, "high": 33046.4}, 1000, 3, "k") == "28.4k [23.8k, 33.0k]"
    assert interval_text({"mean": 0.5, "low": None, "high": None}) == "0.500"


def test_an_entry_states_its_reason_unless_it_agrees():
    with pytest.raises(ValueError, match="needs its reason"):
        Entry("Wang et al. 2024", "Fig. 2", "claim", "ours", DIFFER)
    with pytest.raises(ValueError, match="verdict must be"):
        Entry("Wang et al. 2024", "Fig. 2", "claim", "ours", "maybe")
    assert not_yet("Wang et al. 2024", "Fig. 3", "claim", "issue 23").verdict == NOT_YET


def test_the_page_escapes_text_and_shows_each_figure_once():
    figure = Path("/nowhere/a b&c.png")
    entries = [
        Entry(
            "Edelman et al. 2024",
            "Fig. <1>",
            "a <script>alert(1)</script> claim",
            "ours & more",
            AGREE,
            figures=[figure],
        ),
        Entry("Edelman et al. 2024", "Fig. 2", "claim", "ours", DIFFER, "because", figures=[figure]),
        not_yet("Wang et al. 2024", "Fig. 3", "claim", "issue 23"),
    ]
    page = page_html(entries, 1.0, "induction-probes paper --out DIR")
    assert "<script>" not in page and "&lt;script&gt;" in page and "Fig. &lt;1&gt;" in page
    assert page.count('<img src="figures/a%20b%26c.png"') == 1 and 'href="#entry-0"' in page
    assert "<b>Why:</b> because" in page and "<b>Issue:</b> issue 23" in page
    assert 'href="https://arxiv.org/abs/2402.11004"' in page and 'href="https://arxiv.org/abs/2410.11474"' in page
    contents = page[page.index('<nav id="contents">') : page.index("</nav>")]  # the table of contents, on top
    assert page.index("</nav>") < page.index('<h2 id="paper-0">') and 'id="paper-1"' in page
    assert all(f'href="#entry-{i}"' in contents for i in range(3)) and 'href="#paper-1"' in contents


def test_a_differ_at_settings_the_authors_did_not_give_reads_not_reproduced_at_our_settings():
    """A rule's "differ" on a claim whose settings the authors leave out supports only "not reproduced at our
    settings"; the reason states ours; the word stands for the rule's differ; other verdicts pass unchanged."""
    verdict, reason = at_our_settings(DIFFER, "at neither rate", "d = 8, 5 seeds", "dimension or learning rate")
    assert verdict == AT_OUR_SETTINGS == "not reproduced at our settings" and RULE_OUTCOME[verdict] == DIFFER
    assert reason == (
        "the rule reads differ at our settings (d = 8, 5 seeds; the authors give no dimension or learning rate): "
        "at neither rate"
    )
    assert at_our_settings(PARTLY, "one rate", "d = 8", "dimension") == (PARTLY, "one rate")
    with pytest.raises(ValueError, match="needs its reason"):
        Entry("Wang et al. 2024", "Fig. 5", "claim", "ours", AT_OUR_SETTINGS)
    page = page_html([Entry("Wang et al. 2024", "Fig. 5", "claim", "ours", verdict, reason)], 1.0, "paper")
    assert '<span class="verdict oursettings">not reproduced at our settings</span>' in page
    assert "<b>Why:</b> the rule reads differ at our settings" in page and "1 not reproduced at our settings" in page
