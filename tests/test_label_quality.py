"""Pseudo-label accuracy: the shared tallies by hand, and a measurement that changes no other metric."""

from __future__ import annotations

import csv

import pytest
import torch

from edgesim.learning.label_quality import (
    REFERENCE_CONFIDENCE,
    TRUTH,
    batch_label_aux,
    finish,
    label_rates,
    round_label_metrics,
    start_label_rates,
)
from edgesim.learning.tasks import Batch
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario


@pytest.fixture
def tiny_scenario(tiny_scenario_measured):
    """These tests read the labelling diagnostic: the tiny scenario with it on (its default)."""
    return tiny_scenario_measured


def test_label_rates_and_finish_by_hand():
    # rows: right, right, wrong (not used), right (not used)
    r = label_rates(torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1, 1, 2]), torch.tensor([1.0, 1.0, 0.0, 0.0]))
    assert r == {"pl_hits": 0.5, "pl_correct": 0.75, "pl_used": 0.5}
    assert finish(r) == {"pseudo_label_accuracy": 1.0, "pseudo_label_accuracy_all": 0.75}
    # soft labels are scored by their arg-max; without a mask every row is used
    soft = torch.tensor([[0.6, 0.4], [0.3, 0.7], [0.9, 0.1]])
    assert label_rates(soft, torch.tensor([0, 0, 0])) == {"pl_hits": 2 / 3, "pl_correct": 2 / 3, "pl_used": 1.0}
    assert label_rates(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)) == {}
    with pytest.raises(ValueError, match="one label per true label"):
        label_rates(torch.zeros(3, dtype=torch.long), torch.zeros(2, dtype=torch.long))


def test_one_rule_differs_from_a_methods_own_rule_on_a_hand_case():
    """Rows: confident-right, confident-wrong, unconfident-right, unconfident-right (reference 0.95).

    FixMatch's own "used, right" (used: max p ≥ 0.95) scores 1 of its 2 rows: 0.5; a method that uses every row at
    weight 0.5 (FedDure's m ≈ 0.5) scores all four: 0.75. The one rule reports both on the same rows, whatever the
    method: 0.75 over all rows, 0.5 over the half above the reference."""
    assert REFERENCE_CONFIDENCE == 0.95
    p = torch.tensor([[0.97, 0.03], [0.02, 0.98], [0.60, 0.40], [0.80, 0.20]])
    y = torch.tensor([0, 0, 0, 0])
    r = start_label_rates(p, y)
    assert r == {"pl_start_right": 0.75, "pl_start_confident": 0.5, "pl_start_confident_right": 0.25}
    assert finish(r) == {"start_label_accuracy": 0.75, "start_label_confident_share": 0.5,
                         "start_label_accuracy_confident": 0.5}
    fix = finish(label_rates(p, y, p.max(-1).values >= 0.95))
    half = finish(label_rates(p, y, torch.full((4,), 0.5)))
    assert fix["pseudo_label_accuracy"] == 0.5 and half["pseudo_label_accuracy"] == 0.75  # the rules differ
    # limiting cases: reference 0 counts every row confident; no confident row leaves that cell empty
    assert finish(start_label_rates(p, y, reference=0.0))["start_label_accuracy_confident"] == 0.75
    assert "start_label_accuracy_confident" not in finish(start_label_rates(p, y, reference=1.0))
    assert start_label_rates(torch.zeros(0, 2), torch.zeros(0, dtype=torch.long)) == {}
    with pytest.raises(ValueError, match="one row per true label"):
        start_label_rates(torch.zeros(3, 2), torch.zeros(2, dtype=torch.long))
    # over devices: a ratio of device means, like the method's own accuracy
    sure = torch.tensor([[0.99, 0.01], [0.99, 0.01]])  # a second device: both rows confident and right
    two = torch.tensor([0, 0])
    got = round_label_metrics([{**label_rates(p, y), **r}, {}, {**label_rates(sure, two), **start_label_rates(sure, two)}])
    assert got["start_label_accuracy"] == pytest.approx(0.875)
    assert got["start_label_confident_share"] == pytest.approx(0.75)
    assert got["start_label_accuracy_confident"] == pytest.approx(0.625 / 0.75)


def test_round_metrics_are_a_ratio_of_device_means():
    a = {"pl_hits": 0.5, "pl_correct": 0.75, "pl_used": 0.5}
    b = {"pl_hits": 0.2, "pl_correct": 0.2, "pl_used": 1.0}
    got = round_label_metrics([a, {}, b], mask_rate=True)  # a device without rows is skipped
    assert got["pseudo_label_accuracy"] == pytest.approx(0.35 / 0.75)
    assert got["pseudo_label_accuracy_all"] == pytest.approx(0.475)
    assert got["mask_rate"] == pytest.approx(0.75)
    assert round_label_metrics([{}]) == {}
    # nothing used: no accuracy to report (left out: an empty cell, and equal runs compare equal), the other one is
    none = round_label_metrics([{"pl_hits": 0.0, "pl_correct": 0.4, "pl_used": 0.0}])
    assert none == {"pseudo_label_accuracy_all": 0.4}


