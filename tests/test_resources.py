"""The resource policies (issue 41): formulas by hand, limiting cases, properties, and the engine running the plan."""

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation
from edgesim.resources import POLICIES, PolicyError, ResourcesConfig, check_config, register_policy
from edgesim.resources import formulas as F

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
N0 = 1e-17  # W/Hz
G = 1e-10  # so that g p / N0 = 1e6 Hz at p = 0.1 W


# --- formulas by hand ---------------------------------------------------------------------------------------------


def test_min_band_inverts_shannon_by_hand():
    # a = g p / N0 = 1e6 Hz; r(1e6) = 1e6 log2(1 + 1) = 1e6 bit/s, so 1e6 bit/s needs 1e6 Hz.
    assert F.rate_bps(1e6, G, 0.1, N0) == pytest.approx(1e6, rel=1e-15)
    assert F.min_band_hz(1e6, G, 0.1, N0) == pytest.approx(1e6, rel=1e-12)
    # at or above the limit a / ln 2 no band suffices; nothing to send needs no band
    assert F.min_band_hz(1e6 / math.log(2), G, 0.1, N0) == math.inf
    assert F.min_band_hz(0.0, G, 0.1, N0) == 0.0


@SETTINGS
@given(b=st.floats(1e2, 1e9), g=st.floats(1e-14, 1e-8), p=st.floats(1e-3, 2.0))
def test_min_band_is_the_inverse_of_the_rate(b, g, p):
    r = F.rate_bps(b, g, p, N0)
    assert F.min_band_hz(r, g, p, N0) == pytest.approx(b, rel=1e-6)


def test_proportional_and_equal_bands_by_hand():
    assert F.proportional_bands_hz(3e6, [1e6, 2e6, 0.0]).tolist() == [1e6, 2e6, 0.0]
    assert F.equal_bands_hz(3e6, [1e6, 2e6, 0.0]).tolist() == [1.5e6, 1.5e6, 0.0]


def test_min_max_time_two_devices_by_hand():
    # Device 0: a = 1e6 Hz, 1 Mbit; device 1: a = 3e6 Hz (3x the gain), 2 Mbit. On 1 MHz each:
    # r0 = 1e6 log2(2) = 1 Mbit/s, r1 = 1e6 log2(4) = 2 Mbit/s: both end at 1 s, and with B = 2 MHz nothing is left.
    bands = F.min_max_time_bands_hz(2e6, [0.0, 0.0], [1e6, 2e6], [G, 3 * G], 0.1, N0)
    assert bands == pytest.approx([1e6, 1e6], rel=1e-9)
    ends = F.finish_times_s([0.0, 0.0], [1e6, 2e6], bands, [G, 3 * G], 0.1, N0)
    assert ends == pytest.approx([1.0, 1.0], rel=1e-9)


def test_min_max_time_with_equal_channels_is_equal():
    # the limiting case: equal devices (and readiness) get B / K each
    bands = F.min_max_time_bands_hz(3e6, [0.5] * 3, [4e6] * 3, G, 0.2, N0)
    assert bands == pytest.approx([1e6] * 3, rel=1e-9)
    assert bands.sum() == pytest.approx(3e6, rel=1e-12)


def _brute_force_min_max(bandwidth, ready, bits, gains, power):
    """Nested ternary searches over the shares: each finish time is convex in its band, so the max over the
    devices, minimised over the last ones' split, is convex in the first one's band."""

    def finish(k, band):
        return F.finish_times_s([ready[k]], [bits[k]], [band], [gains[k]], power, N0)[0]

    def tail(rest, k):  # the best last finish when devices k.. share `rest` Hz
        if k == len(bits) - 1:
            return finish(k, rest)
        lo, hi = 0.0, rest
        for _ in range(60):  # (2/3)^60 ≈ 3e-11 of the band left: t agrees with 200 steps to ~1e-13, 10x faster
            m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
            v1, v2 = max(finish(k, m1), tail(rest - m1, k + 1)), max(finish(k, m2), tail(rest - m2, k + 1))
            lo, hi = (lo, m2) if v1 <= v2 else (m1, hi)
        m = 0.5 * (lo + hi)
        return max(finish(k, m), tail(rest - m, k + 1))

    return tail(bandwidth, 0)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # the brute force: ~0.2 s each
