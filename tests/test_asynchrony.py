"""FedAsync and FedBuff on the event clock (edgesim.asynchrony): formulas, hand-computed timelines, the
FedBuff ≡ synchronous FedAvg property, lost work, checkpoints."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesim.asynchrony import (
    AsyncConfig,
    AsyncSimulation,
    check_async_resources,
    fedasync_mixing_weight,
    hinge_staleness,
    polynomial_staleness,
    staleness_weight,
)
from edgesim.availability import Availability
from edgesim.backend import DeviceLoss
from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation
from edgesim.radio import shannon_rate_bps
from edgesim.resources import POLICIES, ResourcesConfig, register_policy
from edgesim.resources.scheduling import STREAM_SCHEDULE

UPLOAD_S = 0.4  # every hand-computed timeline below uploads for 0.4 s on the whole band (TDMA)


# --------------------------------------------------------------------------- formulas


def test_polynomial_staleness_hand_values():
    assert polynomial_staleness(0, 0.5) == 1.0
    assert polynomial_staleness(3, 0.5) == pytest.approx(0.5)  # (3 + 1)^-0.5
    assert polynomial_staleness(8, 1.0 / 3.0) == pytest.approx(1 / 9 ** (1 / 3))
    assert polynomial_staleness(7, 0.0) == 1.0  # a = 0: no discount (limit)


def test_hinge_staleness_hand_values():
    assert hinge_staleness(4, 1.0, 4.0) == 1.0  # at the hinge: still 1
    assert hinge_staleness(6, 1.0, 4.0) == pytest.approx(1 / 3)  # 1 / (1 * (6 - 4) + 1)
    assert hinge_staleness(6, 0.5, 2.0) == pytest.approx(1 / 3)  # 1 / (0.5 * 4 + 1)


@given(st.integers(0, 10_000), st.floats(0, 5), st.floats(0, 50), st.sampled_from(["constant", "polynomial", "hinge"]))
def test_staleness_weights_are_in_0_1_and_never_grow_with_staleness(tau, a, b, fn):
    w, w_next = staleness_weight(fn, tau, a, b), staleness_weight(fn, tau + 1, a, b)
    assert 0 < w <= 1 and w_next <= w
    assert staleness_weight(fn, 0, a, b) == 1.0  # a fresh update is never discounted


def test_fedasync_mixing_weight_and_bad_input():
    assert fedasync_mixing_weight(0.6, 0.5) == pytest.approx(0.3)
    for bad in ((0.0, 1.0), (1.5, 1.0), (0.5, -0.1), (0.5, float("nan"))):
        with pytest.raises(ValueError):
            fedasync_mixing_weight(*bad)
    with pytest.raises(ValueError, match="staleness"):
        staleness_weight("polynomial", -1)


def test_async_config_checks():
    with pytest.raises(ValueError, match="alpha"):
        AsyncConfig(alpha=1.5)
    with pytest.raises(ValueError, match="staleness"):
        AsyncConfig(staleness="exponential")
    with pytest.raises(ValueError, match="buffer_size"):
        AsyncConfig(buffer_size=0)


# --------------------------------------------------------------------------- hand-computed timelines


def cell(cpu_freq_hz, access="tdma"):
    system = SystemConfig(n_devices=len(cpu_freq_hz), bandwidth_hz=1e6, tx_power_dbm=23.0, channel_gain_db=-110.0,
                          cpu_freq_hz=list(cpu_freq_hz), access=access)
    rate = float(shannon_rate_bps(1e6, system.fixed_gain, system.tx_power_w[0], system.noise_psd_w_per_hz))
    workload = WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=1000,
                              model_bits=UPLOAD_S * rate)  # 1e9 cycles, 0.4 s on air
    return system, workload


def async_sim(cpu_freq_hz, mode, cfg, rounds=10, availability=None, access="tdma", resources=None, deadline_s=None):
    system, workload = cell(cpu_freq_hz, access)
    n = len(cpu_freq_hz)
    return AsyncSimulation(system, BudgetConfig(rounds=rounds, round_mode=mode, deadline_s=deadline_s),
                           ParametricBackend(n, n, workload), cfg, seed=0, availability=availability,
                           resources=resources)


def rederive_clock(records):
    """Every update's end from its own row (start + download + compute + queue + airtime), and every aggregation's
    time as the last arrival it took in: the clock from the run's outputs alone."""
    for rec in records:
        for row in rec.devices:
            assert row.end_time_s == pytest.approx(
                row.start_time_s + row.download_s + row.compute_s + row.idle_s + row.upload_airtime_s, abs=1e-9)
        arrivals = [row.end_time_s for row in rec.devices if row.arrived]
        assert rec.end_time_s == pytest.approx(max(arrivals), abs=1e-12)


