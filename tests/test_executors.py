"""Executors: the sequential loop and the vmap one compute the same local training."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from edgesim.learning.device import compute_device
from edgesim.learning.executors import (
    BATCHES,
    SequentialExecutor,
    VmapExecutor,
    client_schedule,
    derive_seed,
    make_executor,
)
from edgesim.learning.inference import evaluate, predict_proba
from edgesim.learning.models import build_model, draw_seed
from edgesim.learning.numerics import Numerics
from edgesim.learning.objectives import cross_entropy_loss, supervised_loss
from edgesim.learning.optim import SGD
from edgesim.learning.state import stack_params
from edgesim.learning.tasks import LocalTask, Stream

SIZES = (37, 64, 5, 0, 50)  # unequal, one client without data
TOL = 1e-5


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny tensors: one intra-op thread avoids OpenMP spin-waits on a shared 2-core host."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def state_of(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def max_diff(a: list[dict], b: list[dict]) -> float:
    return max(float((x[k] - y[k]).abs().max()) for x, y in zip(a, b) for k in x)


def all_equal(a: list[dict], b: list[dict]) -> bool:
    return all(torch.equal(x[k], y[k]) for x, y in zip(a, b) for k in x)


@pytest.fixture(scope="module")
def cnn():
    return build_model("cnn", (1, 8, 8), 10, seed=0)


@pytest.fixture(scope="module")
def clients():
    g = torch.Generator().manual_seed(123)
    return [(torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 10, (n,), generator=g)) for n in SIZES]


def starts(model: nn.Module, k: int) -> list[dict]:
    """Different start points per client (as after personalised aggregation)."""
    base = state_of(model)
    g = torch.Generator().manual_seed(99)
    return [{n: v + 0.01 * torch.randn(v.shape, generator=g) for n, v in base.items()} for _ in range(k)]


def seeds(k: int, round_: int = 0) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(1000 * round_ + c) for c in range(k)]


def sgd(lr: float, momentum: float = 0.0, weight_decay: float = 0.0, batch_size: int = 32, epochs: int = 1,
        prox_mu: float = 0.0, loss=None) -> LocalTask:
    """Supervised local SGD as a LocalTask (as ``common.sgd_task`` builds it): mean cross-entropy, or ``loss``,
    on one stream ``main`` of ``(x, y[, w])``."""
    return LocalTask(loss=cross_entropy_loss() if loss is None else loss, optimizer=SGD(lr, momentum, weight_decay),
                     epochs=epochs, streams=(Stream("main", batch_size),), prox_mu=prox_mu)


def train(executor, model: nn.Module, start_params: list[dict], data: list, generators: list, task: LocalTask):
    """Each client's final state after ``task``."""
    return executor.run(model, task, start_params, data, generators).params


# --------------------------------------------------------------------------- sequential == vmap


@pytest.mark.parametrize(
    "task",
    [
        sgd(lr=0.05, batch_size=16, epochs=2),
        sgd(lr=0.05, momentum=0.9, weight_decay=1e-3, prox_mu=0.1, batch_size=16, epochs=2),
    ],
    ids=["sgd", "momentum-wd-prox"],
)
def test_sequential_and_vmap_agree_with_unequal_clients(cnn, clients, task):
    sp = starts(cnn, len(clients))
    a = SequentialExecutor().run(cnn, task, sp, clients, seeds(len(clients)))
    b = VmapExecutor().run(cnn, task, sp, clients, seeds(len(clients)))
    assert max_diff(a.params, b.params) < TOL
    assert a.n_steps == b.n_steps == [6, 8, 2, 0, 8]
    assert all(torch.equal(a.params[3][k], sp[3][k]) for k in sp[3])  # no data: unchanged
    assert max_diff(a.params, sp) > 1e-3  # and the others did move
    for la, lb in zip(a.mean_loss, b.mean_loss):
        assert la == pytest.approx(lb, rel=1e-5, nan_ok=True)


def test_vmap_in_chunks_equals_all_at_once(cnn, clients):
    task = sgd(lr=0.05, momentum=0.9, batch_size=16)
    sp = starts(cnn, len(clients))
    a = train(VmapExecutor(), cnn, sp, clients, seeds(len(clients)), task)
    b = train(VmapExecutor(max_clients=2), cnn, sp, clients, seeds(len(clients)), task)
    assert max_diff(a, b) < TOL