@given(data=st.data(), k=st.integers(2, 3))
def test_min_max_time_beats_equal_and_matches_brute_force(data, k):
    ready = data.draw(st.lists(st.floats(0.0, 2.0), min_size=k, max_size=k))
    bits = data.draw(st.lists(st.floats(1e5, 1e7), min_size=k, max_size=k))
    gains = data.draw(st.lists(st.floats(1e-12, 1e-9), min_size=k, max_size=k))
    bandwidth = data.draw(st.floats(1e5, 2e7))
    bands = F.min_max_time_bands_hz(bandwidth, ready, bits, gains, 0.2, N0)
    assert bands.sum() == pytest.approx(bandwidth, rel=1e-12)
    t_opt = F.finish_times_s(ready, bits, bands, gains, 0.2, N0).max()
    t_equal = F.finish_times_s(ready, bits, F.equal_bands_hz(bandwidth, bits), gains, 0.2, N0).max()
    assert t_opt <= t_equal * (1 + 1e-12)
    assert t_opt == pytest.approx(_brute_force_min_max(bandwidth, ready, bits, gains, 0.2), rel=1e-6)


def test_min_max_time_for_1000_devices_is_fast():
    import time

    rng = np.random.default_rng(0)
    args = (1e7, rng.uniform(0, 1, 1000), rng.uniform(1e5, 1e6, 1000), rng.uniform(1e-12, 1e-9, 1000), 0.2, N0)
    F.min_max_time_bands_hz(*args)
    t0 = time.perf_counter()
    for _ in range(5):
        F.min_max_time_bands_hz(*args)
    assert (time.perf_counter() - t0) / 5 < 0.05  # < 10 ms idle (benchmarks/RESULTS.md); slack for a busy machine


def test_min_energy_power_by_hand():
    # p = (2^{s/(b τ)} − 1) N0 b / g = (2^1 − 1) · 1e-17 · 1e6 / 1e-10 = 0.1 W; capped at the maximum
    assert F.min_energy_power_w(1e6, 1e6, 1.0, G, 0.2, N0) == pytest.approx(0.1, rel=1e-12)
    assert F.min_energy_power_w(1e6, 1e6, 1.0, G, 0.05, N0) == 0.05
    assert F.min_energy_power_w(1e6, 1e6, -1.0, G, 0.2, N0) == 0.2  # no time left: full power
    assert F.min_energy_power_w(0.0, 1e6, 1.0, G, 0.2, N0) == 0.2  # no upload: the maximum, unused


def test_min_energy_frequency_by_hand_and_loose_deadline():
    assert F.min_energy_freq_hz(1e9, 2.0, 1e8, 2e9) == pytest.approx(5e8)
    assert F.min_energy_freq_hz(1e9, 1e3, 1e8, 2e9) == 1e8  # a loose deadline: f_min
    assert F.min_energy_freq_hz(1e9, 0.1, 1e8, 2e9) == 2e9  # too tight: f_max
    assert F.min_energy_freq_hz(1e9, 0.0, 1e8, 2e9) == 2e9


@SETTINGS
@given(c=st.floats(1e7, 1e10), s=st.floats(1e4, 1e7), b=st.floats(1e4, 1e7), tau=st.floats(0.05, 50.0),
       g=st.floats(1e-13, 1e-9), kappa=st.floats(1e-29, 1e-27))
def test_joint_meets_the_deadline_and_spends_no_more(c, s, b, tau, g, kappa):
    fmax, fmin, pmax = 2e9, 1e8, 0.2
    f, p = F.joint_split(c, s, b, tau, g, N0, kappa, fmin, fmax, pmax)
    f, p = float(f), float(p)
    t_default = c / fmax + s / F.rate_bps(b, g, pmax, N0)
    e_default = kappa * c * fmax ** 2 + pmax * s / F.rate_bps(b, g, pmax, N0)
    t = c / f + s / F.rate_bps(b, g, p, N0)
    e = kappa * c * f ** 2 + p * s / F.rate_bps(b, g, p, N0)
    assert fmin <= f <= fmax and 0 < p <= pmax
    assert e <= e_default * (1 + 1e-9)
    if t_default <= tau:
        assert t <= tau * (1 + 1e-9)
        # the golden-section optimum against a dense grid of upload times
        t_lo, t_hi = s / F.rate_bps(b, g, pmax, N0), tau - c / fmax
        grid = np.linspace(t_lo, t_hi, 2001)
        e_grid = F.joint_energy_j(grid, c, s, b, tau, g, N0, kappa, fmin, fmax, pmax)[0]
        assert e <= e_grid.min() * (1 + 1e-6)
    else:
        assert (f, p) == (fmax, pmax)


