"""A plugin installed as pip lays a distribution out, for the tests of the ``induction_probes.tasks`` entry-point
group: the module, and beside it a dist-info whose ``entry_points.txt`` names it."""

from __future__ import annotations

from pathlib import Path

from induction_probes.circuits.plugins import ENTRY_POINT_GROUP


def installed_plugin(folder: Path, module: str, source: str, value: str | None = None) -> None:
    """``module`` (its code ``source``) installed in ``folder``, its entry point ``mine`` naming ``value`` (default
    the module); the distribution is the module's name with dashes."""
    (folder / f"{module}.py").write_text(source, encoding="utf-8")
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nmine = {value or module}\n")
