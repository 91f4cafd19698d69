"""FedAvg, FedProx, FedBN and Local: aggregation by hand, FedProx(μ=0) ≡ FedAvg, dropped uploads."""

from __future__ import annotations

import pytest
import torch

from edgesim.backend import RoundOutcome
from edgesim.engine import Simulation
from edgesim.learning.aggregation import merge, split_keys, weighted_average
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.fedavg.algorithm import FedAvg, FedAvgConfig, FedProxConfig, batchnorm_keys
from edgesim.learning.context import build_context
from edgesim.learning.models import build_model
from edgesim.scenarios.schema import load_scenario


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
    prox0 = FedAvg(ctx, "fedavg", FedProxConfig(mu=0.0))  # same name ⇒ same derived random streams
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


# --------------------------------------------------------------------------- the family's variants and their bits

FAMILY = ("fedavg_sl", "fedprox_sl", "fedbn_sl", "fedavg_labeled", "fixavg", "fixprox", "fixbn", "fedavg_uda",
          "fedprox_uda", "fedper", "lg_fedavg", "pfedme")


def test_the_issue_names_are_registered_as_config_values_of_one_family():
    from edgesim.learning.algorithms.fedavg.algorithm import FedAvgConfig as Base

    assert set(FAMILY) <= set(REGISTRY)
    for name in FAMILY[:-1]:
        assert issubclass(REGISTRY[name].config_cls, Base)
    assert REGISTRY["fixprox"].config_cls().objective == "fixmatch" and REGISTRY["fixprox"].config_cls().mu == 0.01
    assert REGISTRY["fedbn_sl"].config_cls().data == "all_labels"
    assert REGISTRY["fedavg_sl"].config_cls(mu=0.5).mu == 0.5  # every option stays settable
    with pytest.raises(ValueError, match="objective"):
        FedAvgConfig(objective="mixmatch")
    with pytest.raises(ValueError, match="data"):
        FedAvgConfig(objective="fixmatch", data="all_labels")


def _numbers(state, keys):
    return sum(state[k].numel() for k in keys if state[k].is_floating_point())


@pytest.mark.parametrize("name", ["fedavg", "fedbn", "fedper", "lg_fedavg", "pfedme"])
def test_bits_are_the_sent_tensors(tiny_scenario, name):
    """Upload/download bits = 32 × the floating-point numbers of the keys each algorithm really sends."""
    sc, ctx = _ctx(tiny_scenario, "train.model='resnet9'", "train.batch_size=8")
    alg = REGISTRY[name].build(ctx, REGISTRY[name].config_cls())
    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    plan = alg.plan_round(sim.system_view())
    full = ctx.model.state_dict()
    bn = batchnorm_keys(ctx.model)
    sent = {
        "fedavg": list(full),
        "fedbn": [k for k in full if k not in bn],
        "fedper": [k for k in full if not k.startswith("fc.")],
        "lg_fedavg": [k for k in full if k.startswith(("fc.", "res3.block.2."))],  # last conv (+ its BN) and fc
        "pfedme": list(full),
    }[name]
    bits = 32 * _numbers(full, sent)
    uploads = [w.upload_bits for w in plan.work if w.upload_bits > 0]
    assert uploads and all(b == bits for b in uploads)
    assert all(w.download_bits == bits for w in plan.work)
    if name == "fedavg":
        assert bits == ctx.model_bits
    if name == "lg_fedavg":  # the global layers reach every device, selected or not
        assert len(plan.work) == sc.system.n_devices and len(uploads) == sc.learning["run"].clients_per_round
    if name in ("fedbn", "fedper", "lg_fedavg"):
        assert bits < ctx.model_bits


def test_scaled_bits_follow_a_given_model_size(tiny_scenario):
    sc, ctx = _ctx(tiny_scenario, "train.model='resnet9'", "workload.model_bits=1e6")
    alg = REGISTRY["fedbn"].build(ctx, REGISTRY["fedbn"].config_cls())
    up = alg.plan_round(Simulation(sc.system, sc.budget, alg, seed=sc.seed).system_view()).work[0].upload_bits
    full = ctx.model.state_dict()
    share = _numbers(full, [k for k in full if k not in batchnorm_keys(ctx.model)]) / _numbers(full, list(full))
    assert up == round(1e6 * share)


