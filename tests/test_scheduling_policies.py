"""Stragglers, deadline_feasible's shared band, Oort as published and the age-of-update policy, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgesim.resources import POLICIES, ResourcesConfig
from edgesim.resources.scheduling import ScheduleView


def _view(n=3, *, rate=None, cycles=None, bits=None, freq=None, deadline=1.0, access="fdma", sharing=1,
          last_round=None, round_index=0, gain=None, uniform=None, **kw):
    rate = np.full(n, 1e6) if rate is None else np.asarray(rate, dtype=float)
    return ScheduleView(
        round_index=round_index, n_devices=n, access=access, bandwidth_hz=1e6, deadline_s=deadline,
        channel_gain=np.ones(n) if gain is None else np.asarray(gain, dtype=float), rate_bps=rate,
        cpu_freq_hz=np.full(n, 1e9) if freq is None else np.asarray(freq, dtype=float),
        cycles=np.zeros(n) if cycles is None else np.asarray(cycles, dtype=float),
        upload_bits=np.zeros(n) if bits is None else np.asarray(bits, dtype=float),
        last_round=np.full(n, -1) if last_round is None else np.asarray(last_round),
        rounds_taken=np.zeros(n, dtype=np.int64), duration_s=np.full(n, np.nan), utility=np.full(n, np.nan),
        uniform=np.linspace(0.1, 0.9, n) if uniform is None else np.asarray(uniform, dtype=float), pointer=0,
        exploration=0.1, alpha=2.0, sharing=sharing, **kw)


def test_shared_rate_by_hand():
    """B = 1 MHz, g p / N0 = 1e6 Hz: alone r = 1e6 log2(2) = 1 Mbit/s; with K = 2, b = 0.5 MHz:
    r = 5e5 log2(1 + 2) = 792,481 bit/s; TDMA keeps the whole band."""
    v = _view(1, sharing=2)
    assert v.shared_rate_bps()[0] == pytest.approx(5e5 * math.log2(3), rel=1e-12)
    assert _view(1, sharing=2, access="tdma").shared_rate_bps()[0] == 1e6
    assert _view(1, sharing=1).shared_rate_bps()[0] == 1e6


def test_deadline_feasible_predicts_on_the_shared_band():
    """0.9 Mbit: 0.9 s alone (fits τ = 1 s), 0.9e6 / 792,481 = 1.136 s on B/2 (does not): dropped with K = 2."""
    policy = POLICIES["scheduling"]["deadline_feasible"]()
    bits = [9e5, 5e5]
    alone = policy.allocate(_view(2, bits=bits, sharing=1))
    shared = policy.allocate(_view(2, bits=bits, sharing=2))
    assert np.isfinite(alone).all()
    assert shared[0] == -np.inf and np.isfinite(shared[1])  # 5e5 / 792,481 = 0.63 s still fits


def test_stragglers_by_hand():
    """C / f + s / r alone: 0.5 + 0.4 = 0.9 s (fits τ = 1), 0.8 + 0.4 = 1.2 s (a straggler), 0 (a listener)."""
    v = _view(3, cycles=[5e8, 8e8, 0.0], bits=[4e5, 4e5, 0.0])
    assert v.stragglers().tolist() == [False, True, False]


def _sim(stragglers, scheduling="random", total=16.0):
    from test_resources import _sim as sim

    return sim("fdma", ResourcesConfig(scheduling=scheduling, stragglers=stragglers), n=12, k=5, rounds=6,
               total=total)


@pytest.mark.parametrize("scheduling", ["random", "round_robin"])
def test_exclude_never_schedules_a_straggler(scheduling):
    """τ = 5.4 s / 6 rounds = 0.9 s; 5e8 cycles at 0.8-2 GHz and 4 Mbit on 2 MHz: a device with
    C / f_max + s / r(B, p_max) > τ (this round's gain) is never scheduled under `exclude`; under `keep` some are."""
    from edgesim.resources import formulas as F

    keep, drop = _sim("keep", scheduling, total=5.4), _sim("exclude", scheduling, total=5.4)
    tau = 0.9
    system = drop.system

    def alone_s(row):
        rate = F.rate_bps(system.bandwidth_hz, row.channel_gain, system.tx_power_w[row.device],
                          system.noise_psd_w_per_hz)
        return 5e8 / system.cpu_freqs_hz[row.device] + 4e6 / rate

    late_kept = 0
    for rk, rd in zip(keep.run(), drop.run()):
        assert rd.devices and all(alone_s(row) <= tau for row in rd.devices)
        late_kept += sum(alone_s(row) > tau for row in rk.devices)
    assert late_kept > 0
    # events.csv says why: a straggler_excluded event per excluded device and round, none of them in the round
    excluded = [(e.round_index, e.device) for e in drop.events if e.kind == "straggler_excluded"]
    assert excluded
    taken = {(r.round_index, row.device) for r in drop.records for row in r.devices}
    assert not taken & set(excluded)
    assert not [e for e in keep.events if e.kind == "straggler_excluded"]


def test_stragglers_option_is_checked():
    with pytest.raises(ValueError) as e:
        ResourcesConfig(stragglers="drop")
    assert "stragglers" in str(e.value) and "'keep' or 'exclude'" in str(e.value) and "\n" not in str(e.value)


# --- Oort as published -------------------------------------------------------------------------------------------

def _oort(round_index, last, taken, utility, uniform, history=(), **kw):
    from edgesim.resources import formulas as F

    n = len(last)
    opts = dict(deadline_s=10.0, exploration=0.5, decay=0.5, exploration_min=0.2, alpha=2.0, cutoff=0.95,
                pacer_window=20, pacer_step=0.1, blacklist_rounds=0)
    opts.update(kw)
    scores = F.oort_selection(round_index, 2, np.asarray(utility, dtype=float), np.ones(n), np.asarray(last),
                              np.asarray(taken), history, np.arange(1.0, n + 1), np.asarray(uniform, dtype=float),
                              **opts)
    return set(np.argsort(-scores, kind="stable")[:2].tolist()), scores


def test_oort_three_rounds_by_hand():
    """Six devices (speed = id + 1), K = 2, ε_0 = 0.5 decaying by 0.5 to 0.2, c = 0.95, every duration within T.

    Round 0: ε = 0.5, ⌈εK⌉ = 1 slot, but nobody is explored: both picks explore, the fastest: {5, 4}.
    Round 1: ε = 0.25 → 1 exploration slot, 1 exploitation slot. Reported U_4 = 1, U_5 = 4; bonus
    sqrt(0.1 ln 2 / 1) = 0.2633: 1.2633 and 4.2633; cut-off 0.95 × 4.2633 = 4.05 leaves device 5 alone → {5, 3}.
    Round 2: ε = max(0.125, 0.2) = 0.2 → 1 + 1. U_3 = 3.9 (reported), U_5 = 4; bonus sqrt(0.1 ln 3 / 2) = 0.2344
    for devices 3 and 5 (last in round 1), sqrt(0.1 ln 3 / 1) = 0.3315 for device 4: 4.1344, 4.2344, 1.3315.
    Cut-off 0.95 × 4.2344 = 4.0227: devices 5 and 3 are sampled in proportion to the utility, keys ln(u) / U:
    u_5 = 0.5 → −0.1637, u_3 = 0.9 → −0.0255: device 3; exploration takes device 2 → {3, 2}.
    """
    nan = np.nan
    u = [0.1, 0.2, 0.3, 0.9, 0.4, 0.5]
    assert _oort(0, [-1] * 6, [0] * 6, [nan] * 6, u)[0] == {5, 4}
    assert _oort(1, [-1, -1, -1, -1, 0, 0], [0, 0, 0, 0, 1, 1], [nan, nan, nan, nan, 1.0, 4.0], u)[0] == {5, 3}
    picks, scores = _oort(2, [-1, -1, -1, 1, 0, 1], [0, 0, 0, 1, 1, 2], [nan, nan, nan, 3.9, 1.0, 4.0], u)
    assert picks == {3, 2}
    # the same round with c = 1: only the top utility is admitted (device 5)
    assert _oort(2, [-1, -1, -1, 1, 0, 1], [0, 0, 0, 1, 1, 2], [nan, nan, nan, 3.9, 1.0, 4.0], u,
                 cutoff=1.0)[0] == {5, 2}


def test_oort_pacer_and_blacklist_by_hand():
    from edgesim.resources import formulas as F

    flat = [1.0] * 6  # W = 2: at r = 4, Σ h[2:4] = 2 ≤ Σ h[0:2] = 2, and again at r = 6: relaxed twice
    assert F.oort_preferred_duration_s(6, 10.0, flat, 2, 0.1) == pytest.approx(12.0)
    assert F.oort_preferred_duration_s(5, 10.0, flat, 2, 0.1) == pytest.approx(11.0)
    assert F.oort_preferred_duration_s(6, 10.0, [1, 2, 3, 4, 5, 6], 2, 0.1) == 10.0  # rising: T stays τ
    # more than 2 participations: devices 0, 1, 2; at most ⌊0.3 · 4⌋ = 1 of them, the most-taken
    assert F.oort_blacklist([5, 3, 3, 0], 2).tolist() == [True, False, False, False]
    assert not F.oort_blacklist([5, 3, 3, 0], 0).any()  # 0: no blacklist
    assert F.oort_exploration_rate(0, 0.9, 0.98, 0.2) == 0.9
    assert F.oort_exploration_rate(1, 0.9, 0.98, 0.2) == pytest.approx(0.882)
    assert F.oort_exploration_rate(100, 0.9, 0.98, 0.2) == 0.2  # 0.9 · 0.98^100 = 0.119 < 0.2


def test_oort_defaults_explore_at_k5():
    """K = 5 of 20 devices with Oort's defaults (ε 0.9 → 0.2 by 0.98): more than K distinct devices take part within
    40 rounds (the old ⌊0.1 · 5⌋ = 0 exploration slots kept the first five forever)."""
    from test_resources import _sim as sim

    s = sim("fdma", ResourcesConfig(scheduling="oort"), n=20, k=5, rounds=40, total=400.0)
    seen = {d for rec in s.run() for d in rec.arrived}
    assert len(seen) > 5


@pytest.mark.parametrize("key, value, expected", [
    ("oort_decay", 1.5, "a fraction in [0, 1]"), ("oort_exploration_min", -0.1, "a number >= 0"),
    ("oort_cutoff", 2.0, "a fraction in [0, 1]"), ("oort_pacer_window", 0, "an integer >= 1"),
    ("oort_pacer_step", -1.0, "a number >= 0"), ("oort_blacklist_rounds", -1, "an integer >= 0"),
    ("oort_exploration", 1.2, "a fraction in [0, 1]")])
def test_oort_options_out_of_range_are_one_line(key, value, expected):
    with pytest.raises(ValueError) as e:
        ResourcesConfig(**{key: value})
    assert key in str(e.value) and expected in str(e.value) and "\n" not in str(e.value)


# --- age of update with the channel ------------------------------------------------------------------------------

def test_age_channel_ranking_by_hand():
    """Round R = 4, K = 2 subchannels, ν = 1. Full-band SNRs 1.5, 0.5, 7.5, 3.5 → on B/2: 3, 1, 15, 7 →
    log2(1 + ·) = 2, 1, 4, 3. Ages: device 0 last in round 0 (A = 4), 1 never (A = R + 1 = 5), 2 in round 3 (A = 1),
    3 in round 2 (A = 2). Priorities 8, 5, 4, 6: order 0, 3, 1, 2 (pure staleness would give 1, 0, 3, 2; the best
    channel 2, 3, 0, 1). ν = 0: the channel alone."""
    from edgesim.resources import formulas as F

    last = [0, -1, 3, 2]
    snr = [1.5, 0.5, 7.5, 3.5]
    pri = F.age_channel_priority(4, last, snr, 2, 1.0)
    assert pri.tolist() == pytest.approx([8.0, 5.0, 4.0, 6.0])
    assert np.argsort(-pri).tolist() == [0, 3, 1, 2]
    assert np.argsort(-F.age_channel_priority(4, last, snr, 2, 0.0)).tolist() == [2, 3, 0, 1]
    # through the policy: the full-band rate r = B log2(1 + SNR) is what the engine hands over
    rate = 1e6 * np.log2(1 + np.asarray(snr))
    v = _view(4, rate=rate, last_round=last, round_index=4, sharing=2, config=ResourcesConfig())
    assert np.argsort(-POLICIES["scheduling"]["age_channel"]().allocate(v)).tolist() == [0, 3, 1, 2]


def test_age_exponent_out_of_range_is_one_line():
    with pytest.raises(ValueError) as e:
        ResourcesConfig(age_exponent=-1.0)
    assert "age_exponent" in str(e.value) and "a number >= 0" in str(e.value) and "\n" not in str(e.value)
