"""edgesim: a wireless edge-network co-simulator for federated semi-supervised learning.

``import edgesim`` is the one public entry point (docs/python_api.md):

- :func:`load_scenario` — a validated scenario from a TOML file, a dict or the bundled default, with overrides;
- :func:`run` — co-simulate its algorithms into a run folder; a :class:`Run` (summary, tidy frames);
- :func:`sweep` — a scenario over a grid and seeds; one long pandas DataFrame;
- :func:`load_runs` — run and sweep folders as one long pandas DataFrame;
- exceptions: :class:`ConfigError` (bad input: the key, the value, what was expected) and its
  subclass :class:`RunFolderError` (an ``out`` a run may not use, a folder that is no run);
  :class:`SweepError` (runs of a sweep failed).

This package is also the simulator itself, the bottom layer, and never imports torch: the API
functions (:mod:`edgesim.api`) import the application (``scenarios``), the torch backend
(``learning``), ``plots`` and pandas inside the call.

- formulas: :mod:`edgesim.units`, :mod:`edgesim.radio`, :mod:`edgesim.compute`, :mod:`edgesim.budget`
- channel: :mod:`edgesim.channel`; selection (Algorithm 1): :mod:`edgesim.selection`
- the engine: :mod:`edgesim.engine`, its protocol with a learning backend: :mod:`edgesim.backend`,
  a torch-free backend: :mod:`edgesim.curve`; ``edgesim plan``: :mod:`edgesim.plan`
"""

from edgesim.api import Run, RunFolderError, SweepError, load_runs, load_scenario, run, scenario_fingerprint, sweep
from edgesim.config import ConfigError


def __getattr__(name: str):
    if name == "__version__":
        from importlib.metadata import version

        return version("edgesim")
    raise AttributeError(f"module 'edgesim' has no attribute {name!r}")


__all__ = ["ConfigError", "Run", "RunFolderError", "SweepError", "load_runs", "load_scenario", "run", "scenario_fingerprint", "sweep"]
