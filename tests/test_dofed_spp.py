"""DoFed-SPP (learning/algorithms/dofed_spp/algorithm.py): the B/K decision handed to the engine, Eqs. (23)–(24)
on the clock, the infeasible budget, "auto" cycles, determinism, and a tiny end-to-end run."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from edgesim.budget import InfeasibleBudgetError, examined_pairs
from edgesim.engine import Simulation
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.dofed_spp.algorithm import DofedSppConfig, auto_cycles, phase_cycles
from edgesim.learning.algorithms.dofed_spp.pca import compressed_bits
from edgesim.learning.context import build_context
from edgesim.learning.sizing import resolve_workload
from edgesim.planning import slowest_device_constants
from edgesim.radio import shannon_rate_bps
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario
from edgesim.selection import assignment, best_selection

# Digits, SUBSET over 3 class clusters, 6 identical devices (fixed channel gain): per device 83 train,
# 2 labelled and 32 unlabelled target samples. T/G = 1 s leaves room for only some (B, K).
TINY = """
name = "tiny_dofed"
seed = 1

[system]
n_devices = 6
bandwidth_hz = 1e6
channel_gain_db = -100
cpu_freq_hz = 1e9

[budget]
total_time_s = 10
rounds = 10

[workload]
cycles_per_sample = 3e6
samples_per_device = 117
sr_cycles = "auto"
pseudo_label_cycles_per_model = "auto"
model_bits = "auto"

[data]
dataset = "digits"
partition = "subset"
n_clusters = 3
size_scale = 0.05
test_size = 10

[train]
model = "cnn"
lr = 0.05
batch_size = 16

[run]
algorithms = ["dofed_spp"]
clients_per_round = 3
rounds = 3

