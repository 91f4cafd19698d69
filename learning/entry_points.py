"""Installed packages' entry points: the groups edgesim reads and loading them (standard library only).

One group per kind (:data:`GROUPS`): ``[project.entry-points."edgesim.algorithms"] mine =
"my_package.my_algorithm"``. Each entry point names a module whose import registers, or a function
called with no arguments that does. The algorithms' registry loads its group when its builders are
read (:func:`edgesim.learning.algorithms.load_builders`); scenario validation loads the others.
:mod:`edgesim.learning.plugins` (a scenario's ``[run] plugins``, what a run records) builds on it.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points

from edgesim.config import ConfigError

GROUPS = {
    "algorithms": "edgesim.algorithms",
    "models": "edgesim.models",
    "datasets": "edgesim.datasets",
    "partitions": "edgesim.partitions",
    "policies": "edgesim.policies",
    "codecs": "edgesim.codecs",
    "access": "edgesim.access",
    "association": "edgesim.association",
}
_loaded: set[tuple[str, str, str]] = set()
entry_records: list[dict] = []  # the entry points loaded in this process, for run.json (plugin_record)


class PluginError(ConfigError):
    """A plugin that cannot be loaded; the message names the entry point or module and the reason."""


def register_from(obj) -> None:
    """An entry point's object: a module registers on import; a function is called to register."""
    if callable(obj) and not isinstance(obj, type):
        obj()


def load_entry_points(*kinds: str) -> list[str]:
    """Load the entry points of ``kinds`` (default: all) not loaded yet; returns their ``group:name``s."""
    done = []
    for kind in kinds or tuple(GROUPS):
        group = GROUPS[kind]
        for ep in entry_points(group=group):
            key = (group, ep.name, ep.value)
            if key in _loaded:
                continue
            _loaded.add(key)  # once, even if it fails: a broken plugin is reported once, not on every lookup
            dist = getattr(getattr(ep, "dist", None), "name", None) or "an installed package"
            try:
                register_from(ep.load())
            except (Exception, SystemExit) as e:  # noqa: BLE001 - someone else's code: its failure in one line
                raise PluginError(f"plugin entry point {ep.name!r} = {ep.value!r} (group {group!r}, from {dist}): "
                                  f"cannot be loaded ({type(e).__name__}: {e}); expected a module that registers "
                                  f"{kind}, or uninstall {dist}") from None
            done.append(f"{group}:{ep.name}")
            module = ep.value.split(":", 1)[0]
            entry_records.append({"entry_point": f"{group}:{ep.name}", "module": module, "distribution": dist,
                                   "version": getattr(getattr(ep, "dist", None), "version", None),
                                   "path": getattr(sys.modules.get(module), "__file__", None)})
    return done
