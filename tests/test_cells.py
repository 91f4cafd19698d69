"""Several cells (edgesim/cells.py, edgesim/channel.py): the cells' config, placement over them, association and the
gain of every device to every cell; one cell given explicitly is today's cell, byte for byte."""

import math

import numpy as np
import pytest

from edgesim.cells import ASSOCIATIONS, Layout, associate, devices_per_cell, register_association
from edgesim.channel import ChannelModel, place_over_cells
from edgesim.config import ASSOCIATION_NAMES, BudgetConfig, ConfigError, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation

TWO = [{"x_m": 0.0, "y_m": 0.0}, {"x_m": 1000.0, "y_m": 0.0}]


def two_cells(**kw):
    base = dict(n_devices=3, cells=TWO, cell_radius_m=600.0)
    base.update(kw)
    return SystemConfig(**base)


def layout(positions, sites, shadowing_db=None, powers_w=(1.0, 1.0)):
    """A Layout whose gains follow the default path loss 128.1 + 37.6 log10(d/km) dB and the given shadowing."""
    p, s = np.asarray(positions, float), np.asarray(sites, float)
    d = np.hypot(p[:, None, 0] - s[None, :, 0], p[:, None, 1] - s[None, :, 1])
    x = np.zeros(d.shape) if shadowing_db is None else np.asarray(shadowing_db, float)
    gain = 10 ** (-(128.1 + 37.6 * np.log10(d / 1000.0) - x) / 10)
    return Layout(p, s, d, gain, np.asarray(powers_w, float))


# -- association by hand: 3 devices at 100 m, 400 m and 900 m on the line between two base stations 1 km apart
POSITIONS = [(100.0, 0.0), (400.0, 0.0), (900.0, 0.0)]
SITES = [(0.0, 0.0), (1000.0, 0.0)]
# Device 1's links: PL(400 m) = 128.1 + 37.6·log10(0.4) = 113.1375 dB to cell 0, PL(600 m) = 119.7585 dB to cell 1;
# 8 dB of shadowing on its link to cell 1 makes that link 111.7585 dB: cell 1 has the larger average gain.
SHADOWING_DB = [[0.0, 0.0], [0.0, 8.0], [0.0, 0.0]]


def test_nearest_by_hand():
    assert associate(two_cells(), layout(POSITIONS, SITES, SHADOWING_DB)) == (0, 0, 1)


def test_max_gain_by_hand():
    lay = layout(POSITIONS, SITES, SHADOWING_DB)
    assert 10 * math.log10(lay.gain[1, 0]) == pytest.approx(-113.1375, abs=1e-4)
    assert 10 * math.log10(lay.gain[1, 1]) == pytest.approx(-111.7585, abs=1e-4)
    assert associate(two_cells(association="max_gain"), lay) == (0, 1, 1)
    # limiting case: no shadowing, equal powers: the largest gain is the nearest cell
    assert associate(two_cells(association="max_gain"), layout(POSITIONS, SITES)) == (0, 0, 1)


def test_max_power_by_hand():
    # Cell 0 transmits 10 dB more (10 W against 1 W); device 1 sees cell 0 at -113.1375 + 10 = -103.1375 dB and cell 1 at
    # -111.7585 dB (with its shadowing): cell 0; device 2 (900 m / 100 m: PL 126.38 / 90.50 dB) stays with cell 1.
    lay = layout(POSITIONS, SITES, SHADOWING_DB, powers_w=(10.0, 1.0))
    assert associate(two_cells(association="max_power"), lay) == (0, 0, 1)
    # equal powers: the same as max_gain (a property of the definitions)
    lay = layout(POSITIONS, SITES, SHADOWING_DB)
    assert associate(two_cells(association="max_power"), lay) == associate(two_cells(association="max_gain"), lay)


def test_channel_associates_on_its_own_layout():
    system = two_cells(n_devices=40, shadowing_std_db=8.0, rayleigh_fading=True, association="max_gain")
    channel = ChannelModel(system, 3)
    avg = channel.cell_large_scale_gains()
    assert channel.serving_cell == tuple(int(c) for c in np.argmax(avg, axis=1))
    g = channel.cell_gains(2)
    assert g.shape == (40, 2)
    assert np.array_equal(channel.gains(2), g[np.arange(40), channel.serving_cell])  # the serving link's gain
    assert np.array_equal(channel.cell_gains(2), g)  # the same numbers twice
    assert not np.array_equal(channel.cell_gains(3), g)  # fading per round
    nearest = ChannelModel(two_cells(n_devices=40, shadowing_std_db=8.0), 3)
    assert nearest.serving_cell == tuple(int(c) for c in np.argmin(nearest.cell_distances_m, axis=1))
    assert sum(devices_per_cell(nearest.serving_cell, 2)) == 40


