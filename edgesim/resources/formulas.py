"""The resource policies' formulas: pure functions on NumPy arrays, one entry per device (docs/model/system_model.md).

Units: bandwidth in Hz, power in W, noise power spectral density ``N0`` in W/Hz,
channel gain linear, sizes in bits, frequencies in cycles/s (Hz), times in
seconds, energy in joules. The uplink rate is Shannon's, Eq. (8) of DoFed-SPP
(Ching et al., IEEE TSC 2023): ``r(b, p) = b log2(1 + g p / (N0 b))``; it rises
with ``b`` towards its limit ``g p / (N0 ln 2)`` and with ``p``. Compute takes
``C / f`` seconds and ``κ C f²`` joules (Eq. (7); the dynamic-power model of
Yang et al., "Energy efficient federated learning over wireless communication
networks", IEEE TWC 2021); the radio spends ``p t`` joules.

Every function here is deterministic and vectorised; none draws randomness.
"""

from __future__ import annotations

import math

import numpy as np

_LN2 = math.log(2)
# Where the search for the common finish time stops: the bands sum to B, or the bracket is this narrow (relative).
_BISECTION_REL = 1e-13
_BISECTION_STEPS = 200
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_GOLDEN_STEPS = 72  # the interval shrinks by 0.618 a step: 1e-15 of its width


def rate_bps(bandwidth_hz, channel_gain, tx_power_w, noise_psd_w_per_hz):
    """Eq. (8), vectorised: ``b log2(1 + g p / (N0 b))`` in bit/s (0 where ``b`` = 0)."""
    b = np.asarray(bandwidth_hz, dtype=float)
    a = np.asarray(channel_gain, dtype=float) * np.asarray(tx_power_w, dtype=float) / noise_psd_w_per_hz
    with np.errstate(divide="ignore", invalid="ignore"):
        r = b * np.log1p(a / b) / _LN2
    return np.where(b > 0, r, 0.0)


def rate_limit_bps(channel_gain, tx_power_w, noise_psd_w_per_hz):
    """The rate with an unlimited band, ``lim_{b→∞} r(b) = g p / (N0 ln 2)`` in bit/s: no band reaches it."""
    return np.asarray(channel_gain, dtype=float) * np.asarray(tx_power_w, dtype=float) / (noise_psd_w_per_hz * _LN2)


def min_band_hz(target_rate_bps, channel_gain, tx_power_w, noise_psd_w_per_hz):
    """The least band ``b`` with ``r(b) = R`` (Eq. (8) inverted in ``b``), in Hz; ``inf`` where ``R`` is at or
    above the limit :func:`rate_limit_bps`, 0 where ``R`` = 0.

    With ``a = g p / N0`` (Hz) and ``y = R ln 2 / a`` in (0, 1), ``x = a / b`` solves
    ``ln(1 + x) = y x``; with ``u = 1 + x`` that is ``u = −W₋₁(−y e^{−y}) / y``
    (the lower branch of Lambert's W; the principal branch gives the trivial
    ``u = 1``), so ``b = a / (u − 1)``. Near the limit (``y`` → 1, low SNR) W
    loses its digits, and ``x ≈ 2 (1 − y) (1 + 2 (1 − y) / 3)`` (the series of
    ``ln(1 + x) / x``) starts instead; three Newton steps on ``ln(1 + x) − y x``
    then polish either start.
    """
    from scipy.special import lambertw

    target = np.asarray(target_rate_bps, dtype=float)
    a = np.asarray(channel_gain, dtype=float) * np.asarray(tx_power_w, dtype=float) / noise_psd_w_per_hz
    a, target = np.broadcast_arrays(a, target)
    y = target * _LN2 / a
    ok = (y > 0) & (y < 1)
    out = np.where(target <= 0, 0.0, np.inf)
    if ok.any():
        yo, ao = y[ok], a[ok]
        near = yo > 0.9
        e = 1.0 - yo
        with np.errstate(invalid="ignore", divide="ignore"):
            x_w = -lambertw(-yo * np.exp(-yo), k=-1).real / yo - 1.0
        x = np.where(near, 2.0 * e * (1.0 + 2.0 * e / 3.0), x_w)
        for _ in range(3):
            step = (np.log1p(x) - yo * x) / (1.0 / (1.0 + x) - yo)
            x = np.where(np.isfinite(step), np.maximum(x - step, 0.5 * x), x)
        out = out.copy()
        out[ok] = ao / x
    return out


