"""The SimPy engine: round timing (Eqs. (23)+(24)), TDMA FIFO, FDMA processor sharing, deadlines,
downlink, energy, determinism and checkpoint/resume.

Most scenarios use a fixed channel whose full-band SNR is 3, so that the
full-band rate is r_full = b·log2(1 + 3) = 2 Mbit/s for b = 1 MHz, and the
half-band FDMA rate is r_half = (b/2)·log2(1 + 2·3) = 0.5e6·log2(7) bit/s.
"""

import json
import math

import numpy as np
import pytest

from edgesim.access import make_uplink
from edgesim.backend import DeviceWork, RoundPlan
from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import EVENT_KINDS, Event, Simulation
from edgesim.links import FdmaUplink, TdmaUplink
from edgesim.radio import shannon_rate_bps, shared_uplink_time_s
from edgesim.units import dbm_to_w

B_HZ = 1e6
P_DBM = 23.0
# SNR = g·p/(N0·b) = 3  ⇔  g_dB = 10·log10(3) − (N0_dBm/Hz + 10·log10 b) + ... − p_dBm
GAIN_DB_SNR3 = 10 * math.log10(3.0) + (-174.0 + 10 * math.log10(B_HZ)) - P_DBM
R_FULL = 2e6  # bit/s, b·log2(4)
R_HALF = 0.5e6 * math.log2(7.0)  # bit/s, (b/2)·log2(1 + 2·3)
CYCLES = 5e8  # 0.5 s at 1 GHz
KAPPA = 1e-28


def system(n=4, **kw):
    base = dict(n_devices=n, bandwidth_hz=B_HZ, tx_power_dbm=P_DBM, channel_gain_db=GAIN_DB_SNR3, cpu_freq_hz=1e9,
                kappa=KAPPA)
    base.update(kw)
    return SystemConfig(**base)


def budget(**kw):
    base = dict(total_time_s=100.0, rounds=10)
    base.update(kw)
    return BudgetConfig(**base)


class ScriptedBackend:
    """Every round: the given work; remembers the views and outcomes it saw."""

    def __init__(self, work):
        self.work = tuple(work)
        self.views, self.outcomes = [], []

    def plan_round(self, view):
        self.views.append(view)
        return RoundPlan(self.work, {"K": len(self.work)})

    def complete_round(self, outcome):
        self.outcomes.append(outcome)
        return {"arrived": len(outcome.arrived)}


def work(device, bits=1e6, cycles=CYCLES, download_bits=0.0):
    return DeviceWork(device, {"train": cycles}, bits, download_bits)


def log(sim, kinds=None):
    return [(e.device, e.kind, e.time_s) for e in sim.events if kinds is None or e.kind in kinds]


def approx_log(expected):
    return [(d, k, pytest.approx(t, rel=1e-9, abs=1e-12)) for d, k, t in expected]


# -- the channel at SNR 3 is what the test numbers assume ---------------------------------------------------------


def test_scenario_rates():
    s = system()
    g, p, n0 = s.fixed_gain, dbm_to_w(P_DBM), s.noise_psd_w_per_hz
    assert shannon_rate_bps(B_HZ, g, p, n0) == pytest.approx(R_FULL, rel=1e-12)
    assert shannon_rate_bps(B_HZ / 2, g, p, n0) == pytest.approx(R_HALF, rel=1e-12)


# -- TDMA --------------------------------------------------------------------------------------------------------


def test_tdma_round_of_identical_devices_lasts_eq_23_plus_24():
    # K = 4 identical devices: compute 5e8 cycles / 1e9 Hz = 0.5 s (Eq. 23),
    # then 4 sequential uploads of 1 Mbit at 2 Mbit/s = 4 · 0.5 s = 2.0 s (Eq. 24): 2.5 s in all.
    backend = ScriptedBackend([work(d) for d in range(4)])
    sim = Simulation(system(n=6), budget(), backend)
    record = sim.run_round()
    assert record.duration_s == pytest.approx(2.5, rel=1e-12)
    s = system()
    eq24 = shared_uplink_time_s(4, 1e6, B_HZ, s.fixed_gain, dbm_to_w(P_DBM), s.noise_psd_w_per_hz)
    assert record.duration_s == pytest.approx(0.5 + eq24, rel=1e-12)
    assert record.arrived == (0, 1, 2, 3) and record.dropped == ()
    assert log(sim, {"upload_start", "upload_end"}) == approx_log([
        (0, "upload_start", 0.5), (0, "upload_end", 1.0),
        (1, "upload_start", 1.0), (1, "upload_end", 1.5),
        (2, "upload_start", 1.5), (2, "upload_end", 2.0),
        (3, "upload_start", 2.0), (3, "upload_end", 2.5),
    ])
    assert record.bits_up == 4e6 and record.wasted_bits == 0.0
    # Device 3 queued for the band from 0.5 s to 2.0 s: that is idle time.
    rows = {row.device: row for row in record.devices}
    assert rows[3].idle_s == pytest.approx(1.5, rel=1e-12)
    assert rows[0].idle_s == pytest.approx(1.5, rel=1e-12)  # waits for the others after its upload
    for row in record.devices:
        assert row.compute_s == pytest.approx(0.5) and row.upload_airtime_s == pytest.approx(0.5)
        assert row.download_s + row.compute_s + row.upload_airtime_s + row.idle_s == pytest.approx(2.5)


