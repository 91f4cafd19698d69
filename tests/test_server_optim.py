"""The FedAvg family's server step: FedAvgM, FedAdam and FedYogi (Reddi et al. 2021) by hand and end to end."""

from __future__ import annotations

import pytest
import torch

from edgesim.config import ConfigError
from edgesim.engine import Simulation
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.fedavg.algorithm import FedAvg, FedAvgConfig
from edgesim.learning.context import build_context
from edgesim.learning.server_optim import ServerOptimizer
from edgesim.scenarios.schema import load_scenario


def _step(kind, rounds, **kw):
    opt = ServerOptimizer(kind, kw.get("lr", 0.5), kw.get("momentum", 0.9), kw.get("beta2", 0.99), kw.get("tau", 1e-3),
                          trainable=["w"])
    x = {"w": torch.tensor([1.0, -2.0]), "running_var": torch.tensor([1.0])}
    for avg in rounds:
        x = opt.step(x, {"w": torch.tensor(avg), "running_var": torch.tensor([0.5])})
    return x, opt


def test_server_steps_by_hand():
    # sgd with η = 1 is the average itself; buffers always take the average
    x, _ = _step("sgd", [[3.0, 0.0]], lr=1.0)
    assert x["w"].tolist() == [3.0, 0.0] and x["running_var"].tolist() == [0.5]
    x, _ = _step("sgd", [[3.0, 0.0]], lr=0.5)  # x + η Δ = [1, -2] + 0.5 [2, 2]
    assert x["w"].tolist() == [2.0, -1.0]
    # FedAvgM: v1 = Δ1 = [2, 2]; x1 = [2, -1]. Δ2 = [2, 0] - x1 = [0, 1]; v2 = 0.9 v1 + Δ2 = [1.8, 2.8]; x2 = x1 + 0.5 v2
    x, _ = _step("momentum", [[3.0, 0.0], [2.0, 0.0]])
    assert torch.allclose(x["w"], torch.tensor([2.9, 0.4]))
    # FedAdam, one round: m = 0.1 Δ, v = 0.99 τ² + 0.01 Δ², x + η m / (√v + τ)
    tau, delta = 1e-3, torch.tensor([2.0, 2.0])
    m, v = 0.1 * delta, 0.99 * tau ** 2 + 0.01 * delta ** 2
    x, opt = _step("adam", [[3.0, 0.0]], tau=tau)
    assert torch.allclose(x["w"], torch.tensor([1.0, -2.0]) + 0.5 * m / (v.sqrt() + tau))
    # FedYogi, one round: v = τ² − 0.01 Δ² sign(τ² − Δ²) = τ² + 0.01 Δ² (Δ² > τ²)
    v = tau ** 2 + 0.01 * delta ** 2
    y, _ = _step("yogi", [[3.0, 0.0]], tau=tau)
    assert torch.allclose(y["w"], torch.tensor([1.0, -2.0]) + 0.5 * m / (v.sqrt() + tau))
    state = opt.state_dict()
    assert set(state) == {"m", "v"} and set(state["m"]) == {"w"}  # buffers carry no moments


def test_server_options_are_validated(tiny_scenario):
    with pytest.raises(ValueError, match="server_optimizer = 'rmsprop'"):
        FedAvgConfig(server_optimizer="rmsprop")
    with pytest.raises(ConfigError, match=r"\[algorithms.fedadam\].*server_beta2 = 1.5: expected a number in \[0, 1\)"):
        load_scenario(tiny_scenario, ["algorithms.fedadam.server_beta2=1.5"])
    assert REGISTRY["fedadam"].config_cls().server_lr == 0.01 and REGISTRY["fedavgm"].display == "FedAvgM"


def test_fedavgm_fedadam_fedyogi_train_and_resume_from_their_state(tiny_scenario):
    sc = load_scenario(tiny_scenario)
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    plain = REGISTRY["fedavg"].build(ctx, FedAvgConfig())
    Simulation(sc.system, sc.budget, plain, seed=sc.seed).run(2)
    for name in ("fedavgm", "fedadam", "fedyogi"):
        spec = REGISTRY[name]
        alg = spec.build(ctx, spec.config_cls())
        sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
        metrics = [r.metrics for r in sim.run(2)]
        assert all(0 <= m["accuracy"] <= 1 for m in metrics)
        assert any(not torch.equal(alg.global_state[k], plain.global_state[k]) for k in alg.global_state), name
        assert alg.server_opt.m, name  # the server's moments are kept ...
        again = FedAvg(ctx, name, spec.config_cls())
        again.load_state_dict(alg.state_dict())  # ... and checkpointed with the model
        assert all(torch.equal(again.server_opt.m[k], alg.server_opt.m[k]) for k in alg.server_opt.m)
