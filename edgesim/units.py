"""Decibel and power-unit conversions, done once at the edge of the simulator.

docs/model/system_model.md: every quantity carries its SI unit in its name; decibel inputs
(``tx_power_dbm``, ``noise_psd_dbm_per_hz``, ``channel_gain_db``) are converted
here to linear watts / ratios and never again.
"""

from __future__ import annotations

import math

from ._checks import finite


def db_to_linear(value_db: float) -> float:
    """Power ratio from decibels: ``10 ** (value_db / 10)`` (dimensionless)."""
    return 10.0 ** (finite("value_db", value_db) / 10.0)


def linear_to_db(ratio: float) -> float:
    """Decibels from a power ratio: ``10 * log10(ratio)``; ``ratio`` must be > 0."""
    ratio = finite("ratio", ratio)
    if ratio <= 0:
        raise ValueError(f"ratio(={ratio}) must be > 0 to be expressed in dB")
    return 10.0 * math.log10(ratio)


def dbm_to_w(power_dbm: float) -> float:
    """Watts from dBm: ``10 ** ((power_dbm - 30) / 10)``. 0 dBm = 1 mW, 30 dBm = 1 W."""
    return 10.0 ** ((finite("power_dbm", power_dbm) - 30.0) / 10.0)


def w_to_dbm(power_w: float) -> float:
    """dBm from watts: ``10 * log10(power_w) + 30``; ``power_w`` must be > 0."""
    power_w = finite("power_w", power_w)
    if power_w <= 0:
        raise ValueError(f"power_w(={power_w}) must be > 0 to be expressed in dBm")
    return 10.0 * math.log10(power_w) + 30.0


def dbm_per_hz_to_w_per_hz(psd_dbm_per_hz: float) -> float:
    """Noise power spectral density in W/Hz from dBm/Hz (−174 dBm/Hz ≈ 3.98e-21 W/Hz)."""
    return dbm_to_w(psd_dbm_per_hz)