def test_both_executors_consume_the_generators_alike(cnn, clients):
    task = sgd(lr=0.05, batch_size=16, epochs=3)
    ga, gb = seeds(len(clients)), seeds(len(clients))
    train(SequentialExecutor(), cnn, starts(cnn, 5), clients, ga, task)
    train(VmapExecutor(), cnn, starts(cnn, 5), clients, gb, task)
    assert all(torch.equal(x.get_state(), y.get_state()) for x, y in zip(ga, gb))


def test_int_seeds_equal_generators(cnn, clients):
    task = sgd(lr=0.05, batch_size=16)
    a = train(SequentialExecutor(), cnn, starts(cnn, 5), clients, [0, 1, 2, 3, 4], task)
    b = train(SequentialExecutor(), cnn, starts(cnn, 5), clients, seeds(5), task)
    assert all_equal(a, b)


# --------------------------------------------------------------------------- exactly torch.optim.SGD


@pytest.mark.parametrize("momentum, wd", [(0.0, 0.0), (0.9, 0.0), (0.9, 1e-2), (0.5, 5e-4)])
def test_functional_sgd_step_is_torch_sgd_bit_for_bit(momentum, wd):
    g = torch.Generator().manual_seed(0)
    p_ref = torch.randn(7, 5, generator=g).requires_grad_(True)
    opt = torch.optim.SGD([p_ref], lr=0.1, momentum=momentum, weight_decay=wd)
    sgd = SGD(0.1, momentum, wd)
    p = {"p": p_ref.detach().clone()}
    state = sgd.init(p)
    for step in range(5):
        grad_ = torch.randn(7, 5, generator=g)
        p_ref.grad = grad_.clone()
        opt.step()
        p, state = sgd.update(p, {"p": grad_}, state, step)
        assert torch.equal(p["p"], p_ref.detach())


@pytest.mark.parametrize("memory_format", ["channels_last", "contiguous"])
def test_sequential_executor_is_the_plain_torch_loop(cnn, clients, memory_format):
    """One client: load_state_dict + torch.optim.SGD over randperm batches gives identical bits (the plain loop's
    model and inputs in the same memory format)."""
    task = sgd(lr=0.05, momentum=0.9, weight_decay=1e-3, batch_size=16, epochs=2)
    x, y = clients[0]
    sp = starts(cnn, 1)[0]
    model = build_model("cnn", (1, 8, 8), 10)
    model.load_state_dict(sp)
    fmt = torch.channels_last if memory_format == "channels_last" else torch.contiguous_format
    model = model.to(memory_format=fmt)
    x = x.to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=task.optimizer.lr, momentum=task.optimizer.momentum,
                          weight_decay=task.optimizer.weight_decay)
    # the batch order is the first stream's sub-stream of the one seed drawn from the client's generator
    gen = torch.Generator().manual_seed(derive_seed(draw_seed(torch.Generator().manual_seed(5)), BATCHES, 0))
    for _ in range(task.epochs):
        perm = torch.randperm(len(x), generator=gen)
        batch_size = task.streams[0].batch_size
        for i in range(0, len(x), batch_size):
            idx = perm[i : i + batch_size]
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    got = train(SequentialExecutor(Numerics(memory_format=memory_format)),
        cnn, [sp], [(x, y)], [torch.Generator().manual_seed(5)], task)[0]
    assert all(torch.equal(got[k], model.state_dict()[k]) for k in got)
    assert all(v.is_contiguous() for v in got.values())  # handed back in the default format


def test_vmap_step_on_one_client_is_torch_sgd(cnn, clients):
    """The vectorised executor with a single full-batch step equals torch.optim.SGD (to rounding)."""
    x, y = clients[1]
    sp = starts(cnn, 1)[0]
    task = sgd(lr=0.1, momentum=0.9, weight_decay=1e-3, batch_size=len(x))
    model = build_model("cnn", (1, 8, 8), 10)
    model.load_state_dict(sp)
    opt = torch.optim.SGD(model.parameters(), lr=task.optimizer.lr, momentum=task.optimizer.momentum,
                          weight_decay=task.optimizer.weight_decay)
    perm = client_schedule(len(x), len(x), 1, torch.Generator().manual_seed(0))[0]
    F.cross_entropy(model(x[perm]), y[perm]).backward()
    opt.step()
    got = train(VmapExecutor(), cnn, [sp], [(x, y)], [0], task)[0]
    assert max(float((got[k] - model.state_dict()[k]).abs().max()) for k in got) < 1e-6


