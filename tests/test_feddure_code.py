"""``feddure_code`` element by element: the release's schedule, UDA ramp and soft cross-entropy by hand, the passes
it is charged, a whole round against a plain-torch transcription of the release's loop (weak-view student, −d × CE
of the strong-view argmax, UDA term, fine-tuning, warm-up), sequential = vmap, end to end, bad options."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from test_feddure import _bn_model, _both_executors
from torch.func import functional_call

from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.feddure.config import FedDureConfig
from edgesim.learning.algorithms.feddure_code.algorithm import (
    STUDENT,
    make_task,
    phase_passes,
    release_lr_factor,
    soft_cross_entropy,
    step_passes,
    steps_per_epoch,
    uda_ramp,
)
from edgesim.learning.algorithms.feddure_code.config import FedDureCodeConfig
from edgesim.learning.costs import task_cycles
from edgesim.learning.executors import SequentialExecutor
from edgesim.learning.tasks import View
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

# --------------------------------------------------------------------------- formulas by hand


def test_release_schedule_by_hand():
    # CIFAR config: W = 10, a round of 5 fine-tuning + 5 MPL steps is all warm-up: k/10
    assert [release_lr_factor(k, 10, 5) for k in range(10)] == [k / 10 for k in range(10)]
    # the student: 2 steps at 0, then k/12
    assert [release_lr_factor(k, 10, 5, 2) for k in range(5)] == [0.0, 0.0, 2 / 12, 3 / 12, 4 / 12]
    # after the warm-up, the cosine over max(1, total − W − wait) steps: W = 2, total = 4 → p = (k − 2)/2
    assert release_lr_factor(2, 2, 4) == 1.0 and release_lr_factor(3, 2, 4) == pytest.approx(0.5)
    assert release_lr_factor(4, 2, 4) == pytest.approx(0.0, abs=1e-12)
    # CINIC config (W = 100, 10 MPL steps): past the warm-up p = k − 100, so the factor alternates 1, 0, 1, …
    assert [round(release_lr_factor(k, 100, 10), 12) for k in (100, 101, 102)] == [1.0, 0.0, 1.0]


def test_uda_ramp_and_soft_cross_entropy_by_hand():
    assert uda_ramp(0, 8.0, 20) == pytest.approx(0.4) and uda_ramp(4, 8.0, 20) == pytest.approx(2.0)
    assert uda_ramp(19, 8.0, 20) == 8.0 and uda_ramp(50, 8.0, 20) == 8.0
    logits = torch.tensor([[0.0, math.log(3.0)]])  # softmax = (1/4, 3/4)
    q = torch.tensor([[0.5, 0.5]])
    assert float(soft_cross_entropy(logits, q)[0]) == pytest.approx(-(0.5 * math.log(0.25) + 0.5 * math.log(0.75)))
    # a one-hot target: the ordinary cross-entropy
    onehot = torch.tensor([[0.0, 1.0]])
    assert float(soft_cross_entropy(logits, onehot)[0]) == pytest.approx(float(F.cross_entropy(logits, torch.tensor([1]))))


def test_passes_and_cycles_by_hand():
    # fine-tuning: θ's joint forward + backward (lab 1, unl 2); MPL: + the student's 2 forwards of x and its
    # forward + backward on the weak rows: lab 1 + 2/3 = 5/3, unl 2 + 1 = 3
    assert sum(f + b for _, _, f, b in phase_passes()["mpl"]) == 10
    assert step_passes(0, 1) == pytest.approx({"lab": 5 / 3, "unl": 3.0})
    assert step_passes(1, 0) == pytest.approx({"lab": 1.0, "unl": 2.0})
    assert step_passes(1, 1) == pytest.approx({"lab": 4 / 3, "unl": 2.5})
    keys = ["0.weight", "0.bias"]
    cfg = FedDureCodeConfig()
    task = make_task(cfg, keys, 1, 1, (1, 8, 8), (0.5,), (0.25,))
    b, u, c = 10, 70, 1000.0  # one batch of each per epoch: 1 fine-tuning step + 1 MPL step
    hand = c * (b * (1 + 5 / 3) + u * (2 + 3))
    assert task.epochs == 2 and task_cycles(task, {"lab": b, "unl": u}, c) == pytest.approx(hand, rel=1e-12)
    assert steps_per_epoch(cfg, {"lab": 25, "unl": 70}) == 3 and steps_per_epoch(cfg, {"lab": 5, "unl": 300}) == 5


# --------------------------------------------------------------------------- a round against the release's loop


class Scale:
    """A deterministic 'augmentation' for the test: x·factor (draws nothing)."""

    def __init__(self, factor: float):
        self.factor = factor

    def draw(self, n, generator):
        return None

    def apply(self, x, params):
        return x * self.factor


def release_round(model, start, x, y, u, cfg, finetune_steps, mpl_steps, weak, strong):
    """The release's ``train_label_teacher`` + ``train_step`` (groups/client_ssl/base_ssl.py L891–960, L696–806),
    transcribed with torch.optim.Adam and full batches; returns (θ, φ, mean feedback d over all steps)."""
    teacher = {k: v.clone().requires_grad_(True) for k, v in start.items()}
    student = {k: v.clone().requires_grad_(True) for k, v in start.items()}
    t_opt = torch.optim.Adam(teacher.values(), lr=cfg.lr)
    s_opt = torch.optim.Adam(student.values(), lr=cfg.student_lr)

    def f(p, inp):
        return functional_call(model, p, (inp,))

    ds = []
    for k in range(finetune_steps + mpl_steps):
        for g in t_opt.param_groups:
            g["lr"] = cfg.lr * release_lr_factor(k, cfg.warmup_steps, mpl_steps)
        xw, uw, us = weak.apply(x, None), weak.apply(u, None), strong.apply(u, None)
        out = f(teacher, torch.cat([xw, uw, us]))
        lx, lw, ls = out[: len(x)], out[len(x): len(x) + len(u)], out[len(x) + len(u):]
        t_loss_l = F.cross_entropy(lx, y)
        if k < finetune_steps:
            t_opt.zero_grad()
            t_loss_l.backward()
            t_opt.step()
            ds.append(0.0)
            continue
        m = k - finetune_steps
        q = torch.softmax(lw.detach(), -1)
        conf, targets_u = q.max(-1)
        mask = conf.ge(cfg.uda_threshold).float()
        t_loss_u = torch.mean(-(q * torch.log_softmax(ls, -1)).sum(-1) * mask)
        weight_u = cfg.uda_lambda * min(1.0, (m + 1) / cfg.uda_ramp_steps)
        s_logits_l = f(student, xw)
        s_logits_us = f(student, uw)  # the weak view
        old = F.cross_entropy(s_logits_l.detach(), y)
        s_loss = F.cross_entropy(s_logits_us, targets_u)
        for g in s_opt.param_groups:
            g["lr"] = cfg.student_lr * release_lr_factor(m, cfg.warmup_steps, mpl_steps, cfg.student_wait_steps)
        s_opt.zero_grad()
        s_loss.backward()
        s_opt.step()
        with torch.no_grad():
            new = F.cross_entropy(f(student, xw), y)
        dot = new - old
        hard = ls.detach().argmax(-1)  # the strong view's own argmax
        t_loss = t_loss_l + weight_u * t_loss_u + dot * F.cross_entropy(ls, hard)
        t_opt.zero_grad()
        t_loss.backward()
        t_opt.step()
        ds.append(float(-dot))
    return ({k: v.detach() for k, v in teacher.items()}, {k: v.detach() for k, v in student.items()},
            sum(ds) / len(ds))


@pytest.mark.parametrize("finetune_epochs, epochs", [(1, 2), (0, 3), (2, 1)])
def test_a_round_equals_the_release_loop(finetune_epochs, epochs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 12), nn.Tanh(), nn.Linear(12, 3))
    keys = [n for n, _ in model.named_parameters()]
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    x, y, u = torch.randn(4, 1, 8, 8, generator=g), torch.tensor([0, 1, 2, 1]), torch.randn(8, 1, 8, 8, generator=g)
    # W = 0: no warm-up, the release's cosine from the first step (every factor but the last > 0); a low τ so the
    # UDA mask keeps some rows
    cfg = FedDureCodeConfig(lr=5e-2, student_lr=3e-2, labeled_batch=4, unlabeled_ratio=2, finetune_epochs=finetune_epochs,
                            warmup_steps=0, student_wait_steps=0, uda_threshold=0.4, uda_ramp_steps=3)
    weak, strong = Scale(1.0), Scale(-0.5)
    task = make_task(cfg, keys, epochs, 1, (1, 8, 8), (0.5,), (0.25,))
    task = dataclasses.replace(task, views=(View("x_aug", "x", weak), View("u_weak", "u", weak),
                                            View("u_strong", "u", strong)))
    res = SequentialExecutor().run(model, task, [{**start, **{STUDENT + k: start[k] for k in keys}}],
                                   [{"lab": {"x": x, "y": y}, "unl": {"u": u}}], [0])
    theta, phi, d = release_round(model, start, x, y, u, cfg, finetune_epochs, epochs, weak, strong)
    got = res.params[0]
    for k in keys:
        assert torch.allclose(got[k], theta[k], atol=1e-6), k
        assert torch.allclose(got[STUDENT + k], phi[k], atol=1e-6), k
    assert res.aux["feedback"][0] == pytest.approx(d, abs=1e-6)
    assert any(not torch.equal(got[k], start[k]) for k in keys)
    if epochs:
        assert any(not torch.equal(got[STUDENT + k], start[k]) for k in keys)
    # the elements matter: a student on the strong view, or the paper's +d, is another result
    swapped = dataclasses.replace(task, views=(View("x_aug", "x", weak), View("u_weak", "u", strong),
                                               View("u_strong", "u", weak)))
    other = SequentialExecutor().run(model, swapped, [{**start, **{STUDENT + k: start[k] for k in keys}}],
                                     [{"lab": {"x": x, "y": y}, "unl": {"u": u}}], [0])
    assert any(not torch.allclose(other.params[0][k], theta[k], atol=1e-6) for k in keys)


def test_sequential_equals_vmap_with_batchnorm_and_padding():
    model = _bn_model()
    keys = [n for n, _ in model.named_parameters()]
    cfg = FedDureCodeConfig(labeled_batch=4, unlabeled_ratio=2, lr=1e-2, student_lr=1e-2, warmup_steps=1)
    task = make_task(cfg, keys, 1, 2, (1, 8, 8), (0.5,), (0.25,))
    g = torch.Generator().manual_seed(5)
    base = {k: v.detach().clone() for k, v in model.state_dict().items()}
    starts, data = [], []
    for n_lab, n_unl in [(8, 16), (7, 9), (5, 3)]:  # 2 steps per epoch each, unequal rows: padding
        starts.append({**base, **{STUDENT + k: base[k] for k in keys}})
        data.append({"lab": {"x": torch.rand(n_lab, 1, 8, 8, generator=g), "y": torch.randint(0, 4, (n_lab,), generator=g)},
                     "unl": {"u": torch.rand(n_unl, 1, 8, 8, generator=g)}})
    a, b = _both_executors(model, task, starts, data)
    assert a.n_steps == b.n_steps == [4, 4, 4]
    # the student's forward passes leave θ's running statistics alone: one BatchNorm update per step
    assert [int(p["1.num_batches_tracked"]) for p in a.params] == [4, 4, 4]


def test_feddure_code_runs_end_to_end_and_resumes(tiny_scenario, tmp_path):
    overrides = ['data.partition="feddure_iid_iid"', "data.labels_per_class=3", 'run.algorithms=["feddure_code"]',
                 "budget.rounds=2"]
    out = run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "r")
    import csv

    got = list(csv.DictReader(open(out / "rounds.csv")))
    assert len(got) == 2 and all(0 <= float(r["accuracy"]) <= 1 for r in got)
    # the student trains on every ŷ: the accuracy of the labels used is that of all the MPL steps' labels
    assert all(0 <= float(r["pseudo_label_accuracy"]) <= 1 and 0 <= float(r["pseudo_label_accuracy_all"]) <= 1
               for r in got)
    assert REGISTRY["feddure_code"].display == "FedDure (code)"


def test_bad_options_are_one_clear_error():
    for kwargs, key in [({"uda_threshold": 1.5}, "uda_threshold"), ({"finetune_epochs": -1}, "finetune_epochs"),
                        ({"lr": 0}, "lr"), ({"warmup_steps": 1.5}, "warmup_steps"), ({"optimizer": "rmsprop"}, "optimizer")]:
        with pytest.raises(ValueError, match=key):
            FedDureCodeConfig(**kwargs)
    with pytest.raises(ValueError, match="feedback_sign = 'code': expected \"flipped\""):
        FedDureConfig(feedback_sign="code")
    with pytest.raises(ValueError, match="freg_form"):
        FedDureConfig(freg_form="deep")