def test_tdma_is_fifo_in_order_of_compute_completion():
    # CPUs 1, 2, 4 GHz: compute ends at 0.5, 0.25, 0.125 s; each upload takes 0.5 s.
    # Device 2 uploads 0.125–0.625, device 1 (queued at 0.25) 0.625–1.125, device 0 (queued at 0.5) 1.125–1.625.
    backend = ScriptedBackend([work(0), work(1), work(2)])
    sim = Simulation(system(n=3, cpu_freq_hz=[1e9, 2e9, 4e9]), budget(), backend)
    record = sim.run_round()
    assert log(sim, {"compute_end", "upload_start", "upload_end"}) == approx_log([
        (2, "compute_end", 0.125), (2, "upload_start", 0.125),
        (1, "compute_end", 0.25),
        (0, "compute_end", 0.5),
        (2, "upload_end", 0.625), (1, "upload_start", 0.625),
        (1, "upload_end", 1.125), (0, "upload_start", 1.125),
        (0, "upload_end", 1.625),
    ])
    assert record.arrived == (2, 1, 0)
    assert backend.outcomes[0].arrived == (2, 1, 0)
    assert backend.outcomes[0].upload_end_s == pytest.approx({2: 0.625, 1: 1.125, 0: 1.625})
    assert backend.outcomes[0].compute_end_s == pytest.approx({2: 0.125, 1: 0.25, 0: 0.5})
    rows = {row.device: row for row in record.devices}
    assert rows[0].idle_s == pytest.approx(1.625 - 0.5 - 0.5)  # 0.625 s queued for the band


# -- FDMA --------------------------------------------------------------------------------------------------------


def test_fdma_processor_sharing_two_devices_hand_computed():
    # Identical gains, A = 1 Mbit, B = 3 Mbit, both on air at 0.5 s.
    # Both at r_half = 0.5e6·log2(7) ≈ 1.4037 Mbit/s until A is done: t_A = 1e6 / r_half = 2/log2(7) ≈ 0.71241 s.
    # B has then sent 1 Mbit as well; its last 2 Mbit go alone at r_full = 2 Mbit/s: 1.0 s more.
    backend = ScriptedBackend([work(0, bits=1e6), work(1, bits=3e6)])
    sim = Simulation(system(n=2, access="fdma"), budget(), backend)
    record = sim.run_round()
    t_a = 1e6 / R_HALF
    assert t_a == pytest.approx(2 / math.log2(7))
    assert log(sim, {"upload_start", "upload_end"}) == approx_log([
        (0, "upload_start", 0.5), (1, "upload_start", 0.5),
        (0, "upload_end", 0.5 + t_a),
        (1, "upload_end", 0.5 + t_a + 2e6 / R_FULL),
    ])
    assert record.duration_s == pytest.approx(0.5 + 2 / math.log2(7) + 1.0, rel=1e-12)
    rows = {row.device: row for row in record.devices}
    assert rows[0].upload_airtime_s == pytest.approx(t_a)
    assert rows[1].upload_airtime_s == pytest.approx(t_a + 1.0)
    assert record.arrived == (0, 1)


def test_fdma_shares_recomputed_when_a_transfer_arrives():
    # A (3 Mbit, 2 GHz CPU) is on air at 0.25 s alone at 2 Mbit/s: by 0.5 s it has sent 0.5 Mbit, 2.5 left.
    # B (1 Mbit, 1 GHz) joins at 0.5 s: both at r_half; B is done after 1e6/r_half = 2/log2(7) s,
    # during which A also sends 1 Mbit: 1.5 Mbit left, alone at 2 Mbit/s → 0.75 s more.
    backend = ScriptedBackend([work(0, bits=3e6), work(1, bits=1e6)])
    sim = Simulation(system(n=2, access="fdma", cpu_freq_hz=[2e9, 1e9]), budget(), backend)
    sim.run_round()
    t_b = 2 / math.log2(7)
    assert log(sim, {"upload_start", "upload_end"}) == approx_log([
        (0, "upload_start", 0.25), (1, "upload_start", 0.5),
        (1, "upload_end", 0.5 + t_b),
        (0, "upload_end", 0.5 + t_b + 0.75),
    ])