# --------------------------------------------------------------------------- FedProx and the loss hooks


def test_fedprox_mu_zero_is_plain_training_exactly(cnn, clients):
    plain = sgd(lr=0.05, momentum=0.9, batch_size=16)
    prox0 = sgd(lr=0.05, momentum=0.9, batch_size=16, prox_mu=0.0)
    for ex in (SequentialExecutor(), VmapExecutor()):
        a = train(ex, cnn, starts(cnn, 5), clients, seeds(5), plain)
        b = train(ex, cnn, starts(cnn, 5), clients, seeds(5), prox0)
        assert all_equal(a, b)


def test_fedprox_equals_its_penalty_written_as_a_loss_and_pulls_to_start(cnn, clients):
    mu = 0.5
    task = sgd(lr=0.05, momentum=0.9, batch_size=16, epochs=2)
    by_mu = sgd(lr=0.05, momentum=0.9, batch_size=16, epochs=2, prox_mu=mu)

    def prox(p, p0):
        return 0.5 * mu * sum(((p[n] - p0[n]) ** 2).sum() for n in p)

    sp = starts(cnn, 5)
    by_loss = sgd(lr=0.05, momentum=0.9, batch_size=16, epochs=2, loss=supervised_loss(penalty=prox))
    a = train(SequentialExecutor(), cnn, sp, clients, seeds(5), by_mu)
    b = train(SequentialExecutor(), cnn, sp, clients, seeds(5), by_loss)
    c = train(VmapExecutor(), cnn, sp, clients, seeds(5), by_loss)
    free = train(SequentialExecutor(), cnn, sp, clients, seeds(5), task)
    assert max_diff(a, b) < TOL and max_diff(a, c) < TOL

    def dist(p, p0):
        return sum(float(((p[n] - p0[n]) ** 2).sum()) for n in p)

    for i in (0, 1, 4):
        assert dist(a[i], sp[i]) < dist(free[i], sp[i])


def test_sample_weights_and_soft_targets_hook(cnn, clients):
    """A pseudo-label style objective: KL to soft labels, per-sample confidence weights."""
    g = torch.Generator().manual_seed(4)
    soft = [(x, F.softmax(torch.randn(len(x), 10, generator=g), -1), (torch.rand(len(x), generator=g) > 0.3).float())
            for x, _ in clients]

    def kl(out, target):
        return F.kl_div(F.log_softmax(out, -1), target, reduction="none").sum(-1)

    obj = sgd(lr=0.1, momentum=0.9, batch_size=16, loss=supervised_loss(sample_loss=kl))
    task = sgd(lr=0.1, momentum=0.9, batch_size=16)
    sp = starts(cnn, 5)
    a = train(SequentialExecutor(), cnn, sp, soft, seeds(5), obj)
    b = train(VmapExecutor(), cnn, sp, soft, seeds(5), obj)
    assert max_diff(a, b) < TOL
    # weights of one are no weights at all
    ones = [(x, y, torch.ones(len(x))) for x, y in clients]
    c = train(SequentialExecutor(), cnn, sp, ones, seeds(5), task)
    d = train(SequentialExecutor(), cnn, sp, clients, seeds(5), task)
    assert all_equal(c, d)


def test_sample_loss_must_be_per_sample(cnn, clients):
    obj = sgd(lr=0.1, loss=supervised_loss(sample_loss=lambda out, y: F.cross_entropy(out, y)))
    for ex in (SequentialExecutor(), VmapExecutor()):
        with pytest.raises(ValueError, match="one loss per sample"):
            train(ex, cnn, starts(cnn, 2), clients[:2], seeds(2), obj)


# --------------------------------------------------------------------------- determinism, inputs


