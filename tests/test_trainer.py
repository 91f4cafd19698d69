"""Step-level local training: optimizers, schedules, costs, and sequential == vectorised per loss family."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesim.learning.costs import forward_cycles, stream_rows, task_cycles
from edgesim.learning.executors import SequentialExecutor, VmapExecutor
from edgesim.learning.models import build_model
from edgesim.learning.objectives import cross_entropy_loss, kl_to_soft, sharpen, soft_target_loss
from edgesim.learning.optim import SGD, Adam, Constant, Cosine, make_optimizer
from edgesim.learning.tasks import LocalTask, Stream

SIZES = (23, 40, 5, 0)


def state_of(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def max_diff(a, b):
    return max(float((x[k].double() - y[k].double()).abs().max()) for x, y in zip(a, b) for k in x)


@pytest.fixture(scope="module")
def cnn():
    return build_model("cnn", (1, 8, 8), 10, seed=0)


@pytest.fixture(scope="module")
def data():
    g = torch.Generator().manual_seed(5)
    return [{"x": torch.randn(n, 1, 8, 8, generator=g), "y": torch.randint(0, 10, (n,), generator=g),
             "u": torch.randn(2 * n + 3, 1, 8, 8, generator=g)} for n in SIZES]


def both(model, task, starts, streams, seed=0):
    def gens():
        return [torch.Generator().manual_seed(seed + c) for c in range(len(starts))]

    a = SequentialExecutor().run(model, task, starts, streams, gens())
    b = VmapExecutor().run(model, task, starts, streams, gens())
    return a, b


# --------------------------------------------------------------------------- optimizers


@pytest.mark.parametrize("nesterov,wd", [(False, 0.0), (True, 0.0), (True, 1e-3)])
def test_sgd_is_torch_sgd_bit_for_bit(nesterov, wd):
    g = torch.Generator().manual_seed(0)
    p0 = torch.randn(7, 3, generator=g)
    grads = [torch.randn(7, 3, generator=g) for _ in range(4)]
    ref = p0.clone().requires_grad_(True)
    opt = torch.optim.SGD([ref], lr=0.1, momentum=0.9, nesterov=nesterov, weight_decay=wd)
    mine, state = {"p": p0.clone()}, None
    sgd = SGD(0.1, 0.9, wd, nesterov)
    state = sgd.init(mine)
    for s, gr in enumerate(grads):
        ref.grad = gr.clone()
        opt.step()
        mine, state = sgd.update(mine, {"p": gr}, state, s)
    assert torch.equal(mine["p"], ref.detach())
    inplace = {"p": p0.clone()}
    st_ = sgd.init(inplace)
    for s, gr in enumerate(grads):
        st_ = sgd.update_(inplace, {"p": gr}, st_, s)
    assert torch.equal(inplace["p"], ref.detach())  # the in-place form too


def test_adam_is_torch_adam():
    g = torch.Generator().manual_seed(1)
    p0 = torch.randn(5, generator=g)
    ref = p0.clone().requires_grad_(True)
    opt = torch.optim.Adam([ref], lr=1e-2, weight_decay=1e-4, foreach=False)
    adam = Adam(1e-2, weight_decay=1e-4)
    mine = {"p": p0.clone()}
    state = adam.init(mine)
    for s in range(6):
        gr = torch.randn(5, generator=g)
        ref.grad = gr.clone()
        opt.step()
        mine, state = adam.update(mine, {"p": gr}, state, s)
    assert torch.allclose(mine["p"], ref.detach(), rtol=0, atol=1e-7)
    g2 = torch.Generator().manual_seed(1)
    p1 = torch.randn(5, generator=g2)
    inplace = {"p": p1.clone()}
    st_ = adam.init(inplace)
    for s in range(6):
        st_ = adam.update_(inplace, {"p": torch.randn(5, generator=g2)}, st_, s)
    assert torch.equal(inplace["p"], ref.detach())


def test_adam_first_step_moves_by_lr():
    """Hand value: after one bias-corrected step |Δp| = lr·|g|/(|g| + ε) ≈ lr whatever the gradient's scale."""
    adam = Adam(0.01)
    p, _ = adam.update({"p": torch.zeros(3)}, {"p": torch.tensor([1e-3, 2.0, -50.0])}, adam.init({"p": torch.zeros(3)}), 0)
    assert torch.allclose(p["p"], torch.tensor([-0.01, -0.01, 0.01]), atol=1e-7)


