"""The ``[resources]`` table: which policy decides who transmits, with how much band, power and CPU frequency."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

from ..config import CPU_FREQ_HZ_RANGE, check_int, check_number, check_range, fail

KINDS = ("scheduling", "bandwidth", "power", "cpu_freq")
STRAGGLERS = ("keep", "exclude")


@dataclass(frozen=True)
class ResourcesConfig:
    """The round's resource policies (docs/model/resource_policies.md); the defaults are the engine's own behaviour.

    ``scheduling``: who takes part (``"random"``: the algorithm's own uniform draw).
    ``bandwidth``: how the uplink band is shared (``"equal"``: TDMA whole band in
    arrival order, FDMA processor sharing). ``power``: each uploader's transmit
    power (``"fixed"``: the configured ``tx_power_dbm``, which is every policy's
    maximum). ``cpu_freq``: each device's CPU frequency (``"max"``: the
    configured ``cpu_freq_hz``, every policy's maximum). ``cpu_freq_min_hz``: the
    lowest frequency a DVFS policy may choose (Hz); ``None``: a tenth of each
    device's maximum. ``oort_exploration``: Oort's starting share ε of picks spent
    on devices never tried (Lai et al., OSDI 2021, §4.2). ``oort_decay``: the
    factor ε is multiplied by each round. ``oort_exploration_min``: the floor ε
    decays to. ``oort_alpha``: its straggler penalty exponent (α).
    ``oort_cutoff``: c, the share of the K-th utility above which devices are
    sampled in proportion to their utility. ``oort_pacer_window``: W, the rounds
    whose summed utility the pacer compares. ``oort_pacer_step``: Δ, the share
    of τ the pacer adds to the preferred round duration T when that utility
    stops rising. ``oort_blacklist_rounds``: the participations after which a
    device is no longer picked (0: never). ``age_exponent``: ν of the
    ``age_channel`` priority A^ν · log2(1 + SNR) (0: the channel alone). ``energy_weight``: w in [0, 1] of the
    ``min_energy`` bandwidth's objective w·E + (1 − w)·λ·T (1: energy alone);
    ``time_price_j_per_s``: λ, the joules a second of round time is worth (J/s,
    default 1). ``stragglers``: ``"keep"`` (every device may be scheduled) or
    ``"exclude"`` (a device that cannot meet the round's budget τ even alone on the
    band at its maximum power and frequency is not scheduled that round). ``resource_blocks``: how an OFDMA
    round's blocks are assigned (an access scheme that assigns blocks, docs/model/access_schemes.md). Which names
    exist (plugins included) is checked by :func:`edgesim.resources.round.check_config`.
    """

    scheduling: str = "random"
    bandwidth: str = "equal"
    power: str = "fixed"
    cpu_freq: str = "max"
    cpu_freq_min_hz: Optional[float] = None
    oort_exploration: float = 0.9
    oort_decay: float = 0.98
    oort_exploration_min: float = 0.2
    oort_alpha: float = 2.0
    oort_cutoff: float = 0.95
    oort_pacer_window: int = 20
    oort_pacer_step: float = 0.1
    oort_blacklist_rounds: int = 0
    age_exponent: float = 1.0
    energy_weight: float = 1.0
    time_price_j_per_s: float = 1.0
    stragglers: str = "keep"
    resource_blocks: str = "equal"

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
        for key in ("oort_decay", "oort_exploration_min", "oort_cutoff"):
            check_number(key, getattr(self, key), minimum=0)
            if getattr(self, key) > 1:
                fail(key, getattr(self, key), "a fraction in [0, 1]")
        check_number("oort_alpha", self.oort_alpha, minimum=0)
        check_number("oort_pacer_step", self.oort_pacer_step, minimum=0)
        check_int("oort_pacer_window", self.oort_pacer_window, 1)
        check_int("oort_blacklist_rounds", self.oort_blacklist_rounds, 0)
        check_number("age_exponent", self.age_exponent, minimum=0)
        check_number("energy_weight", self.energy_weight, minimum=0)
        if self.energy_weight > 1:
            fail("energy_weight", self.energy_weight, "a weight in [0, 1] (1: energy alone)")
        check_number("time_price_j_per_s", self.time_price_j_per_s, minimum=0)
        if self.stragglers not in STRAGGLERS:
            fail("stragglers", self.stragglers, " or ".join(map(repr, STRAGGLERS)))
        if not isinstance(self.resource_blocks, str) or not self.resource_blocks:
            fail("resource_blocks", self.resource_blocks,
                 "a policy name (a string; `edgesim list policies` lists them)")

    @property
    def is_default(self) -> bool:
        """Every key at its default: the engine runs exactly as without a ``[resources]`` table."""
        return all(getattr(self, f.name) == f.default for f in fields(self))