def test_same_inputs_same_bits(cnn, clients):
    task = sgd(lr=0.05, momentum=0.9, prox_mu=0.01, batch_size=16)
    template = state_of(cnn)
    for ex in (SequentialExecutor(), VmapExecutor()):
        a = train(ex, cnn, starts(cnn, 5), clients, seeds(5), task)
        b = train(ex, cnn, starts(cnn, 5), clients, seeds(5), task)
        assert all_equal(a, b)
        c = train(ex, cnn, starts(cnn, 5), clients, seeds(5, round_=1), task)
        assert max_diff(a, c) > 1e-4  # another round, another order
    assert all(torch.equal(template[k], cnn.state_dict()[k]) for k in template)  # template untouched


def test_bad_inputs_raise(cnn, clients):
    task = sgd(lr=0.1)
    sp = starts(cnn, 2)
    with pytest.raises(ValueError, match="one entry per client"):
        train(SequentialExecutor(), cnn, sp, clients[:2], seeds(3), task)
    with pytest.raises(ValueError, match="missing"):
        train(VmapExecutor(), cnn, [{"conv1.weight": sp[0]["conv1.weight"]}] * 2, clients[:2], seeds(2), task)
    with pytest.raises(ValueError, match="differ in length"):
        train(SequentialExecutor(), cnn, sp[:1], [(clients[0][0], clients[1][1])], seeds(1), task)
    with pytest.raises(ValueError, match="generator"):
        train(SequentialExecutor(), cnn, sp[:1], clients[:1], ["0"], task)
    for bad in ({"lr": 0}, {"lr": 0.1, "momentum": 1.0}, {"lr": 0.1, "batch_size": 0}, {"lr": 0.1, "prox_mu": -1}):
        with pytest.raises(ValueError):
            sgd(**bad)


# --------------------------------------------------------------------------- BatchNorm, dropout, text


@pytest.fixture(scope="module")
def resnet():
    return build_model("resnet9", (1, 8, 8), 10, seed=0)


def test_resnet9_batchnorm_and_dropout_vectorise_like_the_loop():
    """BatchNorm statistics over real rows only and keyed dropout: vmap == sequential, unequal clients.

    In float64 (on 8×8 inputs the last BatchNorms see 1×1 maps of 3 samples,
    whose statistics amplify float32 rounding to ~1e-3 after two steps).
    """
    resnet = build_model("resnet9", (1, 8, 8), 10, seed=0).double()
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(n, 1, 8, 8, generator=g, dtype=torch.float64), torch.randint(0, 10, (n,), generator=g))
            for n in (6, 3, 0)]
    sp = starts(resnet, 3)
    task = sgd(lr=0.01, momentum=0.9, batch_size=4)
    assert VmapExecutor.unsupported_reason(resnet) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        v = train(VmapExecutor(), resnet, sp, data, seeds(3), task)
    s = train(SequentialExecutor(), resnet, sp, data, seeds(3), task)
    s2 = train(SequentialExecutor(), resnet, sp, data, seeds(3), task)
    assert all_equal(s, s2)  # dropout masks come from the client seeds
    assert max_diff(v, s) < 1e-7
    # running statistics were trained, one batch count per step; the client without data is untouched
    assert not torch.equal(s[0]["prep.1.running_mean"], sp[0]["prep.1.running_mean"])
    assert int(s[0]["prep.1.num_batches_tracked"]) == 2 and int(s[1]["prep.1.num_batches_tracked"]) == 1
    assert int(v[0]["prep.1.num_batches_tracked"]) == 2 and int(v[1]["prep.1.num_batches_tracked"]) == 1
    assert all(torch.equal(v[2][k], sp[2][k]) for k in sp[2])


def test_dropout_masks_depend_on_the_key():
    model = build_model("resnet9", (1, 8, 8), 10, seed=0)
    g = torch.Generator().manual_seed(4)
    data = [(torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 10, (8,), generator=g))]
    task = sgd(lr=0.05, batch_size=8)
    a = train(SequentialExecutor(), model, [state_of(model)], data, [1], task)
    b = train(SequentialExecutor(), model, [state_of(model)], data, [2], task)
    assert not torch.equal(a[0]["fc.weight"], b[0]["fc.weight"])


