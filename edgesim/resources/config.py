"""The ``[resources]`` table: which policy decides who transmits, with how much band, power and CPU frequency."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

from ..config import CPU_FREQ_HZ_RANGE, check_number, check_range, fail

KINDS = ("scheduling", "bandwidth", "power", "cpu_freq")
STRAGGLERS = ("keep", "exclude")


@dataclass(frozen=True)
class ResourcesConfig:
    """The round's resource policies (docs/resource_policies.md); the defaults are the engine's own behaviour.

    ``scheduling``: who takes part (``"random"``: the algorithm's own uniform draw).
    ``bandwidth``: how the uplink band is shared (``"equal"``: TDMA whole band in
    arrival order, FDMA processor sharing). ``power``: each uploader's transmit
    power (``"fixed"``: the configured ``tx_power_dbm``, which is every policy's
    maximum). ``cpu_freq``: each device's CPU frequency (``"max"``: the
    configured ``cpu_freq_hz``, every policy's maximum). ``cpu_freq_min_hz``: the
    lowest frequency a DVFS policy may choose (Hz); ``None``: a tenth of each
    device's maximum. ``oort_exploration``: the fraction of Oort's picks spent
    on devices never tried (ε, Lai et al., OSDI 2021, §4.2); ``oort_alpha``: its
    straggler penalty exponent (α). ``energy_weight``: w in [0, 1] of the
    ``min_energy`` bandwidth's objective w·E + (1 − w)·λ·T (1: energy alone);
    ``time_price_j_per_s``: λ, the joules a second of round time is worth (J/s,
    default 1). ``stragglers``: ``"keep"`` (every device may be scheduled) or
    ``"exclude"`` (a device that cannot meet the round's budget τ even alone on the
    band at its maximum power and frequency is not scheduled that round). Which names exist (plugins included) is
    checked by :func:`edgesim.resources.round.check_config`.
    """

    scheduling: str = "random"
    bandwidth: str = "equal"
    power: str = "fixed"
    cpu_freq: str = "max"
    cpu_freq_min_hz: Optional[float] = None
    oort_exploration: float = 0.1
    oort_alpha: float = 2.0
    energy_weight: float = 1.0
    time_price_j_per_s: float = 1.0
    stragglers: str = "keep"

    def __post_init__(self):
        for kind in KINDS:
            value = getattr(self, kind)
            if not isinstance(value, str) or not value:
                fail(kind, value, "a policy name (a string; `edgesim list policies` lists them)")
        if self.cpu_freq_min_hz is not None:
            check_range("cpu_freq_min_hz", self.cpu_freq_min_hz, *CPU_FREQ_HZ_RANGE, "Hz")
        check_number("oort_exploration", self.oort_exploration, minimum=0)
        if self.oort_exploration > 1:
            fail("oort_exploration", self.oort_exploration, "a fraction in [0, 1]")
        check_number("oort_alpha", self.oort_alpha, minimum=0)
        check_number("energy_weight", self.energy_weight, minimum=0)
        if self.energy_weight > 1:
            fail("energy_weight", self.energy_weight, "a weight in [0, 1] (1: energy alone)")
        check_number("time_price_j_per_s", self.time_price_j_per_s, minimum=0)
        if self.stragglers not in STRAGGLERS:
            fail("stragglers", self.stragglers, " or ".join(map(repr, STRAGGLERS)))

    @property
    def is_default(self) -> bool:
        """Every key at its default: the engine runs exactly as without a ``[resources]`` table."""
        return all(getattr(self, f.name) == f.default for f in fields(self))
