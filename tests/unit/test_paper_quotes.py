"""The paper page quotes the authors' own words (probes/paper/quotes.toml): each table names its seed text, the
quote is whole sentences found verbatim in that text, and a claim of ours that is narrower or broader than the
sentence, or has no sentence to quote, says so in a note. The file is read as the page builder reads it
(``read_quotes``), without building the page (which redraws every figure)."""

import re
from pathlib import Path

import pytest

from induction_probes.probes.paper.entries import SCOPES, SEEDS, read_quotes

# The two seed documents (the authors' responses to their reviewers) lie in shared/seeds beside the repository,
# as in CI; a checkout without them still runs the format checks.
SEED_DIRECTORY = Path(__file__).resolve().parents[2].parent / "shared" / "seeds"
NO_QUOTE = "none"  # the seed of an entry whose claim the responses do not state


def collapsed(text: str) -> str:
    """``text`` with every run of whitespace (line breaks too) as one space: a quote is compared on words."""
    return re.sub(r"\s+", " ", text).strip()


def seed_texts() -> dict[str, str]:
    """Each seed's text, collapsed, from its one file ``<seed>-*.txt``."""
    texts = {}
    for seed in SEEDS:
        files = sorted(SEED_DIRECTORY.glob(f"{seed}-*.txt"))
        assert len(files) == 1, f"expected one seed file {seed}-*.txt in the seeds folder, found {len(files)}"
        texts[seed] = collapsed(files[0].read_text(encoding="utf-8"))
    return texts


def format_problems(where: str, table: dict) -> list[str]:
    """What is wrong with one table's format (empty when nothing)."""
    problems = []
    seed, scope = table.get("seed"), table.get("scope")
    quote, note = table.get("quote", ""), table.get("note", "").strip()
    if seed not in (*SEEDS, NO_QUOTE):
        problems.append(f"seed {seed!r} is none of {(*SEEDS, NO_QUOTE)}")
    if scope not in SCOPES:
        problems.append(f"scope {scope!r} is none of {SCOPES}")
    if (scope != "same" or seed == NO_QUOTE) and not note:
        problems.append("a narrower or broader claim, or one with nothing to quote, needs a note saying how")
    if set(table) - {"seed", "quote", "scope", "note"}:
        problems.append(f"unknown keys {sorted(set(table) - {'seed', 'quote', 'scope', 'note'})}")
    if seed == NO_QUOTE and quote:
        problems.append('seed = "none" quotes nothing: the note says where the claim comes from')
    if seed in SEEDS:
        if quote != collapsed(quote) or not quote:
            problems.append("the quote is empty or has doubled or leading whitespace")
        # whole sentences: a capital (or formula) first, sentence punctuation last
        elif not (quote[0].isupper() or quote[0] == "$") or quote[-1] not in ".!?":
            problems.append(f"the quote is not whole sentences: {quote[:40]!r} … {quote[-20:]!r}")
    return [f"{where}: {problem}" for problem in problems]


def test_every_table_names_its_seed_and_scope_and_notes_what_is_not_the_same():
    quotes = read_quotes()
    assert len(quotes) >= 40  # the page's entries when this was written; the lead's test checks each has a table
    problems = [problem for where, table in quotes.items() for problem in format_problems(where, table)]
    assert not problems, "\n".join(problems)


def test_the_format_check_can_fail():
    """Each rule of :func:`format_problems` flags the table that breaks it (so a passing file means something)."""
    good = {"seed": "edelman", "quote": "A sentence.", "scope": "same"}
    assert format_problems("x", good) == []
    for broken in (
        {**good, "seed": "blog"},
        {**good, "scope": "wider"},
        {**good, "scope": "narrower"},  # no note
        {"seed": NO_QUOTE, "scope": "same"},  # no note on where the claim comes from
        {"seed": NO_QUOTE, "quote": "A sentence.", "scope": "same", "note": "Fig. 3"},
        {**good, "quote": ""},
        {**good, "quote": "a sentence  cut."},
        {**good, "quote": "sentence cut off mid-way"},
        {**good, "source": "Fig. 3"},
    ):
        assert format_problems("x", broken), broken


def test_every_quote_is_verbatim_in_its_seed():
    if not SEED_DIRECTORY.is_dir():
        pytest.skip("the seed documents are not beside the repository")
    texts = seed_texts()
    missing = [
        f"{where}: not in the {table['seed']} seed: {table['quote'][:60]!r}"
        for where, table in read_quotes().items()
        if table.get("seed") in texts and collapsed(table.get("quote", "")) not in texts[table["seed"]]
    ]
    assert not missing, "\n".join(missing)
    # the check can fail: a quote with one word left out is not found
    seed, quote = next((t["seed"], t["quote"]) for t in read_quotes().values() if t.get("seed") in texts)
    words = quote.split()
    assert " ".join(words[:1] + words[2:]) not in texts[seed]
