"""FedAvg, FedProx, FedBN and Local: aggregation by hand, FedProx(μ=0) ≡ FedAvg, dropped uploads."""

from __future__ import annotations

import pytest
import torch

from edgesim.backend import RoundOutcome
from edgesim.engine import Simulation
from learning.aggregation import merge, split_keys, weighted_average
from learning.algorithms import REGISTRY
from learning.algorithms.fedavg import FedAvg, FedProxConfig, batchnorm_keys
from learning.context import build_context
from learning.models import build_model
from scenarios.schema import load_scenario


def test_weighted_average_by_hand():
    a = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(3)}
    b = {"w": torch.tensor([4.0, 8.0]), "n": torch.tensor(5)}
    out = weighted_average([(a, 1.0), (b, 2.0)])
    # (1·[1, 2] + 2·[4, 8]) / 3 = [3, 6]; integer buffers take the max
    assert torch.allclose(out["w"], torch.tensor([3.0, 6.0]))
    assert int(out["n"]) == 5
    with pytest.raises(ValueError, match="at least one"):
        weighted_average([])
    with pytest.raises(ValueError, match="not all zero"):
        weighted_average([(a, 0.0)])


def test_split_and_merge_keys():
    state = {"conv.weight": torch.ones(1), "bn.weight": torch.zeros(1)}
    shared, local = split_keys(state, lambda k: k.startswith("bn."))
    assert set(shared) == {"conv.weight"} and set(local) == {"bn.weight"}
    assert merge(shared, local).keys() == state.keys()


def _ctx(tiny_scenario, *overrides):
    sc = load_scenario(tiny_scenario, list(overrides))
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    return sc, ctx


def _run(sc, backend, rounds=2):
    sim = Simulation(sc.system, sc.budget, backend, seed=sc.seed)
    return [r.metrics for r in sim.run(rounds)]


def test_fedprox_with_mu_zero_equals_fedavg(tiny_scenario):
    sc, ctx = _ctx(tiny_scenario)
    fedavg = REGISTRY["fedavg"].build(ctx, REGISTRY["fedavg"].config_cls())
    prox0 = FedAvg(ctx, "fedavg", prox_mu=0.0)  # same name ⇒ same derived random streams
    assert _run(sc, fedavg) == _run(sc, prox0)
    for k in fedavg.global_state:
        assert torch.equal(fedavg.global_state[k], prox0.global_state[k])
    prox = REGISTRY["fedprox"].build(ctx, FedProxConfig(mu=1.0))
    _run(sc, prox)
    assert any(not torch.equal(fedavg.global_state[k], prox.global_state[k]) for k in fedavg.global_state)


def test_only_arrived_uploads_are_averaged(tiny_scenario):
    sc, ctx = _ctx(tiny_scenario)
    alg = REGISTRY["fedavg"].build(ctx, REGISTRY["fedavg"].config_cls())
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    view = sim.system_view()
    plan = alg.plan_round(view)
    before = {k: v.clone() for k, v in alg.global_state.items()}
    # every upload dropped at the deadline: the global model must not move
    alg.complete_round(RoundOutcome(0, 0.0, 1.0, arrived=(), dropped=tuple(w.device for w in plan.work),
                                    compute_end_s={}, upload_end_s={}))
    assert all(torch.equal(before[k], alg.global_state[k]) for k in before)
    # one arrival: the global model becomes exactly that device's trained model
    alg.plan_round(view)
    one = plan.work[0].device
    alg.complete_round(RoundOutcome(0, 0.0, 1.0, arrived=(one,), dropped=(), compute_end_s={}, upload_end_s={}))
    assert any(not torch.equal(before[k], alg.global_state[k]) for k in before)


def test_deadline_mode_drops_uploads_in_a_real_run(tiny_scenario):
    # budget of 30 s over 3 rounds with a 0.7 s deadline: training alone takes ~0.5 s per device at 1 GHz
    sc, ctx = _ctx(tiny_scenario, "budget.round_mode='deadline'", "budget.deadline_s=0.3")
    alg = REGISTRY["fedavg"].build(ctx, REGISTRY["fedavg"].config_cls())
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    records = sim.run(2)
    assert all(len(r.arrived) < 3 for r in records)
    assert all(r.duration_s <= 0.3 + 1e-9 for r in records)


def test_fedbn_keeps_batchnorm_local():
    model = build_model("resnet9", (1, 8, 8), 10, seed=0)
    keys = batchnorm_keys(model)
    assert keys and all(".running_mean" in k or ".weight" in k or ".bias" in k or "num_batches" in k or
                        ".running_var" in k for k in keys)
    assert not any(k.startswith("fc.") for k in keys)
    assert batchnorm_keys(build_model("cnn", (1, 8, 8), 10, seed=0)) == frozenset()


def test_local_never_uploads(tiny_scenario):
    sc, ctx = _ctx(tiny_scenario)
    alg = REGISTRY["local"].build(ctx, REGISTRY["local"].config_cls())
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    rec = sim.run(1)[0]
    assert rec.bits_up == 0 and rec.bits_down == 0 and len(rec.devices) == sc.system.n_devices
