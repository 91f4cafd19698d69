"""The access schemes' rate formulas (edgesim/access/formulas.py): a hand value, a limiting case and a property each."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgesim.access.formulas import noma_rates_bps, ofdma_rate_bps, water_filling_w

N0 = 1e-20  # W/Hz


def test_ofdma_rate_by_hand():
    # two blocks of 180 kHz, gains 1e-13 and 4e-13, 0.1 W each: SNR = 0.1 g / (N0 b) = 5.556 and 22.22
    b = 180e3
    hand = b * math.log2(1 + 0.1 * 1e-13 / (N0 * b)) + b * math.log2(1 + 0.1 * 4e-13 / (N0 * b))
    assert ofdma_rate_bps(b, [1e-13, 4e-13], [0.1, 0.1], N0) == pytest.approx(hand, rel=1e-12)
    assert hand == pytest.approx(180e3 * (math.log2(1 + 50 / 9) + math.log2(1 + 200 / 9)), rel=1e-12)


def test_ofdma_one_block_is_eq_8_and_no_block_is_zero():
    assert ofdma_rate_bps(1e6, [1e-12], [0.2], N0) == pytest.approx(1e6 * math.log2(1 + 0.2e-12 / (N0 * 1e6)), rel=1e-12)
    assert ofdma_rate_bps(1e6, [], [], N0) == 0.0


def test_water_filling_by_hand():
    # noise levels N0 b / g = 1, 2, 5 W (b = 1 Hz): with P = 4 W the level is 3.5 (blocks 1 and 2), p = 2.5, 1.5, 0
    p = water_filling_w([1e-20, 0.5e-20, 0.2e-20], 4.0, 1.0, N0)
    assert p == pytest.approx([2.5, 1.5, 0.0], abs=1e-12)
    # with P = 10 W all three are under water: level (10 + 8) / 3 = 6, p = 5, 4, 1
    assert water_filling_w([1e-20, 0.5e-20, 0.2e-20], 10.0, 1.0, N0) == pytest.approx([5.0, 4.0, 1.0], abs=1e-12)


def test_water_filling_equal_gains_is_the_equal_split_and_it_beats_any_other_split():
    assert water_filling_w([3e-13] * 4, 1.0, 180e3, N0) == pytest.approx([0.25] * 4, rel=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(20):
        g = rng.exponential(1e-13, size=6)
        p = water_filling_w(g, 0.2, 180e3, N0)
        assert p.sum() == pytest.approx(0.2, rel=1e-12) and (p >= 0).all()
        best = ofdma_rate_bps(180e3, g, p, N0)
        other = rng.dirichlet(np.ones(6)) * 0.2
        assert best >= ofdma_rate_bps(180e3, g, other, N0) * (1 - 1e-12)
        assert best >= ofdma_rate_bps(180e3, g, np.full(6, 0.2 / 6), N0) * (1 - 1e-12)


def test_noma_two_device_rates_by_hand():
    # b = 1 MHz, N0 b = 1e-14 W; received 1e-12 W (strong, decoded first) and 2e-13 W (weak, decoded last)
    r = noma_rates_bps(1e6, [2e-13, 1e-12], N0)
    assert r[1] == pytest.approx(1e6 * math.log2(1 + 1e-12 / (2e-13 + 1e-14)), rel=1e-12)  # 1e6 log2(1 + 100/21)
    assert r[0] == pytest.approx(1e6 * math.log2(1 + 2e-13 / 1e-14), rel=1e-12)  # 1e6 log2(21), no interference


def test_noma_one_member_is_eq_8():
    assert noma_rates_bps(2e5, [3e-13], N0)[0] == pytest.approx(2e5 * math.log2(1 + 3e-13 / (N0 * 2e5)), rel=1e-15)


def test_noma_sum_rate_is_the_sum_capacity():
    rng = np.random.default_rng(1)
    for m in (2, 3, 5):
        for _ in range(10):
            gp = rng.exponential(1e-13, size=m)
            b = float(rng.uniform(1e5, 1e7))
            assert noma_rates_bps(b, gp, N0).sum() == pytest.approx(b * math.log2(1 + gp.sum() / (N0 * b)), rel=1e-10)
