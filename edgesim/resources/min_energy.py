"""The round's least-energy bands, powers and frequencies under a deadline (Yang et al., IEEE TWC 2021).

The problem (FDMA, one round, the K uploaders; Yang, Chen, Saad, Hong, Shikh-Bahaei,
"Energy efficient federated learning over wireless communication networks",
IEEE TWC 20(3), 2021, the total-energy problem of its Sec. III with one local
round): choose each uploader's band ``b_k`` (Hz), upload time ``t_k`` (s),
transmit power ``p_k`` (W) and CPU frequency ``f_k`` (Hz) to

    min  Σ_k κ C_k f_k² + p_k t_k
    s.t. d_k + C_k / f_k + t_k ≤ T,   s_k ≤ t_k b_k log2(1 + g_k p_k / (N0 b_k)),   Σ_k b_k = B,
         f_min ≤ f_k ≤ f_max,  0 ≤ p_k ≤ p_max,

with ``d_k`` the server's compute and the device's download before it computes
(s), ``C_k`` its cycles, ``s_k`` its upload bits, ``g_k`` its gain, ``N0`` the
noise PSD (W/Hz), ``κ`` the switched capacitance. At the optimum the rate
constraint is tight, so ``p_k t_k = (N0 / g_k) z (2^{s_k / z} − 1)`` with
``z = b_k t_k``, and the compute takes the rest, ``f_k = max(f_min, C_k / (L_k − t_k))``
with ``L_k = T − d_k``. The energy is then jointly convex in ``(b_k, t_k)``
(``z (2^{s/z} − 1)`` of the product ``z = b t`` is convex because, with
``u = s ln 2 / z``, ``e^u (1 − u + 2u²) ≥ 1``; ``κ C³ / (L − t)²`` is convex), and
``p_k ≤ p_max`` is the convex set ``t_k ≥ s_k / r(b_k, p_max)``.

**Solved exactly** by Lagrangian duality on ``Σ b_k = B``: for a price ``ν`` (J/Hz)
each device solves its own convex subproblem ``min_{b,t} E_k(b, t) + ν b`` — for
a given ``t`` the best ``b`` is closed-form (``∂/∂b = 0`` gives
``u = 1 + W₀((a − 1)/e)``, ``a = ν g / (N0 t)``, ``b = s ln 2 / (u t)``; raised to
the least band that ``p_max`` allows if below it), and ``t`` is found by golden
section on the convex remainder — and ``log ν`` is found by Brent's method until the
bands fill ``B`` (``Σ b_k(ν)`` falls with ``ν``). The bands left are scaled onto
``B`` (more band never costs energy).

**The weighted objective** ``w · E + (1 − w) · λ · T`` (``w`` =
``resources.energy_weight``, ``λ`` = ``resources.time_price_j_per_s`` in J/s, the
joules one second of round time is worth) also chooses the round's completion
time ``T`` in ``[T_min, τ]``: ``E*(T)`` is convex and falls with ``T``, so Brent's bounded
search on ``T``; ``T_min`` is the least last finish at full power and frequency
(:func:`~edgesim.resources.formulas.min_max_time_bands_hz`). ``w = 1``: ``T = τ``.
"""

from __future__ import annotations

import math

import numpy as np

from . import formulas

_LN2 = math.log(2)
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_T_STEPS = 64  # golden steps on each device's upload time: the interval shrinks to 0.618**64 ≈ 4e-14 of its width
_ROUND_REL = 1e-10  # Brent's bounded search on the round time T (w < 1) stops within this share of τ


def _tx_energy_j(band_hz, upload_s, upload_bits, channel_gain, noise_psd_w_per_hz):
    """``p t`` at the least power sending ``s`` bits in ``t`` s on ``b`` Hz: ``(N0 / g) z (2^{s/z} − 1)``,
    ``z = b t`` (J)."""
    z = band_hz * upload_s
    with np.errstate(over="ignore", invalid="ignore"):
        return noise_psd_w_per_hz / channel_gain * z * np.expm1(_LN2 * upload_bits / z)


