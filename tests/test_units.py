"""Decibel conversions (edgesim/units.py): done once, at the edge, and exactly invertible."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesim.units import db_to_linear, dbm_per_hz_to_w_per_hz, dbm_to_w, linear_to_db, w_to_dbm

SETTINGS = settings(max_examples=60, deadline=None)
DB = st.floats(min_value=-200.0, max_value=200.0)
POSITIVE_RATIO = st.floats(min_value=1e-20, max_value=1e20)


# --- db_to_linear ---------------------------------------------------------


def test_db_to_linear_hand_values():
    assert db_to_linear(0) == 1.0  # 10 ** (0 / 10)
    assert db_to_linear(10) == pytest.approx(10.0)  # 10 ** 1
    assert db_to_linear(-20) == pytest.approx(0.01)  # 10 ** -2
    assert db_to_linear(3) == pytest.approx(1.9952623)  # 10 ** 0.3: "3 dB is a doubling"
    assert db_to_linear(-100) == pytest.approx(1e-10)  # a -100 dB channel gain


def test_db_to_linear_tends_to_zero_for_very_negative_db():
    # 10 ** (-3000 / 10) = 1e-300: the ratio vanishes as dB -> -inf, never negative
    assert 0 < db_to_linear(-3000) <= 1e-299


@SETTINGS
@given(DB, st.floats(min_value=0.01, max_value=50.0))
def test_db_to_linear_is_increasing(value_db, step_db):
    assert db_to_linear(value_db + step_db) > db_to_linear(value_db)


@SETTINGS
@given(DB, DB)
def test_adding_decibels_multiplies_ratios(a_db, b_db):
    # 10^((a+b)/10) = 10^(a/10) * 10^(b/10)
    assert db_to_linear(a_db + b_db) == pytest.approx(db_to_linear(a_db) * db_to_linear(b_db), rel=1e-12)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_db_to_linear_rejects_non_finite(bad):
    with pytest.raises(ValueError, match=r"value_db\(=(nan|inf|-inf)\)"):
        db_to_linear(bad)


# --- linear_to_db ---------------------------------------------------------


def test_linear_to_db_hand_values():
    assert linear_to_db(1) == 0.0  # 10 * log10(1)
    assert linear_to_db(100) == pytest.approx(20.0)  # 10 * 2
    assert linear_to_db(0.5) == pytest.approx(-3.0103, abs=1e-4)  # 10 * log10(0.5) = -3.0103


def test_linear_to_db_tends_to_minus_infinity_near_zero():
    # 10 * log10(1e-300) = -3000: no floor, no clipping
    assert linear_to_db(1e-300) == pytest.approx(-3000.0)


@SETTINGS
@given(DB)
def test_db_round_trip(value_db):
    assert linear_to_db(db_to_linear(value_db)) == pytest.approx(value_db, abs=1e-9)


@SETTINGS
@given(POSITIVE_RATIO)
def test_linear_round_trip(ratio):
    assert db_to_linear(linear_to_db(ratio)) == pytest.approx(ratio, rel=1e-12)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_linear_to_db_rejects_non_positive_or_non_finite(bad):
    with pytest.raises(ValueError, match=r"ratio\(="):
        linear_to_db(bad)


# --- dbm_to_w / w_to_dbm --------------------------------------------------


def test_dbm_to_w_hand_values():
    assert dbm_to_w(30) == 1.0  # 10 ** ((30 - 30) / 10) = 1 W
    assert dbm_to_w(0) == pytest.approx(1e-3)  # 0 dBm = 1 mW
    assert dbm_to_w(23) == pytest.approx(0.19952623)  # 10 ** -0.7: a typical UE power, ~0.2 W
    assert dbm_to_w(-30) == pytest.approx(1e-6)  # 10 ** -6 W


def test_w_to_dbm_hand_values():
    assert w_to_dbm(1) == 30.0  # 10 * log10(1) + 30
    assert w_to_dbm(0.001) == pytest.approx(0.0)  # 1 mW
    assert w_to_dbm(0.2) == pytest.approx(23.0103, abs=1e-4)  # 10 * log10(0.2) + 30 = -6.9897 + 30


def test_dbm_to_w_vanishes_for_very_low_dbm():
    # -3000 dBm = 10 ** -303 W: power -> 0 as dBm -> -inf
    assert 0 < dbm_to_w(-3000) < 1e-300


@SETTINGS
@given(DB)
def test_dbm_is_db_relative_to_one_milliwatt(power_dbm):
    # P[W] = 1 mW * 10 ** (P[dBm] / 10)
    assert dbm_to_w(power_dbm) == pytest.approx(1e-3 * db_to_linear(power_dbm), rel=1e-12)


@SETTINGS
@given(DB)
def test_dbm_round_trip(power_dbm):
    assert w_to_dbm(dbm_to_w(power_dbm)) == pytest.approx(power_dbm, abs=1e-9)


@SETTINGS
@given(DB, st.floats(min_value=0.01, max_value=50.0))
def test_dbm_to_w_is_increasing(power_dbm, step_db):
    assert dbm_to_w(power_dbm + step_db) > dbm_to_w(power_dbm)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_dbm_to_w_rejects_non_finite(bad):
    with pytest.raises(ValueError, match=r"power_dbm\(="):
        dbm_to_w(bad)


@pytest.mark.parametrize("bad", [0.0, -0.2, math.nan, math.inf])
def test_w_to_dbm_rejects_non_positive_or_non_finite(bad):
    with pytest.raises(ValueError, match=r"power_w\(="):
        w_to_dbm(bad)


# --- dbm_per_hz_to_w_per_hz ----------------------------------------------


def test_thermal_noise_psd():
    # -174 dBm/Hz = 10 ** ((-174 - 30) / 10) = 10 ** -20.4 = 3.981e-21 W/Hz (kT at 290 K)
    assert dbm_per_hz_to_w_per_hz(-174) == pytest.approx(3.9810717e-21)


def test_noise_psd_limit_and_scaling():
    # 30 dBm/Hz = 1 W/Hz; each further -10 dB divides by 10
    assert dbm_per_hz_to_w_per_hz(30) == 1.0
    assert dbm_per_hz_to_w_per_hz(-164) == pytest.approx(10 * dbm_per_hz_to_w_per_hz(-174))


@SETTINGS
@given(DB)
def test_noise_psd_converts_like_power(psd_dbm_per_hz):
    assert dbm_per_hz_to_w_per_hz(psd_dbm_per_hz) == dbm_to_w(psd_dbm_per_hz)


def test_noise_psd_rejects_non_finite():
    with pytest.raises(ValueError, match=r"=nan\)"):
        dbm_per_hz_to_w_per_hz(math.nan)