def timeline(records):
    return [(round(r.end_time_s, 9), r.arrived, [row.staleness for row in r.devices if row.arrived]) for r in records]


def test_fedasync_two_devices_by_hand():
    # Compute 1 s and 2.5 s, uploads 0.4 s on one TDMA band, both devices training at once:
    # d0 1.0-1.4 up -> agg 0 (stale 0); again from v1: 1.4-2.4, up 2.4-2.8 -> agg 1 (stale 0);
    # d1 computes to 2.5, waits for the band to 2.8, up 2.8-3.2 -> agg 2 (started v0, server v2: stale 2);
    # d0 from v2: 2.8-3.8, up 3.8-4.2 -> agg 3 (stale 1).
    sim = async_sim([1e9, 0.4e9], "fedasync", AsyncConfig(concurrency=2, alpha=0.6), rounds=4)
    recs = sim.run()
    assert timeline(recs) == [(1.4, (0,), [0]), (2.8, (0,), [0]), (3.2, (1,), [2]), (4.2, (0,), [1])]
    d1 = recs[2].devices[0]
    assert (d1.version, d1.idle_s) == (0, pytest.approx(0.3))  # queued 2.5-2.8 for the band
    # FedAsync's mixing weights: alpha * (staleness + 1)^-0.5
    weights = [fedasync_mixing_weight(0.6, AsyncConfig().weight(r.devices[-1].staleness)) for r in recs]
    assert weights == pytest.approx([0.6, 0.6, 0.6 / math.sqrt(3), 0.6 / math.sqrt(2)])
    assert [r.info["version"] for r in recs] == [1, 2, 3, 4]
    rederive_clock(recs)


def test_fedbuff_two_devices_by_hand():
    # Same devices, K = 2: d0 arrives at 1.4 (v0) and starts again from v0 (no flush yet): 1.4-2.4, up 2.4-2.8;
    # that second arrival fills the buffer -> flush 0 at 2.8 (d0 twice, stale 0, 0); d1 (v0) arrives at 3.2, stale 1;
    # d0 from v1: 2.8-3.8, up 3.8-4.2, stale 0 -> flush 1 at 4.2.
    sim = async_sim([1e9, 0.4e9], "fedbuff", AsyncConfig(concurrency=2, buffer_size=2), rounds=2)
    recs = sim.run()
    assert timeline(recs) == [(2.8, (0, 0), [0, 0]), (4.2, (1, 0), [1, 0])]
    assert [row.version for row in recs[1].devices] == [0, 1]
    assert recs[0].start_time_s == 0.0 and recs[1].start_time_s == pytest.approx(2.8)
    rederive_clock(recs)


