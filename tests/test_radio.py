"""Uplink formulas (edgesim/radio.py): Eqs. (8), (9), (24) of DoFed-SPP and transmit energy."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesim.radio import (
    radio_energy_j,
    shannon_rate_bps,
    shared_uplink_time_s,
    snr,
    unchecked_shannon_rate_bps,
    upload_time_s,
)

SETTINGS = settings(max_examples=60, deadline=None)

# Ranges a cell can plausibly hold (and a little beyond): linear SI units.
BANDWIDTH_HZ = st.floats(min_value=1e3, max_value=1e9)
GAIN = st.floats(min_value=1e-15, max_value=1e-3)
POWER_W = st.floats(min_value=1e-4, max_value=10.0)
NOISE_W_PER_HZ = st.floats(min_value=1e-22, max_value=1e-18)
FACTOR = st.floats(min_value=1.01, max_value=100.0)
MODEL_BITS = st.floats(min_value=1.0, max_value=1e10)
RATE_BPS = st.floats(min_value=1.0, max_value=1e11)

# A toy link with exact numbers: g*p/(N0*b) = 3*1/(0.25*4) = 3, log2(1 + 3) = 2.
TOY = dict(bandwidth_hz=4.0, channel_gain=3.0, tx_power_w=1.0, noise_psd_w_per_hz=0.25)


# --- snr -------------------------------------------------------------------


def test_snr_hand_values():
    assert snr(**TOY) == 3.0  # 3 * 1 / (0.25 * 4)
    # g = 1e-10 (-100 dB), p = 0.2 W, N0 = 4e-21 W/Hz, b = 1 MHz: 2e-11 / 4e-15 = 5000
    assert snr(1e6, 1e-10, 0.2, 4e-21) == pytest.approx(5000.0)


def test_snr_is_zero_without_power_or_gain():
    assert snr(1e6, 1e-10, 0.0, 4e-21) == 0.0
    assert snr(1e6, 0.0, 0.2, 4e-21) == 0.0


@SETTINGS
@given(BANDWIDTH_HZ, GAIN, POWER_W, NOISE_W_PER_HZ, FACTOR)
def test_snr_is_linear_in_gain_and_power_and_inverse_in_bandwidth(b, g, p, n0, factor):
    base = snr(b, g, p, n0)
    assert snr(b, g * factor, p, n0) == pytest.approx(base * factor, rel=1e-12)
    assert snr(b, g, p * factor, n0) == pytest.approx(base * factor, rel=1e-12)
    assert snr(b * factor, g, p, n0) == pytest.approx(base / factor, rel=1e-12)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(TOY, bandwidth_hz=0.0), "bandwidth_hz"),
        (dict(TOY, bandwidth_hz=-1e6), "bandwidth_hz"),
        (dict(TOY, channel_gain=-1.0), "channel_gain"),
        (dict(TOY, tx_power_w=-0.1), "tx_power_w"),
        (dict(TOY, noise_psd_w_per_hz=0.0), "noise_psd_w_per_hz"),
        (dict(TOY, channel_gain=math.nan), "channel_gain"),
        (dict(TOY, tx_power_w=math.inf), "tx_power_w"),
    ],
)
def test_snr_rejects_bad_inputs(kwargs, name):
    with pytest.raises(ValueError, match=rf"{name}\(="):
        snr(**kwargs)


# --- shannon_rate_bps (Eq. 8) ----------------------------------------------


def test_shannon_rate_hand_values():
    assert shannon_rate_bps(**TOY) == 8.0  # 4 Hz * log2(1 + 3) = 4 * 2
    # 1 MHz * log2(1 + 5000) = 1e6 * 12.2880009 bit/s
    assert shannon_rate_bps(1e6, 1e-10, 0.2, 4e-21) == pytest.approx(12.2880009e6)


def test_shannon_rate_tends_to_power_limited_rate_as_bandwidth_grows():
    # b * log2(1 + x/b) -> x / ln 2 as b -> inf, with x = g*p/N0 = 1e-10 * 0.2 / 4e-21 = 5e9
    limit = 5e9 / math.log(2)  # 7.2135e9 bit/s
    assert shannon_rate_bps(1e18, 1e-10, 0.2, 4e-21) == pytest.approx(limit, rel=1e-6)
    # and approaches it from below
    assert shannon_rate_bps(1e9, 1e-10, 0.2, 4e-21) < limit


def test_shannon_rate_vanishes_with_power():
    assert shannon_rate_bps(1e6, 1e-10, 0.0, 4e-21) == 0.0
    # low SNR: r ~ g*p/(N0 ln 2) = 1e-10 * 1e-12 / 4e-21 / ln 2 = 0.0360674 bit/s
    assert shannon_rate_bps(1e6, 1e-10, 1e-12, 4e-21) == pytest.approx(0.025 / math.log(2), rel=1e-6)


def test_shannon_rate_at_high_snr_is_about_b_log2_snr():
    # snr = 1e12: log2(1 + 1e12) = log2(1e12) + 1.4e-12
    assert shannon_rate_bps(1.0, 1.0, 1e12, 1.0) == pytest.approx(math.log2(1e12), rel=1e-12)


@SETTINGS
@given(BANDWIDTH_HZ, GAIN, POWER_W, NOISE_W_PER_HZ, FACTOR)
def test_shannon_rate_increases_with_bandwidth_power_and_gain(b, g, p, n0, factor):
    base = shannon_rate_bps(b, g, p, n0)
    # bandwidth: more band, more noise, but the rate still grows (towards g*p/(N0 ln 2));
    # at very low SNR the gain is below float resolution, hence the 1e-12 slack
    assert shannon_rate_bps(b * factor, g, p, n0) >= base * (1 - 1e-12)
    assert shannon_rate_bps(b, g, p * factor, n0) > base
    assert shannon_rate_bps(b, g * factor, p, n0) > base
    # and never exceeds the infinite-bandwidth limit
    assert base <= g * p / (n0 * math.log(2)) * (1 + 1e-12)


@SETTINGS
@given(BANDWIDTH_HZ, GAIN, POWER_W, NOISE_W_PER_HZ)
def test_shannon_rate_is_eq_8(b, g, p, n0):
    # b * log2(1 + x), written with log1p: log2(1.0 + x) would lose the digits of a small SNR x
    assert shannon_rate_bps(b, g, p, n0) == pytest.approx(b * math.log1p(g * p / (n0 * b)) / math.log(2), rel=1e-12)


def test_shannon_rate_keeps_precision_at_low_snr():
    # snr = 1e-12: log2(1 + 1e-12) = 1e-12 / ln 2 * (1 - 5e-13); log2(1.0 + 1e-12) is off by 1e-4 relative
    assert shannon_rate_bps(1.0, 1.0, 1e-12, 1.0) == pytest.approx(1e-12 / math.log(2), rel=1e-12)


def test_shannon_rate_rejects_bad_inputs():
    with pytest.raises(ValueError, match=r"bandwidth_hz\(=0.0\) must be > 0"):
        shannon_rate_bps(0.0, 1e-10, 0.2, 4e-21)
    with pytest.raises(ValueError, match=r"tx_power_w\(=-0.2\) must be >= 0"):
        shannon_rate_bps(1e6, 1e-10, -0.2, 4e-21)
    with pytest.raises(ValueError, match=r"noise_psd_w_per_hz\(=nan\)"):
        shannon_rate_bps(1e6, 1e-10, 0.2, math.nan)


def test_unchecked_shannon_rate_hand_value_and_limit():
    assert unchecked_shannon_rate_bps(4.0, 3.0, 1.0, 0.25) == pytest.approx(8.0, rel=1e-15)  # TOY: 4 * log2(4)
    assert unchecked_shannon_rate_bps(1e6, 0.0, 0.2, 4e-21) == 0.0  # no gain, no rate


@SETTINGS
@given(BANDWIDTH_HZ, GAIN, POWER_W, NOISE_W_PER_HZ)
def test_unchecked_shannon_rate_is_the_checked_ones_number_bit_for_bit(b, g, p, n0):
    # the engine's TDMA band times uploads with it: its traces must not move by an ulp. NumPy scalars are not
    # floats, so they take the checked path (snr's checks, then the same operations)
    assert unchecked_shannon_rate_bps(b, g, p, n0) == shannon_rate_bps(*map(np.float64, (b, g, p, n0)))


# --- upload_time_s (Eq. 9) -------------------------------------------------


def test_upload_time_hand_values():
    assert upload_time_s(17_440_000, 8_720_000) == 2.0  # 17.44 Mbit / 8.72 Mbit/s
    assert upload_time_s(8, shannon_rate_bps(**TOY)) == 1.0  # 8 bit / 8 bit/s


def test_upload_time_limits():
    assert upload_time_s(0, 1e6) == 0.0  # nothing to send
    assert upload_time_s(1e6, 1e300) == pytest.approx(1e-294)  # -> 0 as the rate -> inf


@SETTINGS
@given(MODEL_BITS, RATE_BPS, FACTOR)
def test_upload_time_decreases_with_rate_and_grows_linearly_with_size(m, r, factor):
    assert upload_time_s(m, r * factor) < upload_time_s(m, r)
    assert upload_time_s(m * factor, r) == pytest.approx(factor * upload_time_s(m, r), rel=1e-12)


@pytest.mark.parametrize(
    "m, r, match",
    [
        (-1.0, 1e6, r"model_bits\(=-1.0\) must be >= 0"),
        (1e6, 0.0, r"rate_bps\(=0.0\) must be > 0"),
        (1e6, -5.0, r"rate_bps\(=-5.0\)"),
        (math.inf, 1e6, r"model_bits\(=inf\)"),
    ],
)
def test_upload_time_rejects_bad_inputs(m, r, match):
    with pytest.raises(ValueError, match=match):
        upload_time_s(m, r)


def test_zero_power_gives_no_rate_and_so_no_upload_time():
    rate = shannon_rate_bps(1e6, 1e-10, 0.0, 4e-21)
    with pytest.raises(ValueError, match=r"rate_bps\(=0.0\)"):
        upload_time_s(1e6, rate)


# --- shared_uplink_time_s (Eq. 24) -----------------------------------------


def test_shared_uplink_hand_values():
    # K * m / (b log2(1 + g p / (N0 b))) = 3 * 8 / 8 = 3 s
    assert shared_uplink_time_s(3, 8.0, **TOY) == 3.0
    # 25 uploads of 17.44 Mbit at 1e6 * 12.2880009 bit/s = 25 * 1.419271 s = 35.4818 s
    assert shared_uplink_time_s(25, 17.44e6, 1e6, 1e-10, 0.2, 4e-21) == pytest.approx(35.48177, rel=1e-6)


def test_shared_uplink_limits():
    assert shared_uplink_time_s(0, 8.0, **TOY) == 0.0  # nobody uploads
    assert shared_uplink_time_s(1, 8.0, **TOY) == upload_time_s(8.0, shannon_rate_bps(**TOY))


@SETTINGS
@given(st.integers(min_value=0, max_value=200), MODEL_BITS, BANDWIDTH_HZ, GAIN, POWER_W, NOISE_W_PER_HZ)
def test_eq_24_is_k_times_eq_9_with_eq_8(k, m, b, g, p, n0):
    # the shared band is K sequential full-band uploads (TDMA)
    one_upload_s = upload_time_s(m, shannon_rate_bps(b, g, p, n0))
    assert shared_uplink_time_s(k, m, b, g, p, n0) == pytest.approx(k * one_upload_s, rel=1e-12)


@SETTINGS
@given(st.integers(min_value=0, max_value=200), MODEL_BITS, BANDWIDTH_HZ, GAIN, POWER_W, NOISE_W_PER_HZ)
def test_shared_uplink_grows_with_uploaders_and_shrinks_with_bandwidth(k, m, b, g, p, n0):
    assert shared_uplink_time_s(k + 1, m, b, g, p, n0) > shared_uplink_time_s(k, m, b, g, p, n0)
    assert shared_uplink_time_s(k, m, 2 * b, g, p, n0) <= shared_uplink_time_s(k, m, b, g, p, n0)


@pytest.mark.parametrize("bad", [-1, 2.5, True, math.inf, math.nan, None])
def test_shared_uplink_rejects_bad_uploader_counts(bad):
    with pytest.raises(ValueError, match=r"n_uploaders\(="):
        shared_uplink_time_s(bad, 8.0, **TOY)


def test_shared_uplink_rejects_bad_link():
    with pytest.raises(ValueError, match=r"bandwidth_hz\(=-4.0\)"):
        shared_uplink_time_s(2, 8.0, **dict(TOY, bandwidth_hz=-4.0))


# --- radio_energy_j ---------------------------------------------------------


def test_radio_energy_hand_values():
    assert radio_energy_j(0.2, 5.0) == pytest.approx(1.0)  # 0.2 W * 5 s
    assert radio_energy_j(2.0, 1.5) == 3.0  # 2 W * 1.5 s


def test_radio_energy_limits():
    assert radio_energy_j(0.0, 10.0) == 0.0  # silent radio
    assert radio_energy_j(0.2, 0.0) == 0.0  # no airtime


@SETTINGS
@given(POWER_W, st.floats(0.0, 1e4), st.floats(0.0, 1e4))
def test_radio_energy_is_additive_in_airtime(p, t1, t2):
    assert radio_energy_j(p, t1 + t2) == pytest.approx(radio_energy_j(p, t1) + radio_energy_j(p, t2), rel=1e-12)


@pytest.mark.parametrize(
    "p, t, match",
    [(-0.2, 1.0, r"tx_power_w\(=-0.2\)"), (0.2, -1.0, r"airtime_s\(=-1.0\)"), (0.2, math.nan, r"airtime_s\(=nan\)")],
)
def test_radio_energy_rejects_bad_inputs(p, t, match):
    with pytest.raises(ValueError, match=match):
        radio_energy_j(p, t)