def test_cosine_schedule_hand_values_and_limits():
    c = Cosine()
    assert c.factor(0, 16) == 1.0
    assert c.factor(16, 16) == pytest.approx(math.cos(7 * math.pi / 16))  # FixMatch ends at cos(7π/16)
    assert c.factor(8, 16) == pytest.approx(math.cos(7 * math.pi / 32))
    assert Cosine(0.5).factor(10, 10) == pytest.approx(0.0, abs=1e-12)
    assert Constant().factor(3, 4) == 1.0
    with pytest.raises(ValueError):
        Cosine(0.0)


@given(st.integers(1, 200))
@settings(max_examples=30, deadline=None)
def test_cosine_factor_decreases(total):
    f = [Cosine().factor(s, total) for s in range(total + 1)]
    assert all(a >= b for a, b in zip(f, f[1:])) and 0 < f[-1] <= f[0] == 1.0


def test_optimizer_inputs_checked():
    for bad in (dict(lr=0.0), dict(lr=0.1, momentum=1.0), dict(lr=0.1, nesterov=True)):
        with pytest.raises(ValueError):
            SGD(**bad)
    with pytest.raises(ValueError, match="optimizer"):
        make_optimizer("rmsprop", 0.1)


# --------------------------------------------------------------------------- costs


def test_task_cycles_hand_count_fixmatch():
    """50 labelled (B = 10) and 500 unlabelled (μB = 70): 8 steps, 80 labelled rows, 2 × 500 unlabelled rows."""
    task = LocalTask(loss=cross_entropy_loss(), optimizer=SGD(0.1), epochs=1,
                     streams=(Stream("lab", 10), Stream("unl", 70)), passes={"lab": 1.0, "unl": 2.0})
    assert stream_rows({"lab": 10, "unl": 70}, {"lab": 50, "unl": 500}, 1) == {"lab": (8, 10), "unl": (1, 500)}
    assert task_cycles(task, {"lab": 50, "unl": 500}, 3.0) == 3.0 * (80 + 2 * 500)


def test_task_cycles_one_stream_is_eq7():
    task = LocalTask(loss=cross_entropy_loss(), optimizer=SGD(0.1), epochs=3, streams=(Stream("main", 16),))
    assert task_cycles(task, {"main": 37}, 2e7) == 3 * 2e7 * 37
    assert task_cycles(task, {"main": 0}, 2e7) == 0.0
    assert forward_cycles(3e6, 10, n_models=2, n_passes=5) == pytest.approx(1e6 * 10 * 2 * 5)


@given(st.integers(0, 300), st.integers(0, 300), st.integers(1, 64), st.integers(1, 64), st.integers(1, 4))
@settings(max_examples=60, deadline=None)
def test_stream_rows_match_the_executor_schedule(n1, n2, b1, b2, epochs):
    from edgesim.learning.executors import task_schedule

    task = LocalTask(loss=cross_entropy_loss(), optimizer=SGD(0.1), epochs=epochs,
                     streams=(Stream("a", b1), Stream("b", b2)))
    sched = task_schedule(task, {"a": n1, "b": n2}, torch.Generator().manual_seed(0))
    rows = stream_rows({"a": b1, "b": b2}, {"a": n1, "b": n2}, epochs)
    for s in ("a", "b"):
        assert sum(i.numel() for i in sched[s]) == rows[s][0] * rows[s][1]
    assert len(sched["a"]) == len(sched["b"])  # every stream has a batch at every step


# --------------------------------------------------------------------------- sequential == vectorised, per loss family