def test_fdma_identical_devices_finish_together():
    # n identical transfers each at (b/n)·log2(1 + n·3): all done after n·m / (b·log2(1 + 3n)).
    n = 5
    sim = Simulation(system(n=n, access="fdma"), budget(), ScriptedBackend([work(d) for d in range(n)]))
    record = sim.run_round()
    expected = 0.5 + n * 1e6 / (B_HZ * math.log2(1 + 3 * n))
    ends = [t for d, k, t in log(sim, {"upload_end"})]
    assert ends == pytest.approx([expected] * n, rel=1e-12)
    assert record.arrived == tuple(range(n))


def test_single_transfer_fdma_equals_tdma():
    durations = []
    for access in ("tdma", "fdma"):
        sim = Simulation(system(n=1, access=access), budget(), ScriptedBackend([work(0, bits=7e6)]))
        durations.append(sim.run_round().duration_s)
    assert durations[0] == pytest.approx(0.5 + 3.5, rel=1e-12)
    assert durations[1] == pytest.approx(durations[0], rel=1e-12)


def test_make_uplink():
    import simpy

    env = simpy.Environment()
    assert isinstance(make_uplink(env, "tdma", 1e6, 1e-20), TdmaUplink)
    assert isinstance(make_uplink(env, "fdma", 1e6, 1e-20), FdmaUplink)
    with pytest.raises(ValueError, match="'cdma'"):
        make_uplink(env, "cdma", 1e6, 1e-20)


# -- deadlines ---------------------------------------------------------------------------------------------------


def test_deadline_drops_late_tdma_upload_and_counts_partial_bits_as_wasted():
    # Compute ends at 0.5 s; device 0 uploads 0.5–1.0 (arrives); device 1 gets the band at 1.0 s
    # and is cut at the 1.25 s deadline: 0.25 s · 2 Mbit/s = 0.5 Mbit wasted, radio energy p · 0.25 s.
    backend = ScriptedBackend([work(0), work(1)])
    sim = Simulation(system(n=2), budget(round_mode="deadline", deadline_s=1.25), backend)
    record = sim.run_round()
    assert record.end_time_s == pytest.approx(1.25)
    assert record.arrived == (0,) and record.dropped == (1,)
    assert backend.outcomes[0].dropped == (1,)
    assert record.wasted_bits == pytest.approx(0.5e6, rel=1e-9)
    assert record.bits_up == 1e6
    rows = {row.device: row for row in record.devices}
    assert rows[1].dropped and not rows[1].arrived
    assert rows[1].upload_airtime_s == pytest.approx(0.25)
    assert rows[1].radio_energy_j == pytest.approx(dbm_to_w(P_DBM) * 0.25)
    assert rows[1].bits_up == 0.0 and rows[1].wasted_bits == pytest.approx(0.5e6)
    assert log(sim)[-2:] == approx_log([(1, "upload_dropped", 1.25), (-1, "round_end", 1.25)])
    assert sim.events[-2].bits == pytest.approx(0.5e6)
    # The band was released: the next round runs the same way.
    second = sim.run_round()
    assert second.duration_s == pytest.approx(1.25) and second.arrived == (0,)
    assert second.cum_wasted_bits == pytest.approx(1e6)


def test_deadline_drops_queued_devices_with_nothing_wasted():
    # Three devices, deadline 0.75: device 0 is on air (0.5 Mbit sent), devices 1 and 2 still queue.
    sim = Simulation(system(n=3), budget(round_mode="deadline", deadline_s=0.75),
                     ScriptedBackend([work(d) for d in range(3)]))
    record = sim.run_round()
    assert record.dropped == (0, 1, 2) and record.arrived == ()
    assert [row.wasted_bits for row in record.devices] == pytest.approx([0.5e6, 0.0, 0.0])
    assert [row.upload_airtime_s for row in record.devices] == pytest.approx([0.25, 0.0, 0.0])
    assert [row.idle_s for row in record.devices] == pytest.approx([0.0, 0.25, 0.25])


def test_work_ending_exactly_at_the_deadline_is_not_dropped():
    sync = Simulation(system(n=3), budget(), ScriptedBackend([work(d) for d in range(3)]))
    end = sync.run_round().end_time_s
    on_time = Simulation(system(n=3), budget(round_mode="deadline", deadline_s=end),
                         ScriptedBackend([work(d) for d in range(3)]))
    record = on_time.run_round()
    assert record.arrived == (0, 1, 2) and record.dropped == ()
    assert record.end_time_s == end
    late = Simulation(system(n=3), budget(round_mode="deadline", deadline_s=end * (1 - 1e-9)),
                      ScriptedBackend([work(d) for d in range(3)]))
    assert late.run_round().dropped == (2,)