def test_fedasync_three_devices_by_hand_with_hinge():
    # Compute 1, 2.5 and 4 s, 0.4 s uploads, all three at once; hinge a = 1, b = 2.
    sim = async_sim([1e9, 0.4e9, 0.25e9], "fedasync",
                    AsyncConfig(concurrency=3, staleness="hinge", staleness_a=1.0, staleness_b=2.0), rounds=7)
    recs = sim.run()
    assert timeline(recs) == [
        (1.4, (0,), [0]),  # d0 v0
        (2.8, (0,), [0]),  # d0 v1 (1.4-2.4, up 2.4-2.8)
        (3.2, (1,), [2]),  # d1 v0 (to 2.5, queued to 2.8)
        (4.2, (0,), [1]),  # d0 v2 (2.8-3.8, up 3.8-4.2)
        (4.6, (2,), [4]),  # d2 v0 (to 4.0, queued to 4.2)
        (5.6, (0,), [1]),  # d0 v4 (4.2-5.2)
        (6.1, (1,), [3]),  # d1 v3 (3.2-5.7, up 5.7-6.1)
    ]
    cfg = sim.cfg
    assert [cfg.weight(s) for s in (0, 2, 3, 4)] == pytest.approx([1.0, 1.0, 1 / 2, 1 / 3])
    rederive_clock(recs)


def test_events_of_an_update_carry_its_model_version():
    sim = async_sim([1e9, 0.4e9], "fedasync", AsyncConfig(concurrency=2), rounds=4)
    sim.run()
    kinds = [(e.device, e.kind, e.round_index) for e in sim.events if e.device == 1]
    assert kinds[:3] == [(1, "compute_start", 0), (1, "compute_end", 0), (1, "upload_start", 0)]
    assert [e.round_index for e in sim.events if e.kind == "aggregate"] == [0, 1, 2, 3]


# --------------------------------------------------------------------------- a free slot by the scheduling policy


def starts(records):
    """The devices in update (start) order, from the run's rows."""
    return [row.device for row in sorted((row for r in records for row in r.devices), key=lambda row: row.update)]


def test_fastest_fills_each_free_slot_with_the_quickest_idle_device_by_hand():
    # Compute 1, 2.5 and 4 s, 0.4 s uploads (predicted 1.4, 2.9, 4.4 s), two slots. At 0: d0, then d1 (d0 busy).
    # d0 arrives at 1.4 and is the quickest idle device again (d2 never is): the two-device timeline exactly —
    # d0 1.4-2.4, up 2.4-2.8; d1 queued 2.5-2.8, up 2.8-3.2 (v0 at v2); d0 from v2 2.8-3.8, up 3.8-4.2 (stale 1);
    # at 3.2 d1 (idle: d1, d2) from v3: 3.2-5.7, up 5.7-6.1; d0 from v4 4.2-5.2, up 5.2-5.6 (stale 0);
    # d1 arrives at 6.1 at v5 (stale 2).
    sim = async_sim([1e9, 0.4e9, 0.25e9], "fedasync", AsyncConfig(concurrency=2), rounds=6,
                    resources=ResourcesConfig(scheduling="fastest"))
    recs = sim.run()
    assert timeline(recs) == [(1.4, (0,), [0]), (2.8, (0,), [0]), (3.2, (1,), [2]), (4.2, (0,), [1]),
                              (5.6, (0,), [0]), (6.1, (1,), [2])]
    assert 2 not in starts(recs)
    rederive_clock(recs)