def test_batch_aux_counts_real_rows_only_and_needs_the_truth():
    tensors = {"u": torch.zeros(3, 1), TRUTH: torch.tensor([0, 1, 2]), "__mask:unl": torch.tensor([1.0, 1.0, 0.0])}
    b = Batch(tensors, {"u": "unl", TRUTH: "unl"}, {"u": 0, TRUTH: 0}, padded=True)
    aux = batch_label_aux(b, torch.tensor([0, 0, 2]), torch.tensor([1.0, 0.0, 1.0]), "u")  # row 3 is padding
    assert {k: float(v) for k, v in aux.items()} == {"pl_hits": 0.5, "pl_correct": 0.5, "pl_used": 0.5}
    plain = Batch({"u": torch.zeros(2, 1), "__mask:unl": torch.ones(2)}, {"u": "unl"}, {"u": 0}, padded=False)
    assert batch_label_aux(plain, torch.tensor([0, 1]), None, "u") == {}


def _rows(folder):
    return list(csv.DictReader(open(folder / "rounds.csv")))


NEW = ("pseudo_label_accuracy", "pseudo_label_accuracy_all", "start_label_accuracy", "start_label_confident_share",
       "start_label_accuracy_confident")


def test_the_measurement_changes_no_other_metric(tiny_scenario, tmp_path, monkeypatch):
    """The same run with the hidden labels carried and without: every other column is identical, byte for byte."""
    import edgesim.learning.algorithms.fedavg.algorithm as fedavg

    sets = ['run.algorithms=["fixavg", "fedper"]', "budget.rounds=2", "algorithms.fixavg.threshold=0.5",
            "algorithms.fedper.objective=\"fixmatch\"", "algorithms.fedper.threshold=0.5"]
    with_truth = _rows(run_scenario(load_scenario(tiny_scenario, sets), tmp_path / "a"))
    original = fedavg.client_streams

    def without_truth(ctx, cfg, d):
        streams = original(ctx, cfg, d)
        return {s: {k: v for k, v in t.items() if k != TRUTH} for s, t in streams.items()}

    monkeypatch.setattr(fedavg, "client_streams", without_truth)
    plain = _rows(run_scenario(load_scenario(tiny_scenario, sets), tmp_path / "b"))
    assert len(with_truth) == len(plain) == 4
    for got, want in zip(with_truth, plain):
        assert got["pseudo_label_accuracy_all"] != "" and all(want.get(k, "") == "" for k in NEW)
        assert {k: v for k, v in got.items() if k not in NEW} == {k: v for k, v in want.items() if k not in NEW}
        assert 0.0 <= float(got["pseudo_label_accuracy_all"]) <= 1.0


def test_methods_that_do_not_pseudo_label_leave_the_column_empty(tiny_scenario, tmp_path):
    rows = _rows(run_scenario(load_scenario(tiny_scenario, ['run.algorithms=["fedavg", "fixavg"]', "budget.rounds=1",
                                                            "algorithms.fixavg.threshold=0.0"]), tmp_path / "r"))
    by = {r["algorithm"]: r for r in rows}
    assert by["fedavg"]["pseudo_label_accuracy"] == ""
    fix = by["fixavg"]
    # threshold 0: every row is used, so the two accuracies agree and the mask rate is 1
    assert float(fix["mask_rate"]) == 1.0
    assert float(fix["pseudo_label_accuracy"]) == pytest.approx(float(fix["pseudo_label_accuracy_all"]))


@pytest.mark.parametrize("algorithm", ["fixavg", "fedavg_uda", "feddure", "feddure_code", "um_pfssl", "dofed_spp"])
def test_every_pseudo_labelling_method_reports_the_one_rule(tiny_scenario, tmp_path, algorithm):
    """The three one-rule columns in rounds.csv, whatever the method's own rule (issue 54.1)."""
    sets = [f'run.algorithms=["{algorithm}"]', "budget.rounds=2", "budget.total_time_s=1000"]
    rows = _rows(run_scenario(load_scenario(tiny_scenario, sets), tmp_path / "r"))
    labelled = [r for r in rows if r["start_label_accuracy"] != ""]
    assert labelled, f"{algorithm}: no round reported start_label_accuracy"
    for r in labelled:
        assert 0.0 <= float(r["start_label_accuracy"]) <= 1.0
        assert 0.0 <= float(r["start_label_confident_share"]) <= 1.0


@pytest.mark.parametrize("algorithm", ["fedmix", "fedmatch"])
def test_labels_at_server_methods_report_the_one_rule(tmp_path, algorithm):
    from test_labels_at_server import TINY

    p = tmp_path / "las.toml"
    p.write_text(TINY)
    rows = _rows(run_scenario(load_scenario(p, [f'run.algorithms=["{algorithm}"]', "budget.rounds=1"]), tmp_path / "r"))
    assert rows and all(0.0 <= float(r["start_label_accuracy"]) <= 1.0 for r in rows)


def test_the_one_rule_follows_the_labelling_diagnostics_schedule(tiny_scenario, tmp_path):
    """``[run] label_quality = false``: no start model is scored (no columns); ``eval_every``: only evaluated rounds."""
    base = ['run.algorithms=["fixavg"]', "budget.rounds=3", "algorithms.fixavg.threshold=0.5"]
    off = _rows(run_scenario(load_scenario(tiny_scenario, [*base, "run.label_quality=false"]), tmp_path / "off"))
    assert all(r.get("start_label_accuracy", "") == "" for r in off)
    every = _rows(run_scenario(load_scenario(tiny_scenario, [*base, "run.eval_every=2"]), tmp_path / "every"))
    assert [r["start_label_accuracy"] != "" for r in every] == [r["accuracy"] != "" for r in every]