def test_deadline_during_compute_counts_only_executed_cycles():
    # Deadline 0.3 s < 0.5 s of compute: 0.3 s · 1 GHz = 3e8 cycles executed, E = 1e-28 · (1e9)² · 3e8 = 0.03 J.
    sim = Simulation(system(n=2), budget(round_mode="deadline", deadline_s=0.3),
                     ScriptedBackend([work(0), work(1)]))
    record = sim.run_round()
    assert record.dropped == (0, 1) and record.arrived == ()
    assert record.compute_energy_j == pytest.approx(2 * 0.03, rel=1e-9)
    assert record.radio_energy_j == 0.0 and record.wasted_bits == 0.0
    assert all(row.compute_s == pytest.approx(0.3) for row in record.devices)
    assert {k for _, k, _ in log(sim)} == {"round_start", "compute_start", "upload_dropped", "round_end"}


def test_fdma_deadline_partial_bits():
    # Both share the band from 0.5 s; at the 1.0 s deadline each has sent 0.5 s · r_half.
    sim = Simulation(system(n=2, access="fdma"), budget(round_mode="deadline", deadline_s=1.0),
                     ScriptedBackend([work(0, bits=1e6), work(1, bits=3e6)]))
    record = sim.run_round()
    assert record.dropped == (0, 1)
    assert [row.wasted_bits for row in record.devices] == pytest.approx([0.5 * R_HALF] * 2, rel=1e-9)
    assert record.wasted_bits == pytest.approx(R_HALF, rel=1e-9)
    # The uplink is empty again: a sync round afterwards gives the hand-computed FDMA result.
    sim2 = Simulation(system(n=2, access="fdma"), budget(round_mode="deadline", deadline_s=10.0),
                      ScriptedBackend([work(0, bits=1e6), work(1, bits=3e6)]))
    sim2.run_round()
    assert sim.run_round().duration_s == pytest.approx(1.0)
    assert sim2.run_round().duration_s == pytest.approx(0.5 + 2 / math.log2(7) + 1.0)


def test_deadline_round_ends_early_when_all_done():
    sim = Simulation(system(n=2), budget(round_mode="deadline", deadline_s=50.0), ScriptedBackend([work(0), work(1)]))
    assert sim.run_round().duration_s == pytest.approx(1.5)
    assert sim.run_round().duration_s == pytest.approx(1.5)
    assert sim.now_s == pytest.approx(3.0)


# -- downlink ----------------------------------------------------------------------------------------------------


def test_downlink_on_adds_broadcast_time():
    # 0.5 Mbit at 1 Mbit/s: 0.5 s before compute, all devices in parallel; then 0.5 s compute, 2 × 0.5 s uploads.
    backend = ScriptedBackend([work(0, download_bits=5e5), work(1, download_bits=5e5)])
    sim = Simulation(system(n=2, downlink_rate_bps=1e6), budget(), backend)
    record = sim.run_round()
    assert record.duration_s == pytest.approx(0.5 + 0.5 + 1.0)
    assert record.bits_down == 1e6 and record.cum_bits_down == 1e6
    assert log(sim, {"download_start", "download_end", "compute_start"}) == approx_log([
        (0, "download_start", 0.0), (1, "download_start", 0.0),
        (0, "download_end", 0.5), (0, "compute_start", 0.5),
        (1, "download_end", 0.5), (1, "compute_start", 0.5),
    ])
    assert all(row.download_s == pytest.approx(0.5) for row in record.devices)


def test_downlink_off_is_instantaneous_but_counted():
    backend = ScriptedBackend([work(0, download_bits=5e5), work(1, download_bits=5e5)])
    sim = Simulation(system(n=2), budget(), backend)
    record = sim.run_round()
    assert record.duration_s == pytest.approx(1.5)
    assert record.bits_down == 1e6
    assert all(row.download_s == 0.0 for row in record.devices)
    assert log(sim, {"download_start", "download_end"}) == [
        (0, "download_start", 0.0), (0, "download_end", 0.0), (1, "download_start", 0.0), (1, "download_end", 0.0)]


def test_deadline_during_download_counts_received_bits():
    sim = Simulation(system(n=1, downlink_rate_bps=1e6), budget(round_mode="deadline", deadline_s=0.25),
                     ScriptedBackend([work(0, download_bits=5e5)]))
    record = sim.run_round()
    assert record.dropped == (0,)
    assert record.bits_down == pytest.approx(2.5e5)
    assert record.devices[0].download_s == pytest.approx(0.25) and record.compute_energy_j == 0.0


# -- energy and counters -----------------------------------------------------------------------------------------


