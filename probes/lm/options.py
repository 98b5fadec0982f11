"""The options only a language model reads, as configs: the ``probe`` and ``ablate`` commands' language-model options
are generated from these fields (help text and parsing included), and each is a keyword argument of the view the
command calls (:mod:`induction_probes.probes.report.lm_views`, :mod:`~induction_probes.probes.report.lm_markov`). A run
of ours given one of them is refused, not silently ignored. Torch-free: the command line reads it while it parses.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from induction_probes.circuits.config import Config, count, option, option_names
from induction_probes.circuits.validation import quoted


def length_range(text: str) -> int | tuple[int, int]:
    """The type of --length: |R| as one integer (12) or an inclusive range (8-16)."""
    low, dash, high = text.partition("-")
    digits = low.strip().isdigit() and (not dash or high.strip().isdigit())
    if (
        not digits or max(len(low.strip()), len(high.strip())) > 9
    ):  # no context holds 10^9 tokens; int() of 5,000 digits fails
        raise argparse.ArgumentTypeError(
            f"|R| must be an integer below 10^9 or a range LOW-HIGH (e.g. 8-16), got {quoted(text)}"
        )
    bounds = (int(low), int(high) if dash else int(low))
    if not 2 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"|R| needs 2 <= LOW <= HIGH, got {text[:200]!r}")
    return bounds if dash else bounds[0]


def share(text: str) -> float:
    """The type of a --threshold: a number in (0, 1] (NaN and infinity are no threshold)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a threshold must be a number in (0, 1], got {text[:200]!r}") from None
    if not 0 < value <= 1:  # also false for NaN
        raise argparse.ArgumentTypeError(f"a threshold must be a number in (0, 1], got {text[:200]!r}")
    return value


def text_file(text: str) -> Path:
    """The type of --text: a path (an empty one names no file)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no file")
    return Path(text)


@dataclass(frozen=True)
class LanguageModelOptions(Config):
    """What ``probe`` and ``ablate`` share on a language model."""

    length: int | tuple[int, int] | None = option(
        None,
        "|R| in the repeated random sequences [BOS] + F + R + R: N, or a range LOW-HIGH drawn per sequence "
        "(default 10-50, within the model's context)",
        type=length_range,
    )
    quiet: bool = option(False, "no progress bar on stderr (none is drawn where stderr is no terminal either)")
    threads: int | None = option(
        None,
        "torch threads (default: one for a model under 10 M parameters, torch's default for a larger one)",
        type=count,
        metavar="N",
    )
    backend: str | None = option(
        None,
        "with --all-steps: local (default) or ray, one Ray task per checkpoint, on a local Ray instance or the cluster "
        "at --address (every node sees the series at the same path)",
        choices=["local", "ray"],
    )
    address: str | None = option(None, "--backend ray: a running cluster's address (default: a local instance)")


@dataclass(frozen=True)
class AblationOptions(LanguageModelOptions):
    threshold: float | None = option(
        None, "mark ablations that remove this share of the induction gap (default 0.5)", type=share
    )
    screen: int | None = option(
        None,
        "rank every head by AtP* (Kramar et al. 2024: attribution patching, with the softmax of later heads' "
        "queries and keys recomputed exactly so that heads read through saturated attention are found, and "
        "GradDrop, so that paths cancelling to first order are found), then ablate only the top N exactly (zero "
        "and mean modes); first-order elsewhere, and blind where the loss itself saturates",
        type=count,
        metavar="N",
    )
    out: Path | None = option(
        None,
        "journal each head's result to FILE as soon as it is final (one JSON line a head; with --all-steps, FILE is "
        "a folder of step_N.jsonl journals); the same command resumes from it after Ctrl-C or a kill",
        type=text_file,
        metavar="FILE",
    )


@dataclass(frozen=True)
class ProbeOptions(LanguageModelOptions):
    threshold: float | None = option(None, "mark heads whose attention score reaches this (default 0.4)", type=share)
    text: Path | None = option(
        None,
        "also the ICL score on this UTF-8 text: loss at token 500 minus token 50 (Olsson et al.)",
        type=text_file,
        metavar="FILE",
    )
    task: str | None = option(
        None,
        "induction: repeated random tokens (default); markov: ICL-MC chains over --k of its tokens",
        choices=["induction", "markov"],
    )
    k: int | None = option(None, "--task markov: states of each chain (default 3)", type=count)
    seq_len: int | None = option(
        None, "--task markov: tokens per sequence (default 100, within the context)", type=count
    )
    id_draws: int | None = option(
        None, "--task markov: draws of the k token ids, each with its own --n-seqs sequences (default 4)", type=count
    )


@dataclass(frozen=True)
class CircuitOptions(LanguageModelOptions):
    checked: int | None = option(
        None,
        "of a model with more than 300 edges, which EAP-IG (Hanna et al. 2024) screens first: how many of the edges "
        "it ranks highest are patched exactly (default 100)",
        type=count,
        metavar="N",
    )
    marked: bool = option(
        False,
        "instead of the screen, patch exactly only the edges among the heads probe marks (previous-token and "
        "induction heads), the embedding, the MLPs and the logits; the circuit's faithfulness still patches every "
        "other edge",
    )


LM_OPTIONS = tuple(
    dict.fromkeys(option_names(ProbeOptions) + option_names(AblationOptions) + option_names(CircuitOptions))
)  # a model's only
INDUCTION_OPTIONS = ("length", "threshold", "text")  # those of the repeated-tokens protocol, not of --task markov
MARKOV_OPTIONS = ("k", "seq_len", "id_draws")  # those of --task markov
