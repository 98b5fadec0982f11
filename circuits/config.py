"""Frozen configs that own their defaults, checks and help text, and read back from JSON strictly.

Every task, recipe and model config is a frozen dataclass with :class:`Config` mixed in. A field made
with :func:`option` carries its command-line help, so the ``induction-probes`` options are generated
from the fields and the API and the command line make the same run from the same arguments.

This module imports no torch: the command line's ``--device`` option (``device_options.py``) is built on it
while ``info`` on a language model runs without torch.
"""

from __future__ import annotations

import argparse
from dataclasses import MISSING, Field, asdict, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, TypeVar

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.validation import shortened


def option(default: Any = MISSING, help: str = "", unwritten_when_none: bool = False, **argparse: Any) -> Any:
    """A config field with its command-line help and any argparse extras (``type``, ``choices``, ``metavar``).
    A field without ``help`` is not offered on the command line. ``unwritten_when_none``: a field added after
    runs were shipped, left out of a run's config.json while unset, so that the runs it does not change keep
    their config.json byte for byte."""
    return field(default=default, metadata={"help": help, "argparse": argparse, "unwritten": unwritten_when_none})


def nested(config_class: type, has_default: bool = False) -> Any:
    """A field that holds another config (a recipe's task): its fields become options of their own.
    With ``has_default`` the default is that config with all its own defaults."""
    if has_default:
        return field(default_factory=config_class, metadata={"config": config_class})
    return field(metadata={"config": config_class})


class Dataclass(Protocol):
    """Any dataclass, for the checker: the field table that dataclasses.fields reads."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]


class Config:
    """``to_dict`` / ``from_dict`` for a frozen dataclass, with one policy: unknown keys are refused."""

    if TYPE_CHECKING:
        # Config is only ever mixed into dataclasses: the field table dataclasses.fields/asdict read from them
        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]
        name: ClassVar[str]  # what to_json writes first: a task's or a recipe's name (the configs it is called on)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> dict[str, Any]:
        """``{"name": ..., field: value, ...}`` for a run's config.json. Nested configs are left out:
        each is written beside its holder (a run's task beside its recipe)."""
        own = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if "config" not in f.metadata and not (f.metadata.get("unwritten") and getattr(self, f.name) is None)
        }
        return {"name": self.name} | own

    @classmethod
    def from_dict(cls, values: object) -> Self:
        """The config from a JSON object; JSON lists become tuples, nested configs are read the same way."""
        if not isinstance(values, dict):
            raise BadInput(f"a {cls.__name__} must be a JSON object, got {type(values).__name__}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise BadInput(f"unknown {cls.__name__} keys: {shortened(', '.join(map(str, unknown)))}")
        converted = {}
        for name, value in values.items():
            inner = known[name].metadata.get("config")
            if inner is not None and isinstance(value, dict):
                value = inner.from_dict(value)
            converted[name] = tuple(value) if isinstance(value, list) else value
        try:
            return cls(**converted)
        except TypeError as error:  # a required key is missing
            raise BadInput(f"{cls.__name__}: {error}") from None


def option_names(config_class: type) -> list[str]:
    """The namespace names :func:`~induction_probes.cli.common.add_config_options` can set for ``config_class``."""
    names = []
    for spec in fields(config_class):
        names += option_names(spec.metadata["config"]) if "config" in spec.metadata else [spec.name]
    return names


C = TypeVar("C", bound=Dataclass)  # the config class config_from_options builds


def config_from_options(config_class: type[C], options: dict[str, Any]) -> C:
    """``config_class`` built from flat option values, the configs it holds from theirs: the same object
    that ``config_class(task=TaskClass(...), ...)`` makes from the same arguments in Python."""
    values = {}
    for spec in fields(config_class):
        inner = spec.metadata.get("config")
        if inner is None:
            if spec.name in options:
                values[spec.name] = options[spec.name]
            continue
        inner_options = {name: options[name] for name in option_names(inner) if name in options}
        if inner_options or spec.default_factory is MISSING:
            values[spec.name] = config_from_options(inner, inner_options)
    required = [f.name for f in fields(config_class) if f.default is MISSING and f.default_factory is MISSING]
    missing = [name for name in required if name not in values]
    if missing:
        raise MissingOption(missing[0])
    return config_class(**values)


class MissingOption(BadInput):
    """A required setting not given: named as the command line's option; ``name`` is the setting's own name, for
    callers that name it otherwise (a sweep spec's key)."""

    def __init__(self, name: str):
        super().__init__(f"--{name.replace('_', '-')} is required")
        self.name = name


def count(text: str) -> int:
    """The type of an option that counts (sequences, states, draws): an integer >= 1, checked while parsing, so
    that the message names the option (``--probe-seqs``), not the parameter it is passed as."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text[:200]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value