[algorithms.dofed_spp]
warmup_rounds = 1
target_epochs = 2
g1 = "zero"
g2 = "zero"
"""


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny_dofed.toml"
    p.write_text(TINY)
    return p


def _setup(path, *overrides):
    sc = load_scenario(path, list(overrides))
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    alg = REGISTRY["dofed_spp"].build(ctx, sc.learning["algorithms"]["dofed_spp"])
    return sc, ctx, alg


class Recorder:
    """Wraps a backend and keeps the plans it gave the engine."""

    def __init__(self, backend):
        self.backend, self.plans = backend, []

    def plan_round(self, view):
        plan = self.backend.plan_round(view)
        self.plans.append(plan)
        return plan

    def complete_round(self, outcome):
        return self.backend.complete_round(outcome)


def test_the_decided_round_is_what_the_engine_times(tiny):
    sc, ctx, alg = _setup(tiny)
    rec = Recorder(alg)
    sim = Simulation(sc.system, sc.budget, rec, seed=sc.seed)
    n, m, f = 6, ctx.model_bits, 1e9
    rate = shannon_rate_bps(1e6, 10 ** (-100 / 10), sc.system.tx_power_w[0], sc.system.noise_psd_w_per_hz)
    sizes = {(len(c.y_train), len(c.y_lab), len(c.x_unl)) for c in ctx.clients}
    assert sizes == {(83, 2, 32)}
    c_tra = 3e6
    sr, pse = phase_cycles(n, 2, 32, sum(p.numel() for p in ctx.model.parameters()), c_tra, 8.0, "zero", "zero")
    assert pse == pytest.approx(1e6 * 32)  # C_pse = (C_tra / 3)·|D_ul|
    pca = int(round(m * compressed_bits(ctx.model.state_dict(), 0.5) / compressed_bits(ctx.model.state_dict(), 1.0)))
    assert pca < m

    # Round 0 (Phase 0): warm-up + SR everywhere, all N upload, all N downsized models come down.
    r0 = sim.run_round()
    plan0 = rec.plans[0]
    for w in plan0.work:
        assert dict(w.compute_cycles) == pytest.approx({"train": 1 * c_tra * 83, "sr": sr})
        assert w.upload_bits == m and w.download_bits == n * pca
    assert r0.duration_s == pytest.approx((c_tra * 83 + sr) / f + n * m / rate, rel=1e-12)

    # Round 1: (B, K) from Ineq. (26) and Algorithm 1 over the examined pairs, with the SRs of round 0.
    rho = alg.rho.copy()
    r1 = sim.run_round()
    plan1 = rec.plans[1]
    train = c_tra * 83 + 2 * c_tra * (32 + 2)  # I = 1 reciprocal epoch + E = 2 target epochs
    consts = slowest_device_constants(1.0, [train] * n, [sr] * n, [pse] * n, [f] * n, m, [rate] * n)
    sel = best_selection(rho, examined_pairs(consts, n), select_b=2)  # the default: coverage at B_sel = 2
    b, k = int(plan1.info["B"]), int(plan1.info["K"])
    assert (b, k) == (sel.b, sel.k) and plan1.info["sr_value"] == pytest.approx(sel.value)
    assert 1 <= b <= k < n  # the budget binds: not every device may upload
    uploaders = [w.device for w in plan1.work if w.upload_bits > 0]
    assert sorted(uploaders) == sorted(sel.devices) and len(uploaders) == k
    for w in plan1.work:
        assert dict(w.compute_cycles) == pytest.approx({"train": train, "sr": sr, "pseudo_label": b * pse})
        assert w.upload_bits in (0.0, m)
        assert w.download_bits == b * pca
    # Eq. (23) + Eq. (24): t = ((I·|train| + E·|target|)·C_tra + C_SR + B·C_pse)/f + K·m / (b·log2(1 + g·p/(N0·b)))
    assert r1.duration_s == pytest.approx((train + sr + b * pse) / f + k * m / rate, rel=1e-12)
    assert r1.bits_up == pytest.approx(k * m) and r1.bits_down == pytest.approx(n * b * pca)
    assert r1.info == {"B": b, "K": k, "sr_value": pytest.approx(sel.value)}
    # each device's [B] is the top-B of its row among the uploaders: its cache now holds those versions
    for d, ids in assignment(rho, sel.devices, b).items():
        for i in ids:
            if i != d:
                assert alg.cache[d, i] > n  # a version uploaded in round 1 (round 0 used ids 1..n)


def test_an_infeasible_budget_is_an_error_with_the_numbers(tiny):
    sc, ctx, alg = _setup(tiny, "budget.total_time_s=1", "budget.rounds=10")  # T/G = 0.1 s < training alone
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    sim.run_round()  # Phase 0 has no (B, K) decision
    with pytest.raises(InfeasibleBudgetError, match=r"round 1: No \(B, K\) pair fits the budget.*needs .* s") as e:
        sim.run_round()
    assert "T/G gives only 0.1 s" in str(e.value)


def test_caps_reproduce_the_papers_fixed_k_and_b(tiny):
    sc, ctx, alg = _setup(tiny, "budget.total_time_s=1000", "algorithms.dofed_spp.max_b=2",
                          "algorithms.dofed_spp.max_k=3")
    rec = Recorder(alg)
    sim = Simulation(sc.system, sc.budget, rec, seed=sc.seed)
    sim.run(2)
    assert rec.plans[1].info["K"] == 3 and rec.plans[1].info["B"] <= 2
    assert sum(w.upload_bits > 0 for w in rec.plans[1].work) == 3


def test_auto_cycles_follow_the_documented_formula(tiny):
    sc = load_scenario(tiny, ['algorithms.dofed_spp.g1="empirical"', 'algorithms.dofed_spp.g2="empirical"'])
    w = resolve_workload(sc)
    _, ctx, _ = _setup(tiny)
    p = sum(t.numel() for t in ctx.model.parameters())
    fwd = 3e6 / 3
    # C_pse = C_fwd·|D_ul|; C_SR = (N+1)·C_fwd·|D_l| + N·C_tra·|D_l| + 3·P·(N + N(N−1)/2)/flops_per_cycle
    assert w.pseudo_label_cycles_per_model == pytest.approx(fwd * 32)
    assert w.sr_cycles == pytest.approx(7 * fwd * 2 + 6 * 3e6 * 2 + 3 * p * (6 + 15) / 8)
    with pytest.raises(ValueError, match="subset"):
        auto_cycles("sr_cycles", load_scenario(tiny, ['data.partition="iid"']), ctx.model, None, 3e6)


def test_plan_counts_the_target_model_a_round_trains(tiny):
    """`edgesim plan`'s C1 subtracts the target model's E_tar epochs (Eq. 15) as a round does."""
    import json

    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    out = json.loads(CliRunner().invoke(app, ["plan", str(tiny), "--json"]).stdout)
    _, _, alg = _setup(tiny)
    # E_tar·C_tra·(|D_l| + |D_ul|) = 2 · 3e6 · (2 + 32) = 2.04e8 cycles = 0.204 s at 1 GHz: the run's own number
    assert alg.tar_cycles == [pytest.approx(2.04e8)] * 6
    assert [d["target_train_s"] for d in out["devices"]] == [pytest.approx(0.204)] * 6
    sr_s = resolve_workload(load_scenario(tiny)).sr_cycles / 1e9
    # C1 = T/G − (I·C_tra·D + target + SR)/f = 1 − (3.51e8 + 2.04e8)/1e9 − SR
    assert out["c1_s"] == pytest.approx(1 - 0.351 - 0.204 - sr_s)
    # another split draws its target sets from each device's data: counted over the plan's D (issue 40), and the
    # table says so: C1 = 1 − (I + E_tar)·C_tra·D/f − SR = 1 − 3·3e6·117/1e9 − 0.1
    other = CliRunner().invoke(app, ["plan", str(tiny), "--set", 'data.partition="iid"', "--set",
                                     "workload.sr_cycles=1e8", "--set", "workload.pseudo_label_cycles_per_model=1e7"])
    assert "Target model (Eq. 15) counted over workload.samples_per_device" in other.stdout
    assert "C1 = -0.153 s" in other.stdout and other.exit_code == 1, other.output


def test_same_seed_same_metrics(tiny):
    runs = []
    for _ in range(2):
        sc, ctx, alg = _setup(tiny)
        runs.append([r.metrics for r in Simulation(sc.system, sc.budget, alg, seed=sc.seed).run(3)])
    assert runs[0] == runs[1]
    sc, ctx, alg = _setup(tiny, "seed=2")
    assert [r.metrics for r in Simulation(sc.system, sc.budget, alg, seed=sc.seed).run(3)] != runs[0]


def test_similarity_rows_and_metrics_are_sane(tiny):
    sc, ctx, alg = _setup(tiny)
    recs = Simulation(sc.system, sc.budget, alg, seed=sc.seed).run(3)
    assert np.allclose(alg.rho.sum(1), 1.0) and (alg.rho >= 0).all()
    for r in recs:
        for key in ("accuracy", "labeling_accuracy"):
            assert 0.0 <= r.metrics[key] <= 1.0
            assert r.metrics[f"{key}_min"] <= r.metrics[key] <= r.metrics[f"{key}_max"]
    live = set(alg.cache.ravel().tolist()) | {0}
    assert set(alg.store) == live  # unreferenced downsized copies are dropped


def test_config_is_validated():
    for bad in ({"g1": "big"}, {"pca_rank_fraction": 0.0}, {"max_b": 0}, {"vectorize": "yes"}, {"warmup_rounds": -1}):
        with pytest.raises(ValueError):
            DofedSppConfig(**bad)


def test_end_to_end_through_run_scenario(tiny, tmp_path):
    sc = load_scenario(tiny, ['run.algorithms=["dofed_spp", "fedfomo", "fedbe"]', "budget.total_time_s=100",
                              'algorithms.dofed_spp.g1="empirical"', "algorithms.fedbe.server_samples=40",
                              "algorithms.fedfomo.n_download=2"])
    out = run_scenario(sc, tmp_path / "run")
    rows = list(csv.DictReader(open(out / "rounds.csv")))
    assert {r["algorithm"] for r in rows} == {"dofed_spp", "fedfomo", "fedbe"}
    dofed = [r for r in rows if r["algorithm"] == "dofed_spp"]
    assert [int(r["round"]) for r in dofed] == [0, 1, 2]
    assert [float(r["K"]) for r in dofed][0] == 6 and all(float(r["B"]) >= 1 for r in dofed[1:])
    for r in rows:
        assert 0.0 <= float(r["accuracy"]) <= 1.0 and 0.0 <= float(r["labeling_accuracy"]) <= 1.0
        assert math.isfinite(float(r["time_s"]))


def test_pseudo_labels_per_device_equal_one_stacked_call(tiny):
    import torch

    from edgesim.learning.algorithms.dofed_spp.pseudo_labels import batched_pseudo_labels, weight_matrix
    from edgesim.learning.inference import predict_proba

    sc, ctx, alg = _setup(tiny)
    Simulation(sc.system, sc.budget, alg, seed=sc.seed).run_round()
    up = [0, 2, 3, 5]
    versions = alg._publish(up)
    for b in (2, 4):  # B < K: one B-model stack per device; B = K: one call for everyone
        assign = assignment(alg.rho, up, b)
        got = alg._pseudo_labels(up, versions, assign)
        x = torch.cat([c.x_unl for c in ctx.clients])
        probs = predict_proba(ctx.model, [alg.store[versions[i]] for i in up], x)
        want = batched_pseudo_labels(probs, torch.as_tensor(weight_matrix(alg.rho, assign, up)), alg.owner)
        assert torch.equal(got, want)


@pytest.mark.parametrize("name", ["cifar10", "cifar100", "dbpedia"])
def test_paper_scenarios_give_the_models_numbers(name):
    """The paper-setting scenarios hold explicit numbers (no data here): they must be the models' own."""
    from pathlib import Path

    from edgesim.learning.data.partitions import dofed_sizes
    from edgesim.learning.models import build_model, flops_per_sample, model_bits

    shape, classes, vocab, model = {
        "cifar10": ((3, 32, 32), 10, None, "cnn"),
        "cifar100": ((3, 32, 32), 100, None, "cnn"),
        "dbpedia": ((100,), 14, 199_000, "text"),
    }[name]
    m = build_model(model, shape, classes, vocab, seed=0)
    c_tra = flops_per_sample(m, shape) / 8
    for split in ("subset", "normal"):
        sc = load_scenario(Path(__file__).resolve().parents[1] / "scenarios" / f"dofed_{name}_{split}.toml")
        w, d = sc.workload, sc.learning["data"]
        s = dofed_sizes(classes, d.n_clusters, d.size_scale)
        sr, pse = phase_cycles(25, s.labeled, s.unlabeled, sum(p.numel() for p in m.parameters()), c_tra, 8.0,
                               "zero", "zero")
        assert w.model_bits == model_bits(m) and w.cycles_per_sample == pytest.approx(c_tra)
        assert w.sr_cycles == pytest.approx(sr, rel=1e-9) and w.pseudo_label_cycles_per_model == pytest.approx(pse)
        assert w.samples_per_device == s.train + s.labeled + s.unlabeled
        cfg = sc.learning["algorithms"]["dofed_spp"]
        assert (cfg.max_b, cfg.max_k, cfg.g1, cfg.g2) == (10, 10, "zero", "zero")
        assert cfg.target_epochs == 1  # Algorithm 2 as written: our E = 10 does not fit these budgets


