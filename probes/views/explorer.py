"""CircuitsVis's attention explorer (``AttentionHeads``: one thumbnail per head; hover or click one to see its
pattern over the tokens, and hover a token to see where it looks), offline.

CircuitsVis's wheel ships its JavaScript bundle (``circuitsvis/dist/cdn/iife.js``), which defines a global
``CircuitsVis``. Its ``str()``, ``show_code()`` and ``_repr_html_`` load that bundle from a CDN (the last one
whenever this machine can reach the internet), so none of them is used: the bundle is inlined into every page
here, once, in a classic ``<script>`` (its ``var CircuitsVis`` is then a global the page's own code can call).

**In a notebook** every output shares one page, so the 1.3 MB bundle is sent once: the first view a kernel shows
(:meth:`AttentionExample._repr_html_`) carries it, and later views call the global it defined. A later view whose
page has no bundle (its first view's output cleared, or a static export that kept only some outputs) says so in
one line where the explorer would be, rather than staying blank. :func:`embed_bundle_in_every_view` makes every
view carry it, for an export. ``.html()`` and every page written to disk (the movie, the report) always carry
it: they stand alone."""

from __future__ import annotations

import functools
import html
import json
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import circuitsvis

from induction_probes.circuits.errors import BadInput

BUNDLE = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"


@functools.cache
def circuitsvis_script() -> str:
    """The bundle's text, without its source-map comment (a browser with its developer tools open would fetch
    the map, a file next to a page that has none)."""
    text = BUNDLE.read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("//# sourceMappingURL="))


def inline_script(code: str, **attributes: str) -> str:
    """``code`` in one ``<script>`` element, any ``</script`` in its strings written ``<\\/script`` (the same
    string to JavaScript and JSON), so that nothing in it ends the element early."""
    extra = "".join(f' {name.replace("_", "-")}="{html.escape(value)}"' for name, value in attributes.items())
    safe = re.sub(r"</(script)", r"<\\/\1", code, flags=re.IGNORECASE)
    return f"<script{extra}>{safe}</script>"


def script_json(value) -> str:
    """``value`` as JSON to write inside a ``<script>``: every ``<`` escaped (``\\u003c``, the same string to
    JSON and JavaScript), so that no token's text (``</s>``, ``<!--``) can end or bend the element."""
    return json.dumps(value).replace("<", "\\u003c")


def rounded(patterns, digits: int = 3) -> Any:  # nested lists of floats, as deep as the input (a float for a number)
    """Nested lists of ``patterns`` (anything with ``tolist``, or lists) rounded to ``digits``: a page's size is
    its numbers' text, and a pixel's colour needs no more."""
    values = patterns.tolist() if hasattr(patterns, "tolist") else patterns
    if isinstance(values, list):
        return [rounded(v, digits) for v in values]
    return round(float(values), digits)


def explorer_props(patterns, tokens: list[str], head_names: list[str]) -> dict:
    """``AttentionHeads``'s properties: ``patterns`` [head, query, key] with one row of keys per token."""
    attention = rounded(patterns)
    if len(attention) != len(head_names):
        raise BadInput(f"{len(attention)} patterns for {len(head_names)} head names")
    if any(len(p) != len(tokens) or any(len(row) != len(tokens) for row in p) for p in attention):
        raise BadInput(f"every pattern must be {len(tokens)} x {len(tokens)}, one row and column per token")
    return {"attention": attention, "tokens": list(tokens), "attentionHeadNames": list(head_names)}


def explorer_html(
    patterns, tokens: list[str], head_names: list[str], caption: str = "", bundle: bool = True, element: str = ""
) -> str:
    """The explorer of ``patterns`` [head, query, key] over ``tokens``, as an HTML fragment that runs offline:
    a ``<div>`` and the script that renders into it (with the bundle, unless the page holds it already).
    ``element``: the ``<div>``'s id (default a fresh one: a notebook shows many outputs on one page)."""
    element = element or f"circuitsvis-{uuid.uuid4().hex[:12]}"
    props = script_json(explorer_props(patterns, tokens, head_names))
    call = (
        f'if (typeof CircuitsVis === "undefined") {{ document.getElementById("{element}").textContent = '
        f'{json.dumps(NO_BUNDLE)}; }} else {{ CircuitsVis.render("{element}", CircuitsVis.AttentionHeads, {props}); }}'
    )
    parts = [f"<p>{html.escape(caption, quote=False)}</p>"] if caption else []
    parts.append(f'<div id="{element}" class="attention-explorer"></div>')
    parts += [inline_script(circuitsvis_script())] if bundle else []
    parts.append(inline_script(call))
    return "\n".join(parts)


NO_BUNDLE = (
    "The attention explorer needs the CircuitsVis bundle, which the first view of this notebook carried: run that "
    "cell again, or call embed_bundle_in_every_view() before showing views for an export."
)


@dataclass
class NotebookBundle:
    """Whether this kernel has sent the bundle to its notebook yet, and whether every view should carry it."""

    sent: bool = False
    every_view: bool = False

    def take(self) -> bool:
        """Whether the view about to be shown carries the bundle (and that it has been sent from now on)."""
        carry = self.every_view or not self.sent
        self.sent = True
        return carry


NOTEBOOK = NotebookBundle()


def embed_bundle_in_every_view(every_view: bool = True) -> None:
    """Every notebook view carries the CircuitsVis bundle from now on (``False``: only the first, the default),
    so that an exported notebook whose outputs were kept in part still renders each view that was kept."""
    NOTEBOOK.every_view = bool(every_view)


@dataclass(frozen=True, eq=False)
class AttentionExample:
    """Heads' patterns on one sequence, as the explorer shows them (a notebook shows the explorer itself)."""

    tokens: list[str]
    heads: list[str]
    patterns: list[list[list[float]]]  # [head][query][key], rounded
    caption: str = ""

    def html(self) -> str:
        """The explorer as a fragment that stands alone: the bundle always in it."""
        return explorer_html(self.patterns, self.tokens, self.heads, self.caption)

    def _repr_html_(self) -> str:
        """The explorer in a notebook: the bundle with the kernel's first view only (module docstring)."""
        return explorer_html(self.patterns, self.tokens, self.heads, self.caption, bundle=NOTEBOOK.take())
