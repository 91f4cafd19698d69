"""Federated algorithms, one module each, registered by name in :data:`REGISTRY`."""

from learning.algorithms.registry import REGISTRY, AlgorithmSpec, get, register  # noqa: F401
from learning.algorithms import fedavg, local  # noqa: F401,E402  (registration side effects)
from learning.algorithms import dofed_spp, feddure, fedbe, fedfomo, pfedme  # noqa: F401,E402  (registration side effects)
from learning.algorithms import fedmatch, fedmix, um_pfssl  # noqa: F401,E402  (registration side effects)