def test_an_uncovered_device_trains_its_student_on_its_labels_only(tiny):
    import torch

    sc, ctx, alg = _setup(tiny, "budget.total_time_s=1000", "algorithms.dofed_spp.max_b=2", "algorithms.dofed_spp.max_k=2")
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    sim.run_round()
    # device 0 finds no model useful (a zero row of Eq. 19's ratios), everyone else every model
    rho = np.full((6, 6), 1.0 / 6)
    rho[0] = 0.0
    alg.rho = rho
    seen = {}
    train = alg._train

    def spy(kind, round_index, starts, datasets, cfg):
        seen[kind] = datasets
        return train(kind, round_index, starts, datasets, cfg)

    alg._train = spy
    rec = sim.run_round()
    assert rec.metrics["uncovered_devices"] == 1.0
    x0, y0 = seen["target"][0]
    c0 = ctx.clients[0]
    assert torch.equal(x0, c0.x_lab) and torch.equal(y0, c0.y_lab)  # labelled data only, no pseudo-labels
    for d in range(1, 6):  # everyone else labels all its unlabelled data
        assert seen["target"][d][0].shape[0] == ctx.clients[d].x_unl.shape[0] + ctx.clients[d].y_lab.shape[0]


@pytest.mark.parametrize("selection", ["literal", "coverage"])
def test_the_selection_option_picks_the_uploaders(tiny, selection):
    sc, ctx, alg = _setup(tiny, "budget.total_time_s=1000", "algorithms.dofed_spp.max_b=3",
                          "algorithms.dofed_spp.max_k=3", f'algorithms.dofed_spp.selection="{selection}"',
                          "algorithms.dofed_spp.coverage_b=1")
    rec = Recorder(alg)
    sim = Simulation(sc.system, sc.budget, rec, seed=sc.seed)
    sim.run_round()
    groups = np.zeros((6, 6))  # three groups of two devices, as tests/test_selection.py
    for lo, v in ((0, 0.5), (2, 0.5), (4, 0.3)):
        groups[lo:lo + 2, lo:lo + 2] = v
    alg.rho = groups
    sim.run_round()
    uploaders = sorted(w.device for w in rec.plans[1].work if w.upload_bits > 0)
    assert uploaders == ([0, 1, 2] if selection == "literal" else [0, 2, 4])


def test_selection_options_are_checked():
    for bad in ({"selection": "greedy"}, {"coverage_b": 0}, {"target_epochs": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            DofedSppConfig(**bad)