# -- placement
@pytest.mark.parametrize("placement", ["uniform_union", "per_cell"])
def test_placement_inside_the_cells_and_deterministic(placement):
    sites = np.array([[0.0, 0.0], [300.0, 0.0], [0.0, 5000.0]])
    pts = place_over_cells(600, sites, 250.0, 10.0, placement, np.random.default_rng(1))
    d = np.hypot(pts[:, None, 0] - sites[None, :, 0], pts[:, None, 1] - sites[None, :, 1])
    assert (d.min(axis=1) <= 250.0).all() and (d >= 10.0).all()  # in the union, never closer than min_distance_m
    again = place_over_cells(600, sites, 250.0, 10.0, placement, np.random.default_rng(1))
    assert np.array_equal(pts, again)
    in_far_cell = int((d[:, 2] <= 250.0).sum())
    if placement == "per_cell":
        assert (d[np.arange(600), np.arange(600) % 3] <= 250.0).all()  # device n in cell n mod C
        assert in_far_cell == 200
    else:  # uniform in area: the isolated cell holds its area's share, 1/(3 - overlap) of the union
        r = 250.0
        lens = 2 * r * r * math.acos(150.0 / r) - 150.0 * math.sqrt(r * r - 150.0 ** 2)  # two discs 300 m apart
        share = math.pi * r * r / (3 * math.pi * r * r - lens)
        assert in_far_cell / 600 == pytest.approx(share, abs=0.06)


# -- one cell: today's cell, byte for byte
def test_one_cell_given_is_the_default_cell():
    kw = dict(n_devices=7, shadowing_std_db=6.0, rayleigh_fading=True, mobility="random_waypoint", speed_m_per_s=3.0)
    default = ChannelModel(SystemConfig(**kw), 5)
    given = ChannelModel(SystemConfig(cells=[{"x_m": 0, "y_m": 0}], **kw), 5)
    for channel in (default, given):
        channel.advance(40.0)
    assert np.array_equal(default.positions_m, given.positions_m)
    assert np.array_equal(default.gains(4), given.gains(4))
    assert np.array_equal(given.cell_gains(4)[:, 0], given.gains(4))
    assert default.serving_cell == given.serving_cell == (0,) * 7
    moved = ChannelModel(SystemConfig(cells=[{"x_m": 500, "y_m": -20}], **kw), 5)  # the same cell, elsewhere
    assert np.allclose(moved.positions_m - [500, -20], ChannelModel(SystemConfig(**kw), 5).positions_m)
    assert np.allclose(moved.gains(0), ChannelModel(SystemConfig(**kw), 5).gains(0), rtol=1e-12)


def test_simulation_exposes_the_mapping():
    workload = WorkloadConfig(cycles_per_sample=1e4, samples_per_device=10, model_bits=1e4)
    sim = Simulation(two_cells(n_devices=6), BudgetConfig(total_time_s=10.0, rounds=1),
                     ParametricBackend(6, 6, workload, seed=0), seed=2)
    assert sim.n_cells == 2 and sim.serving_cell == sim.channel.serving_cell
    view = sim.system_view()
    assert view.n_cells == 2 and view.serving_cell == sim.serving_cell
    one = Simulation(SystemConfig(n_devices=6), BudgetConfig(total_time_s=10.0, rounds=1),
                     ParametricBackend(6, 6, workload, seed=0), seed=2)
    assert one.serving_cell == (0,) * 6 and one.system_view().serving_cell is None and one.n_cells == 1


# -- a plugin's rule
@pytest.fixture
def farthest():
    @register_association("farthest_test")
    def rule(lay):
        return np.argmax(lay.distance_m, axis=1)

    yield "farthest_test"
    ASSOCIATIONS.pop("farthest_test")
    ASSOCIATION_NAMES.remove("farthest_test")


