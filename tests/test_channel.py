"""Channel model: path loss, placement in the cell, shadowing, fading, mobility, checkpoints."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesim.channel import ChannelModel, path_loss_db, place_uniform_in_disc
from edgesim.config import SystemConfig

# -- path loss ---------------------------------------------------------------------------------------------------


def test_path_loss_hand_values():
    # 128.1 + 37.6 * log10(1) = 128.1 dB at 1 km; at 0.1 km: 128.1 − 37.6 = 90.5 dB.
    assert path_loss_db(1000.0) == pytest.approx(128.1, abs=1e-12)
    assert path_loss_db(100.0) == pytest.approx(90.5, abs=1e-12)
    assert path_loss_db(10_000.0, intercept_db=100.0, slope_db=20.0) == pytest.approx(120.0, abs=1e-12)


def test_path_loss_vectorised_matches_scalar():
    d = np.array([10.0, 100.0, 250.0, 1000.0])
    assert np.allclose(path_loss_db(d), [path_loss_db(float(x)) for x in d], rtol=0, atol=1e-12)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_path_loss_rejects_bad_distance(bad):
    with pytest.raises(ValueError, match="distance_m"):
        path_loss_db(bad)
    with pytest.raises(ValueError, match="distance_m"):
        path_loss_db(np.array([100.0, bad]))


def test_path_loss_rejects_negative_slope():
    with pytest.raises(ValueError, match=r"slope_db\(=-1.0\)"):
        path_loss_db(100.0, slope_db=-1.0)


@given(st.floats(1.0, 1e5), st.floats(1.0, 1e5))
def test_path_loss_grows_with_distance(d1, d2):
    lo, hi = sorted((d1, d2))
    assert path_loss_db(lo) <= path_loss_db(hi)


# -- placement ---------------------------------------------------------------------------------------------------


def test_placement_inside_annulus_and_deterministic():
    pts = place_uniform_in_disc(5000, 250.0, 10.0, np.random.default_rng(1))
    assert pts.shape == (5000, 2)
    r = np.hypot(pts[:, 0], pts[:, 1])
    assert r.min() >= 10.0 and r.max() <= 250.0
    again = place_uniform_in_disc(5000, 250.0, 10.0, np.random.default_rng(1))
    assert np.array_equal(pts, again)
    assert place_uniform_in_disc(0, 250.0, 10.0, np.random.default_rng(1)).shape == (0, 2)


def test_placement_is_uniform_in_area():
    # Uniform in the disc of radius R: E[r²] = R²/2 (not R²/3 as uniform-in-radius would give).
    # With a tiny hole the mean moves by (r0²)/2 at most; here 1 m vs 100 m: negligible.
    radius = 100.0
    pts = place_uniform_in_disc(40_000, radius, 1.0, np.random.default_rng(7))
    r2 = (pts**2).sum(axis=1)
    assert r2.mean() == pytest.approx(radius**2 / 2, rel=0.02)
    # Half of the points lie inside r = R / sqrt(2).
    assert (r2 < radius**2 / 2).mean() == pytest.approx(0.5, abs=0.02)
    # Angles are uniform: each quadrant holds a quarter.
    assert ((pts[:, 0] > 0) & (pts[:, 1] > 0)).mean() == pytest.approx(0.25, abs=0.02)


@pytest.mark.parametrize(
    "n, radius, min_d, match",
    [(-1, 10.0, 1.0, "n"), (3, 0.0, 0.0, "radius_m"), (3, 10.0, 10.0, "min_distance_m"), (3, 10.0, -1.0, "min_distance_m")],
)
def test_placement_rejects_bad_input(n, radius, min_d, match):
    with pytest.raises(ValueError, match=match):
        place_uniform_in_disc(n, radius, min_d, np.random.default_rng(0))


# -- gains -------------------------------------------------------------------------------------------------------


def test_fixed_gain_overrides_everything():
    system = SystemConfig(n_devices=4, channel_gain_db=-100.0, shadowing_std_db=8.0, rayleigh_fading=True,
                          mobility="random_waypoint")
    ch = ChannelModel(system, seed=3)
    before = ch.positions_m
    for r in range(3):
        assert np.array_equal(ch.gains(r), np.full(4, 1e-10))
    ch.advance(100.0)
    assert np.array_equal(ch.positions_m, before)


def test_gain_is_path_loss_without_shadowing_or_fading():
    system = SystemConfig(n_devices=10)
    ch = ChannelModel(system, seed=0)
    expected = 10 ** (-path_loss_db(ch.distances_m) / 10)
    assert np.allclose(ch.gains(0), expected, rtol=1e-12, atol=0)
    assert np.array_equal(ch.gains(0), ch.gains(5))  # static, no fading: the same every round


def test_shadowing_drawn_once_per_device():
    system = SystemConfig(n_devices=4000, shadowing_std_db=8.0)
    ch = ChannelModel(system, seed=11)
    x = ch.shadowing_db
    assert x.mean() == pytest.approx(0.0, abs=0.5)
    assert x.std() == pytest.approx(8.0, rel=0.05)
    loss_db = path_loss_db(ch.distances_m)
    assert np.allclose(-10 * np.log10(ch.gains(0)), loss_db - x, atol=1e-9)
    assert np.array_equal(ch.gains(0), ch.gains(1))  # shadowing does not change between rounds


def test_rayleigh_fading_is_exponential_and_per_round():
    system = SystemConfig(n_devices=4000, rayleigh_fading=True)
    ch = ChannelModel(system, seed=5)
    mean_gain = 10 ** (-path_loss_db(ch.distances_m) / 10)
    h0 = ch.gains(0) / mean_gain
    h1 = ch.gains(1) / mean_gain
    assert h0.mean() == pytest.approx(1.0, abs=0.06)  # Exp(1): mean 1, variance 1
    assert h0.var() == pytest.approx(1.0, abs=0.15)
    assert (h0 < math.log(2)).mean() == pytest.approx(0.5, abs=0.03)  # median ln 2
    assert not np.allclose(h0, h1)
    assert np.array_equal(ch.gains(0), ChannelModel(system, seed=5).gains(0))  # derived from (seed, round)
    assert not np.array_equal(ch.gains(0), ChannelModel(system, seed=6).gains(0))


# -- mobility ----------------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.floats(0.0, 500.0), st.floats(0.0, 30.0), st.integers(0, 2**16))
def test_mobility_moves_at_most_speed_times_duration_and_stays_in_disc(duration, speed, seed):
    system = SystemConfig(n_devices=20, mobility="random_waypoint", speed_m_per_s=speed, cell_radius_m=100.0)
    ch = ChannelModel(system, seed=seed)
    before = ch.positions_m
    ch.advance(duration)
    after = ch.positions_m
    moved = np.hypot(*(after - before).T)
    assert (moved <= speed * duration * (1 + 1e-9) + 1e-9).all()
    assert (np.hypot(*after.T) <= 100.0 * (1 + 1e-12)).all()


def test_mobility_walks_the_full_distance_and_static_does_not_move():
    system = SystemConfig(n_devices=50, mobility="random_waypoint", speed_m_per_s=2.0)
    ch = ChannelModel(system, seed=1)
    before = ch.positions_m
    ch.advance(1.0)  # 2 m: far less than any leg, so every device moves exactly 2 m in a straight line
    moved = np.hypot(*(ch.positions_m - before).T)
    assert np.allclose(moved, 2.0, rtol=1e-9)
    static = ChannelModel(SystemConfig(n_devices=50), seed=1)
    p = static.positions_m
    static.advance(1000.0)
    assert np.array_equal(static.positions_m, p)


def test_state_dict_round_trip_gives_identical_future_gains():
    system = SystemConfig(n_devices=30, mobility="random_waypoint", speed_m_per_s=5.0, shadowing_std_db=6.0,
                          rayleigh_fading=True)
    a = ChannelModel(system, seed=9)
    a.advance(40.0)
    state = json.loads(json.dumps(a.state_dict()))  # plain lists and numbers
    b = ChannelModel(system, seed=9)
    b.load_state_dict(state)
    for r in range(1, 5):
        assert np.array_equal(a.gains(r), b.gains(r))
        a.advance(37.5)
        b.advance(37.5)
        assert np.array_equal(a.positions_m, b.positions_m)
    with pytest.raises(ValueError, match="seed"):
        ChannelModel(system, seed=10).load_state_dict(state)
