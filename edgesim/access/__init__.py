"""Access schemes: how the devices of a cell share the uplink, as a registry (``[system] access`` names one, the
``[access]`` table holds its options). The protocol is in :mod:`edgesim.access.registry`; the built-in schemes
register on import. Torch-free, like all of ``edgesim/``."""

from . import classic  # noqa: F401 - registers tdma, fdma, fdma_banded first (their order in every message)

# isort: split
from . import aircomp, noma, ofdma  # noqa: F401 - register aircomp, noma, ofdma
from .registry import (
    SCHEMES,
    AccessScheme,
    Cell,
    NoOptions,
    build_options,
    make_banded,
    make_link,
    make_uplink,
    option_owner,
    options_dict,
    register_access,
    scheme_class,
    summary,
)

__all__ = ["SCHEMES", "AccessScheme", "Cell", "NoOptions", "build_options", "make_banded", "make_link", "make_uplink",
           "option_owner", "options_dict", "register_access", "scheme_class", "summary"]