def test_age_fills_each_free_slot_with_the_device_longest_since_it_started_by_hand():
    # Same devices, two slots, "age": never started first (ties by the update's common random numbers), then the
    # one whose last start is the oldest. Seed 0's numbers rank d2 first for update 0 and d0 before d1 for update 1.
    first = [np.argsort(np.random.default_rng((0, i, STREAM_SCHEDULE)).random(3)).tolist() for i in (0, 1)]
    assert first[0][0] == 2 and first[1].index(0) < first[1].index(1)
    # d2 (u0, v0) computes 0-4; d0 (u1, v0) 0-1, up 1.0-1.4 -> agg 0. Free: d1 never started -> d1 (u2, v1)
    # 1.4-3.9, up 3.9-4.3 -> agg 1 (stale 0); d2 queued 4.0-4.3, up 4.3-4.7. At 4.3 idle d0 (started u1), d1
    # (u2): d0 (u3, v2) 4.3-5.3, up 5.3-5.7. d2 arrives 4.7 -> agg 2 (v0 at v2: stale 2); idle d1 (u2), d2 (u0):
    # d2 (u4, v3) 4.7-8.7. d0 arrives 5.7 -> agg 3 (stale 1); idle d0 (u3), d1 (u2): d1 (u5, v4) 5.7-8.2,
    # up 8.2-8.6 -> agg 4 (stale 0); idle d0 (u3), d1 (u5): d0 (u6, v5) 8.6-9.6, up 9.6-10.0. d2, ready at 8.7
    # on a free band, up 8.7-9.1 -> agg 5 (v3 at v5: stale 2); d0 -> agg 6 at 10.0 (v5 at v6: stale 1).
    sim = async_sim([1e9, 0.4e9, 0.25e9], "fedasync", AsyncConfig(concurrency=2), rounds=7,
                    resources=ResourcesConfig(scheduling="age"))
    recs = sim.run()
    assert timeline(recs) == [(1.4, (0,), [0]), (4.3, (1,), [0]), (4.7, (2,), [2]), (5.7, (0,), [1]),
                              (8.6, (1,), [0]), (9.1, (2,), [2]), (10.0, (0,), [1])]
    assert starts(recs)[:7] == [2, 0, 1, 0, 2, 1, 0]
    rederive_clock(recs)


def test_the_random_policy_is_the_uniform_draw_and_a_policy_changes_only_who_starts():
    plain = async_sim([1e9, 0.4e9, 0.25e9, 0.8e9], "fedbuff", AsyncConfig(concurrency=2, buffer_size=2), rounds=12)
    default = async_sim([1e9, 0.4e9, 0.25e9, 0.8e9], "fedbuff", AsyncConfig(concurrency=2, buffer_size=2),
                        rounds=12, resources=ResourcesConfig())
    assert plain.run() == default.run() and plain.events == default.events


@pytest.mark.parametrize("policy", ["round_robin", "best_channel", "fastest", "deadline_feasible", "age", "oort"])
def test_offline_devices_are_never_chosen_by_a_policy_and_runs_repeat(policy):
    def run():
        system, workload = cell([2e9, 0.8e9, 1.2e9, 0.5e9, 1.5e9], access="fdma")
        avail = Availability(5, markov=(3.0, 2.0, 7))
        sim = AsyncSimulation(system, BudgetConfig(rounds=150, round_mode="fedasync", deadline_s=3.0),
                              ParametricBackend(5, 5, workload), AsyncConfig(concurrency=3), seed=2,
                              availability=avail, resources=ResourcesConfig(scheduling=policy))
        return sim, avail, sim.run()

    _, avail, recs = run()
    rows = [row for r in recs for row in r.devices]
    assert len(recs) == 150
    for row in rows:
        assert avail.online(row.device, row.start_time_s)
    for d in range(5):  # a device trains one update at a time
        spans = sorted((row.start_time_s, row.end_time_s) for row in rows if row.device == d)
        assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))
    again = run()[2]
    assert again == recs  # determinism: same scenario and seed, same records
    rederive_clock(recs)


def test_a_policy_that_ranks_no_idle_device_leaves_the_slot_waiting():
    # deadline_feasible with tau = 2 s: only d0 (1.4 s) is feasible; two slots, but one device ever trains.
    sim = async_sim([1e9, 0.4e9, 0.25e9], "fedasync", AsyncConfig(concurrency=2), rounds=3,
                    resources=ResourcesConfig(scheduling="deadline_feasible"), deadline_s=2.0)
    recs = sim.run()
    assert timeline(recs) == [(1.4, (0,), [0]), (2.8, (0,), [0]), (4.2, (0,), [0])]


