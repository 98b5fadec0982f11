"""The registries that make the project extensible from outside: one per kind of thing (a task with its
recipes, probe and view; a model class; an attention probe; a prior), each a :class:`Registry` in a small module
beside what it registers.

A registration is a name, an entry and any facts about it that its consumers read (whether a probe has a
chance level, whether a prior takes no parameter). The entry is the object itself, which readers and type
checkers follow, or a ``"package.module:attribute"`` string resolved on first use, for a module that cannot
import what it names (one whose module imports the registry back), and the form a sweep's worker is sent::

    MODEL_CLASSES.register("ToyModel", ToyModel)

    @PROBES.register("first_token")
    def first_token(patterns, tokens): ...

The package's own registrations (entries defined inside the package) cannot be replaced or unregistered:
a plugin that registers ``ToyModel`` as ``"os:system"`` is refused, not obeyed by every command after it. A
registry may say what its entries must be (``expects``), checked when a lazy entry is first resolved.

A sweep's worker processes start with the package's own registrations only: :func:`outside_registrations`
describes the others (each entry by the module and name that define it, or by the plain data it describes
itself with) and :func:`register_again` makes them
in the worker, so that it sees the same registries as the process that started it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.validation import quoted, shortened

PACKAGE = "induction_probes"
_REGISTRIES: weakref.WeakSet[Registry] = weakref.WeakSet()  # every registry alive, to send to workers


class UnknownName(BadInput):
    """A name no registration of its kind has."""


class UnusableEntry(BadInput):
    """A registered ``"module:attribute"`` that cannot be imported, or is not what its registry holds."""


@dataclass(frozen=True)
class Expects:
    """What a registry's entries must be: ``what`` says it in a refusal, ``test`` checks a resolved entry."""

    what: str  # "a recipe config class"
    test: Callable[[Any], bool]


def python_function(what: str, *arguments: str) -> Expects:
    """What a registry of functions holds: a function defined in Python (not a builtin such as ``os.system``,
    not a class) that can be called with ``arguments`` by position, as its consumers call it."""

    def test(entry: Any) -> bool:
        target = entry
        while isinstance(target, functools.partial):
            target = target.func
        if not (inspect.isfunction(target) or (inspect.ismethod(target) and inspect.isfunction(target.__func__))):
            return False
        try:
            inspect.signature(entry).bind(*arguments)
        except (TypeError, ValueError):
            return False
        return True

    return Expects(f"{what}: a Python function taking ({', '.join(arguments)})", test)


def described(entry: Any) -> str:
    """What a resolved entry is, for a refusal: its type, and a function's parameters."""
    if inspect.isfunction(entry):
        try:
            return shortened(f"a function taking {inspect.signature(entry)}", 120)
        except ValueError:
            pass
    return f"a {type(entry).__name__}"


E = TypeVar("E")  # what a registering decorator decorates, returned unchanged


@dataclass
class Registration:
    name: str
    entry: Any  # the object, or "package.module:attribute" until first resolved
    info: dict[str, Any] = field(default_factory=dict)
    module: str | None = None  # the module that defines the entry, once known

    @property
    def is_the_packages(self) -> bool:
        """Whether the entry is defined inside the package (one of its own registrations)."""
        return bool(self.module) and self.module.split(".")[0] == PACKAGE

    def reference(self) -> str | dict[str, Any]:
        """``"module:attribute"`` of the entry, by which another process finds it, or the plain data an entry
        that is neither a class nor a function describes itself with (its ``reference()``)."""
        if isinstance(self.entry, str):
            return self.entry
        if not isinstance(self.entry, type) and callable(getattr(self.entry, "reference", None)):
            return self.entry.reference()
        return top_level_reference(self.entry, quoted(self.name), self.module)


def top_level_reference(obj: Any, what: str, module: str | None = None) -> str:
    """``"module:qualname"`` of a class or function (``module``: where it is defined, default its own), by
    which another process finds it; refused, naming it as ``what``, unless it is at a module's top level."""
    module = module or getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", "")
    if not module or not name or "<" in name:
        raise BadInput(
            f"{what} is not defined at the top level of a module: another process "
            "(a sweep's worker) cannot find it; define it at a module's top level"
        )
    return f"{module}:{name}"


def defining_module(entry: Any) -> str | None:
    """The module that defines ``entry``: a class's or function's own, or what an instance says it is defined in
    (``defined_in``), since an instance's ``__module__`` is its class's."""
    return getattr(entry, "defined_in", None) or getattr(entry, "__module__", None)


def is_reference(entry: str) -> bool:
    """Whether ``entry`` has the form ``"package.module:attribute"`` (dotted names on both sides, absolute)."""
    module, colon, attribute = entry.partition(":")
    return bool(colon) and all(is_dotted_name(part) for part in (module, attribute))


