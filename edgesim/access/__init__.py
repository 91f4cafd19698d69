"""Access schemes: how the devices of a cell share the uplink, as a registry (``[system] access`` names one, the
``[access]`` table holds its options). The protocol is in :mod:`edgesim.access.registry`; the built-in schemes
register on import. Torch-free, like all of ``edgesim/``."""

from . import aircomp, classic, noma, ofdma  # noqa: F401 - register tdma, fdma, fdma_banded, noma, ofdma, aircomp
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
