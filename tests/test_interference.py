"""Inter-cell interference (edgesim/interference.py): the bands under frequency reuse, the coupling and the
interference PSD by hand, a two-cell timeline by hand with and without the interferer, and the property that cells on
disjoint sub-bands (reuse n = number of cells) run exactly as independent single cells."""

import math

import numpy as np
import pytest
import simpy

from edgesim.backend import DeviceWork, RoundPlan
from edgesim.cells import cell_bands_hz
from edgesim.config import BudgetConfig, SystemConfig
from edgesim.engine import Simulation
from edgesim.interference import CellLinks, band_overlap_hz, coupling_per_hz2, interference_psd_w_per_hz
from edgesim.resources import ResourcesConfig

B_HZ = 1e6
N0 = 10 ** (-174 / 10) / 1e3  # -174 dBm/Hz in W/Hz
NB = N0 * B_HZ  # the noise power over the band (W)
FAR = [{"x_m": 0.0, "y_m": 0.0}, {"x_m": 3000.0, "y_m": 0.0}]


def test_bands_under_reuse_by_hand():
    cells = [{"x_m": 0, "y_m": 0}, {"x_m": 1, "y_m": 0}, {"x_m": 2, "y_m": 0, "bandwidth_hz": 6e6}]
    one = cell_bands_hz(SystemConfig(cells=cells, bandwidth_hz=3e6))
    assert one.tolist() == [[0.0, 3e6], [0.0, 3e6], [0.0, 6e6]]  # reuse 1: every cell from 0 Hz, its whole band
    three = cell_bands_hz(SystemConfig(cells=cells, bandwidth_hz=3e6, frequency_reuse=3))
    assert three.tolist() == [[0.0, 1e6], [1e6, 1e6], [4e6, 2e6]]  # cell c on sub-band c mod 3 of its band
    two = cell_bands_hz(SystemConfig(cells=cells, bandwidth_hz=3e6, frequency_reuse=2))
    assert two.tolist() == [[0.0, 1.5e6], [1.5e6, 1.5e6], [0.0, 3e6]]


def test_overlap_and_coupling_by_hand():
    assert band_overlap_hz(0.0, 3.0, 1.0, 5.0) == 2.0
    assert band_overlap_hz(0.0, 1.0, 1.0, 1.0) == 0.0  # touching bands do not overlap
    assert band_overlap_hz(2.0, 1.0, 0.0, 10.0) == 1.0  # one inside the other
    k = coupling_per_hz2(np.array([[0.0, 2.0], [1.0, 4.0], [10.0, 1.0]]))
    # |[0,2) ∩ [1,5)| = 1 Hz over 2 Hz · 4 Hz; the third band overlaps neither; the diagonal is 0
    assert k.tolist() == [[0.0, 1 / 8, 0.0], [1 / 8, 0.0, 0.0], [0.0, 0.0, 0.0]]
    received = np.array([[0.0, 8.0, 5.0], [16.0, 0.0, 5.0], [7.0, 7.0, 0.0]])  # W from cell a at BS b
    assert interference_psd_w_per_hz(received, k).tolist() == [2.0, 1.0, 0.0]  # 16/8 at BS 0, 8/8 at BS 1
    assert (k == k.T).all()  # property: the coupling is symmetric
    assert band_overlap_hz(1.0, 5.0, 0.0, 3.0) == band_overlap_hz(0.0, 3.0, 1.0, 5.0)
    assert interference_psd_w_per_hz(np.zeros((3, 3)), k).tolist() == [0.0, 0.0, 0.0]  # nobody on air
    assert interference_psd_w_per_hz(2 * received, k).tolist() == [4.0, 2.0, 0.0]  # linear in the power


def test_the_plans_sinr_by_hand():
    # Two cells on one band W: device 0 (cell 0) and devices 1, 2 (cell 1); p = 1 W. Device 0 delivers 3 N0W to BS 0
    # and 2 N0W to BS 1; devices 1 and 2 deliver 1 N0W and 3 N0W to BS 0 (their mean: 2 N0W) and 3 N0W to BS 1.
    # SNR_0 = 3; SINR_0 = 3 N0W / (N0W + 2 N0W) = 1; SNR_1 = SNR_2 = 3; SINR = 3 / (1 + 2) = 1 (device 0 alone in
    # cell 0 is the mean); with the bands disjoint: SINR = SNR.
    from edgesim.interference import one_per_cell_sinr

    g = np.array([[3.0, 2.0], [1.0, 3.0], [3.0, 3.0]]) * NB
    snr, sinr = one_per_cell_sinr(g, [0, 1, 1], 1.0, np.array([[0.0, B_HZ], [0.0, B_HZ]]), N0)
    assert snr == pytest.approx([3.0, 3.0, 3.0], rel=1e-12) and sinr == pytest.approx([1.0, 1.0, 1.0], rel=1e-12)
    snr, sinr = one_per_cell_sinr(g, [0, 1, 1], 1.0, np.array([[0.0, B_HZ], [B_HZ, B_HZ]]), N0)
    assert (sinr == snr).all()


