"""Per-device local iterations I_k (workload.local_iterations as a list or a table): the clock charges each device its
own I_k·C·D_k cycles and the FedAvg family trains each device I_k epochs (I_k·⌈D_k/B⌉ local steps)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig, iterations_per_device
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation

ITERATIONS = [1, 2, 3, 1, 2, 3]


def test_the_clock_charges_each_device_its_own_iterations_by_hand():
    """I = (1, 2, 3), C = 1e6 cycles/sample, D = 100 samples: I_k C D = 1e8, 2e8, 3e8 cycles; at 1 GHz the compute
    takes 0.1, 0.2 and 0.3 s (one I for all: 0.1 s each, the limiting case)."""
    w = WorkloadConfig(local_iterations=[1, 2, 3], cycles_per_sample=1e6, samples_per_device=100, model_bits=1e6)
    assert w.iterations_vary and w.varies and not w.per_device
    backend = ParametricBackend(3, 3, w, seed=0)
    assert backend.expected_work()[0] == pytest.approx((1e8, 2e8, 3e8))
    system = SystemConfig(n_devices=3, bandwidth_hz=1e6, cpu_freq_hz=1e9, access="fdma")
    rec = Simulation(system, BudgetConfig(total_time_s=100.0, rounds=2), backend, seed=1).run_round()
    assert {row.device: row.compute_s for row in rec.devices} == pytest.approx({0: 0.1, 1: 0.2, 2: 0.3})
    one = WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=100, model_bits=1e6)
    assert ParametricBackend(3, 3, one, seed=0).expected_work()[0] == pytest.approx((1e8,) * 3)


def test_a_table_of_iterations_is_drawn_once_from_its_own_stream():
    w = WorkloadConfig(local_iterations={"dist": "uniform", "low": 1, "high": 4})
    i = iterations_per_device(w, 40, seed=7)
    assert np.array_equal(i, iterations_per_device(w, 40, seed=7)) and i.dtype.kind == "i"
    assert set(i.tolist()) <= {1, 2, 3, 4} and len(set(i.tolist())) > 1
    assert np.array_equal(i, np.random.default_rng((7, 0xD2)).integers(1, 5, 40))


@pytest.mark.parametrize("value, expected", [
    (0, "local_iterations = 0: expected an integer >= 1"),
    ([1, 0, 2], "local_iterations[1] = 0: expected an integer >= 1"),
    ([1, 2.5], "local_iterations[1] = 2.5"),
    ({"dist": "uniform", "low": 3, "high": 1}, "local_iterations.high = 1: expected a value >= low (= 3)"),
])
def test_bad_iterations_are_one_line(value, expected):
    with pytest.raises(ValueError) as e:
        WorkloadConfig(local_iterations=value)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_a_list_of_the_wrong_length_and_an_algorithm_without_them_are_one_line():
    from edgesim.scenarios.schema import ScenarioError, validate

    with pytest.raises(ScenarioError) as e:
        validate({"workload": {"local_iterations": [1, 2]}, "run": {"algorithms": ["fedavg"]}}, "s.toml")
    assert "local_iterations = [1, 2]: expected a list of n_devices (= 25) values, got 2" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        validate({"workload": {"local_iterations": [2] * 25}, "run": {"algorithms": ["fedavg", "fedfomo"]}}, "s.toml")
    assert "'fedfomo' trains every device the same epochs" in str(e.value) and "\n" not in str(e.value)


class _Recording:
    """The run's executor, recording each call's clients' steps (what the learning side trained)."""

    def __init__(self, inner):
        self.inner, self.steps = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, model, task, starts, data, generators):
        result = self.inner.run(model, task, starts, data, generators)
        self.steps.append(list(result.n_steps))
        self.last = result
        return result


def _fedavg(tiny_scenario, iterations, executor="sequential"):
    from edgesim.learning.algorithms import REGISTRY
    from edgesim.learning.context import build_context
    from edgesim.scenarios.schema import load_scenario

    sc = load_scenario(tiny_scenario, [f"workload.local_iterations={iterations}", "run.algorithms=['fedavg']",
                                       "run.clients_per_round=6", f"train.executor={executor!r}"])
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    ctx.executor = _Recording(ctx.executor)
    alg = REGISTRY["fedavg"].build(ctx, REGISTRY["fedavg"].config_cls())
    return sc, ctx, alg, Simulation(sc.system, sc.budget, alg, seed=sc.seed)


def test_fedavg_trains_and_charges_each_device_its_own_iterations(tiny_scenario):
    """Device k trains I_k·⌈D_k/B⌉ steps (I = 1, 2, 3, 1, 2, 3) and the clock charges it I_k·C·D_k cycles, at 1 GHz."""
    sc, ctx, alg, sim = _fedavg(tiny_scenario, ITERATIONS)
    rec = sim.run_round()
    batch = sc.learning["train"].batch_size
    held = [ctx.clients[d].y_sup.shape[0] for d in range(6)]
    assert ctx.executor.steps == [[i * math.ceil(n / batch) for i, n in zip(ITERATIONS, held)]]
    assert {row.device: row.compute_s for row in rec.devices} == pytest.approx(
        {d: ITERATIONS[d] * ctx.cycles_per_sample * held[d] / 1e9 for d in range(6)})


def test_equal_iterations_per_device_are_the_scalar_run(tiny_scenario):
    """A list of one value (every I_k = 2) is the run of local_iterations = 2, model for model (the per-client path
    draws the same batches)."""
    *_, alg_list, sim_list = _fedavg(tiny_scenario, [2] * 6)
    *_, alg_one, sim_one = _fedavg(tiny_scenario, 2)
    assert [r.metrics for r in sim_list.run(2)] == [r.metrics for r in sim_one.run(2)]
    assert all(torch.equal(alg_list.global_state[k], alg_one.global_state[k]) for k in alg_one.global_state)


def test_an_upload_the_clock_cut_is_not_learned_from(tiny_scenario):
    """Devices 2 and 5 (3 epochs each, the longest work) miss the deadline: the new global model is the samples-
    weighted average of the four arrived devices' trained models alone, whatever the cut devices trained."""
    from edgesim.backend import RoundOutcome
    from edgesim.learning.aggregation import weighted_average

    sc, ctx, alg, sim = _fedavg(tiny_scenario, ITERATIONS)
    alg.plan_round(sim.system_view())
    arrived = (0, 1, 3, 4)
    alg.complete_round(RoundOutcome(0, 0.0, 1.0, arrived=arrived, dropped=(2, 5), compute_end_s={},
                                    upload_end_s={}))
    trained = dict(zip(alg.selected, ctx.executor.last.params))
    want = weighted_average([(trained[d], float(alg.sizes[d]["main"])) for d in arrived])
    assert all(torch.equal(alg.global_state[k], want[k]) for k in alg.global_state)
