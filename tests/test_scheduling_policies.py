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


def test_stragglers_option_is_checked():
    with pytest.raises(ValueError) as e:
        ResourcesConfig(stragglers="drop")
    assert "stragglers" in str(e.value) and "'keep' or 'exclude'" in str(e.value) and "\n" not in str(e.value)