def _band_from(target, a_hz, x0, channel_gain, tx_power_w, noise_psd_w_per_hz):
    """:func:`min_band_hz` warm-started at ``x0`` (= a / b of a nearby target): four Newton steps on
    ``ln(1 + x) − y x``; where they do not settle (or start before the maximum of that function), Lambert's W.
    Returns the bands and their ``x``."""
    y = target * _LN2 / a_hz
    x = x0.copy()
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for _ in range(4):
            x = x - (np.log1p(x) - y * x) / (1.0 / (1.0 + x) - y)
        bad = ~(np.isfinite(x) & (x > 0) & (np.abs(np.log1p(x) - y * x) <= 1e-15 * y * x))
    if bad.any():
        x[bad] = a_hz[bad] / min_band_hz(target[bad], channel_gain[bad], tx_power_w[bad], noise_psd_w_per_hz)
    return a_hz / x, x


def proportional_bands_hz(bandwidth_hz: float, upload_bits) -> np.ndarray:
    """``b_k = B s_k / Σ_j s_j``: each uploader's band in proportion to its bits (Hz; 0 for a device without an
    upload). Equal bits give equal shares ``B / K``."""
    s = np.asarray(upload_bits, dtype=float)
    total = s.sum()
    return np.zeros_like(s) if total <= 0 else bandwidth_hz * s / total


def equal_bands_hz(bandwidth_hz: float, upload_bits) -> np.ndarray:
    """``b_k = B / K`` for each of the K uploaders (Hz; 0 for a device without an upload)."""
    s = np.asarray(upload_bits, dtype=float)
    k = int((s > 0).sum())
    return np.where(s > 0, bandwidth_hz / max(k, 1), 0.0)


def finish_times_s(ready_s, upload_bits, bands_hz, channel_gain, tx_power_w, noise_psd_w_per_hz) -> np.ndarray:
    """``a_k + s_k / r_k(b_k)``: when each device's upload ends on its own band (s; ``a_k`` for no upload)."""
    s = np.asarray(upload_bits, dtype=float)
    r = rate_bps(bands_hz, channel_gain, tx_power_w, noise_psd_w_per_hz)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(s > 0, s / r, 0.0)
    return np.asarray(ready_s, dtype=float) + t


def min_max_time_bands_hz(bandwidth_hz: float, ready_s, upload_bits, channel_gain, tx_power_w,
                          noise_psd_w_per_hz: float) -> np.ndarray:
    """The FDMA shares that minimise the last finish: ``min_b max_k (a_k + s_k / r_k(b_k))`` s.t. ``Σ b_k = B``.

    Each ``t_k(b) = s_k / r_k(b)`` falls as ``b`` grows, so at the optimum every
    uploader finishes at one common time ``T`` and ``Σ_k b_k(T) = B`` with
    ``b_k(T)`` = :func:`min_band_hz` of ``s_k / (T − a_k)``; ``Σ b_k(T)`` falls
    with ``T`` (convexly), so ``T`` is found by safeguarded Newton steps between the bound no band beats
    (``max_k a_k + s_k / r_k(∞)``) and the finish of equal shares ``B / K``
    (a feasible point). ``a_k`` is when device k is ready to upload (s after the
    round's start). Returns the bands in Hz (0 for a device without an upload);
    the little the bisection leaves unassigned is shared out in proportion, so
    ``Σ b_k = B``. Equal devices get ``B / K`` each.
    """
    s = np.asarray(upload_bits, dtype=float)
    a = np.asarray(ready_s, dtype=float)
    g, p = (np.broadcast_to(np.asarray(x, dtype=float), s.shape) for x in (channel_gain, tx_power_w))
    up = s > 0
    bands = np.zeros_like(s)
    if not up.any():
        return bands
    su, au, gu, pu = s[up], a[up], g[up], p[up]
    equal = np.full(su.shape, bandwidth_hz / su.size)
    hi = float(np.max(au + su / rate_bps(equal, gu, pu, noise_psd_w_per_hz)))
    lo = float(np.max(au + su / rate_limit_bps(gu, pu, noise_psd_w_per_hz)))
    a_hz = gu * pu / noise_psd_w_per_hz
    best, t = equal, hi
    # Newton on h(T) = Σ b_k(T) − B (convex and falling in T), kept inside the bracket [lo, hi] (bisection when a
    # step leaves it): db_k/dT = −R_k² / (s_k r_k'(b_k)), R_k = s_k / (T − a_k), r'(b) = (ln(1+x) − x/(1+x)) / ln 2.
    x = a_hz / equal
    for _ in range(_BISECTION_STEPS):
        need, x = _band_from(su / np.maximum(t - au, 0.0), a_hz, x, gu, pu, noise_psd_w_per_hz)
        excess = float(need.sum()) - bandwidth_hz
        if excess <= 0:
            hi, best = t, need
        else:
            lo = t
        if abs(excess) <= _BISECTION_REL * bandwidth_hz:  # converged (from either side): scaled onto B below
            best = need
            break
        if hi - lo <= _BISECTION_REL * hi:
            break
        step = math.nan
        if math.isfinite(excess):
            rate = su / (t - au)
            x = a_hz / need
            slope = float(np.sum(-rate ** 2 / (su * (np.log1p(x) - x / (1.0 + x)) / _LN2)))
            step = t - excess / slope if slope < 0 else math.nan
        t = step if lo < step < hi else 0.5 * (lo + hi)
    bands[up] = best * (bandwidth_hz / best.sum())
    return bands