def test_shortest_first_by_hand():
    # all ready at 0, airtimes 3, 1, 2: arrival order ends 3, 4, 6 (mean 13/3); shortest first 1, 3, 6 (mean 10/3)
    ends_fifo, order_fifo = F.tdma_schedule_s([0.0] * 3, [3.0, 1.0, 2.0])
    ends_spt, order_spt = F.tdma_schedule_s([0.0] * 3, [3.0, 1.0, 2.0], shortest_first=True)
    assert order_fifo == [0, 1, 2] and ends_fifo.tolist() == [3.0, 4.0, 6.0]
    assert order_spt == [1, 2, 0] and ends_spt.tolist() == [6.0, 1.0, 3.0]


@SETTINGS
@given(air=st.lists(st.floats(0.01, 10.0), min_size=1, max_size=8))
def test_shortest_first_never_worse_when_all_wait(air):
    fifo, _ = F.tdma_schedule_s([0.0] * len(air), air)
    spt, _ = F.tdma_schedule_s([0.0] * len(air), air, shortest_first=True)
    assert spt.mean() <= fifo.mean() * (1 + 1e-12)


def test_tdma_latest_starts_by_hand():
    # order 1, 2, 0 with airtimes 3, 1, 2 against τ = 10: 0 goes on air at 7, 2 at 5, 1 at 4
    assert F.tdma_latest_starts_s([1, 2, 0], [3.0, 1.0, 2.0], 10.0).tolist() == [7.0, 4.0, 5.0]


def test_oort_interleaves_exploration():
    n = 20
    last = np.array([-1] * 10 + list(range(10)))
    scores = F.oort_scores(10, np.full(n, np.nan), np.full(n, 1.0), last, 5.0, 0.1, 2.0, np.arange(n, dtype=float),
                           np.zeros(n))
    order = np.argsort(-scores, kind="stable")
    first10 = order[:10]
    assert (last[first10] < 0).sum() == 1  # ε = 0.1 of any first 10 are unexplored
    assert order[9] == 9  # the 10th pick explores the fastest unexplored (speed = id)


# --- the engine runs the plan --------------------------------------------------------------------------------------

WORK = WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=500, model_bits=4e6)


