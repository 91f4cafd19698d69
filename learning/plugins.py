"""Plugins: algorithms, models, data sets and partitions from other packages, without editing edgesim.

Two ways in, both ending in the same registries as edgesim's own entries:

- **entry points** of an installed package, one group per kind
  (:data:`GROUPS`): ``[project.entry-points."edgesim.algorithms"] mine =
  "my_package.my_algorithm"``. Each entry point names a module whose import
  registers (``@register(...)`` for an algorithm, ``MODELS.add(...)``,
  ``DATASETS.add(...)``, ``PARTITIONS.add(...)``), or a function called with
  no arguments that does. The algorithm group is loaded when
  :mod:`edgesim.learning.algorithms` is imported; the other groups when a scenario is
  validated (they must stay torch-free: a model names its builder lazily).
- a scenario's ``[run] plugins = ["my_module"]``: modules imported (from the
  Python path, e.g. the current folder) before the scenario is validated.

docs/writing_an_algorithm.md walks through one. Standard library only.
"""

from __future__ import annotations

import importlib
import os
import sys

from edgesim.config import ConfigError
from edgesim.learning.entry_points import (  # noqa: F401 (GROUPS, PluginError, load_entry_points: re-exported)
    GROUPS,
    PluginError,
    entry_records,
    load_entry_points,
    register_from,
)


def import_plugins(modules, where: str) -> None:
    """Import a scenario's ``[run] plugins`` (``where`` names the file in errors).

    The current folder is on the path as for ``python -m``, so a ``my_algorithm.py`` beside the
    scenario's users is found when edgesim runs there."""
    cwd = os.getcwd()
    if modules and cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    for name in modules:
        before = _registered()
        try:
            register_from(importlib.import_module(name))
        except ConfigError:
            raise
        except (Exception, SystemExit) as e:  # noqa: BLE001 - sys.exit() on import must not end edgesim silently
            raise PluginError(f"{where}: [run] plugins: cannot import {name!r} ({type(e).__name__}: {e}); expected "
                              f"a module on the Python path (the current folder or PYTHONPATH) that registers "
                              f"algorithms, models, data sets or partitions") from None
        if _registered() > before:
            _registering.add(name)
        elif name not in _registering and name not in _noted:  # once per process
            _noted.add(name)
            print(f"note: {where}: [run] plugins: {name!r} registered no algorithm, model, data set or partition "
                  f"(a module imported before, or not a plugin?)", file=sys.stderr)


_registering: set[str] = set()  # plugin modules that registered something (a later import of theirs adds nothing)
_noted: set[str] = set()


def _registered() -> int:
    """How many algorithms, models, data sets and partitions are registered (a plugin's import adds to it)."""
    from edgesim.learning.algorithms import ALGORITHMS
    from edgesim.learning.data.datasets import DATASETS
    from edgesim.learning.data.partitions import PARTITIONS
    from edgesim.learning.model_specs import MODELS

    return len(ALGORITHMS) + len(DATASETS) + len(PARTITIONS) + len(MODELS)


def _module_version(name: str) -> str | None:
    """A module's ``__version__``, else the version of the installed distribution that provides it, else ``None``."""
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    module = sys.modules.get(name)
    if isinstance(getattr(module, "__version__", None), str):
        return module.__version__
    for dist in packages_distributions().get(name.split(".", 1)[0], []):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def plugin_record(modules=()) -> list[dict]:
    """What ``run.json`` records of the plugins a run used: each ``[run] plugins`` module (``module``, ``version``,
    ``path``) and each entry point loaded in this process (``entry_point``, ``module``, ``distribution``,
    ``version``, ``path``), so that a run names the code that produced it beside edgesim's own commit."""
    out = [{"module": name, "version": _module_version(name), "path": getattr(sys.modules.get(name), "__file__", None)}
           for name in modules]
    return out + [dict(r) for r in entry_records]
