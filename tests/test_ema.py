"""The EMA evaluation model (issue 35): the moving average of the weights, in local training and in the FedAvg family."""

from __future__ import annotations

import io

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesim.config import ConfigError
from edgesim.engine import Simulation
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.context import build_context
from edgesim.learning.executors import SequentialExecutor, VmapExecutor
from edgesim.learning.objectives import cross_entropy_loss
from edgesim.learning.optim import SGD, ema_update
from edgesim.learning.tasks import LocalTask, Stream
from edgesim.scenarios.schema import load_scenario

# --------------------------------------------------------------------------- the formula


def test_one_ema_step_by_hand():
    ema = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(4)}
    params = {"w": torch.tensor([3.0, -2.0]), "n": torch.tensor(7)}
    out = ema_update(ema, params, 0.9)  # 0.9·1 + 0.1·3 = 1.2; 0.9·2 + 0.1·(−2) = 1.6
    assert torch.allclose(out["w"], torch.tensor([1.2, 1.6]))
    assert out["n"].item() == 7  # a counter is not averaged: it takes the weights' value
    assert torch.equal(ema["w"], torch.tensor([1.0, 2.0]))  # pure: the old average is untouched


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=8), st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=8),
       st.floats(0.0, 0.999))
def test_decay_zero_is_the_weights_and_any_decay_stays_between(a, b, decay):
    n = min(len(a), len(b))
    ema, params = {"w": torch.tensor(a[:n], dtype=torch.float64)}, {"w": torch.tensor(b[:n], dtype=torch.float64)}
    assert torch.equal(ema_update(ema, params, 0.0)["w"], params["w"])  # decay 0: exactly the raw weights
    out = ema_update(ema, params, decay)["w"]
    low, high = torch.minimum(ema["w"], params["w"]), torch.maximum(ema["w"], params["w"])
    assert bool(((out >= low - 1e-9) & (out <= high + 1e-9)).all())  # a convex combination


@pytest.mark.parametrize("decay", [-0.1, 1.0, float("nan")])
def test_a_decay_outside_zero_one_is_refused(decay):
    with pytest.raises(ValueError, match="decay"):
        ema_update({"w": torch.zeros(1)}, {"w": torch.zeros(1)}, decay)
    with pytest.raises(ValueError, match="ema_decay"):
        LocalTask(loss=cross_entropy_loss("x"), optimizer=SGD(0.1), ema_decay=decay)


# --------------------------------------------------------------------------- in local training


def _plus_one_step(inp):
    """A step that adds 1 to every weight: after step s the weights are w₀ + s + 1."""
    return {k: v + 1.0 for k, v in inp.params.items()}, inp.opt_state, {"loss": torch.zeros(())}


def test_the_executor_keeps_the_average_over_the_steps_by_hand():
    model = torch.nn.Linear(2, 1)
    start = {k: torch.zeros_like(v) for k, v in model.state_dict().items()}
    data = [{"main": {"x": torch.zeros(4, 2), "y": torch.zeros(4, dtype=torch.long)}}]
    task = LocalTask(loss=None, step=_plus_one_step, optimizer=SGD(0.1), epochs=1, streams=(Stream("main", 2),),
                     ema_decay=0.5)
    res = SequentialExecutor().run(model, task, [start], data, [0])
    assert res.n_steps == [2]
    # ē₀ = 0; ē₁ = 0.5·0 + 0.5·1 = 0.5; ē₂ = 0.5·0.5 + 0.5·2 = 1.25
    assert all(torch.allclose(v, torch.full_like(v, 1.25)) for v in res.ema[0].values())
    assert all(torch.allclose(v, torch.full_like(v, 2.0)) for v in res.params[0].values())


def _train(ema_decay):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3))
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    data = [{"main": {"x": torch.randn(20, 4, generator=g), "y": torch.randint(0, 3, (20,), generator=g)}}]
    task = LocalTask(loss=cross_entropy_loss("x"), optimizer=SGD(0.1, 0.9), epochs=3, streams=(Stream("main", 8),),
                     ema_decay=ema_decay)
    return model, task, start, data, SequentialExecutor().run(model, task, [start], data, [5])


