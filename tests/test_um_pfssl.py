"""UM-pFSSL: Corr by hand (both forms), the helper protocol step by step, the most certain helper's label,
the engine charging helper downloads and MC passes, the communication cost against the paper's bound,
resume, and the helper graph in the run folder."""

from __future__ import annotations

import json
import math

import networkx as nx
import pytest
import torch

from edgesim.engine import Simulation
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.um_pfssl.algorithm import (
    UMPFSSL,
    UMPFSSLConfig,
    corr,
    cost_bound,
    cost_fedavg,
    labeled_share,
    lowest,
    protocol_steps,
    pseudo_labels,
    refresh_list,
    replace_helpers,
)
from edgesim.learning.context import build_context
from edgesim.learning.costs import forward_cycles
from edgesim.learning.inference import entropy
from edgesim.results.writing import is_run_folder
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import ScenarioError, load_scenario

LN10 = math.log(10)


# --------------------------------------------------------------------------- Corr


def test_corr_by_hand_both_forms():
    # μ = 0.25, Acc = 0.8, mean entropy = ½·log 10 ⇒ H̄ = 0.5
    assert corr(0.5 * LN10, 0.8, 0.25, 10, "arxiv") == pytest.approx(0.75 * 0.5 + 0.25 * 0.8)  # 0.575
    assert corr(0.5 * LN10, 0.8, 0.25, 10, "journal") == pytest.approx(0.75 / 0.5 + 0.25 * 0.8)  # 1.7


def test_corr_limiting_cases():
    # all labelled (μ = 1): Corr is the accuracy in both forms
    assert corr(0.0, 0.6, 1.0, 10, "arxiv") == pytest.approx(0.6)
    assert corr(0.0, 0.6, 1.0, 10, "journal") == pytest.approx(0.6)
    # nothing labelled, uniform predictions (H̄ = 1): arXiv 0, journal 1
    assert corr(LN10, 0.0, 0.0, 10, "arxiv") == pytest.approx(0.0)
    assert corr(LN10, 0.0, 0.0, 10, "journal") == pytest.approx(1.0)
    # certain predictions: arXiv 1, journal 1/1e-8 (no division by zero)
    assert corr(0.0, 0.0, 0.0, 10, "arxiv") == pytest.approx(1.0)
    assert corr(0.0, 0.0, 0.0, 10, "journal") == pytest.approx(1e8)
    assert labeled_share(0, 0) == 0.0 and labeled_share(1, 3) == 0.25


def test_corr_arxiv_in_unit_interval_and_falls_with_entropy():
    for mu in (0.0, 0.3, 0.9):
        for acc in (0.0, 0.5, 1.0):
            values = [corr(h * LN10, acc, mu, 10) for h in (0.0, 0.25, 0.5, 1.0)]
            assert all(0.0 <= v <= 1.0 for v in values)
            assert values == sorted(values, reverse=True)


def test_corr_of_hand_probabilities():
    # two unlabelled samples, C = 2: one certain (entropy 0), one uniform (entropy log 2) ⇒ mean H̄ = 0.5
    p = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    h = float(entropy(p).mean())
    assert h == pytest.approx(0.5 * math.log(2))
    assert corr(h, 1.0, 0.5, 2) == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)


# --------------------------------------------------------------------------- the protocol


def test_lowest_excludes_the_device_itself():
    c = {0: 0.1, 1: 0.9, 2: 0.3, 3: 0.2}
    assert lowest([0, 1, 2, 3], 0, c, 2) == [3, 2]  # 0 is k: never among the lowest
    assert refresh_list([0, 1, 2, 3], 0, c, 2) == [1]  # Up without k itself


def test_replace_helper_step_by_step():
    c = {0: 0.5, 1: 0.9, 2: 0.3, 3: 0.2, 7: 0.25, 8: 0.95}
    # H = {0 (k), 1, 2, 3}, M = 4, R = 2: lowest {3 (0.2), 2 (0.3)}; candidates 7 (0.25), 8 (0.95)
    # best two of {0.2, 0.3, 0.25, 0.95}: 8 and 2 ⇒ 3 is replaced by 8, 7 is not taken
    assert replace_helpers([0, 1, 2, 3], 0, c, [7, 8], 2, 4) == [0, 1, 2, 8]
    # a candidate must beat strictly: equal Corr keeps the member
    assert replace_helpers([0, 1, 2, 3], 0, {**c, 7: 0.2}, [7], 1, 4) == [0, 1, 2, 3]
    # vacancies rank below any model: H = {0}, M = 3, R = 2 ⇒ both candidates move in, whatever their Corr
    assert replace_helpers([0], 0, {0: 0.5, 7: 0.0, 8: 0.0}, [7, 8], 2, 3) == [0, 7, 8]
    # one vacancy, R = 2: the vacancy and the lowest member compete with the candidates
    assert replace_helpers([0, 1, 2], 0, {0: 1, 1: 0.9, 2: 0.1, 7: 0.5, 8: 0.05}, [7, 8], 2, 4) == [0, 1, 2, 7]