def test_cross_entropy_with_adam_and_cosine(data):
    """In float64: Adam divides by √v, which turns float32 rounding of near-zero gradients into ~1e-5 noise."""
    cnn = build_model("cnn", (1, 8, 8), 10, seed=0).double()
    task = LocalTask(loss=cross_entropy_loss(), optimizer=Adam(1e-2), epochs=2, schedule=Cosine(),
                     streams=(Stream("main", 8),))
    streams = [{"main": {"x": d["x"].double(), "y": d["y"]}} for d in data]
    a, b = both(cnn, task, [state_of(cnn)] * len(data), streams)
    assert max_diff(a.params, b.params) < 1e-10
    assert a.n_steps == b.n_steps == [6, 10, 2, 0]
    assert all(math.isclose(x, y, rel_tol=1e-4) or (math.isnan(x) and math.isnan(y)) for x, y in zip(a.mean_loss, b.mean_loss))


def test_kl_to_soft_targets(cnn, data):
    g = torch.Generator().manual_seed(3)
    streams = [{"main": {"x": d["x"], "q": F.softmax(torch.randn(len(d["x"]), 10, generator=g), -1)}} for d in data]
    task = LocalTask(loss=soft_target_loss(), optimizer=SGD(0.1, 0.9), streams=(Stream("main", 8),))
    a, b = both(cnn, task, [state_of(cnn)] * len(data), streams)
    assert max_diff(a.params, b.params) < 1e-5


def test_two_streams_and_proximal_term(cnn, data):
    """A labelled and a cycling unlabelled stream (entropy minimisation on u) with FedProx's μ."""

    def loss(net, b, key):
        lx, lu = net.logits(b, "x", "u")
        sup = b.mean(F.cross_entropy(lx, b["y"], reduction="none"), "x")
        p = F.softmax(lu, -1)
        ent = b.mean(-(p * F.log_softmax(lu, -1)).sum(-1), "u")
        return sup + 0.5 * ent, {"loss": sup, "entropy": ent}

    task = LocalTask(loss=loss, optimizer=SGD(0.05, 0.9), epochs=1, prox_mu=0.1,
                     streams=(Stream("lab", 8), Stream("unl", 12)))
    streams = [{"lab": {"x": d["x"], "y": d["y"]}, "unl": {"u": d["u"]}} for d in data]
    a, b = both(cnn, task, [state_of(cnn)] * len(data), streams)
    assert max_diff(a.params, b.params) < 1e-5
    assert a.n_steps == [max(math.ceil(n / 8), math.ceil((2 * n + 3) / 12)) for n in SIZES]
    assert set(a.aux) == {"entropy"} and a.aux["entropy"][0] > 0


def test_frozen_sigma_trainable_psi_split(cnn, data):
    """FedMatch's θ = σ + ψ: σ (the model's own keys) is a frozen input, ψ (extra keys) trains; σ never moves."""
    keys = [n for n, _ in cnn.named_parameters()]

    def loss(net, b, key):
        theta = {k: net.fixed[k] + net.params["psi:" + k] for k in keys}
        (out,) = (net.apply(theta, b["x"], b.mask("x") if b.padded else None),)
        return b.mean(F.cross_entropy(out, b["y"], reduction="none"), "x"), {}

    sigma = state_of(cnn)
    start = {**sigma, **{"psi:" + k: torch.zeros_like(sigma[k]) for k in keys}}
    task = LocalTask(loss=loss, optimizer=SGD(0.1), streams=(Stream("main", 8),),
                     trainable=frozenset("psi:" + k for k in keys))
    streams = [{"main": {"x": d["x"], "y": d["y"]}} for d in data]
    a, b = both(cnn, task, [start] * len(data), streams)
    assert max_diff(a.params, b.params) < 1e-5
    for r in a.params + b.params:
        assert all(torch.equal(r[k], sigma[k]) for k in keys)
    assert float(a.params[0]["psi:fc2.weight"].abs().sum()) > 0
    assert float(a.params[3]["psi:fc2.weight"].abs().sum()) == 0  # the client without data