def test_energy_accounting():
    # Device d: 5e8 cycles at f_d → kappa·f_d²·5e8 J; upload of m_d bits at 2 Mbit/s → p·m_d/2e6 J.
    freqs = [1e9, 2e9]
    bits = [1e6, 4e6]
    backend = ScriptedBackend([work(0, bits=bits[0]), work(1, bits=bits[1])])
    sim = Simulation(system(n=2, cpu_freq_hz=freqs), budget(), backend)
    p = dbm_to_w(P_DBM)
    r1, r2 = sim.run_round(), sim.run_round()
    for rec in (r1, r2):
        for row in rec.devices:
            assert row.compute_energy_j == pytest.approx(KAPPA * freqs[row.device] ** 2 * CYCLES, rel=1e-12)
            assert row.radio_energy_j == pytest.approx(p * bits[row.device] / R_FULL, rel=1e-9)
        assert rec.compute_energy_j == pytest.approx(KAPPA * CYCLES * (1e18 + 4e18))  # 0.05 + 0.2 J
        assert rec.radio_energy_j == pytest.approx(p * 5e6 / R_FULL, rel=1e-9)
    total = sum(rec.radio_energy_j + rec.compute_energy_j for rec in (r1, r2))
    assert r2.cum_energy_j == pytest.approx(total, rel=1e-12)
    assert r2.cum_bits_up == 10e6 and r1.cum_bits_up == 5e6


def test_system_view_contents():
    backend = ScriptedBackend([work(0)])
    s = SystemConfig(n_devices=3, shadowing_std_db=4.0, rayleigh_fading=True, cpu_freq_hz=[1e9, 2e9, 3e9],
                     tx_power_dbm=[20.0, 23.0, 26.0])
    sim = Simulation(s, budget(total_time_s=50.0, rounds=10), backend, seed=4)
    sim.run_round()
    sim.run_round()
    v0, v1 = backend.views
    assert (v0.round_index, v1.round_index) == (0, 1)
    assert v0.start_time_s == 0.0 and v1.start_time_s == pytest.approx(sim.records[0].end_time_s)
    assert v0.round_budget_s == 5.0 and v0.access == "tdma" and v0.n_devices == 3
    assert v0.cpu_freq_hz == (1e9, 2e9, 3e9)
    assert v0.tx_power_w == pytest.approx((0.1, dbm_to_w(23.0), dbm_to_w(26.0)))
    assert v0.channel_gain == tuple(sim.channel.gains(0))
    for g, p, r in zip(v0.channel_gain, v0.tx_power_w, v0.uplink_rate_bps):
        assert r == pytest.approx(shannon_rate_bps(s.bandwidth_hz, g, p, s.noise_psd_w_per_hz), rel=1e-12)
    assert v0.channel_gain != v1.channel_gain  # fading is drawn per round


def test_events_and_records_shapes():
    sim = Simulation(system(n=3, cpu_freq_hz=[1e9, 2e9, 4e9]), budget(), ScriptedBackend([work(2), work(0)]))
    sim.run(rounds=2)
    times = [e.time_s for e in sim.events]
    assert times == sorted(times)
    assert {e.kind for e in sim.events} <= set(EVENT_KINDS)
    assert [e.kind for e in sim.events if e.device == -1] == ["round_start", "round_end"] * 2
    assert all(isinstance(e, Event) for e in sim.events)
    record = sim.records[1]
    assert [row.device for row in record.devices] == [0, 2]  # by device id
    assert record.info == {"K": 2.0} and record.metrics == {"arrived": 2.0}
    assert record.start_time_s == sim.records[0].end_time_s
    assert sim.event_count == len(sim.events)


def test_plan_is_validated():
    for bad_work, match in [
        ([work(0), work(0)], "appears twice"),
        ([work(5)], r"device\(=5\)"),
        ([DeviceWork(0, {"train": -1.0}, 1e6)], "compute_cycles"),
        ([DeviceWork(0, {"train": 1.0}, -1.0)], "upload_bits"),
    ]:
        with pytest.raises(ValueError, match=match):
            Simulation(system(n=2), budget(), ScriptedBackend(bad_work)).run_round()


def test_empty_plan_and_compute_only_devices():
    sim = Simulation(system(n=2), budget(), ScriptedBackend([]))
    assert sim.run_round().duration_s == 0.0
    sim = Simulation(system(n=2), budget(), ScriptedBackend([work(0, bits=0.0), work(1, bits=0.0)]))
    record = sim.run_round()
    assert record.duration_s == pytest.approx(0.5) and record.arrived == () and record.dropped == ()
    assert record.bits_up == 0.0 and record.radio_energy_j == 0.0


# -- runs, determinism, checkpoints ------------------------------------------------------------------------------


def rich_sim(access="fdma", seed=2):
    s = SystemConfig(n_devices=12, access=access, shadowing_std_db=6.0, rayleigh_fading=True,
                     mobility="random_waypoint", speed_m_per_s=3.0, cpu_freq_hz=[1e9 + 1e8 * i for i in range(12)],
                     downlink_rate_bps=5e7)
    b = BudgetConfig(total_time_s=80.0, rounds=8, round_mode="deadline", deadline_s=12.0)
    backend = ParametricBackend(12, 6, WorkloadConfig(model_bits=4e7, samples_per_device=500), seed=seed, download_bits=1e7)
    return Simulation(s, b, backend, seed=seed), backend