def test_fixmatch_cycles_count_the_unlabelled_views(tiny_scenario):
    """Hand count: the stream with more batches per epoch sets the steps; B labelled + 2 × 7B unlabelled rows each."""
    pytest.importorskip("edgesim.learning.augment")
    sc, ctx = _ctx(tiny_scenario)
    alg = REGISTRY["fixavg"].build(ctx, REGISTRY["fixavg"].config_cls())
    plan = alg.plan_round(Simulation(sc.system, sc.budget, alg, seed=sc.seed).system_view())
    b = ctx.train_cfg.batch_size
    for w in plan.work:
        c = ctx.clients[w.device]
        n_l, n_u = c.y_sup.shape[0], c.x_unl.shape[0]
        e_l, e_u = -(-n_l // b), -(-n_u // (7 * b))
        rows_l, rows_u = (n_l, e_l * min(7 * b, n_u)) if e_l >= e_u else (e_u * min(b, n_l), n_u)
        assert w.compute_cycles["train"] == pytest.approx(ctx.cycles_per_sample * (rows_l + 2 * rows_u))


@pytest.mark.parametrize("name", ["fixavg", "fedavg_uda", "fedper", "lg_fedavg", "pfedme", "fedbn_sl"])
def test_variants_run_and_repeat_exactly(tiny_scenario, name):
    pytest.importorskip("edgesim.learning.augment")
    sc, ctx = _ctx(tiny_scenario)
    first = _run(sc, REGISTRY[name].build(ctx, REGISTRY[name].config_cls()))
    again = _run(sc, REGISTRY[name].build(ctx, REGISTRY[name].config_cls()))
    assert first == again and all(0.0 <= m["accuracy"] <= 1.0 for m in first)
    if name == "fixavg":
        assert "mask_rate" in first[-1]


def test_pfedme_lr_overrides_the_train_lr(tiny_scenario):
    """``[algorithms.pfedme] lr`` trains exactly as ``[train] lr`` set to it would, and differs from the default."""
    from edgesim.learning.algorithms.pfedme.config import PFedMeConfig

    def metrics(cfg, *overrides):
        sc, ctx = _ctx(tiny_scenario, *overrides)
        return _run(sc, REGISTRY["pfedme"].build(ctx, cfg), rounds=1)

    own = metrics(PFedMeConfig(lr=0.01))
    assert own == metrics(PFedMeConfig(), "train.lr=0.01") and own != metrics(PFedMeConfig())


def test_fixmatch_views_on_digits_never_flip_and_on_a_flippable_set_do(tiny_scenario):
    """The run's data set decides: digits' weak/strong views hold no flip stage; the same task built for a data
    set whose labels survive a mirror (Fashion-MNIST's flag) flips."""
    import dataclasses

    from edgesim.learning.algorithms.fedavg.algorithm import make_task
    from edgesim.learning.augment import Flip

    _, ctx = _ctx(tiny_scenario)
    cfg = REGISTRY["fixavg"].config_cls()
    assert ctx.hflip_preserves_labels is False

    def flips(task):
        return {v.out: any(isinstance(s, Flip) for s in v.augmentation.stages) for v in task.views}

    assert flips(make_task(ctx, cfg)) == {"x_aug": False, "u_weak": False, "u_strong": False}
    mirror_ok = dataclasses.replace(ctx, hflip_preserves_labels=True)
    assert flips(make_task(mirror_ok, cfg)) == {"x_aug": True, "u_weak": True, "u_strong": True}


def test_step_metrics_by_hand():
    """Two training runs of the same two devices (DoFed-SPP's target and recognition models): S = (3+2, 5+0)."""
    from edgesim.learning.algorithms.common import step_metrics
    from edgesim.learning.tasks import LocalTrainResult

    first, second = LocalTrainResult([{}, {}], [0.1, 0.2], [3, 5]), LocalTrainResult([{}, {}], [0.1, 0.2], [2, 0])
    assert step_metrics(first, second) == {"local_steps": 10.0, "local_steps_per_device": 5.0}
    assert step_metrics(first) == {"local_steps": 8.0, "local_steps_per_device": 4.0}
    assert step_metrics(LocalTrainResult([], [], [])) == {"local_steps": 0.0, "local_steps_per_device": 0.0}


@pytest.mark.parametrize("name, epochs", [("fedavg", 1), ("fedavg", 3), ("fixavg", 2)])
def test_rounds_report_the_local_steps_counted_by_hand(tiny_scenario, name, epochs):
    """rounds.csv's local_steps: per selected device E·⌈n/B⌉ for a supervised stream; for FixMatch the stream with
    more batches per epoch leads: E·max(⌈n_lab/B⌉, ⌈n_unl/(μB)⌉) (B = 16, μ = 7 here)."""
    import math

    sc, ctx = _ctx(tiny_scenario, f"workload.local_iterations={epochs}", "data.labeled_ratio_alpha=0.5",
                   f'run.algorithms=["{name}"]')
    cfg = REGISTRY[name].config_cls()
    alg = REGISTRY[name].build(ctx, cfg)
    rec = Simulation(sc.system, sc.budget, alg, seed=sc.seed).run_round()
    b, mu = 16, cfg.unlabeled_ratio
    steps = []
    for row in rec.devices:
        c = ctx.clients[row.device]
        n_lab, n_unl = c.x_sup.shape[0], c.x_unl.shape[0]
        if name == "fixavg":
            steps.append(epochs * max(math.ceil(n_lab / b), math.ceil(n_unl / (mu * b))))
        else:
            steps.append(epochs * math.ceil(n_lab / b))
    assert len(steps) == 3 and min(steps) > 0
    assert rec.metrics["local_steps"] == sum(steps)
    assert rec.metrics["local_steps_per_device"] == pytest.approx(sum(steps) / 3)
