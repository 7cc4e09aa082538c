"""The one loader of installed plug-ins (entry point groups `relgrade.measures`, `relgrade.judges`:
a module is imported, a function called). `RELGRADE_LOAD_PLUGINS=0` (or empty, `false`, `no`,
`off`) turns them off, as the test suite does, so a package beside relgrade cannot change it."""

from __future__ import annotations

import inspect
import os

from grader.errors import InputError

SWITCH = "RELGRADE_LOAD_PLUGINS"
_OFF = {"", "0", "false", "no", "off"}


def load_entry_points(group: str) -> list[str]:
    """Load `group`'s entry points, return their names (none when off); InputError if one fails."""
    switch = os.environ.get(SWITCH)
    if switch is not None and switch.strip().lower() in _OFF:
        return []
    from importlib.metadata import entry_points  # slow to scan: only when asked

    names = []
    for point in entry_points(group=group):
        try:
            loaded = point.load()
            if callable(loaded) and not inspect.ismodule(loaded):
                loaded()
        except Exception as exc:
            package = point.dist.name if point.dist is not None else "an installed package"
            raise InputError(
                f"plug-in {point.name!r} ({point.value}) of {package}, entry point group "
                f"{group!r}, failed to load: {type(exc).__name__}: {exc}",
                hint=f"fix or uninstall it, or set {SWITCH}=0 to run without installed plug-ins",
            ) from exc
        names.append(point.name)
    return names