def _links(access, reuse=1):
    """Two cells' links on a fresh clock, device 0 in cell 0 and device 1 in cell 1; the round's gains of every link
    set so that alone each device has SNR 3 and under the other's interference SINR 3 N0B / (N0B + 2 N0B) = 1."""
    env = simpy.Environment()
    system = SystemConfig(n_devices=2, cells=FAR, bandwidth_hz=B_HZ * reuse, access=access, frequency_reuse=reuse)
    links = CellLinks(env, system, (0, 1), N0, ResourcesConfig(), None, 0)
    links.begin_round(0, [0, 1], [3 * NB, 3 * NB], [1.0, 1.0], [1.0, 1.0], np.array([[3 * NB, 2 * NB],
                                                                                        [2 * NB, 3 * NB]]))
    return env, links


def _timeline(access, reuse=1, second=True):
    """Device 0 sends 4 Mbit from t = 0; device 1 (the other cell) 1 Mbit from t = 0.5 s; their end times (s)."""
    env, links = _links(access, reuse)
    ends = {}

    def send(device, start_s, bits):
        yield env.timeout(start_s)
        transfer = yield from links.uplink(device).transmit(env, device, bits, 3 * NB, 1.0)
        ends[device] = transfer.end_s
        assert transfer.sent_bits == bits

    env.process(send(0, 0.0, 4e6))
    if second:
        env.process(send(1, 0.5, 1e6))
    env.run()
    return ends, links.field


@pytest.mark.parametrize("access", ["tdma", "fdma", "noma"])
def test_a_two_cell_timeline_by_hand(access):
    # Alone: r = b log2(1 + 3) = 2 Mbit/s; together: SINR = 3 N0B / (N0B + 2 N0B) = 1, r = b log2(2) = 1 Mbit/s.
    # Device 0: 0 -> 0.5 s alone, 1 Mbit sent; 0.5 -> 1.5 s with device 1, 1 Mbit more (device 1 sends its 1 Mbit
    # and ends at 1.5 s); the last 2 Mbit alone again: ends at 1.5 + 1 = 2.5 s.
    ends, field = _timeline(access)
    assert ends[1] == pytest.approx(1.5, rel=1e-12)
    assert ends[0] == pytest.approx(2.5, rel=1e-12)
    assert field.changes == 4  # each start and end changes the other cell's interference
    # without the interferer: 4 Mbit at 2 Mbit/s (its start and end still change what cell 1 would hear)
    alone, field = _timeline(access, second=False)
    assert alone[0] == pytest.approx(2.0, rel=1e-12) and field.changes == 2


def test_the_interference_psd_while_both_are_on_air():
    env, links = _links("tdma")
    seen = []

    def watch():
        yield env.timeout(1.0)  # both on air
        seen.append(links.field.psd_w_per_hz.tolist())

    def send(device, start_s, bits):
        yield env.timeout(start_s)
        yield from links.uplink(device).transmit(env, device, bits, 3 * NB, 1.0)

    env.process(send(0, 0.0, 4e6))
    env.process(send(1, 0.5, 1e6))
    env.process(watch())
    env.run()
    # I_b = p g_{j,b} |W ∩ W| / (W W) = 2 N0B / B = 2 N0 at both base stations; none once both are done
    assert seen[0] == pytest.approx([2 * N0, 2 * N0], rel=1e-12)
    assert links.field.psd_w_per_hz.tolist() == [0.0, 0.0]


def test_reuse_two_gives_no_interference():
    # reuse 2 over 2 MHz: each cell alone on 1 MHz; the same timeline without any interference (limiting case)
    ends, field = _timeline("tdma", reuse=2)
    assert ends == {0: pytest.approx(2.0, rel=1e-12), 1: pytest.approx(1.0, rel=1e-12)} and field.changes == 0


class Scripted:
    """Every round: the given work for every device."""

    def __init__(self, work):
        self.work = tuple(work)

    def plan_round(self, view):
        return RoundPlan(self.work)

    def complete_round(self, outcome):
        return {}