def _sim(access="fdma", resources=None, *, n=8, k=5, rounds=4, mode="sync", deadline=None, total=40.0):
    system = SystemConfig(n_devices=n, bandwidth_hz=2e6, tx_power_dbm=23.0, cpu_freq_hz=[1e9, 1.5e9, 2e9, 0.8e9] * (n // 4),
                          access=access, cell_radius_m=300, min_distance_m=10, rayleigh_fading=True)
    budget = BudgetConfig(total_time_s=total, rounds=rounds, round_mode=mode, deadline_s=deadline)
    return Simulation(system, budget, ParametricBackend(n, k, WORK, seed=1), seed=3,
                      resources=resources or ResourcesConfig())


def test_defaults_record_the_configured_resources():
    for access in ("tdma", "fdma"):
        sim = _sim(access)
        rec = sim.run_round()
        for row in rec.devices:
            assert row.cpu_freq_hz == sim.system.cpu_freqs_hz[row.device]
            assert row.tx_power_w == sim.system.tx_power_w[row.device]
            if access == "tdma":
                assert row.bandwidth_hz == 2e6
            else:  # the mean processor-sharing share: between B / K and B
                assert 2e6 / 5 * (1 - 1e-9) <= row.bandwidth_hz <= 2e6 * (1 + 1e-9)


@pytest.mark.parametrize("access, resources", [
    ("fdma", ResourcesConfig(bandwidth="min_max_time", power="min_energy", cpu_freq="min_energy")),
    ("fdma", ResourcesConfig(bandwidth="proportional", power="min_energy", cpu_freq="joint")),
    ("tdma", ResourcesConfig(bandwidth="shortest_first", cpu_freq="min_energy", scheduling="fastest")),
])
def test_times_rederive_from_the_recorded_resources(access, resources):
    sim = _sim(access, resources)
    sim.run()
    cycles = 500 * 1e6
    n0 = sim.system.noise_psd_w_per_hz
    for rec in sim.records:
        for row in rec.devices:
            assert row.compute_s == pytest.approx(cycles / row.cpu_freq_hz, rel=1e-12)
            rate = F.rate_bps(row.bandwidth_hz, row.channel_gain, row.tx_power_w, n0)
            assert row.upload_airtime_s == pytest.approx(4e6 / rate, rel=1e-9)
            assert row.compute_energy_j == pytest.approx(sim.system.kappa * row.cpu_freq_hz ** 2 * cycles, rel=1e-12)
            assert row.radio_energy_j == pytest.approx(row.tx_power_w * row.upload_airtime_s, rel=1e-12)


@pytest.mark.parametrize("access, resources", [
    ("fdma", ResourcesConfig(cpu_freq="min_energy")),
    ("fdma", ResourcesConfig(power="min_energy")),
    ("fdma", ResourcesConfig(power="min_energy", cpu_freq="joint")),
    ("fdma", ResourcesConfig(bandwidth="min_max_time", power="min_energy", cpu_freq="joint")),
    ("tdma", ResourcesConfig(cpu_freq="min_energy")),
    ("tdma", ResourcesConfig(bandwidth="shortest_first", cpu_freq="min_energy")),
])
def test_energy_policies_meet_the_deadline_and_save_energy(access, resources):
    base, sim = _sim(access, total=80.0), _sim(access, resources, total=80.0)
    b, s = base.run(), sim.run()
    tau = sim.budget.round_budget_s
    for rb, rs in zip(b, s):
        assert rs.arrived and set(rs.arrived) == set(rb.arrived)  # the same devices (common random numbers)
        if rb.duration_s <= tau:
            assert rs.duration_s <= tau * (1 + 1e-9)
        assert rs.radio_energy_j + rs.compute_energy_j <= (rb.radio_energy_j + rb.compute_energy_j) * (1 + 1e-9)


def test_min_max_time_round_no_longer_than_static_equal_shares():
    @register_policy("bandwidth", "_test_static_equal")
    class StaticEqual:
        access = ("fdma",)

        def allocate(self, r):
            return F.equal_bands_hz(r.bandwidth_hz, r.upload_bits)

    try:
        eq, mm = _sim("fdma", ResourcesConfig(bandwidth="_test_static_equal")), _sim(
            "fdma", ResourcesConfig(bandwidth="min_max_time"))
        for re_, rm in zip(eq.run(), mm.run()):
            assert rm.duration_s <= re_.duration_s * (1 + 1e-9)
    finally:
        POLICIES["bandwidth"].pop("_test_static_equal")


def test_shortest_first_serves_simultaneous_uploads_shortest_first():
    # identical CPUs: every upload is ready at once; the band then serves the shortest airtime (best rate) first
    system = SystemConfig(n_devices=4, bandwidth_hz=1e6, tx_power_dbm=23.0, cpu_freq_hz=1e9, access="tdma",
                          cell_radius_m=400, min_distance_m=10)
    budget = BudgetConfig(total_time_s=100.0, rounds=1)
    fifo_sim = Simulation(system, budget, ParametricBackend(4, 4, WORK), resources=ResourcesConfig())
    rates = np.asarray(fifo_sim.system_view().uplink_rate_bps)
    fifo = fifo_sim.run_round()
    spt = Simulation(system, budget, ParametricBackend(4, 4, WORK),
                     resources=ResourcesConfig(bandwidth="shortest_first")).run_round()
    assert list(spt.arrived) == np.argsort(-rates, kind="stable").tolist()
    assert fifo.arrived == (0, 1, 2, 3)
    assert spt.duration_s == pytest.approx(fifo.duration_s, rel=1e-12)  # the band works as long either way
    def ends(rec):
        return [d.compute_s + d.upload_airtime_s + d.idle_s for d in rec.devices]

    assert np.mean(ends(spt)) <= np.mean(ends(fifo))


@pytest.mark.parametrize("policy", ["round_robin", "best_channel", "fastest", "deadline_feasible", "age", "oort"])
def test_scheduling_policies_pick_by_their_rule_and_resume(policy):
    sim = _sim("fdma", ResourcesConfig(scheduling=policy), rounds=6)
    first = [sim.run_round() for _ in range(3)]
    state = sim.state_dict()
    rest = [sim.run_round() for _ in range(3)]
    again = _sim("fdma", ResourcesConfig(scheduling=policy), rounds=6)
    again.load_state_dict(state)
    assert [again.run_round().devices for _ in range(3)] == [r.devices for r in rest]  # the backend is not resumed
    if policy == "round_robin":
        assert [tuple(d.device for d in r.devices) for r in first] == [(0, 1, 2, 3, 4), (0, 1, 5, 6, 7),
                                                                        (2, 3, 4, 5, 6)]
    if policy == "best_channel":
        view_sim = _sim("fdma", ResourcesConfig(scheduling=policy))
        view = view_sim.system_view()
        best = sorted(np.argsort(-np.asarray(view.uplink_rate_bps), kind="stable")[:5].tolist())
        assert [d.device for d in view_sim.run_round().devices] == best
    if policy == "age":  # 8 devices, 5 a round: the 3 left out of round 0 are in round 1
        r0 = {d.device for d in first[0].devices}
        assert set(range(8)) - r0 <= {d.device for d in first[1].devices}


# --- bad input, in one line ----------------------------------------------------------------------------------------


def test_check_config_refuses_in_one_line():
    fdma, tdma = SystemConfig(n_devices=4, access="fdma"), SystemConfig(n_devices=4, access="tdma")
    cases = [
        (ResourcesConfig(bandwidth="nope"), fdma, "bandwidth = 'nope': expected one of"),
        (ResourcesConfig(bandwidth="min_max_time"), tdma, "applies to [system] access = 'fdma'"),
        (ResourcesConfig(bandwidth="shortest_first"), fdma, "applies to [system] access = 'tdma'"),
        (ResourcesConfig(power="min_energy"), tdma, "power = 'min_energy' applies to"),
        (ResourcesConfig(cpu_freq="joint"), fdma, "needs power = 'min_energy'"),
        (ResourcesConfig(cpu_freq="min_energy", cpu_freq_min_hz=5e9), fdma, "cpu_freq_min_hz = 5000000000.0"),
    ]
    for cfg, system, words in cases:
        with pytest.raises(ValueError, match=None) as e:
            check_config(cfg, system)
        assert words in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="chooses its own devices"):
        check_config(ResourcesConfig(scheduling="age"), fdma, ["dofed_spp"], ["dofed_spp", "um_pfssl"])
    with pytest.raises(ValueError, match="cpu_freq_min_hz"):
        ResourcesConfig(cpu_freq_min_hz=1.0)


