"""FedDure: its formulas by hand, the virtual step's hyper-gradient against finite differences (float64), the
feedback sign, F-reg never leaving the device, sequential = vmap, the cycle count, ablations and resume."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from test_resume import _crashing
from torch.func import functional_call, grad

from edgesim.engine import Simulation
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.feddure.algorithm import (
    C_REG,
    F_REG,
    FedDureConfig,
    feedback,
    freg_apply,
    freg_init,
    make_task,
    phase_passes,
    step_passes,
    virtual_step_loss,
    weighted_mean,
)
from edgesim.learning.context import build_context
from edgesim.learning.costs import task_cycles, training_passes
from edgesim.learning.executors import SequentialExecutor, VmapExecutor
from edgesim.learning.layers import BatchNorm2d, name_layers
from edgesim.learning.models import build_model, flops_per_sample
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

FEDDURE_TINY = ['data.partition="feddure_iid_iid"', "data.labels_per_class=3",
                'run.algorithms=["feddure"]']


# --------------------------------------------------------------------------- formulas by hand


def test_freg_is_an_mlp_with_a_sigmoid_by_hand():
    w = {F_REG[0]: torch.tensor([[1.0, -1.0], [2.0, 0.0]]), F_REG[1]: torch.tensor([0.0, -1.0]),
         F_REG[2]: torch.tensor([[0.5, 1.0]]), F_REG[3]: torch.tensor([0.25])}
    p = torch.tensor([[0.75, 0.25], [0.0, 1.0]])
    # row 1: h = relu([0.5, 0.5]) → 0.25 + 0.5 + 0.25 = 1.0; row 2: h = relu([-1, -1]) = 0 → 0.25
    expected = torch.sigmoid(torch.tensor([1.0, 0.25]))
    assert torch.allclose(freg_apply(w, p), expected)
    g = torch.Generator().manual_seed(0)
    init = freg_init(10, 128, g, "mlp_relu")  # (the default form is now the paper's fc_sigmoid: tested below)
    assert init[F_REG[0]].shape == (128, 10) and init[F_REG[2]].shape == (1, 128)
    assert init[F_REG[0]].abs().max() <= 1 / math.sqrt(10) and init[F_REG[2]].abs().max() <= 1 / math.sqrt(128)
    out = freg_apply(init, F.softmax(torch.randn(64, 10, generator=g), -1))
    assert out.shape == (64,) and bool(((out > 0) & (out < 1)).all())  # property: a weight in (0, 1)


def test_weighted_mean_mean_and_sum_normalisations():
    m, v, mask = torch.tensor([1.0, 0.5, 3.0]), torch.tensor([2.0, 4.0, 100.0]), torch.tensor([1.0, 1.0, 0.0])
    assert float(weighted_mean(m, v, mask, "mean")) == pytest.approx((2 + 2) / 2)  # padded row 3 ignored
    assert float(weighted_mean(m, v, mask, "sum")) == pytest.approx(4 / 1.5)
    ones = torch.ones(3)  # limiting case: unit weights → both are the plain mean over the real rows
    assert float(weighted_mean(ones, v, mask, "mean")) == float(weighted_mean(ones, v, mask, "sum")) == 3.0
    assert float(weighted_mean(torch.zeros(3), v, mask, "sum")) == 0.0  # every weight 0: no term, no NaN


def test_feedback_sign():
    assert float(feedback(torch.tensor(2.0), torch.tensor(1.5))) == 0.5  # the paper: the C-reg step helped → d > 0
    assert float(feedback(torch.tensor(2.0), torch.tensor(1.5), "flipped")) == -0.5
    a, b = torch.rand(5), torch.rand(5)
    assert torch.equal(feedback(a, b, "paper"), -feedback(a, b, "flipped"))
    assert float(feedback(torch.tensor(1.0), torch.tensor(1.0))) == 0.0
    with pytest.raises(ValueError, match="feedback_sign"):
        FedDureConfig(feedback_sign="minus")


def test_virtual_step_hypergradient_by_hand():
    # unl(φ, w) = w·φ²/2, lab(φ) = (φ − 1)²/2: φ⁻ = φ(1 − η w), dL/dw = (φ⁻ − 1)·(−η φ)
    phi, w, eta = {"p": torch.tensor(2.0, dtype=torch.float64)}, torch.tensor(0.5, dtype=torch.float64), 0.1
    loss = virtual_step_loss(lambda q, w_: w_ * q["p"] ** 2 / 2, lambda q: (q["p"] - 1) ** 2 / 2, phi, eta)
    assert float(loss(w)) == pytest.approx(0.9**2 / 2)
    assert float(grad(loss)(w)) == pytest.approx(0.9 * -0.2)  # φ⁻ = 1.9: (0.9)·(−0.2) = −0.18
    # limiting case: η_s = 0 → φ⁻ = φ does not depend on w
    flat = virtual_step_loss(lambda q, w_: w_ * q["p"] ** 2 / 2, lambda q: (q["p"] - 1) ** 2 / 2, phi, 0.0)
    assert float(grad(flat)(w)) == 0.0


def test_virtual_step_hypergradient_matches_finite_differences_float64():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)).double()
    phi = {k: v.detach() for k, v in net.named_parameters()}
    w = {k: v.double() for k, v in freg_init(3, 5, torch.Generator().manual_seed(1)).items()}
    u, x, y = torch.randn(7, 4, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64), torch.tensor([0, 1, 2, 1, 0])
    y_hat = functional_call(net, phi, (u,)).argmax(-1)
    mask = torch.ones(7, dtype=torch.float64)

    def unl(q, w_):
        out = functional_call(net, q, (u,))
        ce = F.cross_entropy(out, y_hat, reduction="none")
        return weighted_mean(freg_apply(w_, F.softmax(out.detach(), -1)), ce, mask, "mean")

    def lab(q):
        return F.cross_entropy(functional_call(net, q, (x,)), y)

    loss = virtual_step_loss(unl, lab, phi, 0.5)
    g = grad(loss)(w)
    h = 1e-6
    for k in w:  # (the default fc_sigmoid form: w1, b1)
        flat = w[k].reshape(-1)
        for i in range(0, flat.numel(), max(1, flat.numel() // 6)):
            plus, minus = {kk: v.clone() for kk, v in w.items()}, {kk: v.clone() for kk, v in w.items()}
            plus[k].view(-1)[i] += h
            minus[k].view(-1)[i] -= h
            fd = (float(loss(plus)) - float(loss(minus))) / (2 * h)
            assert float(g[k].reshape(-1)[i]) == pytest.approx(fd, rel=1e-5, abs=1e-9), (k, i)
    assert any(float(v.abs().max()) > 1e-6 for v in g.values())  # the gradient is not trivially zero


# --------------------------------------------------------------------------- the cycle count


def test_cycles_per_minibatch_are_passes_times_the_models_flops():
    # DoFedCNN on 1×28×28 by hand: MACs conv1 32·28·28·9 = 225,792 (reads the input: 4 FLOPs/MAC), conv2
    # 64·14·14·288 = 3,612,672, fc1 128·3136 = 401,408, fc2 10·128 = 1,280 (6 FLOPs/MAC: forward + both grads)
    c_tra_flops = 4 * 225_792 + 6 * (3_612_672 + 401_408 + 1_280)
    model = build_model("cnn", (1, 28, 28), 10)
    assert flops_per_sample(model, (1, 28, 28)) == c_tra_flops
    c_tra = c_tra_flops / 8  # cycles per sample at 8 FLOPs per cycle
    keys = [n for n, _ in model.named_parameters()]
    b, u = 10, 70  # one step: the labelled batch and the unlabelled batch
    # hand count (forward = C_tra/3, backward = 2·C_tra/3), per row:
    # labelled: F-reg loss at φ⁻ (f+b) + feedback at φ and φ⁺ (2f) + local update (f+b) = 4f + 2b = 8/3 C_tra
    # unlabelled: virtual step (f+b) + through it (f+b) + C-reg (f+b) + θ on weak and strong (2f+2b) = 5 C_tra
    hand = {
        "feddure": b * 8 / 3 * c_tra + u * 5 * c_tra,
        "feddure_no_creg": b * 2 * c_tra + u * 4 * c_tra,  # no C-reg step, no feedback
        "feddure_no_freg": b * 5 / 3 * c_tra + u * 3 * c_tra,  # no virtual step, no F-reg update
    }
    for name, expected in hand.items():
        task = make_task(REGISTRY[name].config_cls(), keys, 1, (1, 28, 28), (0.5,), (0.25,))
        assert task_cycles(task, {"lab": b, "unl": u}, c_tra) == pytest.approx(expected, rel=1e-12), name
    # property: FedDure costs more than FixMatch's B + 2μB training passes, less than 6× it
    fixmatch = (b + 2 * u) * c_tra
    assert fixmatch < hand["feddure"] < 6 * fixmatch
    assert training_passes(1, 1) == 1.0 and training_passes(1, 0) == pytest.approx(1 / 3)
    assert sum(f + b_ for _, _, f, b_ in phase_passes()) == 16  # 7 phases: 10 forwards, 6 backwards per (lab, unl) pair
    assert step_passes() == pytest.approx({"lab": 8 / 3, "unl": 5.0})
    with pytest.raises(ValueError, match="forward"):
        training_passes(-1, 0)


# --------------------------------------------------------------------------- runs


def _ctx(tiny_scenario, *overrides):
    sc = load_scenario(tiny_scenario, [*FEDDURE_TINY, *overrides])
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    return sc, ctx


def _rounds(sc, backend, n=2):
    return [r.metrics for r in Simulation(sc.system, sc.budget, backend, seed=sc.seed).run(n)]


def test_freg_never_leaves_the_device(tiny_scenario):
    sc, ctx = _ctx(tiny_scenario)
    alg = REGISTRY["feddure"].build(ctx, FedDureConfig())
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    plan = alg.plan_round(sim.system_view())
    model_keys = list(ctx.model.state_dict())
    assert ctx.model_bits == ctx.bits_of(model_keys)
    for work in plan.work:  # θ up and down, nothing of φ or w
        assert work.upload_bits == work.download_bits == ctx.model_bits
    before = [dict(w) for w in alg.freg]
    sim.run(1)
    assert set(alg.global_state) == set(model_keys)  # no regulator key reaches the server
    trained = {w.device for w in plan.work}
    for d in range(ctx.n_devices):
        changed = any(not torch.equal(before[d][k], alg.freg[d][k]) for k in before[d])
        assert changed == (d in trained), d  # F-reg trained on the device that trained, and stays there


def test_sequential_equals_vmap_for_the_feddure_step(tiny_scenario):
    sc, ctx = _ctx(tiny_scenario)
    seq = REGISTRY["feddure"].build(ctx, FedDureConfig(weight_norm="sum"))
    _rounds(sc, seq)
    sc2, ctx2 = _ctx(tiny_scenario, 'train.executor="vmap"')
    vec = REGISTRY["feddure"].build(ctx2, FedDureConfig(weight_norm="sum"))
    _rounds(sc2, vec)
    for k in seq.global_state:
        assert torch.allclose(seq.global_state[k], vec.global_state[k], atol=1e-5), k
    for a, b in zip(seq.freg, vec.freg):
        assert set(a) == set(b) and all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


def _bn_model():  # no conv bias before BatchNorm (as ResNet-9): its gradient is rounding noise that Adam scales up
    torch.manual_seed(0)
    return name_layers(nn.Sequential(nn.Conv2d(1, 3, 3, padding=1, bias=False), BatchNorm2d(3), nn.ReLU(), nn.Flatten(),
                                     nn.Linear(3 * 8 * 8, 4)))


def _both_executors(model, task, starts, data):
    """``task`` run by the sequential and the vectorised executor (seeds 7, 8, 9); every parameter must agree."""
    a = SequentialExecutor().run(model, task, starts, data, [7, 8, 9])
    b = VmapExecutor(fallback="error").run(model, task, starts, data, [7, 8, 9])
    for sa, sb in zip(a.params, b.params):
        for k in sa:
            assert torch.allclose(sa[k].float(), sb[k].float(), atol=2e-5), k
    return a, b


def test_sequential_equals_vmap_with_batchnorm_and_padding_and_creg_keeps_the_statistics():
    model = _bn_model()
    keys = [n for n, _ in model.named_parameters()]
    cfg = FedDureConfig(labeled_batch=4, unlabeled_ratio=2, lr=1e-2, creg_lr=1e-2, freg_lr=1e-2)
    task = make_task(cfg, keys, 1, (1, 8, 8), (0.5,), (0.25,))
    g = torch.Generator().manual_seed(5)
    base = {k: v.detach().clone() for k, v in model.state_dict().items()}
    starts, data = [], []
    for c, (n_lab, n_unl) in enumerate([(8, 16), (5, 9), (4, 3)]):  # unequal: padded rows and finished clients
        w = freg_init(4, 6, torch.Generator().manual_seed(c), cfg.freg_form)
        starts.append({**base, **{C_REG + k: base[k] for k in keys}, **w})
        data.append({"lab": {"x": torch.rand(n_lab, 1, 8, 8, generator=g), "y": torch.randint(0, 4, (n_lab,), generator=g)},
                     "unl": {"u": torch.rand(n_unl, 1, 8, 8, generator=g)}})
    a, b = _both_executors(model, task, starts, data)
    assert a.n_steps == b.n_steps == [2, 2, 1]
    for k in a.aux:
        assert a.aux[k] == pytest.approx(b.aux[k], abs=1e-5), k
    # the regulators' forward passes leave θ's running statistics alone: one BatchNorm update per step (θ's joint
    # forward), not one per forward pass of the step
    rm = "1.running_mean"
    assert not torch.equal(a.params[0][rm], base[rm]) and bool(torch.isfinite(a.params[0][rm]).all())
    assert [int(p["1.num_batches_tracked"]) for p in a.params] == [2, 2, 1]


def test_feedback_sign_flips_d_and_ablations_run(tiny_scenario):
    sc, ctx = _ctx(tiny_scenario)
    paper = REGISTRY["feddure"].build(ctx, FedDureConfig())
    code = REGISTRY["feddure"].build(ctx, FedDureConfig(feedback_sign="flipped"))
    mp, mc = _rounds(sc, paper, 1)[0], _rounds(sc, code, 1)[0]
    # the first step's d precedes any use of it; later steps differ, so only the sign pattern is compared
    assert mp["feedback"] != 0 and mc["feedback"] != 0
    assert any(not torch.equal(paper.global_state[k], code.global_state[k]) for k in paper.global_state)
    no_creg = _rounds(sc, REGISTRY["feddure_no_creg"].build(ctx, REGISTRY["feddure_no_creg"].config_cls()), 1)[0]
    no_freg = REGISTRY["feddure_no_freg"]
    strict = _rounds(sc, no_freg.build(ctx, no_freg.config_cls()), 1)[0]
    open_ = _rounds(sc, no_freg.build(ctx, no_freg.config_cls(threshold=0.0)), 1)[0]
    assert no_creg["feedback"] == 0.0 and 0 < no_creg["weight_mean"] < 1
    # τ = 0.95 at the first round: no pseudo-label passes, C-reg does not move, d = 0; τ = 0: every one passes
    assert strict["weight_mean"] == 0.0 and strict["feedback"] == 0.0
    assert open_["weight_mean"] == 1.0 and open_["feedback"] != 0.0
    with pytest.raises(ValueError, match="creg"):
        FedDureConfig(creg=False, freg=False)


def test_first_step_feedback_is_exactly_negated_by_the_code_sign():
    model = _bn_model()
    keys = [n for n, _ in model.named_parameters()]
    base = {k: v.detach().clone() for k, v in model.state_dict().items()}
    start = {**base, **{C_REG + k: base[k] for k in keys}, **freg_init(4, 6, torch.Generator().manual_seed(0), "mlp_relu")}
    g = torch.Generator().manual_seed(1)
    data = [{"lab": {"x": torch.rand(4, 1, 8, 8, generator=g), "y": torch.tensor([0, 1, 2, 3])},
             "unl": {"u": torch.rand(8, 1, 8, 8, generator=g)}}]  # one step: 4 ≤ B, 8 ≤ μB
    d = {}
    for sign in ("paper", "flipped"):
        cfg = FedDureConfig(labeled_batch=4, unlabeled_ratio=2, lr=1e-2, creg_lr=1e-2, freg_lr=1e-2, feedback_sign=sign)
        d[sign] = SequentialExecutor().run(model, make_task(cfg, keys, 1, (1, 8, 8), (0.5,), (0.25,)), [start], data, [3]).aux["feedback"][0]
    assert d["paper"] != 0 and d["flipped"] == pytest.approx(-d["paper"], rel=1e-6)


def test_feddure_resumes_to_the_same_bytes(tiny_scenario, tmp_path, monkeypatch):
    overrides = [*FEDDURE_TINY, "run.checkpoint_every=1", "budget.rounds=3"]
    reference = run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "reference")
    with monkeypatch.context() as m:
        m.setitem(REGISTRY, "feddure", _crashing("feddure", 2))
        with pytest.raises(RuntimeError, match="simulated crash"):
            run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "r")
    out = run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "r", resume=True)
    for name in ("rounds.csv", "devices.csv", "events.csv"):
        assert (Path(out) / name).read_bytes() == (Path(reference) / name).read_bytes(), name


def test_bad_options_are_one_clear_error():
    with pytest.raises(ValueError, match="weight_norm"):
        FedDureConfig(weight_norm="max")
    with pytest.raises(ValueError, match="threshold"):
        FedDureConfig(threshold=1.5)
    with pytest.raises(ValueError, match="lr"):
        FedDureConfig(lr=0)


def test_a_shared_test_set_is_one_copy_and_one_evaluation(tiny_scenario):
    from edgesim.learning.algorithms.common import evaluate_personal, evaluate_shared, labeling_accuracy

    sc, ctx = _ctx(tiny_scenario, "data.test_size=40")
    assert all(c.x_test is ctx.clients[0].x_test for c in ctx.clients) and ctx.clients[0].x_test.shape[0] == 40
    state = ctx.init_state()
    assert evaluate_shared(ctx, state) == pytest.approx(evaluate_personal(ctx, [state] * ctx.n_devices), abs=1e-7)
    copies = [{k: v.clone() for k, v in state.items()} for _ in range(ctx.n_devices)]  # not one object: per device
    assert labeling_accuracy(ctx, [state] * ctx.n_devices) == pytest.approx(labeling_accuracy(ctx, copies), abs=1e-7)


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("feddure_*_*_*.toml")),
                         ids=lambda p: p.name)
def test_the_papers_full_setting_plans_without_the_data(path, tmp_path):
    from typer.testing import CliRunner

    from edgesim.scenarios.cli import app

    # the data set is pointed at an empty folder: planning must not need it
    result = CliRunner().invoke(app, ["plan", str(path), "--json", "--set", f'data.data_dir="{tmp_path}"'])
    assert result.exit_code == 0, result.output
    sc = load_scenario(path)
    assert sc.system.n_devices == 100 and sc.learning["run"].clients_per_round == 5 and sc.budget.rounds == 200
    assert sc.learning["train"].model == "resnet9" and "feddure" in sc.learning["run"].algorithms
