"""Hierarchical federated learning (round_mode = "hierarchical", docs/model/hierarchy.md): the backhaul formula, a
hand timeline of two cells with κ = 2, resume, κ = 1 with one cell equal to FedAvg, and bad input in one line."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from edgesim.backend import DeviceWork, RoundPlan
from edgesim.config import BudgetConfig, ConfigError, SystemConfig
from edgesim.hierarchy import HierarchicalSimulation, HierarchyConfig, backhaul_time_s, cloud_weights
from edgesim.radio import shannon_rate_bps
from edgesim.units import dbm_to_w

B_HZ, P_DBM = 1e6, 23.0
UP_BITS = 1e5
BACKHAUL_BITS = 4e6  # 0.4 s at 1e7 bit/s, + 0.1 s latency


# -- formulas ----------------------------------------------------------------------------------------------------


def test_backhaul_time_is_bits_over_rate_plus_latency():
    assert backhaul_time_s(4e6, 1e7, 0.1) == pytest.approx(0.5, rel=1e-15)  # 4e6 / 1e7 + 0.1, by hand
    assert backhaul_time_s(4e6, math.inf, 0.1) == 0.1  # limiting case: no transfer time, the latency alone
    assert backhaul_time_s(0.0, 1e7, 0.0) == 0.0
    times = [backhaul_time_s(b, 1e7, 0.02) for b in (1e5, 1e6, 1e7)]  # property: grows with the bits
    assert times == sorted(times) and times[0] > 0.02
    with pytest.raises(ValueError, match="rate_bps"):
        backhaul_time_s(1.0, 0.0, 0.0)


def test_cloud_weights_are_the_cells_shares_of_the_data():
    assert cloud_weights([100, 300]) == [0.25, 0.75]  # HierFAVG: |D^l| / |D|
    assert cloud_weights([5, 0]) == [1.0, 0.0]
    assert sum(cloud_weights([3, 7, 11])) == pytest.approx(1.0, rel=1e-15)
    with pytest.raises(ValueError):
        cloud_weights([0, 0])


# -- the clock: a hand timeline of two cells, κ = 2 ------------------------------------------------------------


class CellsBackend:
    """Every edge round: each device of the cell computes its own cycles and uploads UP_BITS; the backhaul carries
    BACKHAUL_BITS each way. Counts what it was asked (its state)."""

    def __init__(self, cycles):
        self.cycles = cycles
        self.edges, self.clouds = [], []

    def assign_cells(self, cell_of, n_cells):
        self.cell_of, self.n_cells = tuple(cell_of), n_cells

    def backhaul_bits(self):
        return BACKHAUL_BITS, BACKHAUL_BITS

    def plan_edge(self, cell, devices, view):
        return RoundPlan(tuple(DeviceWork(d, {"train": self.cycles[d]}, UP_BITS, 0.0) for d in devices), {"K": 1})

    def complete_edge(self, cell, outcome):
        self.edges.append((cell, outcome.round_index))
        return {"accuracy": 0.1 * len(self.edges)}

    def aggregate_cloud(self, index):
        self.clouds.append(index)
        return {"accuracy": 0.5}

    def state_dict(self):
        return {"edges": list(self.edges), "clouds": list(self.clouds)}

    def load_state_dict(self, state):
        self.edges, self.clouds = list(state["edges"]), list(state["clouds"])


def two_cell_sim(rounds=4):
    """Device 0 in cell 0, device 1 in cell 1, 2 km apart (placement "per_cell"); no shadowing or fading."""
    system = SystemConfig(n_devices=2, bandwidth_hz=B_HZ, tx_power_dbm=P_DBM, cpu_freq_hz=1e9, cell_radius_m=20.0,
                          shadowing_std_db=0.0, rayleigh_fading=False, placement="per_cell",
                          cells=[{"x_m": 0.0, "y_m": 0.0}, {"x_m": 2000.0, "y_m": 0.0}])
    budget = BudgetConfig(total_time_s=100.0, rounds=rounds, round_mode="hierarchical")
    cfg = HierarchyConfig(edge_rounds=2, backhaul_bps=1e7, backhaul_latency_s=0.1)
    return HierarchicalSimulation(system, budget, CellsBackend({0: 5e8, 1: 2.2e9}), cfg)


def test_two_cells_two_edge_rounds_per_cloud_round_by_hand():
    sim = two_cell_sim()
    assert sim.cell_of == (0, 1)
    g = sim.channel.gains(0)
    s = sim.system
    a0, a1 = (UP_BITS / shannon_rate_bps(B_HZ, g[d], dbm_to_w(P_DBM), s.noise_psd_w_per_hz) for d in (0, 1))
    assert 0 < a0 < 0.1 and 0 < a1 < 0.1  # each upload's airtime, s (no upload overlaps another: no contention)
    records = sim.run()
    # Cell 0: compute 5e8 / 1e9 = 0.5 s + airtime a0 per edge round; cell 1: 2.2 s + a1; each cell runs its two edge
    # rounds on its own, then its edge model takes 4e6 / 1e7 + 0.1 = 0.5 s to the cloud; the cloud aggregates when
    # the slower (cell 1) has arrived; its model reaches both cells 0.5 s later.
    c1 = 2 * (2.2 + a1) + 0.5  # the first cloud aggregation
    expected = [("edge", 0, 0, 0.0, 0.5 + a0), ("edge", 0, 1, 0.5 + a0, 1 + 2 * a0),
                ("edge", 1, 0, 0.0, 2.2 + a1), ("edge", 1, 1, 2.2 + a1, 4.4 + 2 * a1), ("cloud", -1, 1, 0.0, c1),
                ("edge", 0, 2, c1 + 0.5, c1 + 1 + a0), ("edge", 0, 3, c1 + 1 + a0, c1 + 1.5 + 2 * a0),
                ("edge", 1, 2, c1 + 0.5, c1 + 2.7 + a1), ("edge", 1, 3, c1 + 2.7 + a1, c1 + 4.9 + 2 * a1),
                ("cloud", -1, 3, c1, c1 + 5.4 + 2 * a1)]
    rows = [(r.level, r.cell, r.round_index, r.start_time_s, r.end_time_s) for r in records]
    assert [r[:3] for r in rows] == [e[:3] for e in expected]
    for got, want in zip(rows, expected):
        assert got[3:] == pytest.approx(want[3:], rel=1e-12, abs=1e-12)
    cloud = records[4]
    assert cloud.devices == () and cloud.metrics == {"accuracy": 0.5}
    assert cloud.info["backhaul_bits"] == 2 * 2 * BACKHAUL_BITS  # two cells, up and down
    assert records[-1].info["cum_backhaul_bits"] == 2 * cloud.info["backhaul_bits"]
    assert sim.round_index == 4 and sim.now_s == pytest.approx(expected[-1][4])
    ends = [(e.kind, e.time_s) for e in sim.events if e.kind in ("backhaul_start", "backhaul_end", "cloud_aggregate")]
    assert [k for k, _ in ends][:5] == ["backhaul_start", "backhaul_end", "backhaul_start", "backhaul_end",
                                        "cloud_aggregate"]
    assert [t for _, t in ends][:5] == pytest.approx([1 + 2 * a0, 1.5 + 2 * a0, c1 - 0.5, c1, c1])


def test_round_index_counts_edge_rounds_every_cell_finished_with_their_cloud_round():
    sim = two_cell_sim()
    seen = []
    while sim.round_index < 4:
        sim.run_round()
        seen.append(sim.round_index)
    assert seen == [0, 0, 1, 1, 2, 2, 2, 3, 3, 4]


def test_resume_mid_period_gives_the_same_records_and_events():
    whole = two_cell_sim()
    reference = whole.run()
    first = two_cell_sim()
    head = [first.run_round() for _ in range(3)]  # mid-period: two records of period 0 not handed out yet
    state, backend_state = first.state_dict(), first.backend.state_dict()
    second = two_cell_sim()
    second.load_state_dict(state)
    second.backend.load_state_dict(backend_state)
    tail = second.run()
    assert [dataclasses.astuple(r) for r in head + tail] == [dataclasses.astuple(r) for r in reference]
    assert first.events + second.events == whole.events
    with pytest.raises(ValueError, match="not a hierarchical run's"):
        two_cell_sim().load_state_dict({**state, "kind": "rounds"})


def test_each_edge_round_runs_the_resource_policies_over_its_own_cell():
    """cpu_freq = "min_energy" (Yang et al.'s least-energy frequency for the round's budget T/G) plans every edge
    round's devices: each device computes at the frequency that just meets T/G, below its maximum."""
    from edgesim.resources import ResourcesConfig

    system = SystemConfig(n_devices=2, bandwidth_hz=B_HZ, tx_power_dbm=P_DBM, cpu_freq_hz=1e9, cell_radius_m=20.0,
                          shadowing_std_db=0.0, rayleigh_fading=False, placement="per_cell", access="fdma",
                          cells=[{"x_m": 0.0, "y_m": 0.0}, {"x_m": 2000.0, "y_m": 0.0}])
    budget = BudgetConfig(total_time_s=40.0, rounds=4, round_mode="hierarchical")
    sim = HierarchicalSimulation(system, budget, CellsBackend({0: 5e8, 1: 2.2e9}),
                                 HierarchyConfig(edge_rounds=2, backhaul_bps=1e7, backhaul_latency_s=0.1),
                                 resources=ResourcesConfig(cpu_freq="min_energy"))
    edges = [r for r in sim.run() if r.level == "edge"]
    freqs = {(r.cell, row.device): row.cpu_freq_hz for r in edges for row in r.devices}
    assert set(freqs) == {(0, 0), (1, 1)}
    assert all(f < 1e9 for f in freqs.values())  # slowed down to fit T/G = 10 s: less energy
    assert all(r.duration_s <= budget.round_budget_s * (1 + 1e-9) for r in edges)