def _compute_energy_j(cycles, compute_s, kappa, cpu_freq_min_hz):
    """``κ C f²`` with ``f = max(f_min, C / t_c)`` (J)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.maximum(cpu_freq_min_hz, np.where(cycles > 0, cycles / compute_s, 0.0))  # no cycles: f_min
    return kappa * cycles * f ** 2


def _best_band_hz(nu, upload_s, upload_bits, channel_gain, tx_power_max_w, noise_psd_w_per_hz):
    """For upload time ``t``, the band minimising ``(N0/g) z (2^{s/z} − 1) + ν b`` (``z = b t``), raised to the least
    band at which ``p_max`` sends ``s`` bits in ``t`` s (Hz)."""
    from scipy.special import lambertw

    a = nu * channel_gain / (noise_psd_w_per_hz * upload_s)
    u = 1.0 + lambertw((a - 1.0) / math.e, k=0).real
    b = upload_bits * _LN2 / (u * upload_s)
    need = formulas.min_band_hz(upload_bits / upload_s, channel_gain, tx_power_max_w, noise_psd_w_per_hz)
    return np.maximum(b, need)


def _device_best(nu, cycles, upload_bits, time_left_s, channel_gain, noise_psd_w_per_hz, kappa, cpu_freq_min_hz,
                 cpu_freq_max_hz, tx_power_max_w):
    """Each device's ``min_{b,t} E(b, t) + ν b`` (golden section on ``t``): its band (Hz) and upload time (s)."""
    lo = upload_bits / formulas.rate_limit_bps(channel_gain, tx_power_max_w, noise_psd_w_per_hz)
    hi = time_left_s - cycles / cpu_freq_max_hz

    def cost(t):
        b = _best_band_hz(nu, t, upload_bits, channel_gain, tx_power_max_w, noise_psd_w_per_hz)
        e = (_compute_energy_j(cycles, time_left_s - t, kappa, cpu_freq_min_hz)
             + _tx_energy_j(b, t, upload_bits, channel_gain, noise_psd_w_per_hz) + nu * b)
        return np.where(np.isfinite(e), e, np.inf), b

    end = hi
    x1, x2 = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
    f1, f2 = cost(x1)[0], cost(x2)[0]
    for _ in range(_T_STEPS):
        left = f1 <= f2  # the minimum lies in [lo, x2] (x1 becomes its upper point), else in [x1, hi]
        hi, lo = np.where(left, x2, hi), np.where(left, lo, x1)
        keep_x, keep_f = np.where(left, x1, x2), np.where(left, f1, f2)
        new = np.where(left, hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo))
        f_new = cost(new)[0]
        x1, f1 = np.where(left, new, keep_x), np.where(left, f_new, keep_f)
        x2, f2 = np.where(left, keep_x, new), np.where(left, keep_f, f_new)
    # the end of the interval is a candidate too (the optimum may sit on t = L − C / f_max)
    mid = 0.5 * (lo + hi)
    t = np.where(cost(end)[0] < cost(mid)[0], end, mid)
    return cost(t)[1], t


def _uploaders(upload_bits, *arrays):
    s = np.asarray(upload_bits, dtype=float)
    up = s > 0
    return up, [np.broadcast_to(np.asarray(x, dtype=float), s.shape)[up] for x in (s, *arrays)]


def least_finish_s(bandwidth_hz: float, before_s, cycles, upload_bits, channel_gain, noise_psd_w_per_hz: float,
                   cpu_freq_max_hz, tx_power_max_w) -> float:
    """``T_min``: the least time (s from the round's start) by which every uploader can be done, at full power and
    frequency on the min-max bands (:func:`~edgesim.resources.formulas.min_max_time_bands_hz`); 0 without
    uploaders."""
    up, (s, d, c, g, fmax, pmax) = _uploaders(upload_bits, before_s, cycles, channel_gain, cpu_freq_max_hz,
                                              tx_power_max_w)
    if not up.any():
        return 0.0
    ready = d + c / fmax
    bands = formulas.min_max_time_bands_hz(bandwidth_hz, ready, s, g, pmax, noise_psd_w_per_hz)
    return float(np.max(formulas.finish_times_s(ready, s, bands, g, pmax, noise_psd_w_per_hz)))