def test_torch_batchnorm_or_dropout_falls_back_to_sequential():
    model = nn.Sequential(nn.Flatten(), nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 2))
    assert "torch's own" in VmapExecutor.unsupported_reason(model)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(6, 4, generator=g), torch.randint(0, 2, (6,), generator=g))]
    task = sgd(lr=0.1, batch_size=3)
    with pytest.warns(UserWarning, match="SequentialExecutor"):
        v = train(VmapExecutor(), model, [state_of(model)], data, seeds(1), task)
    assert all_equal(v, train(SequentialExecutor(), model, [state_of(model)], data, seeds(1), task))
    with pytest.raises(ValueError, match="cannot vectorise"):
        train(VmapExecutor(fallback="error"), model, [state_of(model)], data, seeds(1), task)


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_text_model_vmap_equals_sequential():
    model = build_model("text", (6,), 4, vocab_size=30, seed=0)
    g = torch.Generator().manual_seed(2)
    data = []
    for n in (9, 4):
        tok = torch.randint(1, 30, (n, 6), generator=g)
        tok[:, 4:] = 0
        data.append((tok, torch.randint(0, 4, (n,), generator=g)))
    task = sgd(lr=0.5, batch_size=4)
    sp = [state_of(model)] * 2
    a = train(SequentialExecutor(), model, sp, data, seeds(2), task)
    b = train(VmapExecutor(), model, sp, data, seeds(2), task)
    assert max_diff(a, b) < TOL


# --------------------------------------------------------------------------- inference


def plain_logits(model_fn, params, x):
    model = model_fn()
    model.load_state_dict(params)
    model.eval()
    with torch.no_grad():
        return model(x)


@pytest.mark.parametrize("name", ["cnn", "resnet9"])
def test_evaluate_and_predict_proba_agree_with_a_plain_loop(name, cnn, resnet):
    template = {"cnn": cnn, "resnet9": resnet}[name]
    template.train()
    params = starts(template, 3)
    if name == "resnet9":  # distinct running statistics per model, so eval-mode BN matters
        for i, p in enumerate(params):
            p["prep.1.running_mean"] = torch.full_like(p["prep.1.running_mean"], 0.1 * i)
    g = torch.Generator().manual_seed(8)
    x, y = torch.randn(21, 1, 8, 8, generator=g), torch.randint(0, 10, (21,), generator=g)
    ref = torch.stack([plain_logits(lambda: build_model(name, (1, 8, 8), 10), p, x) for p in params])
    probs = predict_proba(template, params, x, batch_size=8)
    assert probs.shape == (3, 21, 10)
    assert torch.allclose(probs, F.softmax(ref, -1), atol=1e-6)
    assert torch.allclose(predict_proba(template, stack_params(params), x), probs, atol=1e-6)
    assert torch.allclose(predict_proba(template, params, x, vectorize=False), probs, atol=1e-6)
    acc = evaluate(template, params, x, y, 8)
    assert acc == [int((r.argmax(-1) == y).sum()) / 21 for r in ref]
    assert evaluate(template, params, x, y, 5, vectorize=False) == acc
    assert all(m.training for m in template.modules())  # train mode restored


def test_evaluate_hand_made():
    lin = nn.Linear(2, 2, bias=False)
    eye = {"weight": torch.eye(2)}
    swap = {"weight": torch.tensor([[0.0, 1.0], [1.0, 0.0]])}
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0], [0.0, 3.0]])
    y = torch.tensor([0, 1, 0, 0])
    assert evaluate(lin, [eye, swap], x, y, 3) == [0.75, 0.25]
    assert evaluate(lin, [eye], x[:0], y[:0]) != evaluate(lin, [eye], x[:0], y[:0])  # NaN on empty


# --------------------------------------------------------------------------- device and choice


def test_compute_device(monkeypatch):
    assert compute_device("cpu") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert compute_device() == torch.device("cpu")
    with pytest.raises(RuntimeError, match="no CUDA"):
        compute_device("cuda")
    with pytest.raises(ValueError):
        compute_device("tpu")


def test_make_executor():
    assert isinstance(make_executor("auto", "cpu"), SequentialExecutor)
    assert isinstance(make_executor("auto", "cuda"), VmapExecutor)
    assert isinstance(make_executor("vmap"), VmapExecutor)
    with pytest.raises(ValueError):
        make_executor("ray")


def test_no_warning_for_vmappable_models(cnn, clients):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train(VmapExecutor(), cnn, starts(cnn, 2), clients[:2], seeds(2), sgd(lr=0.1, batch_size=32))


