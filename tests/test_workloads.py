"""Per-device workloads in physics-only runs: cycles_per_sample and samples_per_device as a list or a distribution."""

from __future__ import annotations

import numpy as np
import pytest

from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig, workload_per_device
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation


def test_lists_give_each_device_its_cycles_by_hand():
    """I = 2, C = (1e6, 2e6, 3e6) cycles/sample, D = (100, 200, 300): I C_k D_k = 2e8, 8e8, 1.8e9 cycles; at 1 GHz the
    compute takes 0.2, 0.8 and 1.8 s."""
    w = WorkloadConfig(local_iterations=2, cycles_per_sample=[1e6, 2e6, 3e6], samples_per_device=[100, 200, 300],
                       model_bits=1e6)
    assert w.per_device and not WorkloadConfig().per_device
    backend = ParametricBackend(3, 3, w, seed=0)
    assert backend.expected_work()[0] == pytest.approx((2e8, 8e8, 1.8e9))
    system = SystemConfig(n_devices=3, bandwidth_hz=1e6, cpu_freq_hz=1e9, access="fdma")
    rec = Simulation(system, BudgetConfig(total_time_s=100.0, rounds=2), backend, seed=1).run_round()
    assert {row.device: row.compute_s for row in rec.devices} == pytest.approx({0: 0.2, 1: 0.8, 2: 1.8})


def test_a_distribution_is_drawn_once_from_the_seed():
    w = WorkloadConfig(cycles_per_sample={"dist": "uniform", "low": 1e4, "high": 3e4},
                       samples_per_device={"dist": "uniform", "low": 400, "high": 600})
    c, d = workload_per_device(w, 50, seed=7)
    again = workload_per_device(w, 50, seed=7)
    assert np.array_equal(c, again[0]) and np.array_equal(d, again[1])  # same seed: the same draw
    assert not np.array_equal(c, workload_per_device(w, 50, seed=8)[0])
    assert ((1e4 <= c) & (c <= 3e4)).all() and ((400 <= d) & (d <= 600)).all() and (d == np.round(d)).all()
    # its own stream: the draw is numpy's uniform on (seed, 0xD0)
    assert np.array_equal(c, np.random.default_rng((7, 0xD0)).uniform(1e4, 3e4, 50))
    # low = high: every device the same (the limiting case)
    same = WorkloadConfig(cycles_per_sample={"dist": "uniform", "low": 2e4, "high": 2e4}, samples_per_device=500)
    assert (workload_per_device(same, 5, 0)[0] == 2e4).all()


@pytest.mark.parametrize("kw, expected", [
    (dict(cycles_per_sample={"dist": "uniform", "low": 3e4, "high": 1e4}), "cycles_per_sample.high"),
    (dict(samples_per_device={"dist": "normal", "low": 1, "high": 2}), "samples_per_device.dist"),
    (dict(samples_per_device={"dist": "uniform", "low": 1}), '{dist = "uniform", low = ..., high = ...}'),
    (dict(cycles_per_sample=[1e6, -1.0]), "cycles_per_sample[1]"),
    (dict(samples_per_device=[10, 0]), "samples_per_device[1]"),
])
def test_bad_workloads_are_one_line(kw, expected):
    with pytest.raises(ValueError) as e:
        WorkloadConfig(**kw)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_a_list_of_the_wrong_length_is_one_line():
    with pytest.raises(ValueError) as e:
        ParametricBackend(4, 2, WorkloadConfig(cycles_per_sample=[1e6, 2e6], samples_per_device=500, model_bits=1e6))
    assert "cycles_per_sample" in str(e.value) and "n_devices (= 4)" in str(e.value)


def test_a_learning_run_refuses_per_device_workloads():
    from edgesim.scenarios.schema import ScenarioError, validate

    with pytest.raises(ScenarioError) as e:
        validate({"workload": {"samples_per_device": [10, 20]}}, "s.toml")
    assert "samples_per_device" in str(e.value) and "physics-only" in str(e.value) and "\n" not in str(e.value)


def test_the_plan_counts_the_local_steps_of_the_device_with_the_most_samples():
    from edgesim.scenarios.plan import steps_summary
    from edgesim.scenarios.schema import validate

    sc = validate({"run": {"backend": "parametric", "clients_per_round": 2}, "system": {"n_devices": 3},
                   "workload": {"samples_per_device": [10, 100, 40], "model_bits": 1e6}}, "s.toml")
    steps = steps_summary(sc, sc.workload)
    batch = steps["batch_size"]
    assert steps["samples_per_device"] == 100 and steps["local_steps_per_device"] == -(-100 // batch)