# -- a scheduling policy per cell ---------------------------------------------------------------------------------


class RankedBackend(CellsBackend):
    """CellsBackend that takes the first ``k`` of the cell's ranking (SystemView.schedule), as HierFedAvg does."""

    def __init__(self, cycles, k=1):
        super().__init__(cycles)
        self.k, self.chosen = k, []

    def plan_edge(self, cell, devices, view):
        taken = tuple(sorted(view.schedule[:self.k]))
        self.chosen.append((cell, view.round_index, taken))
        return RoundPlan(tuple(DeviceWork(d, {"train": self.cycles[d]}, UP_BITS, 0.0) for d in taken), {"K": 1})


def ranked_sim(scheduling, rounds=4, k=1):
    """Six devices, cells ((0, 2, 4), (1, 3, 5)) 2 km apart, Rayleigh fading; κ = 2, K = ``k`` per cell."""
    from edgesim.resources import ResourcesConfig

    system = SystemConfig(n_devices=6, bandwidth_hz=B_HZ, tx_power_dbm=P_DBM, cpu_freq_hz=1e9, cell_radius_m=200.0,
                          shadowing_std_db=0.0, rayleigh_fading=True, placement="per_cell",
                          cells=[{"x_m": 0.0, "y_m": 0.0}, {"x_m": 2000.0, "y_m": 0.0}])
    budget = BudgetConfig(total_time_s=100.0, rounds=rounds, round_mode="hierarchical")
    return HierarchicalSimulation(system, budget, RankedBackend({d: 1e8 for d in range(6)}, k),
                                  HierarchyConfig(edge_rounds=2, backhaul_bps=1e7, backhaul_latency_s=0.1),
                                  resources=ResourcesConfig(scheduling=scheduling))