@pytest.mark.parametrize("access", ["tdma", "fdma"])
def test_same_inputs_give_identical_records_and_events(access):
    a, _ = rich_sim(access)
    b, _ = rich_sim(access)
    ra, rb = a.run(), b.run()
    assert len(ra) == 8 and ra == rb
    assert a.events == b.events
    assert any(r.dropped for r in ra) and any(r.arrived for r in ra)  # the scenario exercises both
    c, _ = rich_sim(access, seed=3)
    assert c.run() != ra


@pytest.mark.parametrize("access", ["tdma", "fdma"])
def test_an_unrecorded_run_counts_the_events_a_recorded_one_keeps(access):
    recorded, _ = rich_sim(access)
    counted, _ = rich_sim(access)
    counted.record_events = False
    assert counted.run() == recorded.run()  # drops in every phase included (the scenario has them)
    assert counted.events == [] and counted.event_count == recorded.event_count == len(recorded.events)


@pytest.mark.parametrize("access", ["tdma", "fdma"])
def test_state_dict_resume_gives_identical_records(access):
    full, _ = rich_sim(access)
    expected = full.run()
    expected_events = [e for e in full.events if e.round_index >= 3]

    first, first_backend = rich_sim(access)
    first.run(rounds=3)
    sim_state = json.loads(json.dumps(first.state_dict()))  # plain numbers and lists
    backend_state = json.loads(json.dumps(first_backend.state_dict()))

    resumed, resumed_backend = rich_sim(access)
    resumed.load_state_dict(sim_state)
    resumed_backend.load_state_dict(backend_state)
    assert resumed.now_s == first.now_s and resumed.round_index == 3
    rest = resumed.run()  # the rounds left to budget.rounds
    assert rest == expected[3:]
    assert resumed.events == expected_events
    assert resumed.event_count == full.event_count


def test_run_stops_at_max_time_and_on_callback():
    sim = Simulation(system(n=2), budget(rounds=10), ScriptedBackend([work(0), work(1)]))  # 1.5 s per round
    assert len(sim.run(max_time_s=4.0)) == 3  # starts at 0, 1.5, 3.0; not at 4.5
    seen = []
    out = sim.run(on_round=lambda rec: seen.append(rec.round_index) or rec.round_index == 4)
    assert seen == [3, 4] and len(out) == 2
    assert len(sim.run()) == 5 and sim.round_index == 10
    assert sim.run() == []


def test_parametric_backend_runs():
    workload = WorkloadConfig(local_iterations=2, cycles_per_sample=1e5, samples_per_device=100, model_bits=1e6)
    backend = ParametricBackend(10, 4, workload, seed=1)
    s = SystemConfig(n_devices=10, access="fdma")
    sim = Simulation(s, BudgetConfig(total_time_s=100.0, rounds=5), backend, seed=1)
    records = sim.run()
    assert len(records) == 5
    acc = [r.metrics["accuracy"] for r in records]
    assert acc == sorted(acc) and 0.1 < acc[0] < acc[-1] < 0.9
    # After 5 rounds of 4 arrived uploads: 0.9 − 0.8·exp(−0.5·20/10)
    assert acc[-1] == pytest.approx(0.9 - 0.8 * math.exp(-1.0))
    for r in records:
        ids = [row.device for row in r.devices]
        assert len(ids) == 4 and ids == sorted(ids)
        expected = sorted(np.random.default_rng((1, r.round_index)).choice(10, 4, replace=False).tolist())
        assert ids == expected
        assert all(row.compute_s == pytest.approx(2e7 / 1e9) for row in r.devices)
        assert r.info == {"K": 4.0}


def test_parametric_backend_validates():
    with pytest.raises(ValueError, match="model_bits"):
        ParametricBackend(4, 2, WorkloadConfig(model_bits="auto"))
    with pytest.raises(ValueError, match=r"clients_per_round\(=5\)"):
        ParametricBackend(4, 5)


# -- the base station's own compute ------------------------------------------------------------------------------


class ServerBackend(ScriptedBackend):
    """Every round: the given device work plus server cycles before the broadcast and after the uploads."""

    def __init__(self, work, before=None, after=None):
        super().__init__(work)
        self.before, self.after = dict(before or {}), dict(after or {})

    def plan_round(self, view):
        self.views.append(view)
        return RoundPlan(self.work, {}, server_cycles=self.before, server_cycles_after=self.after)


