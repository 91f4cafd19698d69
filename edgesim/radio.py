"""Uplink formulas of DoFed-SPP (Ching et al., IEEE TSC 2023), Eqs. (8), (9), (24).

All inputs are linear SI quantities: bandwidth in Hz, power in W, noise power
spectral density in W/Hz, channel gain as a linear power ratio, sizes in bits.

:func:`shannon_rate_bps` is the one place Eq. (8) is computed: the FDMA
uplink of the engine, the system view handed to the backends and
``edgesim plan`` all call it (with NumPy arrays where they have many devices).
Its scalar core, :func:`unchecked_shannon_rate_bps`, times each TDMA transfer
(the engine checks its inputs once per round).
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import count, non_negative, positive

_LN2 = math.log(2)


def snr(bandwidth_hz: float, channel_gain: float, tx_power_w: float, noise_psd_w_per_hz: float) -> float:
    """Signal-to-noise ratio ``g * p / (N0 * b)`` (dimensionless, linear)."""
    b = positive("bandwidth_hz", bandwidth_hz)
    g = non_negative("channel_gain", channel_gain)
    p = non_negative("tx_power_w", tx_power_w)
    n0 = positive("noise_psd_w_per_hz", noise_psd_w_per_hz)
    return g * p / (n0 * b)


def shannon_rate_bps(bandwidth_hz, channel_gain, tx_power_w, noise_psd_w_per_hz):
    """Eq. (8): ``r = b * log2(1 + g * p / (N0 * b))`` in bit/s.

    ``bandwidth_hz`` b is the band given to this device; the noise it sees is
    ``N0 * b``, so splitting the band (FDMA) also splits the noise. Scalars
    give a float (inputs checked); NumPy arrays (any of the arguments,
    broadcast together) give an array, element by element the same numbers.
    """
    b, g, p, n0 = bandwidth_hz, channel_gain, tx_power_w, noise_psd_w_per_hz
    if (type(b) is float and type(g) is float and type(p) is float and type(n0) is float
            and 0.0 < b < math.inf and 0.0 <= g < math.inf and 0.0 <= p < math.inf and 0.0 < n0 < math.inf):
        return unchecked_shannon_rate_bps(b, g, p, n0)  # the checks, all made in the one test above
    if not any(isinstance(x, np.ndarray) for x in (bandwidth_hz, channel_gain, tx_power_w, noise_psd_w_per_hz)):
        return float(bandwidth_hz) * math.log1p(snr(bandwidth_hz, channel_gain, tx_power_w, noise_psd_w_per_hz)) / _LN2
    b = np.asarray(bandwidth_hz, dtype=float)
    x = np.asarray(channel_gain, dtype=float) * np.asarray(tx_power_w, dtype=float) / (
        np.asarray(noise_psd_w_per_hz, dtype=float) * b)
    return b * np.log1p(x) / _LN2


def unchecked_shannon_rate_bps(bandwidth_hz: float, channel_gain: float, tx_power_w: float,
                               noise_psd_w_per_hz: float) -> float:
    """Eq. (8) on floats the caller has checked (``b``, ``N0`` > 0; ``g``, ``p`` ≥ 0; all finite), in bit/s.

    :func:`shannon_rate_bps`'s scalar path, without its checks, for the engine's
    per-transfer rate (its inputs are checked once per round for all devices).
    """
    # log1p keeps full precision at low SNR, where log2(1.0 + snr) loses the digits of snr
    return bandwidth_hz * math.log1p(channel_gain * tx_power_w / (noise_psd_w_per_hz * bandwidth_hz)) / _LN2


def upload_time_s(model_bits: float, rate_bps: float) -> float:
    """Eq. (9): ``t_u = m / r`` in seconds, ``m`` in bits, ``r`` in bit/s."""
    m = non_negative("model_bits", model_bits)
    r = positive("rate_bps", rate_bps)
    return m / r


def shared_uplink_time_s(
    n_uploaders: int,
    model_bits: float,
    bandwidth_hz: float,
    channel_gain: float,
    tx_power_w: float,
    noise_psd_w_per_hz: float,
) -> float:
    """Eq. (24): ``t_u = K * m / (b * log2(1 + g p / (N0 b)))`` in seconds.

    K identical devices upload ``m`` bits each over a shared band ``b``; this
    equals K sequential full-band uploads (TDMA).
    """
    k = count("n_uploaders", n_uploaders)
    rate = shannon_rate_bps(bandwidth_hz, channel_gain, tx_power_w, noise_psd_w_per_hz)
    return k * upload_time_s(model_bits, rate)


def radio_energy_j(tx_power_w: float, airtime_s: float) -> float:
    """Transmit energy ``E = p * t_u`` in joules (W × s)."""
    return non_negative("tx_power_w", tx_power_w) * non_negative("airtime_s", airtime_s)
