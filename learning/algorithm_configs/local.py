"""Local training's options (none; the algorithm: :mod:`learning.algorithms.local`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Union

from edgesim.config import check_choice, check_int, check_number, fail
from learning.algorithm_configs import ScenarioFacts, check_fixed, declare, declare_variants, unused_options, variant


@dataclass(frozen=True)
class LocalConfig:
    """Local training only (no options)."""


declare("local", LocalConfig, module="learning.algorithms.local", display="Local",
        summary="Local: each device trains alone, no communication")