def test_server_phases_hand_computed():
    # server 10 GHz: 5e9 cycles before = 0.5 s, then compute 0.5 s (1 GHz), TDMA uploads 1 Mbit at 2 Mbit/s (0.5 s
    # each, FIFO by id), then 2e9 cycles after = 0.2 s: 0.5 + 0.5 + 2·0.5 + 0.2 = 2.2 s.
    backend = ServerBackend([work(0), work(1)], before={"train": 3e9, "helpers": 2e9}, after={"distill": 2e9})
    sim = Simulation(system(n=2, server_freq_hz=1e10), budget(), backend)
    record = sim.run_round()
    assert record.duration_s == pytest.approx(2.2)
    assert (record.server_before_s, record.server_after_s) == (pytest.approx(0.5), pytest.approx(0.2))
    assert record.server_s == pytest.approx(0.7)
    assert log(sim) == approx_log([
        (-1, "round_start", 0.0), (-1, "server_compute_start", 0.0), (-1, "server_compute_end", 0.5),
        (0, "compute_start", 0.5), (1, "compute_start", 0.5), (0, "compute_end", 1.0), (1, "compute_end", 1.0),
        (0, "upload_start", 1.0), (0, "upload_end", 1.5), (1, "upload_start", 1.5), (1, "upload_end", 2.0),
        (-1, "server_compute_start", 2.0), (-1, "server_compute_end", 2.2), (-1, "round_end", 2.2),
    ])
    # devices wait for the server: that is idle time, not compute
    assert all(row.compute_s == pytest.approx(0.5) for row in record.devices)
    assert record.devices[0].idle_s == pytest.approx(2.2 - 0.5 - 0.5)


def test_server_time_scales_inversely_with_its_frequency():
    times = []
    for f_hz in (1e9, 2e9, 4e9):
        sim = Simulation(system(n=1, server_freq_hz=f_hz), budget(), ServerBackend([work(0)], before={"x": 1e9}))
        times.append(sim.run_round().server_before_s)
    assert times == [pytest.approx(1.0), pytest.approx(0.5), pytest.approx(0.25)]


def test_server_phase_counts_against_the_deadline():
    # deadline 1.2 s from the round's start: server 0.5 s, compute to 1.0 s, upload on air 1.0–1.2 s → dropped with
    # 0.2 s · 2 Mbit/s = 0.4 Mbit wasted; nothing arrived, so the phase after the uploads does not run.
    backend = ServerBackend([work(0)], before={"x": 5e9}, after={"y": 1e9})
    sim = Simulation(system(n=1, server_freq_hz=1e10), budget(round_mode="deadline", deadline_s=1.2), backend)
    record = sim.run_round()
    assert record.dropped == (0,) and record.arrived == ()
    assert record.wasted_bits == pytest.approx(4e5)
    assert record.duration_s == pytest.approx(1.2)
    assert record.server_after_s == 0.0
    assert [e.kind for e in sim.events].count("server_compute_start") == 1


def test_server_phase_longer_than_the_deadline_ends_the_round_at_the_deadline():
    """Issue 22 (a deliberate change of the clock, docs/model/system_model.md): the server's 2 s phase before the
    broadcast is cut at the 1 s deadline; nothing was broadcast, so no device downloads anything (even at an
    instantaneous downlink), computes or uploads, and the round lasts exactly the deadline."""
    backend = ServerBackend([work(0, download_bits=4e6), work(1, download_bits=4e6)], before={"x": 2e10})
    sim = Simulation(system(n=2, server_freq_hz=1e10), budget(round_mode="deadline", deadline_s=1.0), backend)
    record = sim.run_round()
    assert record.dropped == (0, 1) and record.arrived == () and record.duration_s == 1.0
    assert record.bits_down == 0.0 and record.compute_energy_j == 0.0 and record.server_before_s == 1.0
    assert log(sim) == approx_log([
        (-1, "round_start", 0.0), (-1, "server_compute_start", 0.0),
        (0, "upload_dropped", 1.0), (1, "upload_dropped", 1.0), (-1, "round_end", 1.0),
    ])
    assert sim.run_round().start_time_s == 1.0  # the next round starts at the deadline


def test_no_server_phase_no_server_event_and_same_clock():
    plain = Simulation(system(n=2), budget(), ScriptedBackend([work(0), work(1)]))
    empty = Simulation(system(n=2), budget(), ServerBackend([work(0), work(1)]))
    a, b = plain.run_round(), empty.run_round()
    assert [(e.time_s, e.kind, e.device) for e in plain.events] == [(e.time_s, e.kind, e.device) for e in empty.events]
    assert a.end_time_s == b.end_time_s and b.server_s == 0.0
    zero = Simulation(system(n=2), budget(), ServerBackend([work(0), work(1)], before={"x": 0.0}))
    zero.run_round()
    assert [e.kind for e in zero.events][1:3] == ["server_compute_start", "server_compute_end"]
    assert zero.events[-1].time_s == plain.events[-1].time_s


def test_server_cycles_are_validated():
    sim = Simulation(system(n=1), budget(), ServerBackend([work(0)], before={"train": -1.0}))
    with pytest.raises(ValueError, match="server_cycles"):
        sim.run_round()
    sim = Simulation(system(n=1), budget(), ServerBackend([work(0)], after={"distill": math.nan}))
    with pytest.raises(ValueError, match="server_cycles_after"):
        sim.run_round()


