"""Uplink NOMA with SIC (issue 48.3): the two-device hand timeline, cluster_size = 1 is FDMA exactly, the sum rate
of a cluster while all transmit, the clusters, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy
from cli_here import edgesim_here

from edgesim.access import make_link
from edgesim.access.noma import Noma, NomaOptions, clusters_of
from edgesim.access.registry import Cell
from edgesim.backend import DeviceWork, RoundPlan
from edgesim.config import BudgetConfig, ConfigError, SystemConfig
from edgesim.engine import Simulation

N0 = 1e-20
B = 1e6  # N0 B = 1e-14 W


def _run(link, starts, bits, gains, power_w=1.0):
    env = link.env
    out = {}

    def device(d):
        yield env.timeout(starts[d])
        out[d] = yield from link.transmit(env, d, bits[d], gains[d], power_w)

    for d in range(len(bits)):
        env.process(device(d))
    env.run()
    return out


def test_two_devices_by_hand():
    """Received powers 1e-12 W (device 0, decoded first) and 2e-13 W (device 1, decoded last), one cluster.

    While both transmit: r0 = B log2(1 + 100/21) = 2.5266 Mbit/s, r1 = B log2(21) = 4.3923 Mbit/s. Device 1's
    1 Mbit ends at t1 = 1e6 / r1 = 0.22767 s; device 0 then has 2e6 − r0 t1 bits left at B log2(101) = 6.6582 Mbit/s.
    """
    env = simpy.Environment()
    link = make_link(env, "noma", Cell(B, N0, 2), NomaOptions(cluster_size=2))
    link.begin_round(0, [0, 1], [1e-12, 2e-13], [1.0, 1.0], [2e6, 1e6])
    out = _run(link, [0.0, 0.0], [2e6, 1e6], [1e-12, 2e-13])
    r0, r1, r0_alone = B * math.log2(1 + 100 / 21), B * math.log2(21), B * math.log2(101)
    t1 = 1e6 / r1
    assert out[1].end_s == pytest.approx(t1, rel=1e-12)
    assert out[0].end_s == pytest.approx(t1 + (2e6 - r0 * t1) / r0_alone, rel=1e-12)
    assert out[0].band_hz == pytest.approx(B, rel=1e-12) and out[1].band_hz == pytest.approx(B, rel=1e-12)
    assert t1 == pytest.approx(0.227670, rel=1e-5) and out[0].end_s == pytest.approx(0.441659, rel=1e-5)


def test_the_sum_rate_of_a_cluster_while_all_transmit_is_the_sum_capacity():
    rng = np.random.default_rng(2)
    for m in (2, 3, 4):
        gp = rng.exponential(1e-13, size=m)
        env = simpy.Environment()
        link = make_link(env, "noma", Cell(B, N0, m), NomaOptions(cluster_size=m))
        link.begin_round(0, list(range(m)), list(gp), [1.0] * m, [1e9] * m)
        for d in range(m):
            env.process(link.transmit(env, d, 1e9, float(gp[d]), 1.0))
        env.run(until=1e-3)
        assert link._rates.sum() == pytest.approx(B * math.log2(1 + gp.sum() / (N0 * B)), rel=1e-10)


def test_clusters_pair_strong_with_weak():
    g = [5.0, 1.0, 3.0, 2.0, 4.0, 0.5]  # sorted: 0 (5), 4 (4), 2 (3), 3 (2), 1 (1), 5 (0.5)
    c = clusters_of(g, 2, "strong_weak")
    pairs = sorted(sorted(np.flatnonzero(c == k).tolist()) for k in range(3))
    assert pairs == [[0, 5], [1, 4], [2, 3]]  # 5 with 0.5, 4 with 1, 3 with 2
    c = clusters_of(g, 2, "adjacent")
    assert sorted(sorted(np.flatnonzero(c == k).tolist()) for k in range(3)) == [[0, 4], [1, 5], [2, 3]]
    assert np.bincount(clusters_of(g, 4)).tolist() == [3, 3]  # ⌈6/4⌉ = 2 clusters of at most 4


class _RandomPlans:
    def __init__(self, n, k, seed):
        self.n, self.k, self.seed = n, k, seed

    def plan_round(self, view):
        rng = np.random.default_rng((self.seed, view.round_index))
        chosen = np.sort(rng.choice(self.n, size=self.k, replace=False))
        cycles = rng.choice([1e8, 2e8, 5e8], size=self.k)
        bits = rng.choice([0.0, 5e6, 1e7], size=self.k)
        return RoundPlan(tuple(DeviceWork(int(d), {"train": float(c)}, float(b), 1e5) for d, c, b in
                               zip(chosen, cycles, bits)))

    def complete_round(self, outcome):
        return {}


@pytest.mark.parametrize("mode", ["sync", "deadline"])
def test_cluster_size_one_is_fdma_exactly(mode):
    def run(access, options=None):
        system = SystemConfig(n_devices=10, access=access, cpu_freq_hz=[1e9, 2e9] * 5, rayleigh_fading=True,
                              downlink_rate_bps=1e7)
        budget = BudgetConfig(total_time_s=40, rounds=4, round_mode=mode, deadline_s=1.5 if mode == "deadline" else None)
        sim = Simulation(system, budget, _RandomPlans(10, 6, 3), seed=5, access_options=options)
        records = sim.run()
        return sim.events, [(r.arrived, r.dropped, r.devices, r.end_time_s) for r in records]

    fdma, noma = run("fdma"), run("noma", NomaOptions(cluster_size=1))
    assert fdma == noma
    assert any(row.dropped for r in fdma[1] for row in r[2]) or mode == "sync"


def test_noma_pairs_finish_earlier_than_fdma_for_a_cell_of_unequal_gains():
    """Two devices of one cluster on the whole band against FDMA's halves: the sum capacity is larger."""
    def end_s(access, options=None):
        env = simpy.Environment()
        link = make_link(env, access, Cell(B, N0, 2), options)
        if access == "noma":
            link.begin_round(0, [0, 1], [1e-12, 2e-14], [1.0, 1.0], [1e6, 1e6])
        out = _run(link, [0.0, 0.0], [1e6, 1e6], [1e-12, 2e-14])
        return max(t.end_s for t in out.values())

    assert end_s("noma", NomaOptions(cluster_size=2)) < end_s("fdma")


