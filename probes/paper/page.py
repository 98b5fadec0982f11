"""The paper page as HTML: one offline file whose figures lie beside it (``figures/NAME.png``, linked by
relative paths), every text escaped, nothing fetched: no script, font or style from elsewhere. The only
addresses it holds are plain links to the two papers' arXiv pages."""

from __future__ import annotations

import html
import struct
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from induction_probes.probes.figures.plots import DPI, is_wide
from induction_probes.probes.paper.entries import (
    AGREE,
    AT_OUR_SETTINGS,
    DIFFER,
    EXTRA,
    NOT_YET,
    PARTLY,
    SEEDS,
    VERDICTS,
    Entry,
    Quote,
)

PAPERS = {
    "Edelman et al. 2024": (
        "The Evolution of Statistical Induction Heads: In-Context Learning Markov Chains",
        "https://arxiv.org/abs/2402.11004",
    ),
    "Wang et al. 2024": (
        "How Transformers Implement Induction Heads: Approximation and Optimization Analysis",
        "https://arxiv.org/abs/2410.11474",
    ),
    "beyond the papers": ("Shipped results that neither paper measures", None),
}
CLASSES = {
    AGREE: "agree",
    PARTLY: "partly",
    DIFFER: "differ",
    AT_OUR_SETTINGS: "oursettings",
    NOT_YET: "notyet",
    EXTRA: "extra",
}
STYLE = """
body { font-family: sans-serif; max-width: 1150px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { margin-top: 2.2em; border-bottom: 1px solid #ccc; }
h3 { margin-bottom: 0.3em; }
table { border-collapse: collapse; width: 100%; font-size: 0.9em; }
td, th { border: 1px solid #ddd; padding: 4px 6px; } th { background: #f3f3f3; text-align: left; }
.entry { margin: 1.6em 0; padding-top: 0.4em; border-top: 1px dashed #ddd; }
.verdict { font-weight: bold; padding: 1px 7px; border-radius: 4px; white-space: nowrap; }
.agree { background: #d8f0d8; } .partly { background: #fdf0c8; } .differ { background: #f8d4d4; }
.notyet { background: #e4e4e4; } .extra { background: #dde8f6; } .oursettings { background: #f4e1cc; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
figure { margin: 0.5em 0; flex: 1 1 460px; max-width: 820px; } img { width: 100%; border: 1px solid #eee; }
figure.wide { flex-basis: 100%; max-width: none; }
figcaption { color: #666; font-size: 0.85em; }
.sources { color: #666; font-size: 0.85em; }
#contents ul { padding-left: 1.2em; } #contents li { margin: 0.5em 0; } a.up { font-size: 0.55em; font-weight: normal; }
"""


UP = '<a class="up" href="#contents">contents</a>'  # back to the table of contents, beside each paper's title


def text(value: object) -> str:
    return html.escape(str(value), quote=True)


def anchor(index: int) -> str:
    return f"entry-{index}"


def figure_src(path: Path) -> str:
    """The relative address of a figure beside the page (its name percent-encoded)."""
    return "figures/" + quote(path.name)


def figure_class(path: Path) -> str:
    """``wide`` for a figure drawn wider than a column holds readably (``is_wide``: several panels), so the page
    shows it across the whole text; read from the PNG's header (its width at 8 bytes past the IHDR tag)."""
    try:
        header = path.read_bytes()[:24]
    except OSError:  # a figure not drawn here (an entry built by hand): shown in a column
        return ""
    ok = header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR"
    return ' class="wide"' if ok and is_wide(struct.unpack(">I", header[16:20])[0] / DPI) else ""


def badge(verdict: str) -> str:
    return f'<span class="verdict {CLASSES[verdict]}">{text(verdict)}</span>'


def overview(numbered: list[tuple[int, Entry]]) -> str:
    """One row per entry: where, the claim's first words, the verdict; each a link to its entry below."""
    rows = "".join(
        f'<tr><td><a href="#{anchor(i)}">{text(e.where)}</a></td><td>{text(e.claim)}</td>'
        f"<td>{badge(e.verdict)}</td></tr>"
        for i, e in numbered
    )
    return f"<table><tr><th>figure / section</th><th>claim</th><th>verdict</th></tr>{rows}</table>"


