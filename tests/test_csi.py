"""Imperfect CSI: the base station plans on estimated or outdated gains, the devices transmit on the true ones."""

from __future__ import annotations

import numpy as np
import pytest

from edgesim.channel import STREAM_CSI, estimated_gains
from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation
from edgesim.resources import ResourcesConfig

WORK = WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=200, model_bits=2e6)


def _sim(csi=None, std=None, resources=None, mode="sync", deadline=None, rounds=5):
    system = SystemConfig(n_devices=6, bandwidth_hz=2e6, cpu_freq_hz=[1e9, 2e9] * 3, access="fdma",
                          cell_radius_m=300, rayleigh_fading=True, csi=csi, csi_error_std=std)
    budget = BudgetConfig(total_time_s=10.0 * rounds, rounds=rounds, round_mode=mode, deadline_s=deadline)
    return Simulation(system, budget, ParametricBackend(6, 4, WORK, seed=1), seed=5,
                      resources=resources or ResourcesConfig())


def test_estimated_gains_by_hand_and_their_own_stream():
    """ĝ = g · max(1 + e, 1e-3), e ~ N(0, σ) from default_rng((seed, round, 0xC5)); σ = 0: the true gains."""
    g = np.array([1e-10, 2e-10, 3e-10])
    e = np.random.default_rng((7, 3, STREAM_CSI)).normal(0.0, 0.2, 3)
    assert estimated_gains(g, 0.2, 7, 3) == pytest.approx(g * np.maximum(1 + e, 1e-3), rel=1e-15)
    assert (estimated_gains(g, 0.0, 7, 3) == g).all()
    assert (estimated_gains(g, 50.0, 7, 3) > 0).all()  # the floor keeps an estimate positive


def test_the_view_is_the_estimate_and_the_devices_transmit_on_the_truth():
    perfect, est = _sim(), _sim("estimated", 0.3)
    for r in range(3):
        pv, ev = perfect.system_view(), est.system_view()
        truth = np.asarray(pv.channel_gain)
        assert np.asarray(ev.channel_gain) == pytest.approx(estimated_gains(truth, 0.3, 5, r), rel=1e-15)
        rec = est.run_round()
        perfect.run_round()
        assert all(row.channel_gain == truth[row.device] for row in rec.devices)


def test_estimated_with_no_error_is_the_perfect_run():
    a, b = _sim(), _sim("estimated", 0.0)
    assert a.run() == b.run()


def test_outdated_plans_on_the_previous_rounds_gains():
    perfect, old = _sim(), _sim("outdated")
    truths = []
    for r in range(4):
        truths.append(np.asarray(perfect.system_view().channel_gain))
        view = np.asarray(old.system_view().channel_gain)
        assert (view == (truths[r - 1] if r else truths[0])).all()
        perfect.run_round()
        old.run_round()


def test_resume_with_outdated_csi_is_identical():
    whole = _sim("outdated")
    full = whole.run()
    first = _sim("outdated")
    first.run(rounds=2)
    again = _sim("outdated")
    again.load_state_dict(first.state_dict())
    again.backend.load_state_dict(first.backend.state_dict())
    assert again.run() == full[2:]


def test_overestimated_channels_miss_the_deadline():
    """Deadline rounds with the least-energy power and frequency: planned on the true gains every upload ends by τ;
    planned on noisy estimates, a device whose gain was overestimated sends too little power and is dropped."""
    res = ResourcesConfig(power="min_energy", cpu_freq="joint")
    perfect = _sim(resources=res, mode="deadline", deadline=2.0, rounds=8).run()
    noisy = _sim("estimated", 0.5, resources=res, mode="deadline", deadline=2.0, rounds=8).run()
    assert sum(len(r.dropped) for r in perfect) == 0
    assert sum(len(r.dropped) for r in noisy) > 0


@pytest.mark.parametrize("kw, expected", [
    (dict(csi="guess"), "csi"), (dict(csi="estimated"), "csi_error_std"),
    (dict(csi="estimated", csi_error_std=-0.1), "a number >= 0"), (dict(csi_error_std=0.1), "unset")])
def test_bad_csi_is_one_line(kw, expected):
    with pytest.raises(ValueError) as e:
        SystemConfig(n_devices=3, **kw)
    assert expected in str(e.value) and "\n" not in str(e.value)
