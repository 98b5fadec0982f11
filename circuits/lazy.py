"""Modules imported on first use, declared at the top of the module that needs them.

The command line builds its options from the task and recipe configs and must not load torch to do it
(``--help`` stays a fifth of a second); their methods and the command handlers need torch, and the report
layer that imports it. Each such module declares what it defers once, at its top, where a reader (and the
layer test, which counts these as imports) sees it::

    torch = lazy_module("torch")  # the config is read at --help: torch only once a task draws

instead of an import inside each function that needs it."""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for the module ``name``, which it imports when one of its attributes is first read."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str):
        self._name = name
        self._module = None

    def __getattr__(self, attribute: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}{'' if self._module is None else ', imported'}>"


def lazy_module(name: str) -> Any:
    """The module ``name``, imported when first used (see the module docstring for when to defer one)."""
    return LazyModule(name)