def min_energy_power_w(upload_bits, bandwidth_hz, time_s, channel_gain, tx_power_max_w,
                       noise_psd_w_per_hz: float) -> np.ndarray:
    """The least power that sends ``s`` bits on ``b`` Hz within ``τ`` s: Eq. (8) inverted in ``p``,

    ``p = (2^{s / (b τ)} − 1) · N0 b / g`` (W), capped at the device's maximum
    ``p_max`` (also where ``τ`` ≤ 0 or the exponent overflows: the device cannot
    make it, so it sends at full power). A device without an upload keeps ``p_max``.
    """
    s = np.asarray(upload_bits, dtype=float)
    b, tau, g, pmax = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (bandwidth_hz, time_s, channel_gain,
                                                                                 tx_power_max_w)))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        p = np.expm1(_LN2 * s / (b * tau)) * noise_psd_w_per_hz * b / g
    ok = (s > 0) & (b > 0) & (tau > 0) & np.isfinite(p)
    return np.where(ok, np.minimum(p, pmax), pmax)


def min_energy_freq_hz(cycles, time_s, cpu_freq_min_hz, cpu_freq_max_hz) -> np.ndarray:
    """DVFS: the lowest frequency that computes ``C`` cycles within ``τ`` s, ``f = C / τ`` clipped to
    ``[f_min, f_max]`` (Hz); ``f_max`` where ``τ`` ≤ 0 (the device cannot make it). Compute energy ``κ C f²``
    falls with ``f``, so this is the least-energy frequency that meets the deadline (the DVFS argument of
    Yang et al., IEEE TWC 2021)."""
    c = np.asarray(cycles, dtype=float)
    tau, fmin, fmax = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (time_s, cpu_freq_min_hz,
                                                                                 cpu_freq_max_hz)))
    with np.errstate(divide="ignore", invalid="ignore"):
        f = c / tau
    return np.where(tau > 0, np.clip(f, fmin, fmax), fmax)