@pytest.mark.parametrize("answer, words", [
    (lambda r: np.full(r.devices.size, r.bandwidth_hz), "sum to"),
    (lambda r: -np.ones(r.devices.size), "finite bands in Hz >= 0"),
    (lambda r: np.full(r.devices.size, np.nan), "finite bands in Hz >= 0"),
    (lambda r: 1 / 0, "raised ZeroDivisionError"),
])
def test_a_bad_plugin_policy_is_one_line_naming_it_and_the_round(answer, words):
    @register_policy("bandwidth", "_test_bad")
    class Bad:
        def allocate(self, r):
            return answer(r)

    try:
        sim = _sim("fdma", ResourcesConfig(bandwidth="_test_bad"))
        with pytest.raises(PolicyError) as e:
            sim.run_round()
        msg = str(e.value)
        assert msg.startswith("[resources] bandwidth = '_test_bad': round 0: ") and words in msg and "\n" not in msg
        assert sim.round_index == 0  # nothing ran: the run resumes from its last checkpoint
    finally:
        POLICIES["bandwidth"].pop("_test_bad")


# --- end to end: a learning run, a refusal ------------------------------------------------------------------------


def test_a_learning_run_follows_the_policies(tiny_scenario, tmp_path):
    import csv

    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    out = tmp_path / "run"
    sets = ["run.algorithms=fedavg", "system.access=fdma", "resources.scheduling=age",
            "resources.bandwidth=min_max_time", "resources.cpu_freq=min_energy"]
    result = CliRunner().invoke(app, ["run", str(tiny_scenario), "--out", str(out), "-q",
                                      *[a for s in sets for a in ("--set", s)]])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "devices.csv").open()))
    by_round = {}
    for row in rows:
        by_round.setdefault(int(row["round"]), set()).add(int(row["device"]))
    assert by_round[1] == set(range(6)) - by_round[0]  # age: the three left out of round 0 come next
    assert all(float(r["cpu_freq_hz"]) < 1e9 for r in rows)  # the loose budget (10 s a round) lets DVFS slow down
    assert all(0 < float(r["bandwidth_hz"]) < 1e6 for r in rows)
    assert 'scheduling = "age"' in (out / "config.toml").read_text()


def test_a_self_scheduling_algorithm_refuses_a_scheduling_policy(tiny_scenario, tmp_path):
    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    result = CliRunner().invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "r"), "-q",
                                      "--set", "run.algorithms=fedavg,um_pfssl", "--set", "resources.scheduling=fastest"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "[resources] scheduling = 'fastest': algorithm 'um_pfssl' chooses its own devices" in result.stderr
    assert not (tmp_path / "r").exists()