class Replay:
    """A channel that gives the recorded gains of some devices of another run (static devices)."""

    def __init__(self, gains_by_round, serving_cell):
        self.gains_by_round, self.serving_cell = gains_by_round, serving_cell

    def gains(self, round_index):
        return self.gains_by_round[round_index]

    def advance(self, duration_s):
        pass


def _offsets(sim, ids=None, keep=None):
    """Each device event as (round, device, kind) -> seconds after its round's start (``ids``: the run's device ids
    as the other run numbers them; ``keep``: only these devices)."""
    starts = {e.round_index: e.time_s for e in sim.events if e.kind == "round_start"}
    return {(e.round_index, e.device if ids is None else ids[e.device], e.kind): e.time_s - starts[e.round_index]
            for e in sim.events if e.device >= 0 and (keep is None or e.device in keep)}


def _work(n):
    return [DeviceWork(d, {"train": 2e8 * (1 + d % 3)}, 3e5 * (1 + d), 0.0) for d in range(n)]


@pytest.mark.parametrize("access", ["tdma", "fdma"])
def test_reuse_n_equals_independent_single_cells(access):
    """Property: with reuse n = number of cells no cell hears another; each cell runs exactly as a single cell of
    its sub-band with its devices (same gains): every device's upload end, airtime and energy equal."""
    n, rounds = 6, 2
    system = SystemConfig(n_devices=n, cells=FAR, cell_radius_m=250.0, placement="per_cell", bandwidth_hz=2 * B_HZ,
                          frequency_reuse=2, access=access, rayleigh_fading=True, shadowing_std_db=4.0)
    budget = BudgetConfig(total_time_s=100.0, rounds=rounds)
    multi = Simulation(system, budget, Scripted(_work(n)), seed=4)
    gains = [multi.channel.gains(r) for r in range(rounds)]
    multi.run()
    rows = {(r.round_index, r.device): r for rec in multi.records for r in rec.devices}
    for cell in (0, 1):
        mine = [d for d in range(n) if multi.serving_cell[d] == cell]
        assert mine == list(range(cell, n, 2))  # per_cell: device d in cell d mod 2, and nearest to it
        single = Simulation(SystemConfig(n_devices=len(mine), bandwidth_hz=B_HZ, access=access), budget,
                            Scripted([DeviceWork(i, w.compute_cycles, w.upload_bits, 0.0)
                                      for i, w in enumerate(_work(n)[d] for d in mine)]), seed=4)
        single.channel = Replay([g[mine] for g in gains], (0,) * len(mine))
        single.run()
        for rec in single.records:
            for row in rec.devices:
                other = rows[(rec.round_index, mine[row.device])]
                assert (row.upload_airtime_s, row.radio_energy_j, row.channel_gain, row.bandwidth_hz) == \
                    (other.upload_airtime_s, other.radio_energy_j, other.channel_gain, other.bandwidth_hz)
        # the same timeline within each round (a round of the two cells ends with the later cell, so the rounds
        # after the first start later than the single cell's)
        assert _offsets(single, mine) == pytest.approx(_offsets(multi, keep=mine), rel=1e-12, abs=1e-12)


def test_reuse_one_slows_the_uploads_down():
    """The same two cells on one shared band (reuse 1, each cell the whole 1 MHz) against reuse 1 with the cells
    far apart enough to hear nothing: interference only lengthens airtimes (a property)."""
    def airtimes(x_m):
        system = SystemConfig(n_devices=4, cells=[{"x_m": 0, "y_m": 0}, {"x_m": x_m, "y_m": 0}], cell_radius_m=250.0,
                              placement="per_cell", bandwidth_hz=B_HZ, access="fdma")
        sim = Simulation(system, BudgetConfig(total_time_s=100.0, rounds=1), Scripted(_work(4)), seed=1)
        sim.run()
        return np.array([r.upload_airtime_s for r in sim.records[0].devices]), sim

    near, sim = airtimes(600.0)
    assert sim._cell_links.field.changes > 0
    far, _ = airtimes(1e6)  # 1000 km apart: the interference is ~1e-10 of the noise
    assert (near >= far).all() and (near > far).any()  # those that overlap a transfer of the other cell: slower
    assert math.isfinite(near.sum())