def test_round_robin_cycles_through_each_cells_own_devices():
    """Each cell keeps its own pointer: cell 0 takes 0, 2, 4, 0 and cell 1 takes 1, 3, 5, 1 in edge rounds 0-3 (one
    pointer over all six devices would take devices of the other cell, or repeat one)."""
    sim = ranked_sim("round_robin")
    assert sim.members == ((0, 2, 4), (1, 3, 5))
    records = sim.run()
    chosen = sorted(sim.backend.chosen)
    assert chosen == [(0, 0, (0,)), (0, 1, (2,)), (0, 2, (4,)), (0, 3, (0,)),
                      (1, 0, (1,)), (1, 1, (3,)), (1, 2, (5,)), (1, 3, (1,))]
    edges = [r for r in records if r.level == "edge"]
    assert all(tuple(row.device for row in r.devices) == c for r, (_, _, c) in
               zip(sorted(edges, key=lambda r: (r.cell, r.round_index)), chosen))


def test_best_channel_takes_each_cells_strongest_device_of_the_edge_round():
    """Each cell's ranking is of its own devices by the edge round's gain: its strongest K = 2, every edge round."""
    sim = ranked_sim("best_channel", k=2)
    sim.run()
    assert len(sim.backend.chosen) == 8
    for cell, r, taken in sim.backend.chosen:
        g = sim.channel.gains(r)
        mine = sim.members[cell]
        assert taken == tuple(sorted(sorted(mine, key=lambda d: -g[d])[:2]))
    assert {c for c, _, _ in sim.backend.chosen} == {0, 1}