def test_a_registered_rule_serves(farthest):
    assert associate(two_cells(association=farthest), layout(POSITIONS, SITES)) == (1, 1, 0)
    with pytest.raises(ConfigError, match="registered twice"):
        register_association("nearest")(lambda lay: np.zeros(lay.n_devices, dtype=int))


def test_a_bad_rule_answer_is_one_line():
    @register_association("bad_test")
    def rule(lay):
        return [0, 5, 1]

    try:
        with pytest.raises(ConfigError, match=r"association = 'bad_test': returned .*expected 3 integers"):
            associate(two_cells(association="bad_test"), layout(POSITIONS, SITES))
    finally:
        ASSOCIATIONS.pop("bad_test")
        ASSOCIATION_NAMES.remove("bad_test")


# -- bad input: one line naming the key, the value and what was expected
@pytest.mark.parametrize("kw, message", [
    (dict(cells=[]), "cells = []: expected a list of 1 to 1000 tables"),
    (dict(cells=[{"x_m": 0, "y_m": 0}, {"x_m": 0.0, "y_m": 0}]), "cells[1] = {'x_m': 0.0, 'y_m': 0}: expected a base "
     "station at a point of its own (cells[0] is at x_m = 0, y_m = 0)"),
    (dict(cells=[{"x_m": 0}]), "cells[0] = {'x_m': 0}: expected a table with x_m and y_m"),
    (dict(cells=[{"x_m": 0, "y_m": 0, "z_m": 1}]), "cells[0] = "),
    (dict(cells=[{"x_m": 0, "y_m": 0, "bandwidth_hz": 0}]), "cells[0].bandwidth_hz = 0: expected a plausible value"),
    (dict(cells=[{"x_m": 0, "y_m": 0, "tx_power_dbm": 99}]), "cells[0].tx_power_dbm = 99: expected a plausible"),
    (dict(cells=[{"x_m": 0, "y_m": 0, "cpu_hz": -1}]), "cells[0].cpu_hz = -1: expected a plausible value"),
    (dict(cells=[{"x_m": "a", "y_m": 0}]), "cells[0].x_m = 'a': expected a finite number"),
    (dict(frequency_reuse=0), "frequency_reuse = 0: expected an integer in [1, 1] (the number of cells)"),
    (dict(frequency_reuse=1.5), "frequency_reuse = 1.5: expected an integer in [1, 1]"),
    (dict(cells=TWO, frequency_reuse=3), "frequency_reuse = 3: expected an integer in [1, 2] (the number of cells)"),
    (dict(association="strongest"), "association = 'strongest': expected one of 'nearest', 'max_gain', 'max_power'"),
    (dict(placement="grid"), "placement = 'grid': expected one of 'uniform_union', 'per_cell'"),
    (dict(cells=TWO, channel_gain_db=-100), "channel_gain_db = -100: expected unset with several cells"),
])
def test_bad_input_is_one_line(kw, message):
    with pytest.raises(ConfigError) as e:
        SystemConfig(**kw)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_one_cell_given_runs_on_its_own_band_and_edge_cpu():
    """One cell with bandwidth_hz and cpu_hz: the engine's band and server CPU are the cell's (the rest as today)."""
    workload = WorkloadConfig(cycles_per_sample=1e4, samples_per_device=10, model_bits=1e4)
    system = SystemConfig(n_devices=4, cells=[{"x_m": 0, "y_m": 0, "bandwidth_hz": 3e6, "cpu_hz": 2e9}])
    sim = Simulation(system, BudgetConfig(total_time_s=10.0, rounds=1), ParametricBackend(4, 4, workload, seed=0),
                     seed=1)
    assert sim.system.bandwidth_hz == 3e6 and sim.system.server_freq_hz == 2e9
    assert sim.system_view().bandwidth_hz == 3e6


def test_several_cells_are_refused_by_an_asynchronous_run():
    from edgesim.asynchrony import check_async_system

    with pytest.raises(ValueError, match=r"system.cells = .* with round_mode = 'fedasync' does not apply"):
        check_async_system(two_cells(), BudgetConfig(round_mode="fedasync"))
    check_async_system(SystemConfig(cells=[{"x_m": 0, "y_m": 0}]), BudgetConfig(round_mode="fedasync"))  # one: fine