def is_dotted_name(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def resolve(reference: str) -> Any:
    """The object that ``"package.module:attribute"`` names (attributes may be dotted)."""
    module, _, attribute = reference.partition(":")
    value = importlib.import_module(module)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def imported(reference: str, where: str) -> Any:
    """The object ``reference`` names; where it cannot be imported, an :class:`UnusableEntry` that says ``where``
    and why."""
    try:
        return resolve(reference)
    except (ImportError, AttributeError) as error:
        raise UnusableEntry(f"{where}, which cannot be imported: {one_line(error)}") from None


class Registry:
    """Named entries of one kind, in registration order."""

    def __init__(
        self, kind: str, home: str, expects: Expects | None = None, rebuild: Callable[[dict], Any] | None = None
    ):
        self.kind = kind
        self.home = home  # the module that holds this registry (which a worker process imports to find it)
        self.expects = expects
        self.rebuild = rebuild  # an entry from the plain data its reference() gave, in another process
        self._entries: dict[str, Registration] = {}
        _REGISTRIES.add(self)

    @overload
    def register(self, name: str, entry: None = None, *, replace: bool = False, **info: Any) -> Callable[[E], E]: ...

    @overload
    def register(self, name: str, entry: Any, *, replace: bool = False, **info: Any) -> Registration: ...

    def register(
        self, name: str, entry: Any = None, *, replace: bool = False, **info: Any
    ) -> Registration | Callable[[E], E]:
        """Register ``entry`` under ``name`` (with ``info``); without ``entry``, a decorator that registers
        what it decorates and returns it unchanged. A name already taken is refused unless ``replace``."""
        if entry is None:

            def decorator(decorated: E) -> E:
                self.register(name, decorated, replace=replace, **info)
                return decorated

            return decorator
        if not isinstance(name, str) or not name:
            raise BadInput(f"a {self.kind} name must be a non-empty string, got {quoted(name)}")
        if name in self._entries and not replace:
            raise BadInput(
                f"a {self.kind} named {quoted(name)} is registered already (pass replace=True to replace it)"
            )
        if name in self._entries:
            self.refuse_the_packages(name, "replaced")
        if isinstance(entry, str) and not is_reference(entry):
            raise BadInput(f"a lazy {self.kind} entry is 'package.module:attribute', got {quoted(entry)}")
        module = entry.partition(":")[0] if isinstance(entry, str) else defining_module(entry)
        self._entries[name] = Registration(name, entry, dict(info), module)
        return self._entries[name]

    def unregister(self, name: str) -> None:
        self.refuse_the_packages(name, "unregistered")
        del self._entries[name]

    def refuse_the_packages(self, name: str, undone: str) -> None:
        """The package's own registrations are what every run of theirs is read back with: not to be undone."""
        if self.registration(name).is_the_packages:
            raise BadInput(
                f"the {self.kind} {quoted(name)} is the package's own and cannot be {undone}: "
                "register yours under another name"
            )

    def registration(self, name: str) -> Registration:
        if name not in self._entries:
            known = ", ".join(self._entries) or "none"
            raise UnknownName(f"unknown {self.kind} {quoted(name)} (known: {known})")
        return self._entries[name]

    def get(self, name: str) -> Any:
        """The entry registered as ``name`` (imported on first use); an :class:`UnknownName` otherwise."""
        registration = self.registration(name)
        if isinstance(registration.entry, str):
            registration.entry = self.resolved(registration)
        return registration.entry

    def resolved(self, registration: Registration) -> Any:
        """The object a lazy entry names, if it can be imported and is what this registry holds."""
        where = f"the {self.kind} {quoted(registration.name)} is registered as {quoted(registration.entry)}"
        entry = imported(registration.entry, where)
        if self.expects is not None and not self.expects.test(entry):
            raise UnusableEntry(f"{where}, {described(entry)}, not {self.expects.what}")
        return entry

    __getitem__ = get

    def info(self, name: str) -> dict[str, Any]:
        return self.registration(name).info

    def names(self, **info: Any) -> tuple[str, ...]:
        """Every name, in registration order; with ``info``, those whose registration says so."""
        return tuple(name for name, r in self._entries.items() if all(r.info.get(k) == v for k, v in info.items()))

    def where(self, **info: Any) -> RegistryView:
        """A live view of the names whose registration says ``info`` (argparse ``choices`` that follow
        later registrations)."""
        return RegistryView(self, info)

    def items(self) -> list[tuple[str, Any]]:
        return [(name, self.get(name)) for name in self.names()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"


@dataclass(frozen=True)
class RegistryView:
    registry: Registry
    info: dict[str, Any]

    def __iter__(self) -> Iterator[str]:
        return iter(self.registry.names(**self.info))

    def __contains__(self, name: object) -> bool:
        return name in self.registry.names(**self.info)

    def __len__(self) -> int:
        return len(self.registry.names(**self.info))


def outside_registrations() -> list[dict[str, Any]]:
    """Every registration made from outside the package, as plain data a worker process can be sent."""
    found = []
    for registry in sorted(_REGISTRIES, key=lambda r: (r.home, r.kind)):
        home = getattr(sys.modules.get(registry.home), "__dict__", {})
        if not any(value is registry for value in home.values()):
            continue  # not a module's registry (a throwaway one): no worker could find it
        for r in registry._entries.values():
            if not r.module or r.module.split(".")[0] != PACKAGE:
                found.append(
                    {
                        "registry": registry.home,
                        "kind": registry.kind,
                        "name": r.name,
                        "entry": r.reference(),
                        "info": r.info,
                    }
                )
    return found


def register_again(registrations: list[dict[str, Any]]) -> None:
    """Make ``registrations`` (:func:`outside_registrations` of another process) here."""
    for item in registrations:
        module = importlib.import_module(item["registry"])
        registry = next(
            value for value in vars(module).values() if isinstance(value, Registry) and value.kind == item["kind"]
        )
        entry = item["entry"]
        entry = registry.rebuild(entry) if isinstance(entry, dict) and registry.rebuild else entry
        registry.register(item["name"], entry, replace=True, **item["info"])


def one_line(error: BaseException) -> str:
    """An exception as one line of a message: its type, and its text with the line breaks made spaces."""
    text = " ".join(str(error).split())
    return shortened(f"{type(error).__name__}: {text}" if text else type(error).__name__)
