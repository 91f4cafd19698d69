"""OFDMA (issue 48.2): resource blocks, per-block fading, the resource_blocks policies, and the scheme on the clock."""

from __future__ import annotations

import csv
import itertools
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_here import edgesim_here

from edgesim.access.ofdma import RB_POLICIES, Ofdma, OfdmaOptions, RbRound, relaxed_min_max_time_s
from edgesim.access.registry import Cell
from edgesim.backend import DeviceWork, RoundPlan
from edgesim.config import BudgetConfig, ConfigError, SystemConfig
from edgesim.engine import Simulation
from edgesim.resources import ResourcesConfig

N0 = 1e-20
B_RB = 180e3


def _round(gains, bits, n_blocks, power_w=0.1, split="equal"):
    k = len(gains)
    g = np.asarray(gains, dtype=float)
    g = np.repeat(g[:, None], n_blocks, axis=1) if g.ndim == 1 else g
    return RbRound(np.arange(k), g, np.full(k, power_w), np.asarray(bits, dtype=float), B_RB, N0, split)


def test_a_rate_over_blocks_by_hand():
    r = _round([[1e-13, 4e-13, 9e-13]], [1e6], 3)
    hand = sum(B_RB * math.log2(1 + (0.1 / 2) * g / (N0 * B_RB)) for g in (1e-13, 9e-13))  # blocks 0 and 2, p/2 each
    assert r.rate_bps(0, [0, 2]) == pytest.approx(hand, rel=1e-12)


def test_equal_gives_floor_n_over_k_and_the_rest_to_the_slowest():
    r = _round([1e-12, 1e-14, 1e-13], [1e6] * 3, 8)
    owner = RB_POLICIES["equal"]().allocate(r)
    counts = np.bincount(owner, minlength=3)
    assert counts.tolist() == [2, 3, 3]  # 8 // 3 = 2 each; the two slowest (devices 1 and 2) one more
    assert (np.diff(owner) >= 0).all()  # consecutive blocks


def test_best_channel_gives_each_block_to_its_best_device_after_one_each():
    g = np.array([[5.0, 4.0, 3.0, 9.0], [1.0, 2.0, 8.0, 1.0]]) * 1e-13
    owner = RB_POLICIES["best_channel"]().allocate(_round(g, [1e6, 1e6], 4))
    # device 1 (weaker on average) picks first: block 2 (8); device 0 its best free one: block 3 (9);
    # blocks 0 and 1 go to the best gain on each: device 0 (5 > 1, 4 > 2)
    assert owner.tolist() == [0, 0, 1, 0]


def _best_integer_s(r: RbRound) -> float:
    k, n = r.devices.size, r.n_blocks
    best = math.inf
    for counts in itertools.product(range(1, n + 1), repeat=k):
        if sum(counts) == n:
            owner = np.repeat(np.arange(k), counts)
            best = min(best, float(r.times_s(owner).max()))
    return best


@pytest.mark.parametrize("seed", range(4))
def test_min_max_time_greedy_with_flat_blocks_is_the_integer_optimum_and_its_gap_to_the_relaxation(seed):
    rng = np.random.default_rng(seed)
    r = _round(rng.exponential(1e-13, size=3) * 10 ** rng.uniform(-2, 0, size=3), rng.uniform(1e5, 1e6, size=3), 9)
    greedy_s = float(r.times_s(RB_POLICIES["min_max_time"]().allocate(r)).max())
    relaxed_s = relaxed_min_max_time_s(r)
    # Integer optimum (brute force) = greedy: with flat blocks the time of each device falls as it gains blocks, and
    # giving the next block to the bottleneck is optimal for such a separable min-max (Ibaraki and Katoh, 1988, §4).
    assert greedy_s == pytest.approx(_best_integer_s(r), rel=1e-12)
    # The gap: relaxation <= greedy <= the time of the relaxation's counts rounded down (a feasible assignment).
    assert relaxed_s <= greedy_s * (1 + 1e-9)
    x = np.array([_least_blocks(r, k, relaxed_s) for k in range(3)])
    floor = np.floor(x * (1 + 1e-9)).astype(int)  # x_k >= 1 in the relaxation
    assert floor.sum() <= r.n_blocks
    assert greedy_s <= float(r.times_s(np.repeat(np.arange(3), floor)).max()) * (1 + 1e-12)