def test_resume_mid_period_with_a_scheduling_policy_gives_the_same_records():
    """Round robin's per-cell pointers are in the checkpoint: stopped after three records (mid-period) and resumed,
    the same records, events and choices as the whole run."""
    whole = ranked_sim("round_robin", rounds=6)
    reference = whole.run()
    first = ranked_sim("round_robin", rounds=6)
    head = [first.run_round() for _ in range(3)]
    state, backend_state = first.state_dict(), first.backend.state_dict()
    second = ranked_sim("round_robin", rounds=6)
    second.load_state_dict(state)
    second.backend.load_state_dict(backend_state)
    tail = second.run()
    assert [dataclasses.astuple(r) for r in head + tail] == [dataclasses.astuple(r) for r in reference]
    assert first.events + second.events == whole.events
    assert first.backend.chosen + second.backend.chosen == whole.backend.chosen


def test_a_plan_outside_the_cells_ranking_is_one_line():
    """An algorithm that ignores the cell's ranking would run without the policy: refused in one line."""
    sim = ranked_sim("round_robin")
    sim.backend.plan_edge = lambda cell, devices, view: RoundPlan(
        (DeviceWork(devices[-1], {"train": 1e8}, UP_BITS, 0.0),), {})
    with pytest.raises(ConfigError) as e:
        sim.run()
    assert "\n" not in str(e.value) and "round_robin" in str(e.value) and "round 0" in str(e.value)


# -- the learning side: κ = 1 with one cell is FedAvg -----------------------------------------------------------


def test_one_cell_one_edge_round_per_cloud_round_is_fedavg(tiny_scenario, tmp_path):
    """Same devices, costs and accuracies as FedAvg, round by round; a cloud row after each edge row with the same
    accuracy (a free backhaul: rate inf, latency 0)."""
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    base = ["run.algorithms=['fedavg']", "budget.rounds=2", "system.n_devices=4", "run.clients_per_round=2",
            "train.model=mlp"]
    flat = run_scenario(load_scenario(tiny_scenario, base), tmp_path / "flat")
    hier = run_scenario(load_scenario(tiny_scenario, [*base, "budget.round_mode=hierarchical",
                                                      "hierarchy.backhaul_bps=inf",
                                                      "hierarchy.backhaul_latency_s=0"]), tmp_path / "hier")
    a, b = pd.read_csv(flat / "rounds.csv"), pd.read_csv(hier / "rounds.csv")
    assert list(b.level) == ["edge", "cloud"] * 2 and set(b.cell) == {0, -1}
    edge = b[b.level == "edge"].reset_index(drop=True)
    pd.testing.assert_frame_equal(a, edge[a.columns])
    cloud = b[b.level == "cloud"].reset_index(drop=True)
    assert list(cloud.accuracy) == list(a.accuracy) and list(cloud.time_s) == list(a.time_s)
    assert (flat / "devices.csv").read_bytes() == (hier / "devices.csv").read_bytes()


def test_hierfedavg_takes_the_first_k_of_the_cells_ranking(tiny_scenario, tmp_path):
    """scheduling = "round_robin", one cell of three devices, K = 2: HierFAVG's edge rounds take the first K of the
    cell's ranking, by hand {0, 1} (pointer 0), then {2, 0} (pointer 2), not the uniform draw."""
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    overrides = ["run.algorithms=['fedavg']", "budget.rounds=2", "system.n_devices=3", "run.clients_per_round=2",
                 "train.model=mlp", "resources.scheduling=round_robin", "budget.round_mode=hierarchical"]
    devices = pd.read_csv(run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "r") / "devices.csv")
    assert [sorted(devices[devices["round"] == r].device) for r in (0, 1)] == [[0, 1], [0, 2]]