def test_protocol_rounds_arxiv_and_journal():
    arxiv = UMPFSSLConfig(search_rounds=3, update_every=2)
    assert [protocol_steps(t, arxiv) for t in (1, 2, 3, 4, 5, 6)] == [
        (True, False), (True, True), (True, False), (False, True), (False, False), (False, True)]
    journal = UMPFSSLConfig(search_rounds=3, update_every=2, update_rule="from_nu")
    assert [protocol_steps(t, journal)[1] for t in (1, 2, 3, 4)] == [False, True, True, True]


def test_pseudo_label_from_the_most_certain_helper():
    helper_a = torch.tensor([[0.9, 0.1], [0.5, 0.5]])
    helper_b = torch.tensor([[0.6, 0.4], [0.2, 0.8]])
    q = pseudo_labels(torch.stack([helper_a, helper_b]))
    # sample 0: a is more certain; sample 1: b is; soft labels, no threshold
    assert torch.equal(q, torch.tensor([[0.9, 0.1], [0.2, 0.8]]))


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="replace"):
        UMPFSSLConfig(helpers=3, replace=3)
    with pytest.raises(ValueError, match="corr_form"):
        UMPFSSLConfig(corr_form="other")
    with pytest.raises(ValueError, match="update_every"):
        UMPFSSLConfig(update_every=0)
    with pytest.raises(ValueError, match="lr"):
        UMPFSSLConfig(lr=0.0)


# --------------------------------------------------------------------------- on the clock

TINY_UM = """
name = "tiny-um"
seed = 5

[system]
n_devices = 6
bandwidth_hz = 1e6
cpu_freq_hz = 1e9
downlink_rate_bps = {rate}

[budget]
total_time_s = 1000
rounds = 5

[workload]
cycles_per_sample = 1e6
samples_per_device = 40
model_bits = "auto"

[data]
dataset = "digits"
partition = "dirichlet"
alpha = 1.0
labeled_ratio_alpha = 0.5

[train]
model = "cnn_mc"
lr = 0.05
batch_size = 16

[run]
algorithms = ["um_pfssl"]
clients_per_round = {k}

[algorithms.um_pfssl]
helpers = 3
replace = 1
search_rounds = 2
update_every = 2
mc_passes = 2
warmup_epochs = 1
"""


def _setup(tmp_path, rate=1e6, k=3, overrides=()):
    p = tmp_path / "um.toml"
    p.write_text(TINY_UM.format(rate=rate, k=k))
    sc = load_scenario(p, list(overrides))
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    return sc, ctx


def _backend(ctx, sc):
    return REGISTRY["um_pfssl"].build(ctx, sc.learning["algorithms"]["um_pfssl"])


def test_engine_charges_helper_downloads_and_mc_passes(tmp_path):
    rate = 1e6
    sc, ctx = _setup(tmp_path, rate=rate)
    backend = _backend(ctx, sc)
    sim = Simulation(sc.system, sc.budget, backend, seed=sc.seed)
    records = sim.run(4)
    bits = ctx.model_bits
    seen_download = False
    for rec in records[1:]:
        plan_downloads = rec.info["downloads_replace"] + rec.info["downloads_update"] + rec.info["downloads_fill"]
        assert sum(d.bits_down for d in rec.devices) == pytest.approx(plan_downloads * bits)
        for d in rec.devices:
            assert d.download_s == pytest.approx(d.bits_down / rate)  # a finite downlink takes simulated time
            seen_download |= d.bits_down > 0
        # every helper evaluation is T forward passes over the device's labelled + unlabelled data
        evaluated = rec.info["helper_evaluations"]
        assert evaluated > 0
    assert seen_download
    # round 1 (t = 1 ≤ F): every device (arXiv protocol) receives R = 1 candidate; sampled ones fill their lists
    r1 = records[1]
    assert len(r1.devices) == ctx.n_devices
    assert r1.info["downloads_replace"] == ctx.n_devices


