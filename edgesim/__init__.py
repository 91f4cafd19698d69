"""edgesim: a wireless edge-network co-simulator for federated semi-supervised learning.

``import edgesim`` is the one public entry point (docs/use/python_api.md):

- :func:`load_scenario` — a validated scenario from a TOML file, a dict or the bundled default, with overrides;
- :func:`plan` — what ``edgesim plan`` prints, as an object (round budget, per-device times, local steps);
- :func:`run` — co-simulate its algorithms into a run folder; a :class:`Run` (summary, tidy frames);
- :func:`sweep` — a scenario over a grid and seeds; one long pandas DataFrame;
- :func:`load_runs` — run and sweep folders as one long pandas DataFrame;
- exceptions: :class:`ConfigError` (bad input: the key, the value, what was expected) and its
  subclass :class:`RunFolderError` (an ``out`` a run may not use, a folder that is no run);
  :class:`SweepError` (runs of a sweep failed).

This module is a thin face: the API is implemented in the application layer
(:mod:`edgesim.scenarios.api`) and handed on lazily (PEP 562), so ``import edgesim`` imports
nothing above the simulator and never imports torch (docs/extend/architecture.md).

The package is also the simulator itself, the bottom floor:

- formulas: :mod:`edgesim.units`, :mod:`edgesim.radio`, :mod:`edgesim.compute`, :mod:`edgesim.budget`
- channel: :mod:`edgesim.channel`; selection (Algorithm 1): :mod:`edgesim.selection`
- the engine: :mod:`edgesim.engine`, its protocol with a learning backend: :mod:`edgesim.backend`,
  a torch-free backend: :mod:`edgesim.curve`; ``edgesim plan``: :mod:`edgesim.planning`
- the floors above: :mod:`edgesim.learning` (torch), :mod:`edgesim.scenarios` (the application),
  :mod:`edgesim.plots` (figures)
"""

import edgesim.access  # noqa: F401 - registers the built-in access schemes, whose names SystemConfig checks
import edgesim.cells  # noqa: F401 - registers the built-in association rules, whose names SystemConfig checks
from edgesim.config import ConfigError

_API = ("Run", "RunFolderError", "SweepError", "load_runs", "load_scenario", "plan", "run", "scenario_fingerprint",
        "sweep")


def __getattr__(name: str):
    if name in _API:
        from edgesim.scenarios import api

        return getattr(api, name)
    if name == "__version__":
        from importlib.metadata import version

        return version("edgesim")
    raise AttributeError(f"module 'edgesim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API, "__version__"])


__all__ = ["ConfigError", *_API]