def test_a_plugin_policy_picks_free_slots_too():
    @register_policy("scheduling", "test_slowest_first")
    class Slowest:
        """The slowest CPU first (a test plugin)."""

        def allocate(self, v):
            return -v.cpu_freq_hz

    try:
        sim = async_sim([1e9, 0.4e9, 0.25e9], "fedasync", AsyncConfig(concurrency=1), rounds=2,
                        resources=ResourcesConfig(scheduling="test_slowest_first"))
        recs = sim.run()
    finally:  # the registry as before the test (a later test of this process lists the policies)
        POLICIES["scheduling"].pop("test_slowest_first")
    assert starts(recs) == [2, 2]  # d2 alone: compute 4 s, up 0.4 s, and again
    assert [r.end_time_s for r in recs] == pytest.approx([4.4, 8.8])


@pytest.mark.parametrize("mode", ["fedasync", "fedbuff"])
@pytest.mark.parametrize("policy", ["age", "oort"])
def test_resume_with_a_policy_replays_to_identical_records(mode, policy):
    def make():
        system, workload = cell([1e9, 0.8e9, 1.2e9, 0.5e9, 2e9], access="tdma")
        backend = ParametricBackend(5, 5, workload)
        return AsyncSimulation(system, BudgetConfig(rounds=40, round_mode=mode, deadline_s=2.0), backend,
                               AsyncConfig(concurrency=3, buffer_size=2), seed=3,
                               availability=Availability(5, markov=(3.0, 2.0, 3)),
                               resources=ResourcesConfig(scheduling=policy, bandwidth="shortest_first"))

    whole = make()
    full = whole.run()
    first = make()
    first.run(rounds=17)
    again = make()
    again.load_state_dict(first.state_dict())
    again.backend.load_state_dict(first.backend.state_dict())
    assert again.run() == full[17:]
    assert again.event_count == whole.event_count


def test_oort_utility_from_the_devices_losses_is_replayed_on_resume():
    class Reporting(ParametricBackend):
        """Reports made-up loss statistics of the devices it trained (as a learning backend's device_losses())."""

        def aggregate(self, aggregation):
            self.trained = {a.device: DeviceLoss(float((a.update * 7919) % 13), 4) for a in aggregation.arrivals}
            return super().aggregate(aggregation)

        def device_losses(self):
            out, self.trained = self.trained, {}
            return out

    def make(backend=Reporting):
        system, workload = cell([1e9, 0.8e9, 1.2e9, 0.5e9, 2e9, 1.5e9, 0.7e9, 0.9e9], access="fdma")
        return AsyncSimulation(system, BudgetConfig(rounds=40, round_mode="fedasync", deadline_s=2.0),
                               backend(8, 8, workload), AsyncConfig(concurrency=4), seed=1,
                               resources=ResourcesConfig(scheduling="oort", oort_exploration=0.3))

    whole = make()
    full = whole.run()
    assert starts(make(ParametricBackend).run()) != starts(full)  # the utility steers Oort's picks
    first = make()
    first.run(rounds=23)
    state = first.state_dict()
    assert state["utility_log"]
    again = make()
    again.load_state_dict(state)
    again.backend.load_state_dict(first.backend.state_dict())
    assert again.run() == full[23:]


@pytest.mark.parametrize("table, match", [
    (dict(bandwidth="proportional"), r"bandwidth = 'proportional' does not apply to round_mode = 'fedbuff': its "
                                     r"bands are planned for one round's set of uploaders.*expected 'equal' or "
                                     r"'shortest_first'"),
    (dict(bandwidth="min_max_time"), r"bandwidth = 'min_max_time' does not apply"),
    (dict(power="min_energy"), r"power = 'min_energy' does not apply to round_mode = 'fedbuff'.*expected 'fixed'"),
    (dict(cpu_freq="min_energy"), r"cpu_freq = 'min_energy' does not apply.*expected 'max'"),
    (dict(scheduling="deadline_feasible"), r"scheduling = 'deadline_feasible' with round_mode = 'fedbuff' needs "
                                           r"\[budget\] deadline_s"),
    (dict(scheduling="oort"), r"scheduling = 'oort' with round_mode = 'fedbuff' needs \[budget\] deadline_s"),
])
def test_resources_that_plan_a_round_are_refused_in_one_line(table, match):
    with pytest.raises(ValueError, match=match) as info:
        check_async_resources(ResourcesConfig(**table), BudgetConfig(round_mode="fedbuff"))
    assert "\n" not in str(info.value)
    check_async_resources(ResourcesConfig(scheduling="age", bandwidth="shortest_first"),
                          BudgetConfig(round_mode="fedbuff"))
    check_async_resources(ResourcesConfig(scheduling="oort"), BudgetConfig(round_mode="fedasync", deadline_s=5.0))