def test_determinism_and_resume_with_cells():
    system = SystemConfig(n_devices=6, cells=[{"x_m": 0, "y_m": 0}, {"x_m": 400, "y_m": 0}, {"x_m": 200, "y_m": 350}],
                          rayleigh_fading=True, shadowing_std_db=6.0, mobility="random_waypoint", speed_m_per_s=5.0,
                          access="fdma", association="max_gain")
    budget = BudgetConfig(total_time_s=100.0, rounds=4)

    def events(sim):
        return [(e.time_s, e.round_index, e.device, e.kind, e.bits) for e in sim.events]

    whole = Simulation(system, budget, Scripted(_work(6)), seed=9)
    whole.run()
    again = Simulation(system, budget, Scripted(_work(6)), seed=9)
    again.run()
    assert events(whole) == events(again)
    first = Simulation(system, budget, Scripted(_work(6)), seed=9)
    first.run(rounds=2)
    resumed = Simulation(system, budget, Scripted(_work(6)), seed=9)
    resumed.load_state_dict(first.state_dict())
    resumed.run()
    assert events(first) + events(resumed) == events(whole)


def test_each_cell_allocates_its_own_band():
    """[resources] bandwidth = "equal_static" per cell: cell 0 (1 MHz) splits its band between its 2 uploaders, cell 1 (its
    own 3 MHz) between its 2: 0.5 MHz and 1.5 MHz each (banded FDMA, interference on the overlapping 1 MHz)."""
    cells = [{"x_m": 0, "y_m": 0}, {"x_m": 600, "y_m": 0, "bandwidth_hz": 3e6}]
    system = SystemConfig(n_devices=4, cells=cells, placement="per_cell", bandwidth_hz=B_HZ, access="fdma",
                          cell_radius_m=250.0)
    sim = Simulation(system, BudgetConfig(total_time_s=100.0, rounds=1), Scripted(_work(4)), seed=2,
                     resources=ResourcesConfig(bandwidth="equal_static"))
    sim.run()
    bands = {r.device: r.bandwidth_hz for r in sim.records[0].devices}
    assert sim.serving_cell == (0, 1, 0, 1)
    assert bands == {0: 0.5e6, 2: 0.5e6, 1: 1.5e6, 3: 1.5e6}
    assert sim._cell_links.field.changes > 0


def test_ofdma_per_cell_with_interference():
    """OFDMA in each cell (5 blocks of 180 kHz), reuse 1: every upload on its cell's blocks, re-timed by the other
    cell's; the same run with the cells 10 km apart is faster for those that overlap."""
    from edgesim.access.ofdma import OfdmaOptions

    def run(x_m):
        system = SystemConfig(n_devices=4, cells=[{"x_m": 0, "y_m": 0}, {"x_m": x_m, "y_m": 0}], placement="per_cell",
                              bandwidth_hz=B_HZ, access="ofdma", cell_radius_m=250.0)
        sim = Simulation(system, BudgetConfig(total_time_s=100.0, rounds=1), Scripted(_work(4)), seed=2,
                         access_options=OfdmaOptions(resource_blocks=5, rb_bandwidth_hz=180e3, rb_fading=False))
        sim.run()
        return sim

    near, far = run(600.0), run(1e4)
    rows = near.records[0].devices
    assert all(r.resource_blocks >= 2 and r.arrived for r in rows)  # 5 blocks over each cell's 2 uploaders
    a = np.array([r.upload_airtime_s for r in rows])
    b = np.array([r.upload_airtime_s for r in far.records[0].devices])
    assert (a >= b).all() and (a > b).any() and near._cell_links.field.changes > 0


@pytest.mark.parametrize("access", ["tdma", "fdma"])
def test_a_cut_transfer_keeps_the_bits_sent_at_each_rate(access):
    # Device 0 as in the timeline, cut at t = 1 s: 1 Mbit alone (0-0.5 s at 2 Mbit/s) + 0.5 Mbit under interference
    # (0.5-1 s at 1 Mbit/s) = 1.5 Mbit sent; device 1 then finishes alone at 2 Mbit/s: 0.5 Mbit left at 1 s, ends 1.25 s.
    env, links = _links(access)
    out = {}

    def send(device, start_s, bits):
        yield env.timeout(start_s)
        try:
            transfer = yield from links.uplink(device).transmit(env, device, bits, 3 * NB, 1.0,
                                                                lambda t: out.__setitem__(("on air", device), t))
            out[device] = transfer.end_s
        except simpy.Interrupt:
            out["cut"] = out[("on air", device)].sent_bits

    first = env.process(send(0, 0.0, 4e6))
    env.process(send(1, 0.5, 1e6))

    def cut():
        yield env.timeout(1.0)
        first.interrupt("deadline")

    env.process(cut())
    env.run()
    assert out["cut"] == pytest.approx(1.5e6, rel=1e-12)
    assert out[1] == pytest.approx(1.25, rel=1e-12)