def test_helper_cycles_are_mc_passes_from_the_cost_module(tmp_path):
    sc, ctx = _setup(tmp_path)
    backend = _backend(ctx, sc)
    sim = Simulation(sc.system, sc.budget, backend, seed=sc.seed)
    sim.run(1)  # warm-up
    view = sim.system_view()
    before = [dict(s) for s in backend.seen]
    plan = backend.plan_round(view)
    for w in plan.work:
        n_s, n_u = backend.sizes[w.device]
        new = [j for j, s in backend._pending[w.device][1].items()
               if j not in before[w.device] or before[w.device][j].version != s.version]
        # the device evaluated at least the models it keeps that it had not seen (candidates it dropped come on top)
        assert w.compute_cycles["helpers"] >= forward_cycles(ctx.cycles_per_sample, n_s + n_u, len(new), 2)
        assert w.compute_cycles["helpers"] % forward_cycles(ctx.cycles_per_sample, n_s + n_u, 1, 2) == pytest.approx(0.0, abs=1e-3)


def test_communication_cost_against_the_papers_bound(tmp_path):
    # every device trains every round (K̄ = K), so every replacement and every update happens
    n_dev, rounds, m, r, f, nu = 6, 4, 3, 1, 1, 2  # F < ν: no fresh candidate makes an update unnecessary
    sc, ctx = _setup(tmp_path, k=n_dev)
    cfg = UMPFSSLConfig(helpers=m, replace=r, search_rounds=f, update_every=nu, mc_passes=1, warmup_epochs=1)
    backend = UMPFSSL(ctx, cfg)
    records = Simulation(sc.system, sc.budget, backend, seed=sc.seed).run(rounds + 1)
    protocol = records[1:]
    measured = sum(rec.info["transmissions"] for rec in protocol)
    uploads = sum(rec.info["K"] for rec in protocol)
    replaced = sum(rec.info["downloads_replace"] for rec in protocol)
    updated = sum(rec.info["downloads_update"] for rec in protocol)
    filled = sum(rec.info["downloads_fill"] for rec in protocol)
    # the terms the bound counts, attained exactly: K̄·n uploads and F·R·K candidate downloads
    assert uploads == n_dev * rounds
    assert replaced == f * r * n_dev
    # updates: each device refreshes its helpers outside the R lowest, without itself: M − R − 1 each time
    assert updated == (rounds // nu) * n_dev * (m - r - 1)
    # fills: after round 1's replacement every device still has M − 1 − R vacancies (not in the paper's formula)
    assert filled == n_dev * (m - 1 - r)
    assert measured == uploads + replaced + updated + filled
    bound = cost_bound(n_dev, n_dev, rounds, cfg)
    assert bound == n_dev * m * rounds / nu + f * r * n_dev + n_dev * rounds  # (M·n/ν + n + F·R)·K̄ with K = K̄
    assert measured <= bound
    # and the bits: the engine moved exactly the counted transmissions
    assert sum(rec.bits_up + rec.bits_down for rec in protocol) == pytest.approx(measured * ctx.model_bits)
    assert records[0].info["transmissions"] == 2 * n_dev  # the warm-up: w_0 down, the warmed model up
    assert cost_fedavg(3, 10) == 60


def test_dropped_device_keeps_its_list_and_model(tmp_path):
    sc, ctx = _setup(tmp_path)
    backend = _backend(ctx, sc)
    sim = Simulation(sc.system, sc.budget, backend, seed=sc.seed)
    sim.run(1)
    lists, latest = [dict(x) for x in backend.lists], list(backend.latest)
    plan = backend.plan_round(sim.system_view())
    from edgesim.backend import RoundOutcome

    everyone = tuple(w.device for w in plan.work)
    backend.complete_round(RoundOutcome(1, 0.0, 1.0, (), everyone, {}, {}))
    assert backend.lists == lists and backend.latest == latest


def test_resume_gives_identical_rounds(tmp_path):
    sc, ctx = _setup(tmp_path)
    straight = Simulation(sc.system, sc.budget, _backend(ctx, sc), seed=sc.seed).run(4)
    first = _backend(ctx, sc)
    sim = Simulation(sc.system, sc.budget, first, seed=sc.seed)
    sim.run(2)
    engine, state = sim.state_dict(), first.state_dict()
    again = _backend(ctx, sc)
    sim2 = Simulation(sc.system, sc.budget, again, seed=sc.seed)
    sim2.load_state_dict(engine)
    again.load_state_dict(state)
    resumed = sim2.run(2)
    for a, b in zip(straight[2:], resumed):
        assert a.metrics == b.metrics and a.info == b.info and a.end_time_s == b.end_time_s


def test_run_folder_has_variance_and_helper_graphs(tmp_path):
    sc, _ = _setup(tmp_path, overrides=["budget.rounds=3"])
    out = run_scenario(sc, tmp_path / "run")
    summary = json.loads((out / "summary.json").read_text())
    a = summary["algorithms"]["um_pfssl"]
    assert a["display"] == "UM-pFSSL" and a["final_accuracy_var"] >= 0
    header = (out / "rounds.csv").read_text().splitlines()[0].split(",")
    assert {"accuracy_var", "transmissions", "transmissions_total", "downloads_replace"} <= set(header)
    files = sorted((out / "graphs" / "um_pfssl").iterdir())
    assert [f.name for f in files] == ["round_0000.json", "round_0001.json", "round_0002.json"]
    g = nx.node_link_graph(json.loads(files[-1].read_text()), edges="links")
    assert g.is_directed() and g.number_of_nodes() == 6 and g.graph["round"] == 2
    assert g.number_of_edges() > 0
    for k in g:
        assert g.out_degree(k) <= 2  # M − 1 helpers besides itself
    assert all(0.0 <= w <= 1.0 for *_, w in g.edges(data="weight") if w is not None)
    assert is_run_folder(out)  # the graphs are the run's own files: --overwrite may replace the folder
    run_scenario(sc, out, overwrite=True)


def test_too_many_helpers_for_the_devices(tmp_path):
    sc, ctx = _setup(tmp_path)
    with pytest.raises(ValueError, match="helpers"):
        UMPFSSL(ctx, UMPFSSLConfig(helpers=7, replace=1))
    with pytest.raises(ScenarioError, match="replace"):
        _setup(tmp_path, overrides=["algorithms.um_pfssl.replace=5"])


def test_same_class_share_by_hand(tmp_path):
    from edgesim.plots.graphs import draw_graph, same_class_share
    from edgesim.scenarios.graphs import node_link

    # devices 0, 1 of class 3 and 2, 3 of class 5; edges 0→1 (same), 0→2 (other), 2→3 (same)
    graph = {"nodes": {0: {"dominant_class": 3}, 1: {"dominant_class": 3}, 2: {"dominant_class": 5},
                       3: {"dominant_class": 5}},
             "edges": [(0, 1, {"weight": 0.5}), (0, 2, {"weight": 0.1}), (2, 3, {"weight": 0.9})]}
    f = tmp_path / "g.json"
    f.write_text(json.dumps(node_link(graph, 4, 12.5)))
    from edgesim.plots.graphs import read_graph

    g = read_graph(f)
    same, random = same_class_share(g)
    assert same == pytest.approx(2 / 3)
    assert random == pytest.approx((2 + 2) / (4 * 3))  # ordered pairs within a class / all ordered pairs
    assert draw_graph(f, tmp_path / "g.png").stat().st_size > 0
    with pytest.raises(ValueError, match="not a node"):
        node_link({"nodes": {0: {}}, "edges": [(0, 9, {})]}, 0, 0.0)


def test_vectorised_helper_evaluation_agrees_with_the_loop(tmp_path):
    from dataclasses import replace

    sc, ctx = _setup(tmp_path)
    cfg = sc.learning["algorithms"]["um_pfssl"]
    backends = [UMPFSSL(ctx, replace(cfg, vectorize=v)) for v in ("on", "off")]
    for b in backends:
        Simulation(sc.system, sc.budget, b, seed=sc.seed).run(2)
    on, off = backends
    assert on.vectorize and not off.vectorize
    assert on.task.optimizer.lr == ctx.train_cfg.lr
    assert UMPFSSL(ctx, replace(cfg, lr=0.001)).task.optimizer.lr == 0.001  # the lr option overrides [train]
    assert on.lists == off.lists
    for seen_on, seen_off in zip(on.seen, off.seen):
        assert seen_on.keys() == seen_off.keys()
        for j in seen_on:
            assert seen_on[j].corr == pytest.approx(seen_off[j].corr, abs=1e-6)
            assert torch.allclose(seen_on[j].probs, seen_off[j].probs, atol=1e-5)


@pytest.mark.parametrize("name", ["um_pfssl_fmnist_paper.toml", "um_pfssl_cifar10_paper.toml"])
def test_the_papers_setting_plans_without_the_data(name, tmp_path):
    from pathlib import Path

    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    path = Path(__file__).resolve().parents[1] / "scenarios" / name
    result = CliRunner().invoke(app, ["plan", str(path), "--json", "--set", f'data.data_dir="{tmp_path}"'])
    assert result.exit_code == 0, result.output
    sc = load_scenario(path)
    cfg = sc.learning["algorithms"]["um_pfssl"]
    assert sc.system.n_devices == 100 and sc.learning["run"].clients_per_round == 10 and sc.budget.rounds == 201
    assert sc.learning["train"].model == "resnet9" and len(sc.learning["run"].algorithms) == 10
    assert (cfg.helpers, cfg.replace, cfg.search_rounds, cfg.update_every, cfg.mc_passes) == (5, 2, 30, 10, 10)
