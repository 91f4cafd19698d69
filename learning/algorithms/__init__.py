"""The algorithms: one folder each (``NAME/``), found by walking this package; the one registry of them.

An algorithm is a folder ``learning/algorithms/NAME/`` holding

- ``config.py``: its options (a frozen config dataclass), its scenario check and its
  :func:`declare` (or :func:`declare_variants`) call — torch-free, so loading,
  validating and planning a scenario (``edgesim plan``) never import torch;
- ``algorithm.py``: the learning backend, whose builder ``@register`` (or
  :func:`register_variants`) attaches to the declared name (imports torch);
- its private helpers (DoFed-SPP's similarity ratios, PCA and pseudo-labels;
  FedMatch's helper search), imported by its ``algorithm.py`` only.

Importing this package imports every folder's ``config`` (``pkgutil.iter_modules``:
no hand-kept list), filling :data:`ALGORITHMS` — the registry itself, its specs and
:func:`declare`/:func:`register`, live in :mod:`edgesim.learning.registry` and are
re-exported here — with names, config dataclasses, display names, checks, planning
hooks and declared capabilities. :data:`REGISTRY` is the same dict with
every builder attached: reading it (``from edgesim.learning.algorithms import
REGISTRY``) imports every folder's ``algorithm`` and the installed plugins' algorithms
(entry point group ``edgesim.algorithms``, :mod:`edgesim.learning.plugins`), after
edgesim's own. No module outside an algorithm's folder imports the folder.

A config dataclass validates its own values in ``__post_init__``; what depends
on the rest of the scenario (the number of devices, the partition, the model)
is the spec's ``check(cfg, facts)`` on :class:`ScenarioFacts`, run by
scenario validation — so ``edgesim plan`` and ``edgesim run`` refuse the same
things, before any data is loaded. A plugin declares its algorithm the same
way: :func:`declare` in a torch-free module (or just ``@register`` with
``config_cls`` and ``check`` in its torch module).

This module imports no torch.
"""


from __future__ import annotations

import importlib
import pkgutil

from edgesim.learning.registry import (  # noqa: F401 - the algorithm registry, re-exported for algorithms and plugins
    ALGORITHMS,
    AlgorithmSpec,
    PlanningHook,
    ScenarioFacts,
    asynchronous_algorithms,
    check_fixed,
    choosing_devices,
    declare,
    declare_variants,
    defining,
    get,
    hierarchical_algorithms,
    planning_hooks,
    register,
    register_variants,
    unused_options,
    variant,
)


def _folders() -> list[str]:
    """The algorithm folders of this package (its subpackages), in name order."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg)


for _folder in _folders():  # the torch-free declarations
    importlib.import_module(f"{__name__}.{_folder}.config")

_builders_loaded = False


def load_builders() -> dict[str, AlgorithmSpec]:
    """Import every folder's ``algorithm`` (torch) and the plugins' algorithms; returns :data:`ALGORITHMS`,
    every builder attached."""
    global _builders_loaded
    if not _builders_loaded:
        _builders_loaded = True
        for folder in _folders():
            importlib.import_module(f"{__name__}.{folder}.algorithm")
        from edgesim.learning.entry_points import load_entry_points

        load_entry_points("algorithms")
    return ALGORITHMS


def __getattr__(name: str):
    """``REGISTRY``: :data:`ALGORITHMS` with every builder attached (PEP 562; imports torch on first use)."""
    if name == "REGISTRY":
        return load_builders()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