def test_a_batch_with_one_value_per_channel_trains_and_keeps_the_statistics():
    """torch's BatchNorm refuses one value per channel (1 sample, 1×1 maps); ours normalises to β and keeps μ, σ²."""
    resnet = build_model("resnet9", (1, 8, 8), 10, seed=0).double()
    g = torch.Generator().manual_seed(3)
    data = [(torch.randn(1, 1, 8, 8, generator=g, dtype=torch.float64), torch.tensor([3])),
            (torch.randn(5, 1, 8, 8, generator=g, dtype=torch.float64), torch.randint(0, 10, (5,), generator=g))]
    sp = [state_of(resnet)] * 2
    task = sgd(lr=0.01, batch_size=4)
    s = train(SequentialExecutor(), resnet, sp, data, seeds(2), task)
    v = train(VmapExecutor(), resnet, sp, data, seeds(2), task)
    assert max_diff(v, s) < 1e-7
    last = "res3.block.2.1.running_var"  # 1×1 maps: one value per channel for the one-sample client
    assert torch.equal(s[0][last], sp[0][last])
    assert not torch.equal(s[0]["prep.1.running_var"], sp[0]["prep.1.running_var"])  # 8×8 maps: 64 values


def test_batchnorm_of_a_row_less_client_stays_at_the_input_scale():
    """A client whose steps are over feeds padding rows with mask 0: no statistics, so unit variance, not 1/√ε."""
    from edgesim.learning.layers import BatchNorm2d, ForwardState, forward_state

    bn = BatchNorm2d(3).train()
    x = torch.randn(4, 3, 2, 2) * 5
    with forward_state(ForwardState(mask=torch.zeros(4))) as st:
        y = bn(x)
    assert float(y.detach().abs().max()) <= float(x.abs().max()) + 1e-5  # centred by 0, divided by √(1 + ε)
    assert torch.equal(st.buffers["running_var"], bn.running_var)  # statistics untouched


def test_a_finished_clients_loss_does_not_poison_its_reported_loss():
    """The loss of a padded no-op step may be anything (here NaN); it is never added to the client's mean loss."""
    def loss(net, b, key):
        (out,) = net.logits(b, "x")
        value = b.mean(F.cross_entropy(out, b["y"], reduction="none"), "x")
        return value + 0.0 * torch.log(b.mask("x").sum() - 1.0), {}  # NaN when no row is real

    g = torch.Generator().manual_seed(9)
    data = [{"main": {"x": torch.randn(n, 1, 8, 8, generator=g), "y": torch.randint(0, 10, (n,), generator=g)}}
            for n in (40, 7)]
    cnn = build_model("cnn", (1, 8, 8), 10, seed=0)
    task = LocalTask(loss=loss, optimizer=SGD(0.05), streams=(Stream("main", 8),))
    r = VmapExecutor().run(cnn, task, [state_of(cnn)] * 2, data, seeds(2))
    assert all(math.isfinite(x) for x in r.mean_loss), r.mean_loss
    assert all(torch.isfinite(v).all() for st in r.params for v in st.values())


def test_vmap_max_clients_from_the_scenario_bounds_the_pass_and_keeps_the_results(tiny_scenario, tmp_path):
    """``[train] vmap_max_clients`` reaches the vectorised executor; one client a pass gives the rounds of all at
    once (the logged training loss to float rounding: its per-pass sums are ordered differently)."""
    import csv

    import pytest as _pytest

    from edgesim.config import ConfigError
    from edgesim.scenarios.api import load_scenario
    from edgesim.scenarios.run import run_scenario

    outs = {}
    for cap in (None, 1):
        sets = {"train.executor": "vmap", "run.algorithms": ["fedavg"]}
        if cap is not None:
            sets["train.vmap_max_clients"] = cap
        sc = load_scenario(tiny_scenario, **sets)
        assert sc.learning["train"].vmap_max_clients == cap
        run_scenario(sc, tmp_path / f"cap{cap}", None)
        outs[cap] = list(csv.DictReader(open(tmp_path / f"cap{cap}" / "rounds.csv")))
    assert len(outs[None]) == len(outs[1]) == 3
    for whole, one in zip(outs[None], outs[1]):
        assert abs(float(whole.pop("train_loss")) - float(one.pop("train_loss"))) < 1e-6
        assert whole == one
    with _pytest.raises(ConfigError, match="vmap_max_clients"):
        load_scenario(tiny_scenario, **{"train.vmap_max_clients": 0})
