"""The ``[resources]`` policies under the asynchronous rules: what each policy declares, the frequency and power
policies planned per update against ``[budget] deadline_s`` (hand-computed timelines), and the synchronous
engine's check that a plan follows the scheduling ranking."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from edgesim.asynchrony import AsyncConfig, AsyncSimulation
from edgesim.config import BudgetConfig, ConfigError, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation
from edgesim.radio import shannon_rate_bps
from edgesim.resources import (
    KINDS,
    POLICIES,
    ROUND_MODES,
    ResourcesConfig,
    check_round_mode,
    declared,
    register_policy,
    tdma_order,
)
from edgesim.resources.formulas import min_energy_power_w

UPLOAD_S = 0.4  # every upload below takes 0.4 s alone on the whole band at full power


def cell(cpu_freq_hz, access="tdma"):
    system = SystemConfig(n_devices=len(cpu_freq_hz), bandwidth_hz=1e6, tx_power_dbm=23.0, channel_gain_db=-110.0,
                          cpu_freq_hz=list(cpu_freq_hz), access=access)
    rate = float(shannon_rate_bps(1e6, system.fixed_gain, system.tx_power_w[0], system.noise_psd_w_per_hz))
    workload = WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=1000,
                              model_bits=UPLOAD_S * rate)  # 1e9 cycles
    return system, workload


def async_sim(cpu_freq_hz, mode, cfg, rounds, resources, deadline_s=None, access="tdma"):
    system, workload = cell(cpu_freq_hz, access)
    n = len(cpu_freq_hz)
    return AsyncSimulation(system, BudgetConfig(rounds=rounds, round_mode=mode, deadline_s=deadline_s),
                           ParametricBackend(n, n, workload), cfg, seed=0, resources=resources)


def timeline(records):
    return [(round(r.end_time_s, 9), r.arrived, [row.staleness for row in r.devices if row.arrived]) for r in records]


# --------------------------------------------------------------------------- declarations


def test_every_registered_policy_declares_its_round_modes():
    for kind in KINDS:
        for name in POLICIES[kind]:
            d = declared(kind, name)
            assert set(d.round_modes) <= set(ROUND_MODES) and {"sync", "deadline"} <= set(d.round_modes), (kind, name)
            assert d.tdma_order in ("arrival", "shortest_first")
    free_slot = {kind: sorted(n for n in POLICIES[kind] if "async" in declared(kind, n).round_modes) for kind in KINDS}
    assert {"equal", "shortest_first"} <= set(free_slot["bandwidth"])
    assert {"proportional", "min_max_time"}.isdisjoint(free_slot["bandwidth"])
    assert {"max", "min_energy"} <= set(free_slot["cpu_freq"]) and "joint" not in free_slot["cpu_freq"]
    assert {"fixed", "min_energy"} <= set(free_slot["power"])
    assert set(free_slot["scheduling"]) == set(POLICIES["scheduling"])  # a ranking fills a free slot
    deadline = {(k, n) for k in KINDS for n in POLICIES[k] if declared(k, n).needs_deadline}
    assert {("cpu_freq", "min_energy"), ("power", "min_energy"), ("scheduling", "oort"),
            ("scheduling", "deadline_feasible")} <= deadline
    assert ("cpu_freq", "max") not in deadline
    assert tdma_order(ResourcesConfig(bandwidth="shortest_first")) == "shortest_first"
    assert tdma_order(ResourcesConfig()) == "arrival"
    assert [n for n in POLICIES["scheduling"] if not declared("scheduling", n).ranks] == ["random"]


def test_a_plugin_declares_what_it_applies_to():
    @register_policy("cpu_freq", "_test_half")
    class Half:
        """Half the configured frequency."""

        def allocate(self, r):
            return r.cpu_freq_max_hz / 2

    @register_policy("bandwidth", "_test_line")
    class Line:
        """TDMA, shortest first, in every round mode."""

        round_modes = ROUND_MODES
        tdma_order = "shortest_first"

        def allocate(self, r):
            return None

    try:
        with pytest.raises(ValueError, match=r"cpu_freq = '_test_half' does not apply to round_mode = 'fedbuff': it "
                                             r"does not declare 'async' among its round_modes; expected 'max' or "
                                             r"'min_energy'") as info:
            check_round_mode(ResourcesConfig(cpu_freq="_test_half"), "fedbuff", True, None)
        assert "\n" not in str(info.value)
        check_round_mode(ResourcesConfig(cpu_freq="_test_half"), "deadline", False, None)
        check_round_mode(ResourcesConfig(bandwidth="_test_line"), "fedasync", True, None)
        assert tdma_order(ResourcesConfig(bandwidth="_test_line")) == "shortest_first"
    finally:
        POLICIES["cpu_freq"].pop("_test_half")
        POLICIES["bandwidth"].pop("_test_line")


def test_min_energy_without_a_latency_target_is_refused_in_one_line():
    for kind, default in (("cpu_freq", "max"), ("power", "fixed")):
        with pytest.raises(ValueError, match=rf"{kind} = 'min_energy' with round_mode = 'fedasync' needs \[budget\] "
                                             rf"deadline_s.*expected '{default}' or deadline_s set") as info:
            check_round_mode(ResourcesConfig(**{kind: "min_energy"}), "fedasync", True, None)
        assert "\n" not in str(info.value)
        check_round_mode(ResourcesConfig(**{kind: "min_energy"}), "fedasync", True, 2.0)


# --------------------------------------------------------------------------- hand-computed timelines


def test_fedbuff_with_min_energy_frequency_by_hand():
    # Two devices, 1e9 cycles, f_max 1 and 0.4 GHz, 0.4 s uploads on one TDMA band; deadline_s = 2 s per update.
    # min_energy: f = C / (τ − t_up) = 1e9 / 1.6 = 0.625 GHz for d0 (compute 1.6 s); d1 would need 0.625 GHz > its
    # 0.4 GHz: it computes at its maximum (2.5 s). K = 2, two slots:
    # d0 0-1.6, up 1.6-2.0 (buffer 1), again from v0 2.0-3.6; d1 0-2.5, up 2.5-2.9 -> flush 0 at 2.9 (stale 0, 0);
    # d1 from v1 2.9-5.4; d0 up 3.6-4.0 (v0 at v1: stale 1), again from v1 4.0-5.6; d1 up 5.4-5.8 -> flush 1 at 5.8.
    sim = async_sim([1e9, 0.4e9], "fedbuff", AsyncConfig(concurrency=2, buffer_size=2), rounds=2,
                    resources=ResourcesConfig(cpu_freq="min_energy"), deadline_s=2.0)
    recs = sim.run()
    assert timeline(recs) == [(2.9, (0, 1), [0, 0]), (5.8, (0, 1), [1, 0])]
    kappa, cycles = sim.system.kappa, 1e9
    rows = sorted((row for r in recs for row in r.devices), key=lambda row: (row.start_time_s, row.device))
    assert [(row.device, round(row.start_time_s, 9), round(row.end_time_s, 9)) for row in rows] == [
        (0, 0.0, 2.0), (1, 0.0, 2.9), (0, 2.0, 4.0), (1, 2.9, 5.8)]
    for row in rows:
        f = 0.625e9 if row.device == 0 else 0.4e9
        assert row.compute_s == pytest.approx(cycles / f, rel=1e-12)
        assert row.compute_energy_j == pytest.approx(kappa * f ** 2 * cycles, rel=1e-12)  # κ f² C
        assert row.upload_airtime_s == pytest.approx(UPLOAD_S, rel=1e-12)
        assert row.cpu_freq_hz == pytest.approx(f, rel=1e-12) and row.tx_power_w == sim.system.tx_power_w[0]
    # d0 meets the 2 s target exactly when the band is free; the same run at full frequency spends (1/0.625)² more
    full = async_sim([1e9, 0.4e9], "fedbuff", AsyncConfig(concurrency=2, buffer_size=2), rounds=2,
                     resources=ResourcesConfig(), deadline_s=2.0).run()
    d0 = [row.compute_energy_j for r in full for row in r.devices if row.device == 0]
    assert d0[0] / rows[0].compute_energy_j == pytest.approx((1 / 0.625) ** 2, rel=1e-12)


def test_fedasync_min_energy_frequency_limits_a_loose_target_at_the_floor():
    # τ = 100 s: C / (τ − t_up) = 1e9 / 99.6 is below the DVFS floor f_max / 10 = 0.1 GHz: the device computes at
    # the floor (10 s), up 10.0-10.4 -> aggregation 0 at 10.4 (one device, one slot).
    sim = async_sim([1e9], "fedasync", AsyncConfig(concurrency=1), rounds=2,
                    resources=ResourcesConfig(cpu_freq="min_energy"), deadline_s=100.0)
    recs = sim.run()
    assert timeline(recs) == [(10.4, (0,), [0]), (20.8, (0,), [0])]


def test_fedbuff_with_min_energy_power_on_fdma_by_hand():
    # FDMA, two slots: each update counts on B / 2 (both may upload at once). d0 (1 GHz) is ready at 1 s and has
    # τ − 1 = 1 s to send s bits on 0.5 MHz: p = (2^{s / (b τ)} − 1) N0 b / g (W). d1 (0.4 GHz) is ready at 2.5 s:
    # with τ = 2 s it has no time left, so it sends at full power.
    system, workload = cell([1e9, 0.4e9], "fdma")
    bits = float(workload.model_bits)
    sim = async_sim([1e9, 0.4e9], "fedbuff", AsyncConfig(concurrency=2, buffer_size=2), rounds=1,
                    resources=ResourcesConfig(power="min_energy"), deadline_s=2.0, access="fdma")
    rec = sim.run()[0]
    p0 = float(min_energy_power_w(bits, 0.5e6, 1.0, system.fixed_gain, system.tx_power_w[0],
                                  system.noise_psd_w_per_hz))
    expected = (2 ** (bits / (0.5e6 * 1.0)) - 1) * system.noise_psd_w_per_hz * 0.5e6 / system.fixed_gain
    assert p0 == pytest.approx(expected, rel=1e-12) and p0 < system.tx_power_w[0]
    d0 = next(row for row in rec.devices if row.device == 0)
    # alone on the band from 1.0 s (d1 still computes), so faster than its 1 s window: s / r(B, p0)
    air = bits / float(shannon_rate_bps(1e6, system.fixed_gain, p0, system.noise_psd_w_per_hz))
    assert d0.upload_airtime_s == pytest.approx(air, rel=1e-9) and d0.end_time_s <= 2.0
    assert d0.radio_energy_j == pytest.approx(p0 * air, rel=1e-9)  # p · t
    assert d0.rate_bps == pytest.approx(float(shannon_rate_bps(1e6, system.fixed_gain, p0,
                                                               system.noise_psd_w_per_hz)), rel=1e-12)
    d1 = next(row for row in rec.devices if row.device == 1)
    assert d1.radio_energy_j == pytest.approx(system.tx_power_w[1] * d1.upload_airtime_s, rel=1e-9)


def test_async_frequency_plans_resume_to_the_same_records():
    def make():
        return async_sim([1e9, 0.4e9, 0.7e9], "fedbuff", AsyncConfig(concurrency=2, buffer_size=2), rounds=6,
                         resources=ResourcesConfig(cpu_freq="min_energy", scheduling="fastest"), deadline_s=2.0)

    full = make().run()
    first = make()
    first.run(3)
    again = make()
    again.load_state_dict(first.state_dict())
    again.backend.load_state_dict(first.backend.state_dict())
    assert again.run() == full[3:]


# --------------------------------------------------------------------------- the ranking is followed


class IgnoresRanking:
    """The parametric backend, but drawing its devices uniformly whatever the scheduling policy ranks."""

    def __init__(self, inner):
        self.inner = inner

    def plan_round(self, view):
        return self.inner.plan_round(dataclasses.replace(view, schedule=None))

    def complete_round(self, outcome):
        return self.inner.complete_round(outcome)

    def expected_work(self):
        return self.inner.expected_work()


def test_a_plan_that_ignores_the_scheduling_ranking_is_one_clear_error():
    system = SystemConfig(n_devices=6, bandwidth_hz=1e6, channel_gain_db=-110.0,
                          cpu_freq_hz=[5e8, 6e8, 7e8, 8e8, 9e8, 1e9])
    budget = BudgetConfig(total_time_s=40.0, rounds=3)
    workload = WorkloadConfig(samples_per_device=100, model_bits=1e6)
    resources = ResourcesConfig(scheduling="fastest")
    ok = Simulation(system, budget, ParametricBackend(6, 2, workload), resources=resources).run()
    assert all(set(r.arrived) == {4, 5} for r in ok)  # the fastest two, as ranked
    sim = Simulation(system, budget, IgnoresRanking(ParametricBackend(6, 2, workload)), resources=resources)
    with pytest.raises(ConfigError, match=r"\[resources\] scheduling = 'fastest': round 0: the plan takes devices "
                                          r"\[.*\] outside the first 2 of the policy's ranking \[5, 4\]; expected an "
                                          r"algorithm that takes its devices from SystemView.schedule") as info:
        sim.run()
    assert "\n" not in str(info.value) and info.value.key == "scheduling"
    # without a policy (no ranking) the uniform draw is the algorithm's own
    assert len(Simulation(system, budget, IgnoresRanking(ParametricBackend(6, 2, workload))).run()) == 3


def test_listeners_are_free_of_the_ranking():
    from edgesim.backend import DeviceWork

    class WithListener(IgnoresRanking):
        def plan_round(self, view):
            plan = self.inner.plan_round(view)
            taken = {w.device for w in plan.work}
            extra = next(d for d in range(view.n_devices) if d not in taken)
            return dataclasses.replace(plan, work=(*plan.work, DeviceWork(extra, {}, 0.0, 1e5)))

    system = SystemConfig(n_devices=6, bandwidth_hz=1e6, channel_gain_db=-110.0,
                          cpu_freq_hz=[5e8, 6e8, 7e8, 8e8, 9e8, 1e9], downlink_rate_bps=1e7)
    sim = Simulation(system, BudgetConfig(total_time_s=40.0, rounds=2),
                     WithListener(ParametricBackend(6, 2, WorkloadConfig(samples_per_device=100, model_bits=1e6))),
                     resources=ResourcesConfig(scheduling="fastest"))
    assert len(sim.run()) == 2 and not math.isnan(np.mean([r.duration_s for r in sim.records]))


def test_edgesim_plan_shows_the_first_aggregations_planned_updates():
    from edgesim.planning import first_round_allocation

    system, workload = cell([1e9, 0.4e9])
    rows = first_round_allocation(system, BudgetConfig(rounds=2, round_mode="fedasync", deadline_s=2.0), workload,
                                  ResourcesConfig(cpu_freq="min_energy"), clients_per_round=2)
    assert [(r["device"], r["arrived"]) for r in rows] == [(0, True)]  # d0 arrives first, at 2.0 s
    assert rows[0]["cpu_freq_hz"] == pytest.approx(0.625e9, rel=1e-12) and rows[0]["compute_s"] == pytest.approx(1.6)
