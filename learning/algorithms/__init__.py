"""Federated algorithms, one module each, registered by name in :data:`REGISTRY`.

Installed plugins' algorithms (entry point group ``edgesim.algorithms``, :mod:`edgesim.learning.plugins`) are
registered when this package is imported, after edgesim's own.
"""

from edgesim.learning.algorithms.registry import REGISTRY, AlgorithmSpec, get, register  # noqa: F401
from edgesim.learning.algorithms import fedavg, local  # noqa: F401,E402  (registration side effects)
from edgesim.learning.algorithms import dofed_spp, feddure, fedbe, fedfomo, pfedme  # noqa: F401,E402  (registration side effects)
from edgesim.learning.algorithms import fedmatch, fedmix, server_only, um_pfssl  # noqa: F401,E402  (registration side effects)
from edgesim.learning.algorithms import feddure_code  # noqa: F401,E402  (registration side effects)

from edgesim.learning.plugins import load_entry_points as _load_entry_points  # noqa: E402

_load_entry_points("algorithms")
