"""The ``[resources]`` table: which policy decides who transmits, with how much band, power and CPU frequency."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

from ..config import CPU_FREQ_HZ_RANGE, Choice, Described, Finite, Integer, Plausible, check_keys, fail, key
from .registry import KINDS, policy_words

STRAGGLERS = ("keep", "exclude")
FRACTION = Finite(minimum=0, maximum=1, noun="a fraction")


def _check_stragglers(value) -> None:
    if value not in STRAGGLERS:
        fail("stragglers", value, " or ".join(map(repr, STRAGGLERS)))


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

    scheduling: str = key("random", "who takes part in a round (the algorithm takes the first K of the ranking; "
                          "fedasync/fedbuff: a free slot takes the first idle online device)",
                          allowed=Described(words=lambda: policy_words("scheduling")))
    bandwidth: str = key("equal", "how the uplink band is shared",
                         allowed=Described(words=lambda: policy_words("bandwidth")))
    power: str = key("fixed", "each uploader's transmit power (the configured one is the maximum)",
                     allowed=Described(words=lambda: policy_words("power")))
    cpu_freq: str = key("max", "each device's CPU frequency (the configured one is the maximum)",
                        allowed=Described(words=lambda: policy_words("cpu_freq")))
    cpu_freq_min_hz: Optional[float] = key(
        None, "the lowest frequency a DVFS policy may choose; unset: a tenth of each device's maximum", unit="Hz",
        allowed=Plausible(low=CPU_FREQ_HZ_RANGE[0], high=CPU_FREQ_HZ_RANGE[1], unit="Hz", optional=True,
                          also="at most the slowest cpu_freq_hz"))
    oort_exploration: float = key(0.9, "Oort's starting share ε of picks among devices never tried",
                                  allowed=FRACTION)
    oort_decay: float = key(0.98, "the factor Oort's ε is multiplied by each round", allowed=FRACTION)
    oort_exploration_min: float = key(0.2, "the floor Oort's ε decays to", allowed=FRACTION)
    oort_alpha: float = key(2.0, "Oort's straggler penalty exponent α", allowed=Finite(minimum=0))
    oort_cutoff: float = key(0.95, "Oort's c: devices above c × the K-th utility are sampled in proportion to it",
                             allowed=FRACTION)
    oort_pacer_window: int = key(20, "Oort's pacer window W: the rounds whose summed utility it compares",
                                 unit="rounds", allowed=Integer(1))
    oort_pacer_step: float = key(0.1, "Oort's pacer step Δ: the share of τ added to the preferred round duration "
                                 "when the utility stops rising", allowed=Finite(minimum=0))
    oort_blacklist_rounds: int = key(0, "the participations after which Oort no longer picks a device (0: never)",
                                     unit="rounds", allowed=Integer(0))
    age_exponent: float = key(1.0, "ν of age_channel's priority A^ν · log2(1 + SNR): how much the age of update "
                              "weighs against the channel", allowed=Finite(minimum=0))
    energy_weight: float = key(1.0, "the weight w of energy in min_energy's objective w·E + (1 − w)·λ·T (1: energy "
                               "alone)", allowed=Finite(minimum=0, maximum=1, noun="a weight", why="1: energy alone"))
    time_price_j_per_s: float = key(1.0, "λ in min_energy's objective: the joules one second of round time is "
                                    "worth", unit="J/s", allowed=Finite(minimum=0))
    stragglers: str = key("keep", "whether a device that cannot meet the round's budget even alone at full power "
                          "and frequency is scheduled", allowed=Choice(choices=STRAGGLERS, checker=_check_stragglers))
    resource_blocks: str = key("equal", "how an OFDMA round's resource blocks are assigned (access = \"ofdma\", "
                               "docs/model/access_schemes.md)",
                               allowed=Described(words=lambda: policy_words("resource_blocks")))

    def __post_init__(self):
        check_keys(self)
        for kind in (*KINDS, "resource_blocks"):  # which names exist (plugins included): round.check_config
            value = getattr(self, kind)
            if not isinstance(value, str) or not value:
                fail(kind, value, "a policy name (a string; `edgesim list policies` lists them)")

    @property
    def is_default(self) -> bool:
        """Every key at its default: the engine runs exactly as without a ``[resources]`` table."""
        return all(getattr(self, f.name) == f.default for f in fields(self))