def quote_html(quote: Quote | None) -> list[str]:
    """The authors' words and how our claim stands to them (nothing for an entry built without its quote)."""
    if quote is None:
        return []
    if quote.seed == "none":  # the note says where the claim comes from (and how ours stands to it)
        return [f"<p><b>Authors:</b> <i>not restated in their responses to the reviewers</i> ({text(quote.note)})</p>"]
    said = f"<p><b>Authors</b> ({text(SEEDS[quote.seed])}): &ldquo;{text(quote.text)}&rdquo;</p>"
    return [said] + ([] if quote.scope == "same" else [f"<p><b>Ours is {quote.scope}:</b> {text(quote.note)}</p>"])


def entry_html(index: int, entry: Entry, shown: dict[str, int]) -> str:
    """An entry's claim, our numbers, its verdict (with the reason where it is not agree) and its figures;
    a figure that an earlier entry shows is linked to, not repeated."""
    parts = [
        f'<div class="entry" id="{anchor(index)}"><h3>{text(entry.where)} {badge(entry.verdict)}</h3>',
        *quote_html(entry.quote),
        f"<p><b>Claim judged:</b> {text(entry.claim)}</p>",
        f"<p><b>Ours:</b> {text(entry.ours)}</p>",
    ]
    if entry.reason:
        parts.append(f"<p><b>{'Issue' if entry.verdict == NOT_YET else 'Why'}:</b> {text(entry.reason)}</p>")
    drawn = []
    for path in entry.figures:
        if path.name in shown:
            parts.append(
                f'<p class="sources">Figure {text(path.name)}: shown with '
                f'<a href="#{anchor(shown[path.name])}">an entry above</a>.</p>'
            )
            continue
        shown[path.name] = index
        src = text(figure_src(path))  # the figure links to itself: a click shows it at full size
        drawn.append(
            f'<figure{figure_class(path)}><a href="{src}"><img src="{src}" alt="{text(path.name)}"></a>'
            f"<figcaption>{text(path.name)}</figcaption></figure>"
        )
    if drawn:
        parts.append('<div class="figures">' + "".join(drawn) + "</div>")
    if entry.sources:
        parts.append(f'<p class="sources">Read from: {text("; ".join(entry.sources))}</p>')
    return "\n".join(parts + ["</div>"])


def counts_text(entries: list[Entry]) -> str:
    counts = Counter(e.verdict for e in entries)
    return ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v])


def page_html(entries: list[Entry], seconds: float, command: str) -> str:
    """The whole page: a head with the counts of verdicts, then per paper an overview table and its entries."""
    numbered = list(enumerate(entries))
    shown: dict[str, int] = {}
    sections, contents = [], []
    for number, (paper, (title, address)) in enumerate(PAPERS.items()):
        mine = [(i, e) for i, e in numbered if e.paper == paper]
        if not mine:
            continue
        link = f' (<a href="{text(address)}">arXiv</a>)' if address else ""
        contents.append(contents_item(number, paper, title, mine))
        sections += [
            f'<h2 id="paper-{number}">{text(paper)}: {text(title)}{link} {UP}</h2>',
            f"<p>{text(counts_text([e for _, e in mine]))}.</p>",
            overview(mine),
            *(entry_html(i, e, shown) for i, e in mine),
        ]
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>induction-probes: both papers, redrawn</title><style>{STYLE}</style></head><body>",
        "<h1>Both papers, redrawn from the shipped runs and results</h1>",
        f"<p>Every figure below was drawn by <code>{text(command)}</code> in {seconds:.0f} s from the shipped runs "
        "(<code>checkpoints/</code>) and results (<code>experiments/results/</code>), or computed from them; nothing "
        "was trained. Each entry gives the paper's figure or section, what the paper claims, what we measured, and "
        "whether the two agree; a figure the project does not reproduce yet names the issue that would add it. "
        f"In all: {text(counts_text(entries))}; {len(shown)} figures; a figure opens at full size when clicked.</p>",
        f'<nav id="contents"><h2>Contents</h2><ul>{"".join(contents)}</ul></nav>',
    ]
    return "\n".join(head + sections + ["</body></html>"])


def contents_item(number: int, paper: str, title: str, mine: list[tuple[int, Entry]]) -> str:
    """A paper's line of the table of contents: its section, its counts, and a link to each of its entries."""
    links = " · ".join(f'<a href="#{anchor(i)}">{text(e.where)}</a>' for i, e in mine)
    counts = text(counts_text([e for _, e in mine]))
    return f'<li><a href="#paper-{number}">{text(paper)}: {text(title)}</a> ({counts})<br><small>{links}</small></li>'