# --------------------------------------------------------------------------- FedBuff reduces to synchronous rounds


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 6), cpu=st.floats(1e8, 3e9), bits_mult=st.floats(0.05, 5.0), rounds=st.integers(1, 4),
       down=st.floats(0, 1e6))
def test_fedbuff_with_equal_devices_and_k_equal_concurrency_is_sync_fedavg(n, cpu, bits_mult, rounds, down):
    """Equal devices (FDMA: their uploads end together), no churn, K = concurrency = N: the same rounds."""
    system = SystemConfig(n_devices=n, bandwidth_hz=1e6, tx_power_dbm=23.0, channel_gain_db=-110.0,
                          cpu_freq_hz=cpu, access="fdma", downlink_rate_bps=1e7)
    workload = WorkloadConfig(samples_per_device=500, model_bits=bits_mult * 1e6)
    sync = Simulation(system, BudgetConfig(rounds=rounds), ParametricBackend(n, n, workload, download_bits=down))
    buff = AsyncSimulation(system, BudgetConfig(rounds=rounds, round_mode="fedbuff"),
                           ParametricBackend(n, n, workload, download_bits=down),
                           AsyncConfig(concurrency=n, buffer_size=n))
    a, b = sync.run(), buff.run()
    assert [r.end_time_s for r in a] == [r.end_time_s for r in b]
    assert [r.start_time_s for r in a] == [r.start_time_s for r in b]
    assert [r.metrics for r in a] == [r.metrics for r in b]
    assert [sorted(r.arrived) for r in a] == [sorted(r.arrived) for r in b]
    for x, y in zip(a, b):
        assert y.info["staleness_max"] == 0
        assert y.cum_energy_j == pytest.approx(x.cum_energy_j, rel=1e-12)
        assert y.cum_bits_up == pytest.approx(x.cum_bits_up, rel=1e-12)
        assert y.cum_bits_down == pytest.approx(x.cum_bits_down, rel=1e-12)


# --------------------------------------------------------------------------- devices that come and go


def test_work_lost_mid_upload_is_wasted_bits_and_energy():
    # d0 online [0, 1.2): computes 0-1, goes on air at 1.0 and is cut at 1.2 after 0.2 of its 0.4 s upload.
    system, workload = cell([1e9, 0.4e9])
    avail = Availability(2, [[0.0, 1.2], [0.0]])
    sim = AsyncSimulation(system, BudgetConfig(rounds=1, round_mode="fedasync"), ParametricBackend(2, 2, workload),
                          AsyncConfig(concurrency=2), availability=avail)
    (rec,) = sim.run()
    lost = [row for row in rec.devices if row.dropped]
    assert len(lost) == 1
    row = lost[0]
    assert (row.device, row.drop_reason, row.staleness, row.arrived) == (0, "offline", -1, False)
    assert row.end_time_s == pytest.approx(1.2)
    assert row.wasted_bits == pytest.approx(workload.model_bits / 2)
    assert row.upload_airtime_s == pytest.approx(0.2)
    assert row.radio_energy_j == pytest.approx(system.tx_power_w[0] * 0.2)
    assert row.compute_energy_j == pytest.approx(system.kappa * 1e9 ** 2 * 1e9)
    assert rec.cum_wasted_bits == pytest.approx(workload.model_bits / 2)
    assert rec.arrived == (1,)  # d1 got the band at 1.2 when d0 dropped off... and finished its own upload
    assert [e.kind for e in sim.events if e.device == 0][-1] == "upload_dropped"
    # d0 never comes back: it is never drawn again
    sim.run(rounds=3)
    assert all(row.device == 1 for r in sim.records[1:] for row in r.devices)


