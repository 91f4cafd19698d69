"""Plugins: algorithms, models, data sets, partitions, resource policies and codecs from other packages, without
editing edgesim.

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

docs/extend/writing_an_algorithm.md walks through one. Standard library only.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path

from edgesim.config import ConfigError
from edgesim.learning.entry_points import (  # noqa: F401 - GROUPS, PluginError, load_entry_points: re-exported
    GROUPS,
    PluginError,
    entry_records,
    load_entry_points,
    register_from,
)


def import_plugins(modules, where: str, folder: str | os.PathLike | None = None) -> None:
    """Import a scenario's ``[run] plugins`` (``where`` names the file in errors).

    A module is looked for in ``folder`` first — the scenario file's own folder, as a relative ``data_dir`` is —
    then on the Python path (``PYTHONPATH``, and the current folder as for ``python -m``): a ``my_algorithm.py``
    beside the scenario is found from wherever edgesim runs. ``folder`` goes to the front of the path when it holds
    one of the modules (as a script's folder does for ``python script.py``)."""
    cwd = os.getcwd()
    if modules and cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    here = _holding_folder(modules, folder)
    if here is not None:
        if here in sys.path:
            sys.path.remove(here)
        sys.path.insert(0, here)
    for name in modules:
        before = _registered()
        try:
            with _old_names_refused():
                register_from(importlib.import_module(name))
        except ConfigError:
            raise
        except ModuleNotFoundError as e:
            moved = moved_name(e.name)
            if moved is None:
                raise PluginError(f"{where}: [run] plugins: cannot import {name!r} ({type(e).__name__}: {e}); expected "
                                  f"a module beside the scenario file or on the Python path (the current folder or "
                                  f"PYTHONPATH) that registers algorithms, models, data sets, partitions, resource "
                                  f"policies or codecs") from None
            raise PluginError(f"{where}: [run] plugins: {name!r} imports {e.name!r}, which is now {moved!r} (edgesim's "
                              f"packages moved under it: learning -> edgesim.learning, scenarios -> "
                              f"edgesim.scenarios, plots -> edgesim.plots); expected the plugin to import the new "
                              f"names") from None
        except (Exception, SystemExit) as e:  # noqa: BLE001 - sys.exit() on import must not end edgesim silently
            raise PluginError(f"{where}: [run] plugins: cannot import {name!r} ({type(e).__name__}: {e}); expected "
                              f"a module beside the scenario file or on the Python path (the current folder or "
                              f"PYTHONPATH) that registers algorithms, models, data sets, partitions, resource "
                              f"policies or codecs") from None
        if _registered() - before:
            _registering.add(name)
        elif name not in _registering and name not in _noted:  # once per process (a worker's is its parent's)
            _noted.add(name)
            if _notes:
                print(f"note: {where}: [run] plugins: {name!r} registered no algorithm, model, data set or partition, "
                      f"nor a resource policy or codec (a module imported before, or not a plugin?)", file=sys.stderr)


def _holding_folder(modules, folder) -> str | None:
    """``folder`` (resolved) when a module of ``modules`` is there (``name.py`` or a package ``name/``), else
    ``None``."""
    if folder is None:
        return None
    root = Path(folder).resolve()
    for name in modules:
        top = root / str(name).split(".", 1)[0]
        if top.with_suffix(".py").is_file() or (top / "__init__.py").is_file():
            return str(root)
    return None


OLD_PACKAGES = ("learning", "scenarios", "plots")  # top-level before the namespace moved under edgesim


def moved_name(module) -> str | None:
    """``edgesim.learning.algorithms`` for ``learning.algorithms`` (a name of the old top-level packages, which a
    plugin written before the move imports), else ``None``."""
    if not isinstance(module, str) or module.split(".")[0] not in OLD_PACKAGES:
        return None
    return f"edgesim.{module}"


class _OldNames:
    """A meta-path finder, first while a plugin is imported: the old top-level name of one of edgesim's own packages
    (``learning`` found in edgesim's own folder, as from a source checkout on the path) is refused as not found,
    naming it, instead of importing a second copy of the package (whose registrations then clash)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in OLD_PACKAGES:
            return None
        import importlib.util

        ours = importlib.util.find_spec(f"edgesim.{fullname}")
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            same = ours is not None and set(spec.submodule_search_locations or ()) & set(
                ours.submodule_search_locations or ())
            if same:
                raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
            return spec
        return None


class _old_names_refused:
    def __enter__(self):
        self.finder = _OldNames()
        sys.meta_path.insert(0, self.finder)

    def __exit__(self, *exc):
        sys.meta_path.remove(self.finder)


_registering: set[str] = set()  # plugin modules that registered something (a later import of theirs adds nothing)
_noted: set[str] = set()
_notes = True  # a --jobs worker validates the scenario its parent validated: its notes are the parent's, said once


def silence_notes() -> None:
    """No ``[run] plugins`` notes from this process (a ``--jobs`` worker: its parent printed them)."""
    global _notes
    _notes = False


def _registered() -> set[tuple[str, str]]:
    """Every registered ``(kind, name)``: algorithms, models, data sets, partitions, resource policies
    (``policy bandwidth``, ...), codecs and access schemes (a plugin's import adds to it)."""
    from edgesim.access import SCHEMES
    from edgesim.codecs import CODECS
    from edgesim.learning.algorithms import ALGORITHMS
    from edgesim.learning.data.datasets import DATASETS
    from edgesim.learning.data.partitions import PARTITIONS
    from edgesim.learning.model_specs import MODELS
    from edgesim.resources import POLICIES

    tables = {"algorithm": ALGORITHMS, "dataset": DATASETS, "partition": PARTITIONS, "model": MODELS,
              "codec": CODECS, "access scheme": SCHEMES,
              **{f"policy {kind}": names for kind, names in POLICIES.items()}}
    return {(kind, name) for kind, table in tables.items() for name in table}


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
    ``path``, and ``sha256``: the hex SHA-256 of that file's bytes, so a run names the plugin's exact source even
    when it has no version) and each entry point loaded in this process (``entry_point``, ``module``,
    ``distribution``, ``version``, ``path``), so that a run names the code that produced it beside edgesim's own
    commit."""
    out = []
    for name in modules:
        path = getattr(sys.modules.get(name), "__file__", None)
        out.append({"module": name, "version": _module_version(name), "path": path, "sha256": file_sha256(path)})
    return out + [dict(r) for r in entry_records]


def file_sha256(path) -> str | None:
    """The hex SHA-256 of a file's bytes (``None``: no file, or it cannot be read)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except OSError:
        return None
