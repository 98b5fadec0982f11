"""Modules imported on first use, declared at the top of the module that needs them.

The laziness of the command line, at its one boundary: ``--help`` and a language model's ``info`` answer
without torch, so the command line's entry module declares torch and the device checks, and ``info`` the report
that loads a run, as::

    torch = lazy_module("torch")  # loads once a command computes

A tool or a reader follows a plain import; this one they cannot, so it stays at that boundary (a test counts
them) and everywhere else imports are plain. The layer test reads these declarations as imports."""

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