def test_offline_devices_are_never_drawn_and_cut_work_ends_when_they_leave():
    system, workload = cell([1e9, 0.8e9, 1.2e9, 0.5e9, 2e9])
    avail = Availability(5, markov=(3.0, 2.0, 7))
    sim = AsyncSimulation(system, BudgetConfig(rounds=300, round_mode="fedasync"), ParametricBackend(5, 5, workload),
                          AsyncConfig(concurrency=3), availability=avail)
    recs = sim.run()
    rows = [row for r in recs for row in r.devices]
    assert len(rows) > 300 and any(row.drop_reason == "offline" for row in rows)
    for row in rows:
        assert avail.online(row.device, row.start_time_s)
        if row.dropped:
            assert row.end_time_s == avail.online_until_s(row.device, row.start_time_s)
        else:
            assert row.end_time_s <= avail.online_until_s(row.device, row.start_time_s)


def test_a_run_whose_devices_all_leave_for_good_ends():
    system, workload = cell([1e9, 0.4e9])
    avail = Availability(2, [[0.0, 5.0], []])
    sim = AsyncSimulation(system, BudgetConfig(rounds=50, round_mode="fedasync"), ParametricBackend(2, 2, workload),
                          AsyncConfig(concurrency=1), availability=avail)
    recs = sim.run()
    assert len(recs) == 3  # d0 only: arrivals at 1.4, 2.8, 4.2; cut at 5.0
    assert sim.run_round() is None


# --------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("mode", ["fedasync", "fedbuff"])
def test_resume_replays_the_clock_to_identical_records(mode):
    def make():
        system, workload = cell([1e9, 0.8e9, 1.2e9, 0.5e9, 2e9], access="fdma")
        return AsyncSimulation(system, BudgetConfig(rounds=40, round_mode=mode), ParametricBackend(5, 5, workload),
                               AsyncConfig(concurrency=3, buffer_size=2), seed=3,
                               availability=Availability(5, markov=(3.0, 2.0, 3)))

    whole = make()
    full = whole.run()
    first = make()
    first.run(rounds=17)
    state = first.state_dict()
    backend_state = first.backend.state_dict()
    again = make()
    again.load_state_dict(state)
    again.backend.load_state_dict(backend_state)
    rest = again.run()
    assert rest == full[17:]
    assert again.event_count == whole.event_count
    events_after = [e for e in whole.events if e.time_s > state["now_s"]]
    assert [e for e in again.events if e.time_s > state["now_s"]] == events_after


def test_resume_refuses_a_changed_scenario():
    system, workload = cell([1e9, 0.4e9])
    sim = AsyncSimulation(system, BudgetConfig(rounds=5, round_mode="fedasync"), ParametricBackend(2, 2, workload),
                          AsyncConfig(concurrency=2))
    sim.run()
    state = sim.state_dict()
    system2, _ = cell([1e9, 0.5e9])
    other = AsyncSimulation(system2, BudgetConfig(rounds=5, round_mode="fedasync"), ParametricBackend(2, 2, workload),
                            AsyncConfig(concurrency=2))
    with pytest.raises(ValueError, match="changed"):
        other.load_state_dict(state)


def test_the_round_engine_refuses_an_asynchronous_mode():
    system, workload = cell([1e9])
    with pytest.raises(ValueError, match="AsyncSimulation"):
        Simulation(system, BudgetConfig(round_mode="fedbuff"), ParametricBackend(1, 1, workload))