def test_the_run_folders_know_the_omitted_defaults():
    import dataclasses

    from edgesim.results.fingerprint import OMITTED_WHEN_DEFAULT, scenario_keys

    assert OMITTED_WHEN_DEFAULT["resources"] == {k: v for k, v in dataclasses.asdict(ResourcesConfig()).items()
                                                 if v is not None}
    assert scenario_keys({"seed": 1})["resources.bandwidth"] == "equal"
    assert scenario_keys({"resources": {"bandwidth": "min_max_time"}})["resources.bandwidth"] == "min_max_time"


def test_band_power_and_frequency_policies_leave_a_sync_learning_run_unchanged_but_its_clock(tiny_scenario, tmp_path):
    """Same devices, data and draws (common random numbers) and every upload arrives in a sync round: the accuracy
    of each round is the default's; only when it ends, and the energy, differ (docs/model/resource_policies.md)."""
    import csv

    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    def rounds(extra):
        out = tmp_path / f"r{len(extra)}"
        sets = ["run.algorithms=fedavg", "system.access=fdma", *extra]
        result = CliRunner().invoke(app, ["run", str(tiny_scenario), "--out", str(out), "-q",
                                          *[a for s in sets for a in ("--set", s)]])
        assert result.exit_code == 0, result.output
        return list(csv.DictReader((out / "rounds.csv").open()))

    base = rounds([])
    policy = rounds(["resources.bandwidth=min_max_time", "resources.power=min_energy", "resources.cpu_freq=joint"])
    assert [r["accuracy"] for r in policy] == [r["accuracy"] for r in base]
    assert [r["time_s"] for r in policy] != [r["time_s"] for r in base]
    assert float(policy[-1]["cum_energy_j"]) < float(base[-1]["cum_energy_j"])


