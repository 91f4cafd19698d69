"""Common random numbers: what is not an algorithm's own choice is drawn the same for every algorithm of a run.

Methods that are mathematically one method give byte-identical curves: FedProx with μ = 0 and FedAvg; a
FedAvg written as a new module from the shared round functions; FixBN and FixAvg on a model without BatchNorm.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass

from edgesim.backend import RoundOutcome, RoundPlan, SystemView
from edgesim.learning.aggregation import weighted_average
from edgesim.learning.algorithms import REGISTRY, AlgorithmSpec
from edgesim.learning.algorithms.common import (
    arrived_updates,
    round_metrics,
    sample_clients,
    train_devices,
    training_plan,
)
from edgesim.learning.costs import task_cycles
from edgesim.learning.objectives import cross_entropy_loss
from edgesim.learning.tasks import LocalTask, Stream
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario


@dataclass(frozen=True)
class MyFedAvgConfig:
    """No options."""


class MyFedAvg:
    """FedAvg written from scratch by a user, from the shared round functions only."""

    def __init__(self, ctx, cfg):
        self.ctx = ctx
        self.task = LocalTask(loss=cross_entropy_loss("x"), optimizer=ctx.optimizer(), epochs=ctx.epochs,
                              streams=(Stream("main", ctx.train_cfg.batch_size),))
        self.state = ctx.init_state()
        self.selected = ()

    def plan_round(self, view: SystemView) -> RoundPlan:
        ctx = self.ctx
        self.selected = sample_clients(ctx, view.round_index, ctx.run_cfg.clients_per_round)
        cycles = {d: task_cycles(self.task, {"main": len(ctx.clients[d].y_sup)}, ctx.cycles_per_sample)
                  for d in self.selected}
        return training_plan(self.selected, cycles, ctx.model_bits, ctx.model_bits)

    def complete_round(self, outcome: RoundOutcome) -> dict:
        ctx, sel = self.ctx, self.selected
        data = [{"main": {"x": ctx.clients[d].x_sup, "y": ctx.clients[d].y_sup}} for d in sel]
        result = train_devices(ctx, "my_fedavg", outcome.round_index, sel, [self.state] * len(sel), data, self.task)
        updates = arrived_updates(outcome, sel, result.params, [len(ctx.clients[d].y_sup) for d in sel])
        if updates:
            self.state = weighted_average(updates)
        return round_metrics(ctx, [self.state] * ctx.n_devices, result, shared=self.state)


def columns(folder, algorithm):
    rows = [r for r in csv.DictReader(open(folder / "rounds.csv")) if r["algorithm"] == algorithm]
    assert rows
    return {k: [r[k] for r in rows] for k in rows[0] if k != "algorithm"}


def test_mathematically_equal_methods_give_identical_curves(tiny_scenario, tmp_path, monkeypatch):
    monkeypatch.setitem(REGISTRY, "my_fedavg", AlgorithmSpec("my_fedavg", MyFedAvgConfig, MyFedAvg, "test"))
    sc = load_scenario(tiny_scenario, ['run.algorithms=["fedavg", "fedprox", "my_fedavg"]',
                                       "algorithms.fedprox.mu=0.0", "budget.rounds=3"])
    out = run_scenario(sc, tmp_path / "r")
    fedavg = columns(out, "fedavg")
    assert float(fedavg["accuracy"][-1]) > 0
    for other in ("fedprox", "my_fedavg"):
        got = columns(out, other)
        for key in ("accuracy", "accuracy_std", "train_loss", "time_s", "bits_up", "energy_j"):
            assert got[key] == fedavg[key], (other, key)


def test_fedprox_with_its_own_mu_differs(tiny_scenario, tmp_path):
    """The property is not vacuous: a real difference between methods still shows."""
    sc = load_scenario(tiny_scenario, ['run.algorithms=["fedavg", "fedprox"]', "algorithms.fedprox.mu=1.0",
                                       "budget.rounds=2"])
    out = run_scenario(sc, tmp_path / "r")
    assert columns(out, "fedprox")["train_loss"] != columns(out, "fedavg")["train_loss"]


def test_fixbn_is_fixavg_on_a_model_without_batchnorm(tiny_scenario, tmp_path):
    """FixBN keeps BatchNorm local; on a model without BatchNorm it is FixAvg, augmentations and all."""
    sc = load_scenario(tiny_scenario, ['run.algorithms=["fixavg", "fixbn"]', "budget.rounds=2",
                                       "algorithms.fixavg.threshold=0.5", "algorithms.fixbn.threshold=0.5"])
    from edgesim.learning.algorithms.fedavg.algorithm import batchnorm_keys
    from edgesim.learning.models import build_model

    assert not batchnorm_keys(build_model(sc.learning["train"].model, (1, 8, 8), 10))
    out = run_scenario(sc, tmp_path / "r")
    a, b = columns(out, "fixavg"), columns(out, "fixbn")
    assert a["mask_rate"] == b["mask_rate"] and a["accuracy"] == b["accuracy"] and a["train_loss"] == b["train_loss"]


def test_every_algorithm_samples_the_same_devices_and_starts_from_the_same_model(tiny_scenario, tmp_path):
    sc = load_scenario(tiny_scenario, ['run.algorithms=["fedavg", "fixavg", "fedper"]', "budget.rounds=2"])
    out = run_scenario(sc, tmp_path / "r")
    by_alg: dict = {}
    for r in csv.DictReader(open(out / "devices.csv")):
        by_alg.setdefault(r["algorithm"], []).append((r["round"], r["device"], r["channel_gain"]))
    assert by_alg["fedavg"] == by_alg["fixavg"] == by_alg["fedper"]