def test_resnet9_fixmatch_style_joint_forward_with_views():
    """ResNet-9 (BatchNorm + dropout) with weak/strong views of the unlabelled stream, float64."""
    pytest.importorskip("edgesim.learning.augment")
    from edgesim.learning.augment import make_augmentation
    from edgesim.learning.objectives import fixmatch_loss
    from edgesim.learning.tasks import View

    model = build_model("resnet9", (1, 8, 8), 10, seed=0).double()
    g = torch.Generator().manual_seed(2)
    streams = [{"lab": {"x": torch.randn(n, 1, 8, 8, generator=g, dtype=torch.float64),
                        "y": torch.randint(0, 10, (n,), generator=g)},
                "unl": {"u": torch.randn(2 * n + 1, 1, 8, 8, generator=g, dtype=torch.float64)}} for n in (5, 3)]
    weak, strong = make_augmentation("weak", (1, 8, 8)), make_augmentation("strong", (1, 8, 8), (0.5,), (0.25,))
    task = LocalTask(loss=fixmatch_loss(threshold=0.0), optimizer=SGD(0.01, 0.9, nesterov=True), epochs=1,
                     streams=(Stream("lab", 2), Stream("unl", 4)),
                     views=(View("x_aug", "x", weak), View("u_weak", "u", weak), View("u_strong", "u", strong)))
    a, b = both(model, task, [state_of(model)] * 2, streams)
    assert max_diff(a.params, b.params) < 1e-7
    assert a.aux["mask_rate"] == pytest.approx([1.0, 1.0])


# --------------------------------------------------------------------------- objectives by hand


def test_kl_and_sharpen_hand_values():
    q = torch.tensor([[0.5, 0.5]])
    logits = torch.log(torch.tensor([[0.25, 0.75]]))
    assert float(kl_to_soft(logits, q)) == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(0.5 / 0.75))
    assert float(kl_to_soft(torch.log(q), q)) == pytest.approx(0.0, abs=1e-7)
    s = sharpen(torch.tensor([[0.2, 0.8]]), 0.5)
    assert torch.allclose(s, torch.tensor([[0.04 / 0.68, 0.64 / 0.68]]))


def test_fixmatch_loss_hand_value():
    """One confident unlabelled sample counts, one below τ does not; the mean is over all μB rows."""
    from edgesim.learning.layers import ForwardState
    from edgesim.learning.objectives import fixmatch_loss
    from edgesim.learning.tasks import Batch, Net

    lin = nn.Linear(2, 2, bias=False)
    eye = {"weight": torch.eye(2) * 10}
    x = torch.tensor([[1.0, 0.0]])
    u_weak = torch.tensor([[1.0, 0.0], [0.01, 0.0]])  # confident class 0; ~uniform
    u_strong = torch.tensor([[0.0, 1.0], [0.0, 1.0]])
    batch = {"x_aug": x, "y": torch.tensor([0]), "u_weak": u_weak, "u_strong": u_strong,
             "__mask:lab": torch.ones(1), "__mask:unl": torch.ones(2)}
    b = Batch(batch, {"x_aug": "lab", "y": "lab", "u_weak": "unl", "u_strong": "unl"},
              {"x_aug": 0, "y": 1, "u_weak": 2, "u_strong": 3}, padded=False)
    net = Net(lin, eye, {}, eye, ForwardState(), False, False, frozenset({"weight"}))
    total, aux = fixmatch_loss(threshold=0.95, lambda_u=2.0)(net, b, torch.tensor(0))
    sup = F.cross_entropy(torch.tensor([[10.0, 0.0]]), torch.tensor([0]))
    ce_strong = F.cross_entropy(torch.tensor([[0.0, 10.0]]), torch.tensor([0]))
    assert float(aux["mask_rate"]) == 0.5
    assert float(total) == pytest.approx(float(sup + 2.0 * ce_strong / 2), rel=1e-6)
