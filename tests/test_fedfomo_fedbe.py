"""The baselines FedFomo and FedBE (learning/algorithms/fedfomo/algorithm.py, fedbe.py): weights by hand, downloads
on the clock, and short runs on tiny data."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from edgesim.backend import RoundOutcome
from edgesim.engine import Simulation
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.fedbe.algorithm import FedBEConfig, dirichlet_sample, sharpen, swag_sample
from edgesim.learning.algorithms.fedfomo.algorithm import affinity_update, epsilon_greedy, fomo_update, fomo_weights
from edgesim.learning.context import build_context
from edgesim.scenarios.schema import load_scenario

TINY = """
name = "tiny_baselines"
seed = 5

[system]
n_devices = 6
bandwidth_hz = 1e6
channel_gain_db = -100
cpu_freq_hz = 1e9

[budget]
total_time_s = 100
rounds = 10

[workload]
cycles_per_sample = 3e6
samples_per_device = 85
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
algorithms = ["fedfomo", "fedbe"]
clients_per_round = 3

[algorithms.fedfomo]
n_download = 2

[algorithms.fedbe]
server_samples = 40
n_samples = 3
"""


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny_baselines.toml"
    p.write_text(TINY)
    return p


def _setup(path, name, *overrides):
    sc = load_scenario(path, list(overrides))
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    cfg = sc.learning["algorithms"].get(name) or REGISTRY[name].config_cls()
    return sc, ctx, REGISTRY[name].build(ctx, cfg)


# --------------------------------------------------------------------------- FedFomo


def test_fomo_weights_by_hand():
    # L(baseline) = 1; losses [0.5, 1.5, 0.8] at distances [2, 1, 0.4]: δ = [0.25, −0.5, 0.5]
    delta, w = fomo_weights(1.0, [0.5, 1.5, 0.8], [2.0, 1.0, 0.4])
    assert np.allclose(delta, [0.25, -0.5, 0.5])
    assert np.allclose(w, [1 / 3, 0.0, 2 / 3])
    assert np.allclose(affinity_update(delta), [1.0, -2.0, 2.0])  # δ / |Σδ| = δ / 0.25
    _, none = fomo_weights(0.1, [0.5, 0.9], [1.0, 1.0])
    assert none.tolist() == [0.0, 0.0]  # nobody beats the baseline: it is kept
    base = {"w": torch.tensor([0.0, 0.0]), "n": torch.tensor(7)}
    a = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(1)}
    b = {"w": torch.tensor([3.0, -1.0]), "n": torch.tensor(2)}
    out = fomo_update(base, [a, b], [0.25, 0.75])  # 0.25·[1, 2] + 0.75·[3, −1]
    assert torch.allclose(out["w"], torch.tensor([2.5, -0.25])) and int(out["n"]) == 7


def test_epsilon_greedy():
    aff = np.array([0.1, 0.5, 0.2, 0.9, 0.0])
    assert epsilon_greedy(aff, [1, 2, 3, 4], 3, 0.0, np.random.default_rng(0)) == [3, 1, 2]
    picks = epsilon_greedy(aff, [1, 2, 3, 4], 4, 1.0, np.random.default_rng(1))
    assert sorted(picks) == [1, 2, 3, 4]
    assert epsilon_greedy(aff, [1, 2], 5, 0.5, np.random.default_rng(0)) in ([1, 2], [2, 1])
    assert epsilon_greedy(aff, [], 3, 0.5, np.random.default_rng(0)) == []


def test_fedfomo_downloads_and_weights_on_the_clock(tiny):
    sc, ctx, alg = _setup(tiny, "fedfomo")
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    view = sim.system_view()
    plan0 = alg.plan_round(view)
    assert all(w.download_bits == 0 for w in plan0.work)  # nothing at the server yet
    alg.complete_round(RoundOutcome(0, 0.0, 1.0, tuple(alg.selected), (), {}, {}))
    assert sorted(alg.server) == sorted(alg.selected)
    first = set(alg.selected)
    view = sim.system_view()
    plan1 = alg.plan_round(dataclasses.replace(view, round_index=1))
    m = ctx.model_bits
    for w in plan1.work:
        got = alg.downloads[w.device]
        assert len(got) == min(2, len(first - {w.device})) and w.device not in got and set(got) <= first
        assert w.download_bits == len(got) * m and w.upload_bits == m
        n_val = ctx.clients[w.device].y_lab.shape[0]  # validation = the labelled target set
        assert w.compute_cycles["fomo_weights"] == pytest.approx((len(got) + 1) * 1e6 * n_val)
    # the affinity update and the new starting point follow the hand formulas
    before = {i: alg.models[i] for i in alg.selected}
    aff = alg.affinity.copy()
    expect = {}
    for i in alg.selected:
        x, y = ctx.clients[i].x_lab, ctx.clients[i].y_lab

        def loss(s, x=x, y=y):
            return float(F.cross_entropy(torch.func.functional_call(ctx.model, s, (x,)).double(), y))

        def flat(s):
            return torch.cat([v.reshape(-1).double() for v in s.values()])

        cands = alg.downloads[i]
        d = [float((flat(alg.server[j]) - flat(before[i])).abs().sum()) for j in cands]
        delta, _ = fomo_weights(loss(before[i]), [loss(alg.server[j]) for j in cands], d)
        expect[i] = (cands, affinity_update(delta))
    alg.complete_round(RoundOutcome(1, 1.0, 2.0, tuple(alg.selected), (), {}, {}))
    for i, (cands, inc) in expect.items():
        assert np.allclose(alg.affinity[i, cands] - aff[i, cands], inc, rtol=1e-5, atol=1e-9)


def test_fedfomo_runs_and_is_deterministic(tiny):
    out = []
    for _ in range(2):
        sc, ctx, alg = _setup(tiny, "fedfomo", 'algorithms.fedfomo.validation="split"')
        out.append([r.metrics for r in Simulation(sc.system, sc.budget, alg, seed=sc.seed).run(3)])
    assert out[0] == out[1]
    assert all(0 <= m["accuracy"] <= 1 and 0 <= m["labeling_accuracy"] <= 1 for m in out[0])


# --------------------------------------------------------------------------- FedBE


def test_swag_sample_and_sharpen_by_hand():
    base = {"w": torch.tensor([0.0, 0.0])}
    clients = [{"w": torch.tensor([3.0, 4.0])}, {"w": torch.tensor([0.0, 2.0])}]
    # unit updates [0.6, 0.8] and [0, 1] → mean [0.3, 0.9]; mean norm (5 + 2)/2 = 3.5; no noise
    s = swag_sample(base, clients, torch.Generator().manual_seed(0), var_scale=0.0)
    assert torch.allclose(s["w"], torch.tensor([1.05, 3.15]))
    noisy = swag_sample(base, clients, torch.Generator().manual_seed(0), var_scale=0.1)
    assert not torch.allclose(noisy["w"], s["w"])
    assert torch.allclose(sharpen(torch.tensor([[0.2, 0.8]]), 0.5), torch.tensor([[0.04, 0.64]]) / 0.68)
    mix = dirichlet_sample(clients, np.random.default_rng(0), 1.0)["w"]
    assert 0.0 <= float(mix[0]) <= 3.0 and 2.0 <= float(mix[1]) <= 4.0  # a convex combination


def test_fedbe_runs_on_the_clock(tiny):
    sc, ctx, alg = _setup(tiny, "fedbe")
    assert alg.server_x.shape[0] == 40
    recs = Simulation(sc.system, sc.budget, alg, seed=sc.seed).run(2)
    for r in recs:
        assert len(r.arrived) == 3 and r.bits_up == pytest.approx(3 * ctx.model_bits)
        assert r.bits_down == pytest.approx(3 * ctx.model_bits)
        assert 0 <= r.metrics["accuracy"] <= 1 and "distill_loss" in r.metrics
    # the BS after the uploads: C_fwd·40·(1 + 3 samples + 3 clients) + 2 epochs·C_tra·40 at 10 GHz
    c = 3e6
    assert recs[0].server_after_s == pytest.approx((c / 3 * 40 * 7 + 2 * c * 40) / 1e10, rel=1e-12)
    assert recs[0].server_before_s == 0.0
    free = _setup(tiny, "fedbe", "algorithms.fedbe.server_on_clock=false")[2]
    rec = Simulation(sc.system, sc.budget, free, seed=sc.seed).run_round()
    assert rec.server_s == 0.0 and rec.end_time_s == pytest.approx(recs[0].end_time_s - recs[0].server_after_s)
    with pytest.raises(ValueError, match="server_on_clock"):
        FedBEConfig(server_on_clock="yes")
    with pytest.raises(ValueError, match="server needs"):
        _setup(tiny, "fedbe", "algorithms.fedbe.server_samples=100000")
    with pytest.raises(ValueError):
        FedBEConfig(mode="laplace")
