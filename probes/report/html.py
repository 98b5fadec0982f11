"""One offline HTML page: sections of text and figures, every figure embedded as a PNG data URI, so the page
opens anywhere with nothing fetched. The ICL-MC report (:mod:`~induction_probes.probes.report.markov_html`) and
the task report (:mod:`~induction_probes.probes.report.task_views`) are written with it."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from induction_probes.circuits.untrusted import write_atomic

STYLE = """
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
figure { margin: 1.5em 0; } img { max-width: 100%; } figcaption { color: #666; font-size: 0.85em; }
"""


def embedded_figure(path: Path) -> str:
    """A PNG file as an <img> whose source is the file itself (a data URI), with its name as caption."""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    name = html.escape(path.name)
    return f'<figure><img src="data:image/png;base64,{data}" alt="{name}"><figcaption>{name}</figcaption></figure>'


def section(title: str, intro: str, text: str, figures: list[Path]) -> str:
    parts = [f"<h2>{html.escape(title)}</h2>", f"<p>{html.escape(intro)}</p>"]
    parts += [f"<pre>{html.escape(text)}</pre>"] if text else []
    return "\n".join(parts + [embedded_figure(path) for path in figures])


def paragraph(text: str) -> str:
    return f"<p>{html.escape(text)}</p>"


def write_page(name: str, heading: str, sections: list[str], directory: Path) -> Path:
    """``directory/NAME_report.html``: the heading and the sections (already HTML) on one page."""
    page = "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(name)}: report</title><style>{STYLE}</style></head><body>",
            f"<h1>{html.escape(heading)}</h1>",
            *sections,
            "</body></html>",
        ]
    )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory.resolve() / f"{name}_report.html"  # the user's folder may be a link; nothing below it is
    write_atomic(path, page.encode("utf-8"))  # a rename: a link planted at the page's name is replaced, not followed
    return path