@pytest.mark.slow
def test_a_killed_hierarchical_run_resumes_to_the_same_bytes(tiny_scenario, tmp_path, monkeypatch):
    """FedAvg under κ = 2 (edge models, cloud model, checkpoints after every record), stopped in its second cloud
    period and resumed: the same run folder, byte for byte. Slow (three runs, ~2 s CPU); the default run covers the
    clock's part in test_resume_mid_period_gives_the_same_records_and_events."""
    from edgesim.learning.algorithms.fedavg.hierarchical import HierFedAvg
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    overrides = ["run.algorithms=['fedavg']", "budget.rounds=4", "system.n_devices=4", "run.clients_per_round=2",
                 "train.model=mlp", "budget.round_mode=hierarchical", "hierarchy.edge_rounds=2",
                 "run.checkpoint_every=1"]
    reference = run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "reference")
    complete = HierFedAvg.complete_edge
    calls = []

    def crash_at_the_third(self, cell, outcome):
        calls.append(cell)
        if len(calls) == 3:
            raise RuntimeError("simulated crash")
        return complete(self, cell, outcome)

    with monkeypatch.context() as m:
        m.setattr(HierFedAvg, "complete_edge", crash_at_the_third)
        with pytest.raises(RuntimeError, match="simulated crash"):
            run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "r")
    out = run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "r", resume=True)
    for name in ("rounds.csv", "devices.csv", "events.csv"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name


@pytest.mark.slow
def test_jobs_give_the_same_bytes_in_hierarchical_rounds(tiny_scenario, tmp_path):
    """Two algorithms over two cells under κ = 2, each cell on its own backhaul: ``--jobs 2`` writes the bytes of
    ``--jobs 1`` (issue 50.4). Slow (two runs of two algorithms); the default run covers the clock's determinism in
    test_resume_mid_period_gives_the_same_records_and_events."""
    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    sets = ["run.algorithms=['fedavg', 'fedprox']", "budget.rounds=4", "system.n_devices=4",
            "run.clients_per_round=2", "train.model=mlp", "budget.round_mode=hierarchical", "hierarchy.edge_rounds=2",
            "hierarchy.backhaul_bps=[1e7, 2e7]", "system.cells=[{x_m = 0, y_m = 0}, {x_m = 400, y_m = 0}]"]
    args = [a for s in sets for a in ("--set", s)]
    for jobs in ("1", "2"):
        done = CliRunner().invoke(app, ["run", str(tiny_scenario), *args, "--out", str(tmp_path / jobs),
                                        "--jobs", jobs, "-q"])
        assert done.exit_code == 0, done.output
    for name in ("rounds.csv", "devices.csv", "events.csv", "cells.csv"):
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes(), name
    rounds = pd.read_csv(tmp_path / "1" / "rounds.csv")
    assert set(rounds["level"]) == {"edge", "cloud"} and set(rounds["cell"]) == {-1, 0, 1}


# -- bad input: one line each ------------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, key, value", [
    (["hierarchy.edge_rounds=0"], "edge_rounds", 0),
    (["hierarchy.backhaul_bps=-1"], "backhaul_bps", -1),
    (["hierarchy.backhaul_latency_s=-0.5"], "backhaul_latency_s", -0.5),
    (["hierarchy.backhaul_bps=[1e6, 2e6]"], "backhaul_bps", [1e6, 2e6]),  # one cell: a list of one
    (["hierarchy.backhaul_latency_s=[0.1, 0.2]", "system.cells=[{x_m = 0, y_m = 0}, {x_m = 500, y_m = 0}, "
      "{x_m = 0, y_m = 500}]"], "backhaul_latency_s", [0.1, 0.2]),  # three cells: three values
    (["hierarchy.edge_rounds=2", "budget.rounds=3"], "edge_rounds", 2),  # the run must end at a cloud round
])
def test_bad_hierarchy_is_one_line_naming_key_and_value(tiny_scenario, overrides, key, value):
    from edgesim.scenarios.schema import load_scenario

    with pytest.raises(ConfigError) as e:
        load_scenario(tiny_scenario, ["budget.round_mode=hierarchical", "run.algorithms=['fedavg']", *overrides])
    message = str(e.value)
    assert "\n" not in message and "[hierarchy]" in message and f"{key} = {value!r}" in message