def test_the_cyclic_gc_is_paused_only_for_the_engines_own_work():
    """The backend always runs with the caller's GC setting; the caller's setting is back after each round."""
    import gc

    seen = []

    class Watching(ParametricBackend):
        def plan_round(self, view):
            seen.append(gc.isenabled())
            return super().plan_round(view)

        def complete_round(self, outcome):
            seen.append(gc.isenabled())
            return super().complete_round(outcome)

    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            sim = Simulation(SystemConfig(n_devices=4), BudgetConfig(rounds=2), Watching(4, 2, WorkloadConfig(model_bits=1e6, samples_per_device=500)))
            sim.run()
            assert gc.isenabled() is enabled and seen == [enabled] * 4
        finally:
            gc.enable()
            seen.clear()


class _ResourceTdma(TdmaUplink):
    """The reference: the TDMA band as a plain ``simpy.Resource(capacity=1)`` (the engine's earlier link)."""

    def __init__(self, env, bandwidth_hz, noise_psd_w_per_hz):
        super().__init__(env, bandwidth_hz, noise_psd_w_per_hz)
        import simpy

        self._band = simpy.Resource(env, capacity=1)

    def transmit(self, env, device, bits, channel_gain, tx_power_w, on_air=None, *, checked=False):
        import simpy

        from edgesim.links import Transfer

        transfer = Transfer(device, bits, channel_gain, tx_power_w, env.now)
        rate = shannon_rate_bps(self.bandwidth_hz, channel_gain, tx_power_w, self.noise_psd_w_per_hz)
        with self._band.request() as request:
            try:
                yield request
            except simpy.Interrupt:
                transfer.aborted = True
                raise
            transfer.start_s = env.now
            transfer.band_hz = self.bandwidth_hz
            if on_air is not None:
                on_air(transfer)
            try:
                yield env.timeout(transfer.bits / rate)
            except simpy.Interrupt:
                transfer.airtime_s = env.now - transfer.start_s
                transfer.sent_bits = min(transfer.bits, transfer.airtime_s * rate)
                transfer.aborted = True
                raise
        transfer.end_s = env.now
        transfer.airtime_s = transfer.end_s - transfer.start_s
        transfer.sent_bits = transfer.bits
        return transfer


class _RandomPlans(ParametricBackend):
    """Random devices, cycles and upload sizes each round, ties included (equal cycles on equal CPUs)."""

    def plan_round(self, view):
        rng = np.random.default_rng((self.seed, view.round_index, 7))
        chosen = np.sort(rng.choice(self.n_devices, size=self.clients_per_round, replace=False))
        cycles = rng.choice([1e8, 2e8, 2e8, 5e8], size=len(chosen))
        bits = rng.choice([0.0, 5e6, 1e7, 1e7], size=len(chosen))
        return RoundPlan(tuple(DeviceWork(int(d), {"train": float(c)}, float(b), 1e5) for d, c, b in
                               zip(chosen, cycles, bits)))


def _compare_with_resource(seed, monkeypatch) -> list:
    """Run a random deadline scenario with our band and with simpy.Resource's; assert the same trace; the rows."""
    import edgesim.engine as engine

    def run(uplink_cls):
        monkeypatch.setattr(engine, "make_uplink", lambda env, access, b, n0, *order: uplink_cls(env, b, n0))
        system = SystemConfig(n_devices=12, access="tdma", cpu_freq_hz=[1e9, 2e9, 1e9, 0.5e9] * 3,
                              downlink_rate_bps=1e7)
        budget = BudgetConfig(total_time_s=40, rounds=5, round_mode="deadline", deadline_s=2.0 + seed / 3)
        sim = Simulation(system, budget, _RandomPlans(12, 9, WorkloadConfig(model_bits=1e6, samples_per_device=500), seed=seed), seed=seed)
        records = sim.run()
        return sim.events, [(r.arrived, r.dropped, r.devices, r.end_time_s) for r in records]

    ours, reference = run(TdmaUplink), run(_ResourceTdma)
    assert ours == reference
    rows = [row for r in reference[1] for row in r[2]]
    assert any(row.arrived for row in rows)
    return rows


@pytest.mark.parametrize("seed", range(6))
def test_the_tdma_band_is_event_for_event_a_simpy_resource(seed, monkeypatch):
    """Same trace, same records as the band built on simpy.Resource: queueing, ties, deadlines that interrupt
    devices waiting for the band and on air."""
    _compare_with_resource(seed, monkeypatch)


def test_the_resource_comparison_covers_interrupts_on_air_and_in_the_line(monkeypatch):
    rows = [row for seed in range(6) for row in _compare_with_resource(seed, monkeypatch)]
    assert any(row.dropped and row.wasted_bits > 0 for row in rows)  # cut while on air
    assert any(row.dropped and row.wasted_bits == 0 and row.upload_airtime_s == 0 and row.compute_s > 0
               for row in rows)  # cut while waiting for the band