def _least_blocks(r, k, t):
    lo, hi = 1.0, float(r.n_blocks)
    g, p, s = r.gains_rb[k, 0], r.tx_power_w[k], r.upload_bits[k]
    if lo * B_RB * math.log2(1 + p * g / (N0 * lo * B_RB)) >= s / t:
        return lo
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid * B_RB * math.log2(1 + p * g / (N0 * mid * B_RB)) >= s / t:
            hi = mid
        else:
            lo = mid
    return hi


@pytest.mark.parametrize("seed", range(5))
def test_min_max_time_is_never_slower_than_equal_and_best_channel_with_flat_blocks(seed):
    rng = np.random.default_rng(seed)
    r = _round(rng.exponential(1e-13, size=4) * np.array([1.0, 0.1, 0.03, 1.0]), rng.uniform(2e5, 2e6, size=4), 20)
    times = {name: float(r.times_s(RB_POLICIES[name]().allocate(r)).max()) for name in RB_POLICIES}
    assert times["min_max_time"] <= min(times["equal"], times["best_channel"]) * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_min_max_time_with_fading_only_adds_blocks_that_speed_a_device_up(seed):
    rng = np.random.default_rng(seed)
    g = rng.exponential(1e-13, size=(4, 20)) * np.array([[1.0], [0.1], [0.003], [1.0]])
    r = _round(g, [1e6, 1e6, 2e6, 5e5], 20)
    owner = RB_POLICIES["min_max_time"]().allocate(r)
    for k in range(4):
        mine = np.flatnonzero(owner == k)
        assert mine.size >= 1
        for drop in mine:  # each block it holds speeds it up: without any one of them it is no faster
            rest = mine[mine != drop]
            if rest.size:
                assert r.rate_bps(k, rest) <= r.rate_bps(k, mine) * (1 + 1e-12)


def test_block_fading_is_unit_mean_per_round_and_coherent_over_coherence_rbs():
    link = Ofdma(None, Cell(10e6, N0, 400, seed=3), OfdmaOptions(resource_blocks=50, coherence_rbs=5))
    h = link.block_gains(7, np.ones(400))
    assert h.shape == (400, 50)
    assert (h[:, 0:5] == h[:, [0]]).all() and not (h[:, 5] == h[:, 0]).all()
    assert h.mean() == pytest.approx(1.0, abs=0.05)  # exponential(1) draws: unit mean
    assert (link.block_gains(7, np.ones(400)) == h).all() and not (link.block_gains(8, np.ones(400)) == h).all()
    flat = Ofdma(None, Cell(10e6, N0, 4, seed=3), OfdmaOptions(resource_blocks=6, rb_fading=False))
    assert (flat.block_gains(0, [2.0, 3.0, 4.0, 5.0]) == np.array([[2.0], [3.0], [4.0], [5.0]])).all()


def test_blocks_exceeding_the_band_are_refused():
    with pytest.raises(ConfigError, match=r"resource_blocks = 30: expected N · rb_bandwidth_hz at most the band"):
        Ofdma(None, Cell(5e6, N0, 4), OfdmaOptions(resource_blocks=30))
    with pytest.raises(ConfigError, match=r"coherence_rbs = 30: expected an integer in \[1, resource_blocks = 25\]"):
        OfdmaOptions(coherence_rbs=30)
    with pytest.raises(ConfigError, match=r"power_split = 'greedy': expected 'equal' or 'water_filling'"):
        OfdmaOptions(power_split="greedy")


class _Plan:
    def __init__(self, bits):
        self.bits = bits

    def plan_round(self, view):
        return RoundPlan(tuple(DeviceWork(d, {"train": 1e8}, b, 0.0) for d, b in enumerate(self.bits)))

    def complete_round(self, outcome):
        return {}