def _policy_cases():
    from edgesim.resources.policies import POLICIES

    cases = []
    for kind in ("scheduling", "bandwidth", "power", "cpu_freq"):
        for name, cls in POLICIES[kind].items():
            access = (getattr(cls, "access", None) or ("fdma",))[0]
            slow = (kind, name) == ("bandwidth", "min_energy")  # its solver alone takes ~2 s (the same on one cell)
            cases.append(pytest.param(kind, name, access, marks=[pytest.mark.slow] if slow else []))
    return cases


@pytest.mark.parametrize("kind, name, access", _policy_cases())
def test_every_resource_policy_runs_per_cell(kind, name, access):
    """Each [resources] policy with two cells on disjoint sub-bands (reuse 2): the run completes, every device is in
    a cell, and a policy's bands of one cell sum to at most that cell's 500 kHz."""
    from edgesim.config import WorkloadConfig
    from edgesim.curve import ParametricBackend

    system = SystemConfig(n_devices=6, cells=FAR, cell_radius_m=250.0, placement="per_cell", bandwidth_hz=B_HZ,
                          frequency_reuse=2, access=access, shadowing_std_db=4.0)
    workload = WorkloadConfig(cycles_per_sample=1e6, samples_per_device=100, model_bits=2e5)
    sim = Simulation(system, BudgetConfig(total_time_s=60.0, rounds=2), ParametricBackend(6, 4, workload, seed=0),
                     seed=3, resources=ResourcesConfig(**{kind: name}))
    sim.run()
    for rec in sim.records:
        assert rec.devices
        for cell in (0, 1):
            band = sum(r.bandwidth_hz for r in rec.devices if sim.serving_cell[r.device] == cell)
            if access == "fdma" and kind == "bandwidth" and name != "equal":
                assert band <= 0.5e6 * (1 + 1e-9)


@pytest.mark.parametrize("delay, expected", [(None, 1 / 3), (0.0, 1.0 + 1.0), (0.5, 2 / 3 + 2 / 3)])
def test_aircomp_per_cell_noise_by_hand(delay, expected):
    """AirComp in each of two cells, one device each (η = P g = 3 N0W, power P = 1 W): a cell's aggregate carries
    noise of variance (N0 + Ī) W / η per parameter, Ī the interference PSD averaged over its airtime T = 10 / W
    (10 parameters, one symbol each at W symbols/s). Alone: N0W / 3N0W = 1/3. The other cell's device on air the
    whole time (2 N0W received): (N0W + 2N0W) / 3N0W = 1 in each cell, 2 summed. The other cell half a T later:
    each cell hears it half its airtime, Ī W = N0W, 2/3 each, 4/3 summed."""
    env, links = _links("aircomp")
    airtime_s = 10 / B_HZ

    def send(device, start_s):
        yield env.timeout(start_s)
        yield from links.uplink(device).transmit(env, device, 320.0, 3 * NB, 1.0)

    env.process(send(0, 0.0))
    if delay is not None:
        env.process(send(1, delay * airtime_s))
    env.run()
    arrived = [0] if delay is None else [0, 1]
    assert links.noise_var(arrived) == pytest.approx(expected, rel=1e-9)


def test_aircomp_rounds_over_two_cells_sum_the_cells_noise():
    """A round of AirComp over two cells on disjoint sub-bands (reuse 2): the outcome's noise variance is the sum of
    each cell's N0 b / η_c, η_c = min_k P g_k over the cell's devices (Zhu, Wang and Huang's truncated inversion)."""
    class Keep(Scripted):
        def complete_round(self, outcome):
            self.outcome = outcome
            return {}

    system = SystemConfig(n_devices=4, cells=FAR, cell_radius_m=250.0, placement="per_cell", bandwidth_hz=2 * B_HZ,
                          frequency_reuse=2, access="aircomp")
    backend = Keep(_work(4))
    sim = Simulation(system, BudgetConfig(total_time_s=100.0, rounds=1), backend, seed=5)
    g = sim.channel.gains(0)
    p = system.tx_power_w[0]
    sim.run()
    assert sorted(backend.outcome.arrived) == [0, 1, 2, 3]
    expected = sum(N0 * B_HZ / min(p * g[d] for d in range(4) if d % 2 == c) for c in (0, 1))
    assert backend.outcome.over_the_air_noise_var == pytest.approx(expected, rel=1e-12)