def min_energy_bands_hz(bandwidth_hz: float, deadline_s: float, before_s, cycles, upload_bits, channel_gain,
                        noise_psd_w_per_hz: float, kappa: float, cpu_freq_min_hz, cpu_freq_max_hz,
                        tx_power_max_w) -> np.ndarray:
    """The bands (Hz, summing to ``B``; 0 for a device without an upload) of the least-energy round that ends by
    ``T`` = ``deadline_s`` (s from the round's start), the module's problem; with these bands each device's
    least-energy split of its time (:func:`~edgesim.resources.formulas.joint_split`) is the optimum's.
    ``before_s``: each device's server wait + download before it computes (s). Where no bands meet ``T`` (``T`` ≤
    ``T_min``, :func:`least_finish_s`), the min-max bands at full power and frequency: the least last finish."""
    up, (s, d, c, g, fmin, fmax, pmax) = _uploaders(upload_bits, before_s, cycles, channel_gain, cpu_freq_min_hz,
                                                    cpu_freq_max_hz, tx_power_max_w)
    bands = np.zeros(np.shape(upload_bits), dtype=float)
    if not up.any():
        return bands
    ready = d + c / fmax
    fallback = formulas.min_max_time_bands_hz(bandwidth_hz, ready, s, g, pmax, noise_psd_w_per_hz)
    finish = formulas.finish_times_s(ready, s, fallback, g, pmax, noise_psd_w_per_hz)
    if not float(np.max(finish)) < deadline_s:
        bands[up] = fallback
        return bands
    left = deadline_s - d

    def band_sum(nu):
        b, _ = _device_best(nu, c, s, left, g, noise_psd_w_per_hz, kappa, fmin, fmax, pmax)
        return float(b.sum()), b

    # Bracket the price: Σ b(ν) falls with ν, to the min-max bands of T (below B) as ν → ∞ and without bound as ν → 0.
    nu = max(float(np.sum(pmax * left)) / bandwidth_hz, 1e-300)
    total, b = band_sum(nu)
    if total > bandwidth_hz:
        nu_lo, nu_hi = nu, nu * 100.0
        while (found := band_sum(nu_hi))[0] > bandwidth_hz and nu_hi < 1e300:
            nu_lo, nu_hi = nu_hi, nu_hi * 100.0
        b_hi = found[1]
    else:
        nu_lo, nu_hi, b_hi = nu / 100.0, nu, b
        while (found := band_sum(nu_lo))[0] <= bandwidth_hz and nu_lo > 1e-300:
            nu_lo, nu_hi, b_hi = nu_lo / 100.0, nu_lo, found[1]
    if nu_hi > nu_lo:  # Brent's method on log ν between the bracket's ends, then the end whose bands fit in B
        from scipy.optimize import brentq

        x = brentq(lambda x: band_sum(math.exp(x))[0] - bandwidth_hz, math.log(nu_lo), math.log(nu_hi),
                   xtol=1e-13, rtol=1e-15, maxiter=200)
        for step in (0.0, 1e-13, 1e-12, 1e-11, 1e-10):
            if math.exp(x + step) < nu_hi and (found := band_sum(math.exp(x + step)))[0] <= bandwidth_hz:
                b_hi = found[1]
                break
    bands[up] = b_hi * (bandwidth_hz / float(b_hi.sum()))
    return bands


def round_energy_j(bands_hz, deadline_s: float, before_s, cycles, upload_bits, channel_gain,
                   noise_psd_w_per_hz: float, kappa: float, cpu_freq_min_hz, cpu_freq_max_hz, tx_power_max_w) -> float:
    """The devices' total energy ``Σ κ C f² + p s / r(b, p)`` (J) on the given bands when each device splits its time
    left (``T − before``) the least-energy way (:func:`~edgesim.resources.formulas.joint_split`, the ``joint``
    frequency with ``min_energy`` power)."""
    c = np.asarray(cycles, dtype=float)
    s = np.asarray(upload_bits, dtype=float)
    f, p = formulas.joint_split(c, s, bands_hz, deadline_s - np.asarray(before_s, dtype=float), channel_gain,
                                noise_psd_w_per_hz, kappa, cpu_freq_min_hz, cpu_freq_max_hz, tx_power_max_w)
    r = formulas.rate_bps(bands_hz, channel_gain, p, noise_psd_w_per_hz)
    with np.errstate(divide="ignore", invalid="ignore"):
        tx = np.where(s > 0, p * s / r, 0.0)
    return float(np.sum(kappa * c * f ** 2 + tx))


def weighted_round_time_s(energy_weight: float, time_price_j_per_s: float, bandwidth_hz: float, deadline_s: float,
                          before_s, cycles, upload_bits, channel_gain, noise_psd_w_per_hz: float, kappa: float,
                          cpu_freq_min_hz, cpu_freq_max_hz, tx_power_max_w) -> float:
    """The round time ``T`` in ``[T_min, τ]`` (s) minimising ``w E*(T) + (1 − w) λ T``, ``E*(T)`` the least energy
    by ``T`` (:func:`min_energy_bands_hz`, J), ``λ`` in J/s; golden section (``E*`` is convex). ``w = 1``: ``τ``;
    ``w = 0``: ``T_min``. ``τ`` itself where ``τ`` ≤ ``T_min`` (nothing meets it)."""
    w = float(energy_weight)
    args = (before_s, cycles, upload_bits, channel_gain, noise_psd_w_per_hz, kappa, cpu_freq_min_hz,
            cpu_freq_max_hz, tx_power_max_w)
    if w >= 1.0:
        return float(deadline_s)
    t_min = least_finish_s(bandwidth_hz, before_s, cycles, upload_bits, channel_gain, noise_psd_w_per_hz,
                           cpu_freq_max_hz, tx_power_max_w)
    if not t_min < deadline_s:
        return float(deadline_s)
    if w <= 0.0:
        return t_min

    def objective(t):
        bands = min_energy_bands_hz(bandwidth_hz, t, *args)
        return w * round_energy_j(bands, t, *args) + (1.0 - w) * time_price_j_per_s * t

    from scipy.optimize import minimize_scalar

    found = minimize_scalar(objective, bounds=(t_min, float(deadline_s)), method="bounded",
                            options={"xatol": _ROUND_REL * float(deadline_s), "maxiter": 200})
    best = min((found.fun, found.x), (objective(float(deadline_s)), float(deadline_s)))
    return best[1]