def joint_energy_j(upload_time_s, cycles, upload_bits, bandwidth_hz, time_s, channel_gain, noise_psd_w_per_hz,
                   kappa, cpu_freq_min_hz, cpu_freq_max_hz, tx_power_max_w):
    """The device energy ``κ C f(t)² + p(t) t`` when the upload takes ``t`` of the ``τ`` seconds left and the
    compute the rest (``f(t) = max(f_min, C / (τ − t))``, ``p(t)`` = :func:`min_energy_power_w`); J."""
    c = np.asarray(cycles, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.maximum(cpu_freq_min_hz, np.where(c > 0, c / (time_s - upload_time_s), 0.0))  # no cycles: f_min
    f = np.minimum(f, cpu_freq_max_hz)
    p = min_energy_power_w(upload_bits, bandwidth_hz, upload_time_s, channel_gain, tx_power_max_w,
                           noise_psd_w_per_hz)
    return kappa * np.asarray(cycles, dtype=float) * f ** 2 + p * upload_time_s, f, p


def joint_split(cycles, upload_bits, bandwidth_hz, time_s, channel_gain, noise_psd_w_per_hz: float, kappa: float,
                cpu_freq_min_hz, cpu_freq_max_hz, tx_power_max_w) -> tuple[np.ndarray, np.ndarray]:
    """Per device, the split of the ``τ`` seconds left between computing and uploading that spends the least
    energy: ``min_t κ C f² + p t`` with ``f = C / (τ − t)`` (≥ ``f_min``) and ``p`` the least power sending
    ``s`` bits in ``t`` s on ``b`` Hz, subject to ``f ≤ f_max`` and ``p ≤ p_max``.

    Both terms are convex in the upload time ``t``: ``κ C³ / (τ − t)²`` rises,
    ``t (2^{s/(b t)} − 1) N0 b / g`` falls (the perspective of a convex function),
    so the problem is a one-variable convex one, solved by golden-section search
    on ``t ∈ [s / r(b, p_max), τ − C / f_max]``. Returns ``(f, p)`` in Hz and W;
    a device whose interval is empty (it cannot meet ``τ`` even at full power and
    frequency) keeps ``(f_max, p_max)``, one without an upload computes at
    :func:`min_energy_freq_hz`'s frequency and keeps ``p_max``.
    """
    c = np.asarray(cycles, dtype=float)
    s = np.asarray(upload_bits, dtype=float)
    b, tau, g, fmin, fmax, pmax = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (
        bandwidth_hz, time_s, channel_gain, cpu_freq_min_hz, cpu_freq_max_hz, tx_power_max_w)))
    with np.errstate(divide="ignore", invalid="ignore"):
        t_lo = np.where(s > 0, s / rate_bps(b, g, pmax, noise_psd_w_per_hz), 0.0)
        t_hi = tau - c / fmax
    ok = (s > 0) & (b > 0) & np.isfinite(t_lo) & (t_hi >= t_lo)
    f = np.where(s > 0, fmax, min_energy_freq_hz(c, tau, fmin, fmax))
    p = pmax.copy()
    if ok.any():
        args = [v[ok] for v in (c, s, b, tau, g)]
        lim = [v[ok] for v in (fmin, fmax, pmax)]
        lo, hi = t_lo[ok], t_hi[ok]

        def energy(t):
            return joint_energy_j(t, args[0], args[1], args[2], args[3], args[4], noise_psd_w_per_hz, kappa, *lim)[0]

        for _ in range(_GOLDEN_STEPS):
            x1, x2 = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
            left = energy(x1) <= energy(x2)  # then the minimum lies in [lo, x2], else in [x1, hi]
            hi, lo = np.where(left, x2, hi), np.where(left, lo, x1)
        t = 0.5 * (lo + hi)
        # The ends are candidates too (the minimum of a convex function may sit on the boundary).
        cands = np.stack([t, t_lo[ok], t_hi[ok]])
        es = np.stack([energy(x) for x in cands])
        t = cands[np.argmin(es, axis=0), np.arange(t.size)]
        _, fo, po = joint_energy_j(t, *args, noise_psd_w_per_hz, kappa, *lim)
        f[ok], p[ok] = fo, po
    return f, p


def tdma_latest_starts_s(order, airtime_s, deadline_s: float) -> np.ndarray:
    """TDMA served in ``order`` (device indices), packed against the deadline: the latest time each transfer may
    go on air so that all end by ``τ`` (s): ``S_last = τ − t_last``, ``S_prev = S_next − t_prev``.

    Any work-conserving single-band schedule whose devices are all ready by these
    starts ends by ``τ`` (a single server's busy periods, hence its last end, do
    not depend on the order it serves ready work in).
    """
    air = np.asarray(airtime_s, dtype=float)
    starts = np.zeros_like(air)
    end = float(deadline_s)
    for k in reversed(list(order)):
        starts[k] = end - air[k]
        end = starts[k]
    return starts


