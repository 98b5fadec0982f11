"""What every command module shares: the one-line-error parser, options generated from config classes,
the options of commands that read a run or a language model, and how an answer is printed.
Torch-free, so parsing never waits for torch."""

from __future__ import annotations

import argparse
import os
from dataclasses import MISSING, fields
from pathlib import Path

from induction_probes.circuits.common.config import config_from_options, option_names  # noqa: F401 (the command modules import them from here)
from induction_probes.circuits.common.defaults import PROBE_SEED, PROBE_SEQS
from induction_probes.circuits.common.devices import DeviceOptions
from induction_probes.circuits.common.lazy import lazy_module
from induction_probes.circuits.common.limits import require_seed
from induction_probes.probes.report.tables import json_text

# read once a command names a model: parsing (and --help) needs no Hugging Face layer
language_models = lazy_module("induction_probes.circuits.interop.language_models")

PROG = "induction-probes"
FIELD_TYPES = {"int": int, "float": float, "str": str}


class UsageError(Exception):
    """Raised instead of argparse's usage dump, so that every error is one line."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would print the usage too
        raise UsageError(message)


def path(text: str) -> Path:
    """The type of every path argument: an empty one names no place (``Path("")`` would be the current
    directory, where a run or figures would land unasked)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no place")
    return Path(text)


def run_name(text: str) -> str:
    """The type of every run argument (a folder or a shipped run's name): an empty one names no place either."""
    path(text)
    return text


def count(text: str) -> int:
    """The type of an option that counts sequences: an integer >= 1, checked while parsing, so that the message
    names the option (``--probe-seqs``), not the parameter it is passed as."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text[:200]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def seed(text: str) -> int:
    """The type of every --seed: an integer from 0 to circuits/common/limits.py's MAX_SEED, checked while parsing."""
    try:
        return require_seed("a seed", int(text))
    except ValueError as error:
        message = str(error) if text.strip().lstrip("+-").isdigit() else f"a seed must be an integer, got {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_config_options(parser: argparse.ArgumentParser, config_class: type) -> None:
    """One option per documented field of ``config_class`` and of the configs it holds (a recipe's task),
    with the field's help and default. Options left out stay out of the namespace (``SUPPRESS``), so
    only what was typed is passed on, and the config class fills in its own defaults."""
    for field in fields(config_class):
        if "config" in field.metadata:
            add_config_options(parser, field.metadata["config"])
            continue
        if not field.metadata.get("help"):
            continue
        default = "" if field.default is MISSING or field.default is None else f" (default {field.default})"
        text = field.metadata["help"].replace("%", "%%") + default
        # a string under `from __future__ import annotations` (the package's configs), a type otherwise
        type_name = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
        if type_name == "bool":
            action = argparse.BooleanOptionalAction
            parser.add_argument(flag(field.name), dest=field.name, action=action, default=argparse.SUPPRESS, help=text)
            continue
        extras = dict(field.metadata["argparse"])
        if "type" not in extras:  # per-layer fields name their own parser
            extras["type"] = FIELD_TYPES[type_name.split(" | ")[0]]
        parser.add_argument(flag(field.name), dest=field.name, default=argparse.SUPPRESS, help=text, **extras)


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """``--device``, on every command that runs a model (generated from :class:`DeviceOptions`)."""
    add_config_options(parser, DeviceOptions)


def device_of(args: argparse.Namespace) -> str:
    """The ``--device`` given, or the default (cpu); checked against this machine in ``main``."""
    return config_from_options(DeviceOptions, typed_options(args, DeviceOptions)).device


def typed_options(args: argparse.Namespace, config_class: type) -> dict:
    """The options of ``config_class`` that were given on the command line."""
    given = vars(args)
    return {name: given[name] for name in option_names(config_class) if name in given}


def add_run_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=run_name, help="run directory or shipped run name (e.g. markov-k3)")


def add_subcommands(parser: argparse.ArgumentParser, dest: str):
    """The sub-commands of a command (``verify prop21``), one of which must be given."""
    return parser.add_subparsers(dest=dest, required=True, parser_class=type(parser))


def answer(value: str | dict) -> str:
    """What a command prints: the report's text as it is, or its JSON-ready dict as strict JSON."""
    return value if isinstance(value, str) else json_text(value)


def add_output_options(parser: argparse.ArgumentParser, plot: bool = True) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    if plot:
        parser.add_argument("--plot", type=path, metavar="DIR", help="write figures (PNG) into DIR")