def test_bad_cluster_sizes_are_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"^cluster_size = 0: expected an integer >= 1$"):
        NomaOptions(cluster_size=0)
    with pytest.raises(ConfigError, match=r"^pairing = 'random': expected 'strong_weak' or 'adjacent'$"):
        NomaOptions(pairing="random")
    with pytest.raises(ConfigError, match=r"cluster_size = 5: expected an integer in \[1, 4\]"):
        Noma.check(NomaOptions(cluster_size=5), SystemConfig(n_devices=8), 4, "sync")
    text = """
name = "noma"
[system]
n_devices = 8
access = "noma"
[access]
cluster_size = 5
[budget]
rounds = 2
[workload]
cycles_per_sample = 1e7
samples_per_device = 50
model_bits = 1e6
[run]
backend = "parametric"
clients_per_round = 4
"""
    (tmp_path / "s.toml").write_text(text)
    done = edgesim_here("run", tmp_path / "s.toml", "--out", tmp_path / "r", "-q", timeout_s=300)  # tests/cli_here.py
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert ("[access]: cluster_size = 5: expected an integer in [1, 4] (the devices of a round, [run] "
            "clients_per_round)" in done.stderr)
    ok = edgesim_here("run", tmp_path / "s.toml", "--out", tmp_path / "r2", "-q", "--set", "access.cluster_size=2",
                      timeout_s=300)
    assert ok.returncode == 0, ok.stderr