def tdma_schedule_s(ready_s, airtime_s, shortest_first: bool = False) -> tuple[np.ndarray, list[int]]:
    """When each TDMA transfer ends (s) and the order they went on air, for devices ready at ``a_k`` with airtimes
    ``t_k``: first come first served, or, with ``shortest_first``, the waiting transfer with the shortest airtime
    first (non-preemptive; ties by readiness, then index). Devices with no airtime (no upload) are left out."""
    import heapq

    a = np.asarray(ready_s, dtype=float)
    t = np.asarray(airtime_s, dtype=float)
    todo = sorted((k for k in range(a.size) if t[k] > 0), key=lambda k: (a[k], k))
    ends = a.copy()
    order: list[int] = []
    now, i, waiting = -math.inf, 0, []
    while i < len(todo) or waiting:
        if not waiting and now < a[todo[i]]:
            now = a[todo[i]]
        while i < len(todo) and a[todo[i]] <= now:
            k = todo[i]
            heapq.heappush(waiting, ((t[k] if shortest_first else 0.0), a[k], k))
            i += 1
        _, _, k = heapq.heappop(waiting)
        now += t[k]
        ends[k] = now
        order.append(k)
    return ends, order


def oort_statistical_utility(sum_sq_loss: float, n_samples: int) -> float:
    """Oort's statistical utility of a device's last update (Lai et al., OSDI 2021, §4.2, the utility
    ``U(i) = |B_i| sqrt((1/|B_i|) Σ_{k∈B_i} Loss(k)²)``): ``sum_sq_loss`` = ``Σ Loss(k)²`` over the
    ``n_samples`` = ``|B_i|`` samples it trained on (nats²). Equals ``sqrt(|B_i| Σ Loss(k)²)``; 0 for a device
    with no samples. Units: samples · nats."""
    n = int(n_samples)
    if n < 0 or not sum_sq_loss >= 0 or not math.isfinite(sum_sq_loss):
        raise ValueError(f"oort_statistical_utility: sum_sq_loss={sum_sq_loss!r}, n_samples={n_samples!r}; "
                         f"expected a finite sum >= 0 and a count >= 0")
    return n * math.sqrt(sum_sq_loss / n) if n > 0 else 0.0


