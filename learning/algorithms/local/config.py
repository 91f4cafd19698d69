"""Local training's options (none; the algorithm: :mod:`edgesim.learning.algorithms.local.algorithm`)."""

from __future__ import annotations

from dataclasses import dataclass

from edgesim.compression import SENDS_NOTHING
from edgesim.learning.algorithms import declare


@dataclass(frozen=True)
class LocalConfig:
    """Local training only (no options)."""

    COMPRESSION = SENDS_NOTHING  # a run-wide [compression] leaves it as it is (docs/model/compression.md)


declare("local", LocalConfig, module="edgesim.learning.algorithms.local.algorithm", display="Local",
        summary="Local: each device trains alone, no communication")