def add_probe_set_options(parser: argparse.ArgumentParser) -> None:
    """Fresh sequences of the run's task, a seed apart from its training and evaluation, and the device
    the model runs on."""
    add_device_option(parser)
    parser.add_argument(
        "--n-seqs", type=count, default=PROBE_SEQS, help="fresh sequences to probe on (default %(default)s)"
    )
    parser.add_argument("--seed", type=seed, default=PROBE_SEED, help="seed of those sequences (default %(default)s)")
    add_output_options(parser)


# --- a run of ours or a Hugging Face language model -------------------------------------------------------

LM_OPTIONS = ("length", "threshold", "text", "task", "k", "seq_len")  # options only a language model reads
INDUCTION_OPTIONS = ("length", "threshold", "text")  # those of the repeated-tokens protocol, not of --task markov


def length_range(text: str) -> int | tuple[int, int]:
    """The type of --length: |R| as one integer (12) or an inclusive range (8-16)."""
    low, dash, high = text.partition("-")
    if not (low.strip().isdigit() and (not dash or high.strip().isdigit())):
        raise argparse.ArgumentTypeError(f"|R| must be an integer or a range LOW-HIGH (e.g. 8-16), got {text[:200]!r}")
    value = (int(low), int(high)) if dash else int(low)
    bounds = value if dash else (value, value)
    if not 2 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"|R| needs 2 <= LOW <= HIGH, got {text[:200]!r}")
    return value


def share(text: str) -> float:
    """The type of a --threshold: a number in (0, 1] (NaN and infinity are no threshold)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a threshold must be a number in (0, 1], got {text[:200]!r}") from None
    if not 0 < value <= 1:  # also false for NaN
        raise argparse.ArgumentTypeError(f"a threshold must be a number in (0, 1], got {text[:200]!r}")
    return value


def add_language_model_options(parser: argparse.ArgumentParser, ablate: bool = False) -> None:
    """The options only a language model reads; a run of ours given one is refused, not silently ignored."""
    group = parser.add_argument_group("language models (a Hugging Face model directory or cache name)")
    group.add_argument(
        "--length",
        type=length_range,
        help="|R| in the repeated random sequences [BOS] + F + R + R: N, or a range LOW-HIGH drawn per sequence "
        "(default 10-50, within the model's context)",
    )
    what = "share of the induction gap an ablation removes (default 0.5)" if ablate else "attention score (default 0.4)"
    group.add_argument("--threshold", type=share, help=f"mark heads whose {what} reaches this")
    if not ablate:
        group.add_argument(
            "--task",
            choices=["induction", "markov"],
            help="induction: repeated random tokens (default); markov: ICL-MC chains over --k of its tokens",
        )
        group.add_argument("--k", type=count, help="--task markov: states of each chain (default 3)")
        group.add_argument(
            "--seq-len", type=count, help="--task markov: tokens per sequence (default 100, within the context)"
        )
        group.add_argument(
            "--text",
            type=path,
            metavar="FILE",
            help="also the ICL score on this UTF-8 text: loss at token 500 minus token 50 (Olsson et al.)",
        )


def language_model(args: argparse.Namespace):
    """The language model (a ``ModelSource`` or ``Series``) that ``args.run`` names, or None for a run of ours,
    which must not have been given the language-model options. The one place that tells the two apart.
    Nothing is downloaded: the environment is set offline for Hugging Face before anything of theirs loads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    source = language_models.find_source(args.run)
    given = [name for name in LM_OPTIONS if getattr(args, name, None) is not None]
    if source is None and given:
        raise ValueError(f"--{given[0].replace('_', '-')} applies to language models only; {args.run} is a run")
    markov = getattr(args, "task", None) == "markov"
    if markov and (wrong := [name for name in INDUCTION_OPTIONS if getattr(args, name, None) is not None]):
        raise ValueError(f"--{wrong[0]} belongs to the repeated-tokens protocol, not to --task markov")
    if not markov and (wrong := [name for name in ("k", "seq_len") if getattr(args, name, None) is not None]):
        raise ValueError(f"--{wrong[0].replace('_', '-')} applies to --task markov only")
    return source


def language_model_options(args: argparse.Namespace) -> dict:
    """The keyword arguments every language-model view takes from the command line."""
    options = {"length": args.length, "n_seqs": args.n_seqs, "seed": args.seed, "device": device_of(args)}
    return (
        options
        | {"as_json": args.json, "plot": getattr(args, "plot", None)}
        | ({"threshold": args.threshold} if args.threshold is not None else {})
    )