def test_decay_zero_in_training_is_the_trained_weights_and_the_average_never_changes_training():
    *_, plain = _train(None)
    *_, zero = _train(0.0)
    *_, avg = _train(0.9)
    assert plain.ema is None
    for k in plain.params[0]:
        assert torch.equal(plain.params[0][k], zero.params[0][k]) and torch.equal(plain.params[0][k], avg.params[0][k])
        assert torch.equal(zero.ema[0][k], zero.params[0][k])
    assert any(not torch.equal(avg.ema[0][k], avg.params[0][k]) for k in avg.params[0])
    *_, again = _train(0.9)
    assert all(torch.equal(avg.ema[0][k], again.ema[0][k]) for k in avg.ema[0])  # deterministic


def test_the_vectorised_executor_refuses_a_task_with_an_average():
    model, task, start, data, _ = _train(0.9)
    with pytest.raises(ValueError, match="ema_decay.*sequential"):
        VmapExecutor().run(model, task, [start], data, [5])


# --------------------------------------------------------------------------- in the FedAvg family


def _ctx(tiny_scenario):
    sc = load_scenario(tiny_scenario)
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    return sc, ctx


def _fixavg(ctx, ema_decay):
    spec = REGISTRY["fixavg"]
    return spec.build(ctx, spec.config_cls(ema_decay=ema_decay))


def _rounds(sc, backend, rounds):
    return [r.metrics for r in Simulation(sc.system, sc.budget, backend, seed=sc.seed).run(rounds)]


def test_fixavg_with_decay_zero_evaluates_the_global_model(tiny_scenario):
    pytest.importorskip("edgesim.learning.augment")
    sc, ctx = _ctx(tiny_scenario)
    plain, zero = _fixavg(ctx, None), _fixavg(ctx, 0.0)
    assert _rounds(sc, plain, 2) == _rounds(sc, zero, 2)
    assert "ema" not in plain.state_dict()


def test_fixavg_evaluates_the_average_and_trains_the_global_model(tiny_scenario):
    pytest.importorskip("edgesim.learning.augment")
    sc, ctx = _ctx(tiny_scenario)
    plain, avg = _fixavg(ctx, None), _fixavg(ctx, 0.5)
    first = {k: v.clone() for k, v in avg.global_state.items()}
    _rounds(sc, plain, 1)
    _rounds(sc, avg, 1)
    for k in first:  # training never sees the average: the global models agree; ē₁ = (w₀ + w₁) / 2
        assert torch.equal(plain.global_state[k], avg.global_state[k])
        if first[k].is_floating_point():
            assert torch.allclose(avg.ema[k], (first[k] + avg.global_state[k]) / 2)
    again = _fixavg(ctx, 0.5)
    _rounds(sc, again, 1)
    assert all(torch.equal(avg.ema[k], again.ema[k]) for k in avg.ema)  # deterministic


def test_fixavg_with_an_average_resumes_to_the_same_metrics(tiny_scenario):
    pytest.importorskip("edgesim.learning.augment")
    sc, ctx = _ctx(tiny_scenario)
    straight = _rounds(sc, _fixavg(ctx, 0.7), 3)
    first = _fixavg(ctx, 0.7)
    sim = Simulation(sc.system, sc.budget, first, seed=sc.seed)
    sim.run(2)
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)
    engine_state = sim.state_dict()
    resumed = _fixavg(ctx, 0.7)
    buf.seek(0)
    resumed.load_state_dict(torch.load(buf))
    sim2 = Simulation(sc.system, sc.budget, resumed, seed=sc.seed)
    sim2.load_state_dict(engine_state)
    assert [r.metrics for r in sim2.run(1)] == straight[2:]


def test_a_scenario_with_a_bad_decay_is_one_clear_line(tiny_scenario):
    with pytest.raises(ConfigError, match="ema_decay.*1.5"):
        load_scenario(tiny_scenario, ['run.algorithms=["fixavg"]', "algorithms.fixavg.ema_decay=1.5"])