def oort_utility(utility, duration_s, last_round, round_index: int, deadline_s: float, alpha: float) -> np.ndarray:
    """Oort's utility of an explored device (Lai et al., OSDI 2021, Alg. 1, lines 6-9):

    ``(U_i + sqrt(0.1 ln R / L_i)) · (T / t_i)^{α · 1(T < t_i)}`` with ``U_i`` the
    statistical utility ``|B_i| sqrt(mean loss²)`` of its last update (0 where
    the backend reports none), ``R`` the round, ``L_i`` the round it last took
    part in (the staleness bonus; from 1), ``T`` the preferred round duration
    (the round's budget τ, s) and ``t_i`` its last duration (s). Dimensionless.
    """
    u = np.nan_to_num(np.asarray(utility, dtype=float), nan=0.0)
    last = np.maximum(np.asarray(last_round, dtype=float) + 1.0, 1.0)
    bonus = np.sqrt(0.1 * math.log(max(round_index + 1, 1)) / last)
    t = np.asarray(duration_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        penalty = np.where(t > deadline_s, (deadline_s / t) ** alpha, 1.0)
    return (u + bonus) * penalty


def oort_scores(round_index: int, utility, duration_s, last_round, deadline_s: float, exploration: float,
                alpha: float, speed, uniform) -> np.ndarray:
    """Oort's picks as a ranking (a score per device, higher first): explored devices by :func:`oort_utility`,
    unexplored ones (never took part) by speed (the full-band rate), interleaved so that any first K hold
    ``⌊ε K⌋`` or ``⌈ε K⌉`` unexplored devices (position j explores when ``⌊(j+1)ε⌋ > ⌊jε⌋``), while both lists
    last. Ties go by ``uniform``."""
    last = np.asarray(last_round)
    explored = last >= 0
    util = oort_utility(utility, duration_s, last_round, round_index, deadline_s, alpha)
    ex = np.flatnonzero(explored)
    ex = ex[np.lexsort((uniform[ex], -util[ex]))]
    un = np.flatnonzero(~explored)
    un = un[np.lexsort((uniform[un], -np.asarray(speed, dtype=float)[un]))]
    n = last.size
    order = []
    i = j = 0
    for pos in range(n):
        explore = math.floor((pos + 1) * exploration) > math.floor(pos * exploration)
        if (explore and j < un.size) or i >= ex.size:
            order.append(un[j])
            j += 1
        else:
            order.append(ex[i])
            i += 1
    scores = np.empty(n)
    scores[np.asarray(order, dtype=np.int64)] = -np.arange(n, dtype=float)
    return scores


def oort_exploration_rate(round_index: int, start: float, decay: float, floor: float) -> float:
    """Oort's ε in round ``R`` (0-based): ``max(ε_0 · d^R, ε_min)`` (Lai et al., OSDI 2021, §5.1, "the exploration
    factor ... decays by 0.98 after each round till 0.2"; FedScale's selector multiplies before each selection)."""
    return max(start * decay ** round_index, floor)


def oort_preferred_duration_s(round_index: int, deadline_s: float, history, window: int, step: float) -> float:
    """Oort's pacer (Alg. 1, lines 11-12): the preferred round duration ``T`` starts at ``τ`` and is relaxed by
    ``step · τ`` at every checkpoint ``r`` (a multiple of ``W`` = ``window``, ``2W ≤ r ≤ R``) where the summed
    statistical utility of the last ``W`` rounds did not rise above that of the ``W`` before,
    ``Σ U[r−W, r) ≤ Σ U[r−2W, r−W)``; ``history[r]``: round r's summed utility. s."""
    h = np.asarray(history, dtype=float)
    relaxed = 0
    for r in range(2 * window, min(round_index, h.size) + 1, window):
        if h[r - window:r].sum() <= h[r - 2 * window:r - window].sum():
            relaxed += 1
    return deadline_s * (1.0 + step * relaxed)


def oort_blacklist(rounds_taken, threshold: int, max_share: float = 0.3) -> np.ndarray:
    """Oort's blacklist (§4.3, "we remove a client after it has been selected R times"): devices that took part in
    more than ``threshold`` rounds, at most ``⌊max_share · N⌋`` of them, the most-taken first (ties by id) — FedScale's
    ``blacklist_max_len`` 0.3; ``threshold`` 0: none. Bool per device."""
    taken = np.asarray(rounds_taken)
    out = np.zeros(taken.size, dtype=bool)
    if threshold <= 0:
        return out
    over = np.flatnonzero(taken > threshold)
    over = over[np.lexsort((over, -taken[over]))][:int(max_share * taken.size)]
    out[over] = True
    return out


def oort_selection(round_index: int, k: int, utility, duration_s, last_round, rounds_taken, history, speed, uniform,
                   *, deadline_s: float, exploration: float, decay: float, exploration_min: float, alpha: float,
                   cutoff: float, pacer_window: int, pacer_step: float, blacklist_rounds: int) -> np.ndarray:
    """Oort as published (Lai et al., OSDI 2021, Alg. 1): a score per device whose first ``K`` are the round's picks.

    ``ε_R`` (:func:`oort_exploration_rate`); ``e = min(#unexplored, ⌈ε_R K⌉)``
    exploration slots (⌈·⌉: the defaults explore at K = 5) and ``x = min(K − e,
    #explored)`` exploitation slots (the rest to exploration if too few are
    explored). Exploitation: the explored, not blacklisted devices' utility
    :func:`oort_utility` with the pacer's ``T`` (:func:`oort_preferred_duration_s`);
    those at or above ``c · U_(x)`` (``c`` = ``cutoff``, ``U_(x)`` the x-th largest)
    are sampled, ``x`` of them without replacement in proportion to the utility
    (Efraimidis-Spirakis keys ``ln(u) / U`` with the round's common random numbers
    ``u``). Exploration: the fastest unexplored devices (full-band rate, ties by
    ``u``). Scores: the picks first — the exploited by utility, with an explored
    pick at each position j where ``⌈(j+1)ε⌉ > ⌈jε⌉`` (the order matters only to an
    asynchronous run's free slot) — then the rest as :func:`oort_scores`
    interleaves them; blacklisted devices ``-inf``.
    """
    n = np.asarray(last_round).size
    k = n if k <= 0 else min(int(k), n)
    last = np.asarray(last_round)
    u = np.asarray(uniform, dtype=float)
    eps = oort_exploration_rate(round_index, exploration, decay, exploration_min)
    banned = oort_blacklist(rounds_taken, blacklist_rounds)
    t_pref = oort_preferred_duration_s(round_index, deadline_s, history, pacer_window, pacer_step)
    util = oort_utility(utility, duration_s, last_round, round_index, t_pref, alpha)
    explored = np.flatnonzero((last >= 0) & ~banned)
    unexplored = np.flatnonzero(last < 0)
    e = min(unexplored.size, math.ceil(eps * k - 1e-12))
    x = min(k - e, explored.size)
    e = min(unexplored.size, k - x)
    exploit: list[int] = []
    explore: list[int] = []
    if x > 0:
        ranked_ex = explored[np.lexsort((u[explored], -util[explored]))]
        threshold = cutoff * util[ranked_ex[x - 1]]
        pool = ranked_ex[util[ranked_ex] >= threshold]
        with np.errstate(divide="ignore"):
            keys = np.where(util[pool] > 0, np.log(np.maximum(u[pool], 1e-300)) / util[pool], -np.inf)
        chosen = pool[np.lexsort((u[pool], -keys))][:x]
        exploit = [int(d) for d in chosen[np.lexsort((u[chosen], -util[chosen]))]]
    if e > 0:
        ranked_un = unexplored[np.lexsort((u[unexplored], -np.asarray(speed, dtype=float)[unexplored]))]
        explore = [int(d) for d in ranked_un[:e]]
    picked: list[int] = []
    for pos in range(x + e):  # the picks interleaved as ε would (a free slot of an asynchronous run takes the first)
        slot = math.ceil((pos + 1) * eps - 1e-12) > math.ceil(pos * eps - 1e-12)
        picked.append(explore.pop(0) if (slot and explore) or not exploit else exploit.pop(0))
    rest = np.ones(n, dtype=bool)
    rest[picked] = False
    rest &= ~banned
    scores = np.full(n, -np.inf)
    scores[picked] = 2.0 * n - np.arange(len(picked), dtype=float)
    if rest.any():
        idx = np.flatnonzero(rest)
        sub = oort_scores(round_index, np.asarray(utility, dtype=float)[idx], np.asarray(duration_s)[idx],
                          last[idx], t_pref, eps, alpha, np.asarray(speed, dtype=float)[idx], u[idx])
        scores[idx] = sub  # in (−n, 0]: below every pick
    return scores


def age_channel_priority(round_index: int, last_round, snr_full_band, subchannels: int, exponent: float) -> np.ndarray:
    """The age-of-update scheduling priority with the channel term (Yang, Arafa, Quek and Poor, "Age-based scheduling
    policy for federated learning in mobile edge networks", ICASSP 2020): ``A_k^ν · log2(1 + SNR_k)``.

    ``A_k`` the age of update in rounds (``R − L_k``, the rounds since device k's
    update last reached the server; ``R + 1`` for one never heard from), ``ν`` =
    ``exponent`` (how much staleness weighs against the channel; 0: best channel
    alone), ``SNR_k`` its SNR on one of the ``subchannels`` equal subchannels,
    ``K · SNR(B)`` (``snr_full_band`` = ``g p / (N0 B)``). Dimensionless (bit/s/Hz
    times rounds^ν); higher first. With equal subchannels the paper's assignment
    of K subchannels reduces to the K highest priorities. The product form is our
    reading of the paper's abstract (staleness and the instantaneous channel
    jointly); its equations were not found to check it against
    (docs/model/resource_policies.md, "age_channel").
    """
    last = np.asarray(last_round, dtype=float)
    age = np.where(last < 0, round_index + 1.0, round_index - last)
    return age ** exponent * np.log2(1.0 + subchannels * np.asarray(snr_full_band, dtype=float))
