"""The access schemes' rate formulas, pure functions of NumPy arrays (units in the names; docs/model/system_model.md).

Each has a hand-computed test, a limiting case and a property in ``tests/test_access_formulas.py``.
"""

from __future__ import annotations

import math

import numpy as np

from ..radio import shannon_rate_bps

_LN2 = math.log(2.0)


def ofdma_rate_bps(rb_bandwidth_hz: float, gains, powers_w, noise_psd_w_per_hz: float) -> float:
    """A device's rate over its resource blocks (bit/s): ``Σ_rb b log2(1 + p_rb g_rb / (N0 b))``.

    ``gains``/``powers_w``: its blocks' linear gains and the power on each (W); ``b``: one block's band (Hz).
    Eq. (8) of each block summed (OFDMA: orthogonal subcarriers, no interference; e.g. Zhu, Wang and Huang,
    IEEE TWC 2020, §II; 3GPP TS 36.211 for the 180 kHz LTE block).
    """
    g = np.asarray(gains, dtype=float)
    p = np.asarray(powers_w, dtype=float)
    return float(np.sum(shannon_rate_bps(float(rb_bandwidth_hz), g, p, float(noise_psd_w_per_hz)))) if g.size else 0.0


def water_filling_w(gains, total_power_w: float, rb_bandwidth_hz: float, noise_psd_w_per_hz: float) -> np.ndarray:
    """The power on each block that maximises ``Σ b log2(1 + p_i g_i / (N0 b))`` with ``Σ p_i = P`` (W).

    ``p_i = max(0, μ − N0 b / g_i)``, the water level μ set by the power budget (Cover and Thomas, *Elements of
    Information Theory*, 2nd ed., §9.4, Eq. 9.74-9.75).
    """
    g = np.asarray(gains, dtype=float)
    floor = noise_psd_w_per_hz * rb_bandwidth_hz / g  # the noise level of each block, N0 b / g (W)
    order = np.argsort(floor, kind="stable")
    levels = floor[order]
    csum = np.cumsum(levels)
    m = np.arange(1, g.size + 1)
    mu = (total_power_w + csum) / m  # the water level with the m best blocks filled
    used = int(np.flatnonzero(mu > levels)[-1]) + 1  # the blocks under water: the level is above their floor
    p = np.zeros(g.size)
    p[order[:used]] = mu[used - 1] - levels[:used]
    return p


def noma_rates_bps(band_hz: float, received_w, noise_psd_w_per_hz: float) -> np.ndarray:
    """Uplink NOMA with successive interference cancellation in one cluster (bit/s, one rate per member).

    The base station decodes in descending received power ``g·p``; member k sees the members decoded after it as
    interference: ``r_k = b log2(1 + g_k p_k / (Σ_{j decoded after k} g_j p_j + N0 b))`` (Ding et al., IEEE JSAC
    2017, "A survey on non-orthogonal multiple access for 5G networks", §III-B, the uplink SIC rates). Their sum is
    ``b log2(1 + Σ g p / (N0 b))`` (the multiple-access channel's sum capacity).
    """
    gp = np.asarray(received_w, dtype=float)
    order = np.argsort(-gp, kind="stable")  # decoding order: strongest first
    weaker = np.concatenate([np.cumsum(gp[order][::-1])[::-1][1:], [0.0]])  # Σ of those decoded after each
    rates = np.empty(gp.size)
    rates[order] = shannon_rate_bps(float(band_hz), gp[order], 1.0 / (1.0 + weaker / (noise_psd_w_per_hz * band_hz)),
                                    float(noise_psd_w_per_hz))
    return rates


def aircomp_airtime_s(n_parameters: int, subcarriers: int, symbol_rate_hz: float) -> float:
    """Over-the-air aggregation's airtime (s): the P parameters as analog symbols over S orthogonal sub-channels,
    ``⌈P / S⌉`` symbols on each, one symbol per ``1 / symbol_rate`` seconds — the same whatever the number of devices
    (Zhu, Wang and Huang, IEEE TWC 2020, "Broadband analog aggregation", §II-B)."""
    return math.ceil(n_parameters / subcarriers) / symbol_rate_hz


def aircomp_eta(tx_power_max_w, gains) -> float:
    """The aggregation's scale η (W): truncated channel inversion ``b_k = √η / h_k`` with ``|b_k|² ≤ P_k`` for every
    included device, so ``η = min_k P_k g_k`` (g = |h|², the weakest included device's power limit; Zhu, Wang and
    Huang, IEEE TWC 2020, Eq. (7)-(9))."""
    return float(np.min(np.asarray(tx_power_max_w, dtype=float) * np.asarray(gains, dtype=float)))


def aircomp_noise_var(noise_psd_w_per_hz: float, band_hz: float, eta: float) -> float:
    """The variance of the noise on each aggregated parameter after the receiver's ``1 / √η``: ``N0 b / η``
    (the channel's noise power ``N0 b`` on the sub-channel of band ``b``, W, over the scale η, W)."""
    return noise_psd_w_per_hz * band_hz / eta
