"""Devices that come and go (edgesim.availability): the Markov on/off process, trace files and their errors."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesim.availability import (
    Availability,
    AvailabilityConfig,
    make_availability,
    read_trace,
    stationary_online_fraction,
)
from edgesim.config import ConfigError


def test_stationary_fraction_hand_value_and_limits():
    assert stationary_online_fraction(600.0, 300.0) == pytest.approx(2 / 3)
    assert stationary_online_fraction(1e9, 1.0) == pytest.approx(1.0)  # almost never off
    with pytest.raises(ValueError):
        stationary_online_fraction(0.0, 1.0)


def test_markov_long_run_online_fraction_matches_on_over_on_plus_off():
    on, off, n, horizon = 2.0, 1.0, 100, 3000.0
    avail = Availability(n, markov=(on, off, 11))
    fractions = np.array([avail.online_fraction(d, horizon) for d in range(n)])
    # Each device's time average has variance ~ 2 (on·off)² / ((on+off)³ H) ≈ 1e-4 (std 0.01); the mean over
    # 100 independent devices has std ≈ 0.001: 0.005 is five standard errors.
    assert fractions.mean() == pytest.approx(on / (on + off), abs=0.005)


def test_markov_starts_stationary():
    avail = Availability(4000, markov=(1.0, 3.0, 5))
    at_zero = np.mean([avail.online(d, 0.0) for d in range(4000)])
    at_later = np.mean([avail.online(d, 17.3) for d in range(4000)])
    sigma = math.sqrt(0.25 * 0.75 / 4000)
    assert at_zero == pytest.approx(0.25, abs=5 * sigma)
    assert at_later == pytest.approx(0.25, abs=5 * sigma)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 50), st.floats(0, 200))
def test_markov_queries_agree(device_seed, t):
    avail = Availability(1, markov=(2.0, 5.0, device_seed))
    until, nxt = avail.online_until_s(0, t), avail.next_online_s(0, t)
    if avail.online(0, t):
        assert until > t and nxt == t
        assert not avail.online(0, until)
    else:
        assert until == t and nxt > t
        assert avail.online(0, nxt)


def test_markov_streams_do_not_depend_on_query_order():
    a, b = Availability(3, markov=(1.0, 1.0, 2)), Availability(3, markov=(1.0, 1.0, 2))
    a.online(2, 500.0)
    assert [b.online_until_s(d, 10.0) for d in range(3)] == [a.online_until_s(d, 10.0) for d in range(3)]


def test_always_and_trace_queries():
    always = Availability(2)
    assert always.online(1, 1e9) and always.online_until_s(0, 3.0) == math.inf
    tr = Availability(2, [[1.0, 2.0, 5.0, 6.0], []])
    assert not tr.online(0, 0.5) and tr.online(0, 1.0) and not tr.online(0, 2.0)
    assert tr.next_online_s(0, 2.5) == 5.0 and tr.online_until_s(0, 5.5) == 6.0
    assert tr.next_online_s(0, 6.0) == math.inf and tr.next_online_s(1, 0.0) == math.inf


def write(tmp_path, text, name="trace.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_read_trace_sorts_and_merges(tmp_path):
    p = write(tmp_path, "device,start_s,end_s\n1,5,6\n0,3,4\n0,0,1\n0,1,2\n")
    assert read_trace(p, 3) == [[0.0, 2.0, 3.0, 4.0], [5.0, 6.0], []]
    avail = make_availability(AvailabilityConfig(model="trace", trace="trace.csv"), 3, seed=0, base=tmp_path)
    assert avail.online(0, 1.5) and not avail.online(2, 0.0)


@pytest.mark.parametrize("text, expected", [
    ("device,start_s\n0,1\n", r"trace.csv: row 1: missing column 'end_s'"),
    ("device,start_s,end_s\n0,0,5\n0,4,6\n",
     r"trace.csv: row 3: start_s = 4.0: device 0's interval overlaps \[0.0, 5.0\) of row 2"),
    ("device,start_s,end_s\n0,-1,5\n", r"trace.csv: row 2: start_s = '-1': expected a finite number of seconds >= 0"),
    ("device,start_s,end_s\n0,3,2\n", r"trace.csv: row 2: end_s = '2': expected more than start_s = '3'"),
    ("device,start_s,end_s\n7,0,1\n", r"trace.csv: row 2: device = 7: unknown device; expected an id in 0..2"),
    ("device,start_s,end_s\nx,0,1\n", r"trace.csv: row 2: device = 'x'"),
    ("device,start_s,end_s\n0,0,inf\n", r"trace.csv: row 2: end_s = 'inf'"),
    ("device,start_s,end_s\n0,0\n", r"trace.csv: row 2: 2 values"),
])
def test_trace_errors_are_one_line_naming_file_row_and_value(tmp_path, text, expected):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError, match=expected) as info:
        read_trace(p, 3)
    assert "\n" not in str(info.value) and str(p) in str(info.value)


def test_missing_trace_file_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the availability trace"):
        read_trace(tmp_path / "nope.csv", 2)


def test_config_checks():
    with pytest.raises(ValueError, match="model"):
        AvailabilityConfig(model="sometimes")
    with pytest.raises(ValueError, match="trace"):
        AvailabilityConfig(model="trace")
    with pytest.raises(ValueError, match="mean_on_s"):
        AvailabilityConfig(model="markov", mean_on_s=0)


# --------------------------------------------------------------------------- in the round engine (sync, deadline)


def _round_sim(avail, mode="sync", deadline_s=None):
    from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
    from edgesim.curve import ParametricBackend
    from edgesim.engine import Simulation
    from edgesim.radio import shannon_rate_bps

    system = SystemConfig(n_devices=3, bandwidth_hz=1e6, tx_power_dbm=23.0, channel_gain_db=-110.0,
                          cpu_freq_hz=[1e9, 0.4e9, 0.25e9], access="tdma")
    rate = float(shannon_rate_bps(1e6, system.fixed_gain, system.tx_power_w[0], system.noise_psd_w_per_hz))
    workload = WorkloadConfig(cycles_per_sample=1e6, samples_per_device=1000, model_bits=0.4 * rate)
    budget = BudgetConfig(rounds=2, round_mode=mode, deadline_s=deadline_s)
    return Simulation(system, budget, ParametricBackend(3, 3, workload), availability=avail), system, workload


@pytest.mark.parametrize("mode, deadline_s", [("sync", None), ("deadline", 100.0)])
def test_round_engine_drops_a_device_that_leaves_mid_upload(mode, deadline_s):
    # Compute 1, 2.5, 4 s; TDMA uploads of 0.4 s. Device 1 leaves at 2.7 s, 0.2 s into its upload (on air 2.5-2.9).
    avail = Availability(3, [[0.0], [0.0, 2.7], [0.0]])
    sim, system, workload = _round_sim(avail, mode, deadline_s)
    rec = sim.run_round()
    row = rec.devices[1]
    assert (row.dropped, row.drop_reason, row.arrived) == (True, "offline", False)
    assert row.wasted_bits == pytest.approx(workload.model_bits / 2)
    assert row.radio_energy_j == pytest.approx(system.tx_power_w[1] * 0.2)
    assert row.compute_energy_j == pytest.approx(system.kappa * 0.4e9 ** 2 * 1e9)
    assert rec.arrived == (0, 2) and rec.dropped == (1,)
    assert rec.cum_wasted_bits == pytest.approx(workload.model_bits / 2)
    assert rec.end_time_s == pytest.approx(4.4)  # device 2 computes to 4.0, uploads 4.0-4.4
    assert [r.drop_reason for r in rec.devices] == ["", "offline", ""]
    # offline from 2.7 on: never scheduled again
    rec2 = sim.run_round()
    assert [r.device for r in rec2.devices] == [0, 2]


def test_round_engine_with_always_available_is_unchanged():
    a, _, _ = _round_sim(Availability(3))
    b, _, _ = _round_sim(None)
    assert a.run() == b.run() and a.events == b.events


def test_deadline_drops_say_deadline():
    sim, _, _ = _round_sim(None, "deadline", 3.0)
    rec = sim.run_round()
    assert [r.drop_reason for r in rec.devices] == ["", "", "deadline"]