@pytest.mark.parametrize("overrides, words", [
    (["budget.round_mode=hierarchical", "run.algorithms=['fedavg', 'fedbn']"], "'fedbn' has no hierarchical form"),
    (["budget.round_mode=hierarchical", "run.algorithms=['local']"], "'local' has no hierarchical form"),
    (["hierarchy.edge_rounds=2"], "[hierarchy] is used only by [budget] round_mode = 'hierarchical'"),
    (["budget.round_mode=hierarchical", "variants.flat.algorithm=fedavg", "variants.flat.round_mode=sync"],
     "round_mode = 'sync': expected one of 'hierarchical'"),
    (["compression.backhaul=fp16", "run.algorithms=['fedavg']"], "only a run with [budget] round_mode = "
                                                                 "'hierarchical' has a backhaul"),
])
def test_what_has_no_hierarchical_form_is_refused_in_one_line(tiny_scenario, overrides, words):
    from edgesim.scenarios.schema import load_scenario

    with pytest.raises(ConfigError) as e:
        load_scenario(tiny_scenario, overrides)
    assert "\n" not in str(e.value) and words in str(e.value)


# -- the backhaul's codec and edgesim plan's schedule -----------------------------------------------------------


def test_the_backhaul_codec_sends_the_edge_model_as_its_difference_from_the_cloud_model():
    from types import SimpleNamespace

    import torch

    from edgesim.compression import Codec, CompressionConfig
    from edgesim.learning.compression import Backhaul

    template = {"w": torch.zeros(6), "steps": torch.zeros((), dtype=torch.long)}

    def ctx(codec):
        return SimpleNamespace(template_state=template, model_bits=32 * 6, compression=CompressionConfig(
            backhaul=codec), generator=lambda *keys: torch.Generator().manual_seed(0))

    cloud = {"w": torch.full((6,), 1.0), "steps": torch.tensor(3)}
    edge = {"w": torch.tensor([1.0, 1.5, 0.5, 1.0 + 2 ** -12, 1.0, 3.0]), "steps": torch.tensor(4)}
    plain = Backhaul(ctx(Codec()), ["w", "steps"], uncompressed_bits=192)
    assert plain.bits == 192 and plain.up(0, 0, edge, cloud) is not edge
    assert torch.equal(plain.up(0, 0, edge, cloud)["w"], edge["w"]) and torch.equal(plain.down(0, cloud)["w"],
                                                                                  cloud["w"])
    half = Backhaul(ctx(Codec("fp16")), ["w", "steps"], uncompressed_bits=192)
    assert half.bits == 16 * 6  # fp16: 16 bits a number (by hand)
    sent = half.up(0, 1, edge, cloud)  # cloud + fp16(edge − cloud): the difference 2^-12 survives in half precision
    assert torch.equal(sent["w"], edge["w"]) and int(sent["steps"]) == 4
    assert torch.equal(half.down(0, cloud)["w"], cloud["w"])  # 1.0 is exact in half precision


def test_plan_prints_the_edge_cloud_schedule(tiny_scenario):
    from edgesim.scenarios.plan import plan_report
    from edgesim.scenarios.schema import load_scenario

    sc = load_scenario(tiny_scenario, [
        "budget.round_mode=hierarchical", "run.algorithms=['fedavg']", "budget.rounds=6", "hierarchy.edge_rounds=3",
        "hierarchy.backhaul_bps=[1e6, 2e6]", "hierarchy.backhaul_latency_s=0.5", "workload.model_bits=1e6",
        "system.cells=[{x_m = 0, y_m = 0}, {x_m = 600, y_m = 0}]", "system.placement=per_cell"])
    report = plan_report(sc)
    h = report.hierarchy
    assert (h["edge_rounds"], h["cloud_rounds"], h["cloud_after_edge_rounds"]) == (3, 2, [2, 5])
    assert [c["devices"] for c in h["cells"]] == [3, 3]
    assert [c["model_one_way_s"] for c in h["cells"]] == [1.5, 1.0]  # 1e6 / 1e6 + 0.5, 1e6 / 2e6 + 0.5
    assert h["backhaul_bits"]["fedavg"] == {"model": 1e6, "cloud_round": 4e6, "run": 8e6}
    assert "Edge/cloud schedule" in report.text() and report.to_dict()["hierarchy"] == h
    assert plan_report(load_scenario(tiny_scenario, [])).hierarchy is None