def test_on_the_clock_each_upload_takes_bits_over_its_summed_rate():
    system = SystemConfig(n_devices=3, bandwidth_hz=5e6, access="ofdma", channel_gain_db=-110, tx_power_dbm=20)
    opts = OfdmaOptions(resource_blocks=7, rb_fading=False)
    sim = Simulation(system, BudgetConfig(rounds=1), _Plan([1e6, 2e6, 1e6]), seed=0, access_options=opts,
                     resources=ResourcesConfig(resource_blocks="min_max_time"))
    rec = sim.run_round()
    counts = [row.resource_blocks for row in rec.devices]
    assert sum(counts) == 7 and all(isinstance(c, int) and c >= 1 for c in counts)
    g, p = 1e-11, 0.1
    n0 = system.noise_psd_w_per_hz
    for row in rec.devices:
        n = row.resource_blocks
        rate = n * B_RB * math.log2(1 + (p / n) * g / (n0 * B_RB))
        assert row.upload_airtime_s == pytest.approx(float(sim.system.n_devices and [1e6, 2e6, 1e6][row.device]) / rate,
                                                     rel=1e-12)
        assert row.bandwidth_hz == n * B_RB
    assert counts[1] > counts[0]  # the larger upload gets more blocks


SCENARIO = """
name = "ofdma"
seed = 2
[system]
n_devices = 8
bandwidth_hz = 5e6
access = "ofdma"
[access]
resource_blocks = 25
[budget]
total_time_s = 100
rounds = 2
[workload]
cycles_per_sample = 1e7
samples_per_device = 50
model_bits = 1e6
[run]
backend = "parametric"
clients_per_round = 4
"""


def _edgesim(tmp_path: Path, text: str, *extra: str) -> subprocess.CompletedProcess:
    """``edgesim run`` of ``text`` in this process (tests/cli_here.py: no fresh interpreter's start)."""
    (tmp_path / "s.toml").write_text(text)
    return edgesim_here("run", tmp_path / "s.toml", "--out", tmp_path / "run", "-q", *extra, timeout_s=300)


def test_a_run_writes_integer_block_counts(tmp_path):
    done = _edgesim(tmp_path, SCENARIO, "--set", "resources.resource_blocks=best_channel")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader((tmp_path / "run" / "devices.csv").open()))
    by_round: dict[str, int] = {}
    for row in rows:
        assert row["resource_blocks"].isdigit() and int(row["resource_blocks"]) >= 1
        by_round[row["round"]] = by_round.get(row["round"], 0) + int(row["resource_blocks"])
    assert set(by_round.values()) == {25}


@pytest.mark.parametrize("extra, message", [
    (("--set", "access.resource_blocks=30"),
     "[access]: resource_blocks = 30: expected N · rb_bandwidth_hz (= 5400000.0 Hz) at most [system] bandwidth_hz = "
     "5000000.0 Hz"),
    (("--set", "access.resource_blocks=3"),
     "[access]: resource_blocks = 3: expected at least [run] clients_per_round = 4 (every uploader needs one block)"),
    (("--set", "system.access=fdma"),
     "[access]: resource_blocks = 25 is an option of access = 'ofdma', not of access = 'fdma'; expected no options"),
    (("--set", "budget.round_mode=fedbuff"),
     "access = 'ofdma' has no asynchronous mode ([budget] round_mode = 'fedbuff')"),
])
def test_bad_input_is_one_line(tmp_path, extra, message):
    done = _edgesim(tmp_path, SCENARIO, *extra)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr


def test_a_block_policy_under_fdma_is_refused(tmp_path):
    text = SCENARIO.replace('access = "ofdma"', 'access = "fdma"').replace("[access]\nresource_blocks = 25\n", "")
    done = _edgesim(tmp_path, text + '[resources]\nresource_blocks = "best_channel"\n')
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert ("resource_blocks = 'best_channel' applies to an access scheme that assigns resource blocks (such as "
            "'ofdma'); this cell has access = 'fdma'" in done.stderr)
