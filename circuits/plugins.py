"""Plugins: modules outside the package that register tasks, recipes, probes, priors or model classes when they
are imported. The command line imports them before it builds its options, from two places:

- the ``induction_probes.tasks`` entry-point group of every installed distribution, each entry naming a module
  (in a plugin's ``pyproject.toml``: ``[project.entry-points."induction_probes.tasks"]``, ``my_tasks = "my_tasks"``);
- ``$INDUCTION_PROBES_PLUGINS``, module names separated by commas (a module on ``PYTHONPATH``, not installed).

A sweep's workers are sent what was registered from outside (:func:`~induction_probes.circuits.registry.
outside_registrations`) and load the entry points themselves. A plugin that cannot be imported, raises or exits
while it is imported is a :class:`BadInput` naming where it was named: one line instead of a traceback, or an exit
with nothing said."""

from __future__ import annotations

import importlib
import importlib.metadata
import os

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.registry import is_dotted_name, one_line
from induction_probes.circuits.validation import quoted, shortened

PLUGINS_VARIABLE = "INDUCTION_PROBES_PLUGINS"  # modules to import (comma-separated) before a command runs
ENTRY_POINT_GROUP = "induction_probes.tasks"  # installed distributions' plugin modules


def load_plugins() -> None:
    """Import every plugin: the entry points of the group, then the modules of the variable."""
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        source = f"the entry point {quoted(entry.name)} of {entry_point_owner(entry)} ({ENTRY_POINT_GROUP})"
        module = entry.value.partition(":")[0].strip()  # a module, or module:attribute (the module is imported)
        if not is_dotted_name(module):
            raise BadInput(f"{source} names {quoted(entry.value)}, which is not a module name")
        import_plugin(module, source)
    for name in plugin_names():
        import_plugin(name, f"${PLUGINS_VARIABLE}")


def entry_point_owner(entry: importlib.metadata.EntryPoint) -> str:
    distribution = entry.dist
    return f"the distribution {quoted(distribution.name)}" if distribution is not None else "an unnamed distribution"


def plugin_names() -> list[str]:
    names = [name.strip() for name in os.environ.get(PLUGINS_VARIABLE, "").split(",") if name.strip()]
    for name in names:
        if not is_dotted_name(name):  # a relative name (.plug) would be a TypeError of importlib's
            raise BadInput(
                f"${PLUGINS_VARIABLE} names {quoted(name)}, which is not a module name "
                "(dotted Python names, separated by commas)"
            )
    return names


def import_plugin(name: str, source: str) -> None:
    """Import the plugin module ``name`` that ``source`` (the variable, or an entry point) names."""
    where = f"{source} names the module {quoted(name)}"
    try:
        importlib.import_module(name)
    except ImportError as error:
        detail = shortened(" ".join(str(error).split()))
        raise BadInput(
            f"{source} names a module that cannot be imported: {detail} (importing {quoted(name)})"
        ) from None
    except SystemExit as stop:  # sys.exit in a plugin would end the command with nothing said
        raise BadInput(f"{where}, which called sys.exit({quoted(stop.code)}) while being imported") from None
    except BaseException as error:  # its own bug, a registration refused, even a KeyboardInterrupt or GeneratorExit
        # it raised: the plugin's, said in one line (a Ctrl-C during its import cannot be told apart, and ends it too)
        raise BadInput(f"{where}, which failed while being imported: {one_line(error)}") from None
