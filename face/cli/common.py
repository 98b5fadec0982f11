"""What every command module shares: the one-line-error parser, options generated from config classes,
the options of commands that read a run or a language model, and how an answer is printed.
Torch-free, so parsing never waits for torch."""

from __future__ import annotations

import argparse
import os
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, NoReturn, Protocol

from induction_probes.circuits.config import (  # noqa: F401 (the command modules import them from here)
    config_from_options,
    count,
    option_names,
)
from induction_probes.circuits.defaults import LM_PROBE_SEQS, PROBE_SEED, PROBE_SEQS
from induction_probes.circuits.device_options import DeviceOptions
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop import model_sources
from induction_probes.circuits.limits import require_seed
from induction_probes.probes.lm.options import (
    INDUCTION_OPTIONS,
    LM_OPTIONS,
    MARKOV_OPTIONS,
    AblationOptions,
    ProbeOptions,
)
from induction_probes.probes.report.tables import json_text

PROG = "induction-probes"
FIELD_TYPES = {"int": int, "float": float, "str": str}


class UsageError(Exception):
    """Raised instead of argparse's usage dump, so that every error is one line."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print the usage too
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


def seed(text: str) -> int:
    """The type of every --seed: an integer from 0 to circuits/limits.py's MAX_SEED, checked while parsing."""
    try:
        return require_seed("a seed", int(text))
    except ValueError as error:
        message = str(error) if text.strip().lstrip("+-").isdigit() else f"a seed must be an integer, got {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


class OptionTarget(Protocol):
    """Where options are added: a parser, or one of its argument groups."""

    def add_argument(self, *names: str, **settings: Any) -> argparse.Action: ...


def add_config_options(parser: OptionTarget, config_class: type) -> None:
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


def answer(value: str | dict | list) -> str:
    """What a command prints: the report's text as it is, or its JSON-ready dict (or list) as strict JSON."""
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
        "--n-seqs",
        type=count,
        help=f"fresh sequences to probe on (default {PROBE_SEQS} on a run, {LM_PROBE_SEQS} on a language model)",
    )
    parser.add_argument("--seed", type=seed, default=PROBE_SEED, help="seed of those sequences (default %(default)s)")
    add_output_options(parser)


def probe_set_size(args: argparse.Namespace, language_model: bool) -> int:
    """--n-seqs, or the default for what is probed (the API's default, written once in defaults.py)."""
    if args.n_seqs is not None:
        return args.n_seqs
    return LM_PROBE_SEQS if language_model else PROBE_SEQS


# --- a run of ours or a Hugging Face language model -------------------------------------------------------


def add_language_model_options(parser: argparse.ArgumentParser, ablate: bool = False) -> None:
    """The options only a language model reads, generated from their configs
    (:mod:`~induction_probes.probes.lm.options`); a run of ours given one is refused, not silently ignored."""
    group = parser.add_argument_group("language models (a Hugging Face model directory or cache name)")
    add_config_options(group, AblationOptions if ablate else ProbeOptions)


def language_model(args: argparse.Namespace):
    """The language model (a ``ModelSource`` or ``Series``) that ``args.run`` names, or None for a run of ours,
    which must not have been given the language-model options. The one place that tells the two apart.
    Nothing is downloaded: the environment is set offline for Hugging Face before anything of theirs loads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    source = model_sources.find_source(args.run)
    given = [name for name in LM_OPTIONS if getattr(args, name, None) is not None]
    if source is None and given:
        raise BadInput(f"--{given[0].replace('_', '-')} applies to language models only; {args.run} is a run")
    markov = getattr(args, "task", None) == "markov"
    if markov and (wrong := [name for name in INDUCTION_OPTIONS if getattr(args, name, None) is not None]):
        raise BadInput(f"--{wrong[0]} belongs to the repeated-tokens protocol, not to --task markov")
    if not markov and (wrong := [name for name in MARKOV_OPTIONS if getattr(args, name, None) is not None]):
        raise BadInput(f"--{wrong[0].replace('_', '-')} applies to --task markov only")
    return source


def language_model_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments a language-model view takes from the command line: the probe set, and the
    language-model options that were given (the view's own defaults stand for the others)."""
    given = {name: getattr(args, name) for name in LM_OPTIONS if name != "task" and hasattr(args, name)}
    options = {"n_seqs": probe_set_size(args, True), "seed": args.seed, "device": device_of(args)}
    options |= {"progress": not given.pop("quiet", False), "as_json": args.json, "plot": getattr(args, "plot", None)}
    return options | given