def test_a_sweep_over_a_policy_and_its_report(tmp_path):
    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "resource_policies.toml"
    runner = CliRunner()
    sweep = runner.invoke(app, ["sweep", str(scenario), "--grid", "resources.bandwidth=equal,proportional",
                                "--set", "resources.power=fixed", "--set", "resources.cpu_freq=max",
                                "--set", "run.rounds=3", "--out", str(tmp_path / "sw"), "-q",
                                "--jobs", "1"])  # the report is the point, not the workers (test_sweep.py's)
    assert sweep.exit_code == 0, sweep.output
    report = runner.invoke(app, ["report", str(tmp_path / "sw"), "--out", str(tmp_path / "rep")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "rep" / "leaderboard.md").read_text()
    assert "## resources.bandwidth=equal" in page and "## resources.bandwidth=proportional" in page


# --- Oort's statistical utility from the learning side (the loss statistic each trained device reports) -----------


def test_oort_statistical_utility_by_hand_limit_and_property():
    assert F.oort_statistical_utility(8.0, 2) == pytest.approx(4.0)  # |B| sqrt(Σ L² / |B|) = 2 sqrt(4)
    assert F.oort_statistical_utility(0.0, 0) == 0.0  # no samples, nothing to learn from
    assert F.oort_statistical_utility(0.0, 5) == 0.0  # every loss 0
    for bad in ((-1.0, 2), (math.nan, 2), (1.0, -1)):
        with pytest.raises(ValueError):
            F.oort_statistical_utility(*bad)


@given(st.lists(st.floats(0, 20), min_size=1, max_size=50))
@SETTINGS
def test_oort_statistical_utility_is_sqrt_n_times_the_sum_of_squares(losses):
    sq = sum(x * x for x in losses)
    assert F.oort_statistical_utility(sq, len(losses)) == pytest.approx(math.sqrt(len(losses) * sq), rel=1e-12)
    # equal losses L on n samples: n L, the utility grows with both the data and the loss
    assert F.oort_statistical_utility(len(losses) * 4.0, len(losses)) == pytest.approx(2.0 * len(losses))


class _Reporting(ParametricBackend):
    """The physics-only backend with known per-device losses: device d trained on n_d samples of loss l_d each."""

    LOSSES = {0: (4, 1.0), 1: (1, 3.0), 2: (1, 4.0)}  # (|B|, L): utilities |B| L = 4, 3, 4

    def device_losses(self):
        from edgesim.backend import DeviceLoss

        return {d: DeviceLoss(n * loss * loss, n) for d, (n, loss) in self.LOSSES.items()}


def _oort_sim(backend_cls, deadline_s=None, **kw):
    system = SystemConfig(n_devices=3, bandwidth_hz=2e6, tx_power_dbm=23.0, cpu_freq_hz=1e9, access="fdma",
                          cell_radius_m=300, min_distance_m=10)
    budget = BudgetConfig(total_time_s=100.0, rounds=4, round_mode="deadline" if deadline_s else "sync",
                          deadline_s=deadline_s)
    return Simulation(system, budget, backend_cls(3, 3, WORK, seed=1), seed=3,
                      resources=ResourcesConfig(scheduling="oort", oort_exploration=0.0), **kw)


def test_oort_ranks_by_the_reported_losses_by_hand():
    """Three devices all take part in round 0 and report (|B|, L) = (4, 1), (1, 3), (1, 4): utilities
    |B| sqrt(Σ L²/|B|) = 4, 3, 4 → with the same staleness bonus and no straggler penalty (rounds within τ = 25 s),
    round 1 ranks device 0 and 2 (4 + bonus) before device 1 (3 + bonus); the tie between 0 and 2 goes by the
    round's common random numbers."""
    sim = _oort_sim(_Reporting)
    sim.run_round()
    assert sim._scheduler.utility.tolist() == pytest.approx([4.0, 3.0, 4.0])
    order = sim.system_view().schedule
    assert set(order[:2]) == {0, 2} and order[2] == 1
    # the scores are the formula's: U + sqrt(0.1 ln R / L), R = 2 (round 1, 1-based), L = 1
    bonus = math.sqrt(0.1 * math.log(2) / 1.0)
    util = F.oort_utility(sim._scheduler.utility, sim._scheduler.duration_s, sim._scheduler.last_round, 1, 25.0, 2.0)
    assert util.tolist() == pytest.approx([4 + bonus, 3 + bonus, 4 + bonus])


def test_oort_hears_only_the_devices_whose_update_arrived():
    """A deadline that the slowest upload misses: its device's loss never reaches the server, so its utility stays
    unknown while the others' are set."""
    probe = _oort_sim(_Reporting).run_round()  # the last upload ends the sync round
    sim = _oort_sim(_Reporting, deadline_s=probe.end_time_s * 0.999)
    rec = sim.run_round()
    assert rec.dropped == probe.arrived[-1:] and len(rec.arrived) == 2
    u = sim._scheduler.utility
    assert math.isnan(u[rec.dropped[0]])
    assert [u[d] for d in sorted(rec.arrived)] == pytest.approx([_Reporting.LOSSES[d][0] * _Reporting.LOSSES[d][1]
                                                                   for d in sorted(rec.arrived)])


def test_oort_without_reported_losses_falls_back_to_its_system_half():
    """A backend that reports nothing (here the physics-only one): the utilities stay unknown and Oort ranks the
    explored devices by the staleness bonus × straggler penalty alone — the same for all three here, so the round's
    common random numbers order them."""
    sim = _oort_sim(ParametricBackend)
    sim.run_round()
    assert np.isnan(sim._scheduler.utility).all()
    uniform = np.random.default_rng((3, 1, 0x5C)).random(3)
    assert sim.system_view().schedule == tuple(int(d) for d in np.lexsort((uniform, np.zeros(3))))


def test_a_learning_run_reports_each_trained_devices_loss_to_oort(tiny_scenario):
    """FedAvg on the tiny scenario with Oort: after round 0 each trained device's utility is sqrt(|B| Σ L²) of the
    per-sample cross-entropy of the global model it started from on its labelled samples, computed here by hand;
    the other devices' stay unknown. The log is read and emptied every round."""
    import torch
    import torch.nn.functional as TF

    from edgesim.learning.models import build_model
    from edgesim.scenarios.algorithm_run import make_backends, make_simulation
    from edgesim.scenarios.schema import load_scenario

    sc = load_scenario(tiny_scenario, ["run.algorithms=fedavg", "system.access=fdma", "resources.scheduling=oort"])
    build = make_backends(sc)[0]
    backend = build("fedavg")
    start = {k: v.clone() for k, v in backend.global_state.items()}
    sim = make_simulation(sc, backend, "fedavg", device_losses=build.device_losses)
    rec = sim.run_round()
    trained = sorted(d.device for d in rec.devices)
    ctx = backend.ctx
    net = build_model(sc.learning["train"].model, ctx.input_shape, ctx.n_classes, ctx.vocab_size, seed=0)
    net.load_state_dict(start)
    net.eval()
    for d in range(sc.system.n_devices):
        u = sim._scheduler.utility[d]
        if d not in trained:
            assert math.isnan(u)
            continue
        c = ctx.clients[d]
        with torch.no_grad():
            losses = TF.cross_entropy(net(c.x_sup), c.y_sup, reduction="none").double()
        assert u == pytest.approx(math.sqrt(len(losses) * float((losses ** 2).sum())), rel=1e-5)
    assert build.device_losses() == {}  # taken by the engine after the round


def test_oort_learning_runs_are_deterministic_and_the_default_run_computes_no_losses(tiny_scenario, tmp_path):
    from typer.testing import CliRunner

    from edgesim.scenarios.algorithm_run import make_backends
    from edgesim.scenarios.cli import app
    from edgesim.scenarios.schema import load_scenario

    def run(name):
        out = tmp_path / name
        result = CliRunner().invoke(app, ["run", str(tiny_scenario), "--out", str(out), "-q", "--set",
                                          "run.algorithms=fedavg,fixavg", "--set", "resources.scheduling=oort",
                                          "--set", "budget.rounds=4"])
        assert result.exit_code == 0, result.output
        return [(out / f).read_bytes() for f in ("rounds.csv", "devices.csv")]

    assert run("a") == run("b")
    assert not hasattr(make_backends(load_scenario(tiny_scenario, []))[0], "device_losses")


def test_report_pairs_each_policy_with_the_reference_point_and_draws_energy_against_time(tmp_path):
    """`edgesim report --reference`: each grid point minus the point with the reference values and the same other
    values (here the band), seed by seed — checked against the runs' own summaries — and the figure."""
    import csv
    import json
    import statistics

    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "resource_policies.toml"
    runner = CliRunner()
    sweep = runner.invoke(app, ["sweep", str(scenario), "--grid", "system.bandwidth_hz=1e6,1e7", "--grid",
                                "resources={bandwidth='equal'},{cpu_freq='min_energy'}", "--seeds", "2",
                                "--set", "run.rounds=6", "--out", str(tmp_path / "sw"), "-q", "--no-plots",
                                "--jobs", "1"])  # the pairing is the point, not the workers (test_sweep.py's)
    assert sweep.exit_code == 0, sweep.output
    args = ["report", str(tmp_path / "sw"), "--out", str(tmp_path / "rep"), "--threshold", "0.5",
            "--reference", "resources.bandwidth=equal", "--reference", "resources.cpu_freq=max"]
    report = runner.invoke(app, args)
    assert report.exit_code == 0, report.output
    rows = list(csv.DictReader((tmp_path / "rep" / "against_reference.csv").open()))
    assert {r["resources.cpu_freq"] for r in rows} == {"max", "min_energy"}

    def summary(band, arm, seed):
        name = f"system.bandwidth_hz={band},resources=_{arm}_,seed={seed}"
        algs = json.loads((tmp_path / "sw" / name / "summary.json").read_text())["algorithms"]
        return next(iter(algs.values()))

    def row(value, cpu, metric):
        return next(r for r in rows if float(r["system.bandwidth_hz"]) == value and r["resources.cpu_freq"] == cpu
                    and r["metric"] == metric)

    for band, value in (("1e6", 1e6), ("1e7", 1e7)):
        by_hand = [summary(band, "cpu_freq=min_energy", s)["time_to_accuracy_s"]["0.5"]
                   - summary(band, "bandwidth=equal", s)["time_to_accuracy_s"]["0.5"] for s in (0, 1)]
        got = row(value, "min_energy", "time_to_accuracy_s")
        assert float(got["difference_mean"]) == pytest.approx(statistics.fmean(by_hand))
        assert float(got["difference_mean"]) > 0  # DVFS stretches the rounds ...
        assert float(row(value, "min_energy", "energy_to_accuracy_j")["difference_mean"]) < 0  # ... and saves energy
        assert float(row(value, "max", "energy_to_accuracy_j")["difference_mean"]) == 0.0  # the reference itself
    assert (tmp_path / "rep" / "energy_vs_time.png").stat().st_size > 0
    assert "## Against the reference point" in (tmp_path / "rep" / "leaderboard.md").read_text()
    bad = runner.invoke(app, ["report", str(tmp_path / "sw"), "--out", str(tmp_path / "rep2"),
                              "--reference", "resources.bandwidth=min_max_time"])
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1
    assert "--reference: no group of these runs has resources.bandwidth = 'min_max_time'" in bad.stderr
