"""Issue 53.2: ``bandwidth_hz`` of FDMA transfers cut at a deadline is the mean share over the airtime,
∫ b / n dt / airtime (docs/system_model.md), for every cut transfer: three transfers by hand."""

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
