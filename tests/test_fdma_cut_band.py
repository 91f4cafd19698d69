"""Issue 53.2: ``bandwidth_hz`` of FDMA transfers cut at a deadline is the mean share over the airtime,
∫ b / n dt / airtime (docs/model/system_model.md), for every cut transfer: three transfers by hand."""

from __future__ import annotations

import pytest
import simpy

from edgesim.links import FdmaUplink

B = 1e6
N0 = 1e-20


def _cut_three(starts_s, deadline_s):
    env = simpy.Environment()
    link = FdmaUplink(env, B, N0)
    out = {}

    def device(d, start_s):
        yield env.timeout(start_s)
        try:
            yield from link.transmit(env, d, 1e12, 1e-10, 0.1, lambda t: out.__setitem__(d, t))
        except simpy.Interrupt:
            pass

    procs = [env.process(device(d, s)) for d, s in enumerate(starts_s)]

    def cut():
        yield env.timeout(deadline_s)
        for p in procs:  # one by one at the same instant, as the engine does at a deadline
            p.interrupt("deadline")

    env.process(cut())
    env.run()
    return out


def test_three_cut_transfers_by_hand():
    # Device 0 alone on [0, 0.5), with device 1 on [0.5, 0.75), all three on [0.75, 1]: cut at 1 s.
    out = _cut_three([0.0, 0.5, 0.75], 1.0)
    assert all(t.aborted for t in out.values())
    assert out[0].band_hz == pytest.approx((B * 0.5 + B / 2 * 0.25 + B / 3 * 0.25) / 1.0, rel=1e-12)  # 0.7083 B
    assert out[1].band_hz == pytest.approx((B / 2 * 0.25 + B / 3 * 0.25) / 0.5, rel=1e-12)  # 0.4167 B
    assert out[2].band_hz == pytest.approx(B / 3, rel=1e-12)
    # The band-seconds handed out on [0, 1] add up to B · 1 s (the old charge gave B/3 + B/2 + B on the last stretch).
    assert sum(t.band_hz * t.airtime_s for t in out.values()) == pytest.approx(B * 1.0, rel=1e-12)


def test_cut_together_from_the_start_share_the_band_equally():
    out = _cut_three([0.0, 0.0, 0.0], 2.0)
    for t in out.values():
        assert t.band_hz == pytest.approx(B / 3, rel=1e-12)
        assert t.airtime_s == 2.0


def test_devices_csv_bandwidth_of_three_uploads_cut_at_a_deadline_by_hand():
    """The same three transfers through the engine: computes of 0, 0.5 and 0.75 s, a deadline at 1 s."""
    from edgesim.backend import DeviceWork, RoundPlan
    from edgesim.config import BudgetConfig, SystemConfig
    from edgesim.engine import Simulation

    class Plan:
        def plan_round(self, view):
            return RoundPlan(tuple(DeviceWork(d, {"train": c}, 1e12, 0.0) for d, c in enumerate([0.0, 5e8, 7.5e8])))

        def complete_round(self, outcome):
            return {}

    system = SystemConfig(n_devices=3, access="fdma", bandwidth_hz=B, channel_gain_db=-100, cpu_freq_hz=1e9)
    rec = Simulation(system, BudgetConfig(rounds=1, round_mode="deadline", deadline_s=1.0), Plan()).run_round()
    band = {row.device: row.bandwidth_hz for row in rec.devices}
    assert all(row.dropped and row.drop_reason == "deadline" for row in rec.devices)
    assert band[0] == pytest.approx(B * (0.5 + 0.25 / 2 + 0.25 / 3), rel=1e-9)
    assert band[1] == pytest.approx(B * (0.25 / 2 + 0.25 / 3) / 0.5, rel=1e-9)
    assert band[2] == pytest.approx(B / 3, rel=1e-9)
