"""`edgesim run` end to end: determinism, the run-folder contract, crashes and divergence."""

from __future__ import annotations

import csv
import json
import math
import re

import pytest
from conftest import TINY_SCENARIO

from edgesim.config import ConfigError
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.common import DivergenceError, check_losses
from edgesim.learning.tasks import LocalTrainResult
from edgesim.results.files import MARKER
from edgesim.results.reading import display_names
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny scenario's run, made once for this file's tests that only read it."""
    folder = tmp_path_factory.mktemp("tiny_run")
    (folder / "tiny.toml").write_text(TINY_SCENARIO)
    return run_scenario(load_scenario(folder / "tiny.toml"), folder / "r")


def test_same_scenario_and_seed_give_identical_rounds_csv(tiny_scenario, tiny_run, tmp_path):
    a = tiny_run
    b = run_scenario(load_scenario(tiny_scenario), tmp_path / "b")
    for name in ("rounds.csv", "devices.csv", "events.csv"):
        assert (a / name).read_text() == (b / name).read_text(), name
    c = run_scenario(load_scenario(tiny_scenario, ["seed=4"]), tmp_path / "c")
    assert (a / "rounds.csv").read_text() != (c / "rounds.csv").read_text()


def test_rounds_csv_is_on_the_simulated_clock(tiny_run):
    out = tiny_run
    rows = list(csv.DictReader(open(out / "rounds.csv")))
    assert {r["algorithm"] for r in rows} == {"fedavg", "fedprox", "local"}
    for alg in ("fedavg", "local"):
        mine = [r for r in rows if r["algorithm"] == alg]
        assert [int(r["round"]) for r in mine] == [0, 1, 2]
        ends = [float(r["time_s"]) for r in mine]
        assert all(b > a for a, b in zip(ends, ends[1:]))  # simulated time only moves forward
        for r in mine:
            assert math.isclose(float(r["duration_s"]), float(r["time_s"]) - float(r["start_time_s"]))
            assert 0.0 <= float(r["accuracy"]) <= 1.0
    fedavg = [r for r in rows if r["algorithm"] == "fedavg"]
    assert all(int(r["n_selected"]) == 3 for r in fedavg)
    local = [r for r in rows if r["algorithm"] == "local"]
    assert all(float(r["cum_bits_up"]) == 0 for r in local)  # Local never communicates
    # the registry's display names reach summary.json, where the figures read them (no torch needed to plot)
    summary = json.loads((out / "summary.json").read_text())
    assert {a: s["display"] for a, s in summary["algorithms"].items()} == {"fedavg": "FedAvg", "fedprox": "FedProx",
                                                                          "local": "Local"}
    assert display_names([out]) == {"fedavg": "FedAvg", "fedprox": "FedProx", "local": "Local"}


def test_summary_reports_the_budget_beside_the_whole_run(tiny_scenario, tiny_run, tmp_path):
    out = tiny_run
    rows = [r for r in csv.DictReader(open(out / "rounds.csv")) if r["algorithm"] == "fedavg"]
    times = [float(r["time_s"]) for r in rows]
    accs = [float(r["accuracy"]) for r in rows]
    # a budget that ends between the second and the third round: rounds 0 and 1 are within it
    budget = (times[1] + times[2]) / 2
    out2 = run_scenario(load_scenario(tiny_scenario, [f"budget.total_time_s={budget!r}"]), tmp_path / "b")
    s = json.loads((out2 / "summary.json").read_text())
    assert s["budget_s"] == budget
    a = s["algorithms"]["fedavg"]
    assert a["rounds_within_budget"] == 2 and a["accuracy_at_budget"] == pytest.approx(accs[1])
    assert a["last_accuracy"] == pytest.approx(accs[2])  # the run itself went on past T
    for t, v in a["time_to_accuracy_s"].items():
        assert a["time_to_accuracy_within_budget_s"][t] == (v if v is not None and v <= budget else None)
    # T before the first round ends: nothing within the budget
    out3 = run_scenario(load_scenario(tiny_scenario, [f"budget.total_time_s={times[0] / 2!r}"]), tmp_path / "c")
    a = json.loads((out3 / "summary.json").read_text())["algorithms"]["fedavg"]
    assert a["accuracy_at_budget"] is None and a["rounds_within_budget"] == 0
    assert all(v is None for v in a["time_to_accuracy_within_budget_s"].values())


def test_a_crash_leaves_a_marked_incomplete_folder(tiny_scenario, tmp_path, monkeypatch):
    spec = REGISTRY["fedprox"]

    def exploding(ctx, cfg):
        backend = spec.build(ctx, cfg)

        def boom(outcome):
            raise RuntimeError("simulated crash")

        backend.complete_round = boom
        return backend

    monkeypatch.setitem(REGISTRY, "fedprox", spec.__class__(spec.name, spec.config_cls, exploding, spec.summary))
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_scenario(load_scenario(tiny_scenario), tmp_path / "r")
    assert not (tmp_path / "r").exists()
    marker = (tmp_path / "r.incomplete" / MARKER).read_text()
    assert "INCOMPLETE" in marker and "failed: RuntimeError: simulated crash" in marker


def test_unknown_algorithm_in_run_list_fails_before_writing(tiny_scenario, tmp_path):
    with pytest.raises(ConfigError, match="unknown algorithm 'fedmagic'"):  # refused when the scenario loads
        load_scenario(tiny_scenario, ["run.algorithms=['fedavg', 'fedmagic']"])
    assert not list(tmp_path.glob("r*"))


def test_divergence_names_algorithm_device_and_round(tiny_scenario, tmp_path):
    result = LocalTrainResult(params=[{}, {}], mean_loss=[0.5, float("nan")], n_steps=[3, 3])
    with pytest.raises(DivergenceError, match="fedavg: training diverged on device 7 in round 4"):
        check_losses("fedavg", 4, [2, 7], result)
    # a device without samples reports NaN by design: not divergence
    check_losses("fedavg", 4, [2, 7], LocalTrainResult([{}, {}], [0.5, float("nan")], [3, 0]))
    sc = load_scenario(tiny_scenario, ["train.lr=1e12", "run.algorithms=['fedavg']"])
    folder = run_scenario(sc, tmp_path / "r")  # the run finishes; summary.json says fedavg diverged
    note = json.loads((folder / "summary.json").read_text())["algorithms"]["fedavg"]["diverged"]
    assert re.match(r"fedavg: training diverged on device \d+ in round \d+ .*lower train.lr \(= 1e\+12\)", note)
