"""Evaluation: batched passes give the device-by-device numbers; ``[run] eval_every``, ``eval_devices`` and
``label_quality`` choose which rounds and devices are measured (docs/use/metrics.md)."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
import torch

from edgesim.config import ConfigError
from edgesim.learning.algorithms import common
from edgesim.learning.evaluation import EvalPlan, due, sample_size
from edgesim.learning.inference import evaluate, paired_accuracy
from edgesim.learning.models import build_model
from edgesim.results.metrics import final_accuracy, time_to_accuracy
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import ScenarioError, load_scenario


def rows(folder, name="rounds.csv"):
    return list(csv.DictReader(open(folder / name)))


# --------------------------------------------------------------------------- batched = device by device


@pytest.fixture
def tiny_scenario(tiny_scenario_measured):
    """These tests read the labelling diagnostic: the tiny scenario with it on (its default)."""
    return tiny_scenario_measured


def test_paired_accuracy_counts_each_model_on_its_own_rows():
    model = build_model("cnn", (1, 8, 8), 10, None, seed=0)
    states = [build_model("cnn", (1, 8, 8), 10, None, seed=s).state_dict() for s in range(4)]
    g = torch.Generator().manual_seed(0)
    sizes = [5, 0, 13, 1]
    parts = [(torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 10, (n,), generator=g)) for n in sizes]
    want = [evaluate(model, [s], x, y, 4)[0] for s, (x, y) in zip(states, parts)]
    for max_models in (None, 1, 3):
        got = paired_accuracy(model, states, parts, batch_size=4, max_models=max_models)
        assert math.isnan(got[1]) and math.isnan(want[1])
        assert [a for i, a in enumerate(got) if i != 1] == [a for i, a in enumerate(want) if i != 1]
    # hand: a model that predicts class 0 everywhere scores the share of 0 labels, padded rows never counted
    zero = {k: torch.zeros_like(v) for k, v in states[0].items()}
    y = torch.tensor([0, 3, 0])
    got = paired_accuracy(model, [zero, zero], [(torch.randn(3, 1, 8, 8), y), (torch.randn(1, 1, 8, 8), y[1:2])])
    assert got == [2 / 3, 0.0]


def _device_by_device(monkeypatch):
    """Replace the batched evaluation with one device at a time (the reference the batched one must equal)."""
    one_part = common.accuracy_per_part

    def per_part(ctx, state, parts):
        return [one_part(ctx, state, [p])[0] for p in parts]

    def per_device(ctx, states, parts, *, one_model_pass=False):
        if one_model_pass and len(states) > 1 and all(s is states[0] for s in states):
            return per_part(ctx, states[0], parts)
        return [evaluate(ctx.model, [s], x, y, ctx.train_cfg.eval_batch_size)[0] for s, (x, y) in zip(states, parts)]

    monkeypatch.setattr(common, "accuracy_per_part", per_part)
    monkeypatch.setattr(common, "accuracy_per_device", per_device)


def test_batched_evaluation_writes_the_device_by_device_numbers(tiny_scenario, tmp_path, monkeypatch):
    """A shared-model algorithm (FedAvg) and a personalised one (Local): every column of rounds.csv the same bytes
    (the vectorised executor takes the stacked-models path for the personal models; a check of UM-pFSSL, DoFed-SPP,
    FedFomo and pFedMe against the code before batching: docs/use/metrics.md, "Evaluation")."""
    sets = ['train.executor="vmap"', 'run.algorithms=["fedavg", "local"]', "budget.rounds=2",
            "data.labeled_ratio_alpha=0.5"]
    sc = load_scenario(tiny_scenario, sets)
    batched = run_scenario(sc, tmp_path / "batched")
    _device_by_device(monkeypatch)
    reference = run_scenario(sc, tmp_path / "reference")
    assert (batched / "rounds.csv").read_text() == (reference / "rounds.csv").read_text()
    assert (batched / "devices.csv").read_text() == (reference / "devices.csv").read_text()
    assert "labeling_accuracy" in rows(batched)[0]  # the labelling accuracy was compared too


# --------------------------------------------------------------------------- the plan


def test_due_rounds_hand_values():
    assert [r for r in range(10) if due(r, 3, 9)] == [2, 5, 8, 9]
    assert [r for r in range(10) if due(r, 1, 9)] == list(range(10))  # limiting case: every round
    assert [r for r in range(10) if due(r, 10, 9)] == [9]  # every = the run: the last round only
    for every in range(1, 7):  # property: the last round is always evaluated
        assert due(11, every, 11)


def test_sample_size_hand_values():
    assert sample_size(None, 10) == sample_size("all", 10) == 10
    assert sample_size(4, 10) == 4
    assert sample_size(0.25, 10) == 2  # round(2.5) = 2 (halves to even)
    assert sample_size(0.01, 10) == 1  # at least one device
    assert sample_size(1.0, 10) == 10


class _Run:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_eval_plan_draws_a_fixed_sample_and_nothing_by_default():
    rng = np.random.default_rng(0)
    default = EvalPlan.from_config(_Run(), 50, 20, rng)
    assert default.is_default and default.devices is None and default.last_round == 19
    assert rng.random() == np.random.default_rng(0).random()  # the default drew nothing
    a = EvalPlan.from_config(_Run(eval_devices=0.2), 50, 20, np.random.default_rng(7))
    b = EvalPlan.from_config(_Run(eval_devices=10), 50, 20, np.random.default_rng(7))
    assert a.devices == b.devices and len(a.devices) == 10 and list(a.devices) == sorted(set(a.devices))
    q = EvalPlan.from_config(_Run(eval_every=4, label_quality=3), 5, 10, None)
    assert [r for r in range(10) if q.accuracy_due(r)] == [3, 7, 9]
    assert [r for r in range(10) if q.labels_due(r)] == [2, 5, 8, 9]
    off = EvalPlan.from_config(_Run(label_quality=False), 5, 10, None)
    assert not any(off.labels_due(r) for r in range(10)) and off.accuracy_due(0)
    on = EvalPlan.from_config(_Run(eval_every=2, label_quality=True), 5, 10, None)
    assert [on.labels_due(r) for r in range(10)] == [on.accuracy_due(r) for r in range(10)]


def test_final_accuracy_over_evaluated_rounds():
    nan = float("nan")
    full = [0.1, 0.5, 0.6, 0.605, 0.607]
    assert final_accuracy(full, 0.01, 2) == (0.607, 4, True)
    # the same curve evaluated at rounds 1, 3, 4: the plateau rule compares evaluated neighbours, patience in them
    assert final_accuracy([nan, 0.5, nan, 0.605, 0.607], 0.01, 1) == (0.607, 4, True)
    assert final_accuracy([nan, 0.5, nan, 0.605, 0.607], 0.2, 1) == (0.605, 3, True)
    assert final_accuracy([nan, 0.5, nan, 0.7], 0.01, 1) == (0.7, 3, False)
    f, i, settled = final_accuracy([nan, nan], 0.01, 1)
    assert math.isnan(f) and (i, settled) == (1, False)


# --------------------------------------------------------------------------- runs


def test_eval_every_fills_only_the_evaluated_rounds_and_changes_no_training(tiny_scenario, tmp_path):
    base = ["budget.rounds=5", 'run.algorithms=["fedavg", "local"]', "run.sustain_rounds=1"]
    full = run_scenario(load_scenario(tiny_scenario, base), tmp_path / "full")
    every = run_scenario(load_scenario(tiny_scenario, [*base, "run.eval_every=2"]), tmp_path / "every")
    f, e = rows(full), rows(every)
    assert len(f) == len(e) == 10
    for a, b in zip(f, e):
        for key in ("round", "time_s", "train_loss", "cum_bits_up", "cum_energy_j", "local_steps"):
            assert a[key] == b[key], key  # evaluation is measurement: the training and the clock are the same
        if int(a["round"]) in (1, 3, 4):  # every 2nd round and the last
            assert a["accuracy"] == b["accuracy"] and b["accuracy"] != ""
        else:
            assert b["accuracy"] == "" and b["accuracy_std"] == ""
    summary = json.loads((every / "summary.json").read_text())
    for alg in ("fedavg", "local"):
        mine = [r for r in e if r["algorithm"] == alg]
        times = [float(r["time_s"]) for r in mine]
        accs = [float(r["accuracy"]) if r["accuracy"] else float("nan") for r in mine]
        got = summary["algorithms"][alg]
        assert got["last_accuracy"] == accs[-1] and got["best_accuracy"] == max(a for a in accs if a == a)
        for t, v in got["time_to_accuracy_s"].items():  # a crossing is seen at an evaluated round only
            assert v == time_to_accuracy(times, accs, float(t), 1)
            assert v is None or accs[times.index(v)] >= float(t)


def test_eval_devices_and_label_quality(tiny_scenario, tmp_path):
    base = ["budget.rounds=3", 'run.algorithms=["fedavg", "local"]', "data.labeled_ratio_alpha=0.5"]
    full = rows(run_scenario(load_scenario(tiny_scenario, base), tmp_path / "full"))
    some = rows(run_scenario(load_scenario(tiny_scenario, [*base, "run.eval_devices=2"]), tmp_path / "some"))
    assert [r["train_loss"] for r in some] == [r["train_loss"] for r in full]
    assert any(a["accuracy"] != b["accuracy"] for a, b in zip(some, full))  # a mean over 2 of the 6 devices
    for a, b in zip(some, full):  # the sample's extremes lie within the cell's
        assert float(b["accuracy_min"]) <= float(a["accuracy_min"]) <= float(a["accuracy_max"]) \
               <= float(b["accuracy_max"])
    never = rows(run_scenario(load_scenario(tiny_scenario, [*base, "run.label_quality=false"]), tmp_path / "never"))
    assert "labeling_accuracy" not in never[0] and [r["accuracy"] for r in never] == [r["accuracy"] for r in full]
    every2 = rows(run_scenario(load_scenario(tiny_scenario, [*base, "run.label_quality=2"]), tmp_path / "two"))
    for a, b in zip(every2, full):
        assert a["labeling_accuracy"] == (b["labeling_accuracy"] if a["round"] in ("1", "2") else "")
        assert a["accuracy"] == b["accuracy"]


@pytest.mark.parametrize("override, words", [
    ("run.eval_every=4", "[run] eval_every = 4: expected at most the run's rounds ([budget] rounds = 3)"),
    ("run.eval_every=0", "eval_every"),
    ("run.eval_devices=7", "[run] eval_devices = 7: expected at most [system] n_devices (= 6)"),
    ("run.eval_devices=1.5", "eval_devices"),
    ("run.eval_devices=\"some\"", "eval_devices"),
    ("run.label_quality=0", "label_quality"),
    ("run.client_workers=0", "client_workers"),
])
def test_bad_evaluation_settings_are_one_line(tiny_scenario, override, words):
    with pytest.raises((ScenarioError, ConfigError)) as e:
        load_scenario(tiny_scenario, [override])
    assert words in str(e.value) and "\n" not in str(e.value)


def test_personalised_methods_evaluate_the_chosen_rounds_and_devices(tiny_scenario, tmp_path):
    """UM-pFSSL and DoFed-SPP evaluate their own models (and DoFed-SPP labels with its pseudo-labels): the same
    rules — only the last of 2 rounds, 3 of the 6 devices, no labelling diagnostic."""
    sets = ["budget.rounds=2", "budget.total_time_s=1e6", 'run.algorithms=["um_pfssl", "dofed_spp"]', "data.labeled_ratio_alpha=0.5",
            "run.eval_every=2", "run.eval_devices=3", "run.label_quality=false"]
    got = rows(run_scenario(load_scenario(tiny_scenario, sets), tmp_path / "p"))
    assert "labeling_accuracy" not in got[0]
    for r in got:
        assert (r["accuracy"] == "") == (r["round"] == "0"), r
