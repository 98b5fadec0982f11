"""One row of the paper page: a figure or claim of a paper, what the project measured for it, and the verdict."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from induction_probes.circuits.errors import BadInput

AGREE, DIFFER, PARTLY, NOT_YET = "agree", "differ", "partly", "not reproduced yet"
# a rule's "differ" where the authors state no settings to reproduce: ours decide it, stated (at_our_settings)
AT_OUR_SETTINGS = "not reproduced at our settings"
EXTRA = "no claim to compare"  # a shipped result that neither paper measures
VERDICTS = (AGREE, PARTLY, DIFFER, AT_OUR_SETTINGS, NOT_YET, EXTRA)
RULE_OUTCOME = {AT_OUR_SETTINGS: DIFFER}  # the rule's outcome a verdict word states, where it is not the word


SEEDS = {"edelman": "Edelman et al.'s response to their reviewers", "wang": "Wang et al.'s response to their reviewers"}
SCOPES = ("same", "narrower", "broader")  # our claim against the authors' sentence


@dataclass(frozen=True)
class Quote:
    """The authors' sentence an entry judges (``seed`` names the text, "none" where their responses do not state
    the claim), and whether our claim is the ``same``, ``narrower`` or ``broader`` (``note`` says how)."""

    seed: str
    text: str
    scope: str
    note: str


@dataclass(frozen=True)
class Entry:
    """``where`` is the paper's figure or section ("Fig. 1", "Thm 4.1", "rebuttal Fig. 6"); ``ours`` the
    measured numbers, read from ``sources`` (shipped files, or a computation on a shipped checkpoint);
    ``reason`` says in one line why a verdict other than agree is what it is (for "not reproduced yet",
    the issue that would add it)."""

    paper: str
    where: str
    claim: str
    ours: str
    verdict: str
    reason: str = ""
    figures: list[Path] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    quote: Quote | None = None  # the authors' own words (:func:`with_quote`), set when the page is built

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise BadInput(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if self.verdict != AGREE and not self.reason:
            raise BadInput(f"{self.paper} {self.where}: a verdict of {self.verdict!r} needs its reason")


def judged(
    paper: str,
    where: str,
    claim: str,
    ours: str,
    holds: bool,
    otherwise: str,
    why: str,
    figures: list[Path] | None = None,
    sources: list[str] | None = None,
) -> Entry:
    """The entry of a claim checked by one test: agree when ``holds``, else the verdict ``otherwise`` with the
    reason ``why``."""
    return Entry(
        paper, where, claim, ours, AGREE if holds else otherwise, "" if holds else why, figures or [], sources or []
    )


def by_parts(held: list[bool]) -> str:
    """The verdict of a claim made of parts: agree when every part holds, differ when none does, partly else."""
    return AGREE if all(held) else PARTLY if any(held) else DIFFER


def at_our_settings(verdict: str, reason: str, settings: str, unstated: str) -> tuple[str, str]:
    """A rule's verdict on a claim whose settings the authors do not state (``unstated``: what they leave out),
    measured at ``settings`` of ours: "differ" there supports "not reproduced at our settings", not that the
    authors' result differs; the reason states the settings. Any other verdict is returned as it is."""
    if verdict != DIFFER:
        return verdict, reason
    stated = f"the rule reads differ at our settings ({settings}; the authors give no {unstated})"
    return AT_OUR_SETTINGS, f"{stated}: {reason}"


def not_yet(paper: str, where: str, claim: str, issue: str, today: str = "nothing yet") -> Entry:
    """A figure or claim the project does not reproduce yet, with the issue that would add it."""
    return Entry(paper, where, claim, today, NOT_YET, reason=issue)


def p_text(p: float | None) -> str:
    """A test's p-value at two figures, or "-" where the test is undefined (no spread, or one pair)."""
    return "-" if p is None else f"{p:.2g}"


def interval_text(stat: dict, scale: float = 1.0, digits: int = 3, unit: str = "") -> str:
    """A summary's {mean, low, high} as "mean [low, high]" at ``digits`` significant figures, divided by
    ``scale`` (1000 for thousands of sequences); a mean without an interval (one seed) alone."""

    def number(value: float) -> str:  # "#": 33.0 keeps its zero, as 0.110 does; 104. loses its point
        return f"{value / scale:#.{digits}g}".rstrip(".") + unit

    if stat.get("low") is None or stat.get("high") is None:
        return number(stat["mean"])
    return f"{number(stat['mean'])} [{number(stat['low'])}, {number(stat['high'])}]"


def with_quote(entry: Entry, quotes: dict[str, dict]) -> Entry:
    """``entry`` with its table of ``quotes`` (``probes/paper/quotes.toml``, keyed by ``where``)."""
    table = quotes.get(entry.where)
    if table is None:
        raise BadInput(f"{entry.paper} {entry.where}: no table in quotes.toml (every entry quotes its authors)")
    return replace(entry, quote=Quote(table["seed"], table.get("quote", ""), table["scope"], table.get("note", "")))


def read_quotes() -> dict[str, dict]:
    """``quotes.toml`` beside this module: the authors' words of every entry."""
    return tomllib.loads((Path(__file__).parent / "quotes.toml").read_text(encoding="utf-8"))
