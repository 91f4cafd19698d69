"""``[run] warm_start``: computed once, every algorithm starts from its model (paired), charged on the clock,
the same bytes with --jobs 2 and after a resume, bad values one clear error."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from test_resume import _crashing

from edgesim.config import ConfigError
from edgesim.learning.config import RunConfig, warm_start_algorithms
from edgesim.scenarios import warm_start
from edgesim.scenarios.algorithm_run import make_backends
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

SEMI = ['data.partition="iid"', "data.labeled_fraction=0.3"]  # labelled and unlabelled data on every device
WARM = 'run.warm_start={algorithm = "fedavg_labeled", rounds = 2}'


def rows(folder: Path) -> list[dict]:
    return list(csv.DictReader(open(Path(folder) / "rounds.csv")))


def by_alg(folder: Path, alg: str) -> list[dict]:
    return [r for r in rows(folder) if r["algorithm"] == alg]


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob("*"))
            if p.is_file() and p.name != "run.json"}


def test_every_algorithm_starts_from_the_warm_model(tiny_scenario):
    sc = load_scenario(tiny_scenario, [*SEMI, WARM, "budget.rounds=4",
                                       'run.algorithms=["fedavg", "fixavg", "local", "feddure", "feddure_code"]'])
    build = make_backends(sc)[0]
    warm = warm_start.compute(sc, build)
    assert [r.round_index for r in warm.records] == [0, 1] and all(r.info["warm_start"] == 1.0 for r in warm.records)
    cold = build("fedavg").global_state
    assert any(not torch.equal(cold[k], warm.model[k].to(cold[k].device)) for k in cold)  # it trained
    for name in ("fedavg", "fixavg", "feddure", "feddure_code"):
        state = build(name, warm.model).global_state
        assert set(state) == set(warm.model) and all(torch.equal(state[k].cpu(), warm.model[k]) for k in state), name
    local = build("local", warm.model)  # a personal-model algorithm: every device's model is the warm one
    assert all(torch.equal(s[k].cpu(), warm.model[k]) for s in local.states for k in warm.model)
    # a second computation is the same (a pure function of the scenario and seed)
    again = warm_start.compute(sc, build)
    assert all(torch.equal(again.model[k], warm.model[k]) for k in warm.model)


def test_warm_rounds_are_shared_flagged_and_charged_on_the_clock(tiny_scenario, tmp_path):
    out = run_scenario(load_scenario(tiny_scenario, [*SEMI, WARM, "budget.rounds=4",
                                                     'run.algorithms=["fixavg", "fedavg"]']), tmp_path / "w")
    plain = run_scenario(load_scenario(tiny_scenario, [*SEMI, "budget.rounds=2",
                                                       'run.algorithms=["fedavg_labeled"]']), tmp_path / "p")
    sup = by_alg(plain, "fedavg_labeled")
    for alg in ("fixavg", "fedavg"):
        got = by_alg(out, alg)
        assert [r["warm_start"] for r in got] == ["1.0", "1.0", "0.0", "0.0"]
        for warm_row, sup_row in zip(got[:2], sup):  # the warm rounds are the supervised method's rounds
            assert {k: v for k, v in warm_row.items() if k in sup_row and k != "algorithm"} == \
                {k: v for k, v in sup_row.items() if k != "algorithm"}
        # the clock goes on: round 2 starts when the supervised rounds ended, bits and energy continue
        assert float(got[2]["start_time_s"]) == float(sup[-1]["time_s"]) > 0
        assert float(got[2]["cum_bits_up"]) == float(sup[-1]["cum_bits_up"]) + float(got[2]["bits_up"])
        assert float(got[2]["cum_energy_j"]) == pytest.approx(float(sup[-1]["cum_energy_j"]) + float(got[2]["energy_j"]))
    import json

    summary = json.loads((out / "summary.json").read_text())
    assert summary["warm_start"]["rounds"] == 2 and summary["warm_start"]["simulated_time_s"] == float(sup[-1]["time_s"])
    assert summary["algorithms"]["fixavg"]["rounds"] == 4  # rounds counts the warm start's


def test_fedavg_from_its_own_warm_start_is_fedavg(tiny_scenario, tmp_path):
    """Streams named by what they draw: a warm start of FedAvg* followed by FedAvg* is FedAvg* run straight."""
    straight = by_alg(run_scenario(load_scenario(tiny_scenario, [*SEMI, "budget.rounds=4",
                                                                 'run.algorithms=["fedavg_labeled"]']),
                                   tmp_path / "s"), "fedavg_labeled")
    warm = by_alg(run_scenario(load_scenario(tiny_scenario, [*SEMI, WARM, "budget.rounds=4",
                                                             'run.algorithms=["fedavg_labeled"]']),
                               tmp_path / "w"), "fedavg_labeled")
    assert [{k: v for k, v in r.items() if k != "warm_start"} for r in warm] == straight


def test_warm_start_with_jobs_and_resume_writes_the_same_bytes(tiny_scenario, tmp_path, monkeypatch):
    from edgesim.learning.algorithms import REGISTRY

    overrides = [*SEMI, WARM, "budget.rounds=4", "run.checkpoint_every=1", 'run.algorithms=["fixavg", "fedavg"]']
    one = run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "one")
    two = run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "two", jobs=2)
    a, b = files(one), files(two)
    assert sorted(a) == sorted(b) and all(a[n] == b[n] for n in a)

    def built_on_the_warm_model(ctx):
        assert ctx.start_state is not None  # built on the warm start's model

    with monkeypatch.context() as m:
        m.setitem(REGISTRY, "fedavg", _crashing("fedavg", 3, built_on_the_warm_model))
        with pytest.raises(RuntimeError, match="simulated crash"):
            run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "r")
    assert (tmp_path / "r.incomplete" / "checkpoints" / warm_start.FILE).is_file()
    computed = []
    real = warm_start.compute
    monkeypatch.setattr(warm_start, "compute", lambda *a: computed.append(1) or real(*a))
    out = run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "r", resume=True)
    assert computed == []  # read back, not recomputed
    c = files(out)
    assert sorted(c) == sorted(a) and all(a[n] == c[n] for n in a)


def test_bad_warm_start_values_are_one_clear_error(tiny_scenario):
    assert "fedavg_labeled" in warm_start_algorithms() and "fixavg" not in warm_start_algorithms()
    assert "fedavg_sl" not in warm_start_algorithms()  # the hidden labels are no warm start
    cases = [
        ("20", "warm_start = 20: expected a table such as"),
        ('{algorithm = "fixavg", rounds = 2}', "warm_start.algorithm = 'fixavg': expected a supervised algorithm"),
        ('{algorithm = "fedavg"}', "expected both keys algorithm and rounds"),
        ('{algorithm = "fedavg", rounds = 0}', "warm_start.rounds = 0: expected an integer >= 1"),
        ('{algorithm = "fedavg", rounds = 2, lr = 1}', "warm_start.lr = 1: expected one of the keys algorithm, rounds"),
    ]
    for value, message in cases:
        with pytest.raises(ConfigError) as e:
            load_scenario(tiny_scenario, [f"run.warm_start={value}"])
        assert message in str(e.value) and "\n" not in str(e.value), (value, str(e.value))
    with pytest.raises(ConfigError, match=r"warm_start.rounds = 3: expected fewer than rounds \(= 3\)"):
        load_scenario(tiny_scenario, ['run.warm_start={algorithm = "fedavg", rounds = 3}', "run.rounds=3"])
    with pytest.raises(ConfigError, match=r"\[run\] warm_start.rounds = 3: expected fewer than the run's rounds "
                                          r"\(\[budget\] rounds = 3"):
        load_scenario(tiny_scenario, ['run.warm_start={algorithm = "fedavg", rounds = 3}'])
    with pytest.raises(ValueError, match="parametric"):
        RunConfig(backend="parametric", warm_start={"algorithm": "fedavg", "rounds": 1})
    # the warm start's algorithm table is checked as if it ran
    with pytest.raises(ConfigError, match=r"\[algorithms.fedavg\]"):
        load_scenario(tiny_scenario, ['run.warm_start={algorithm = "fedavg", rounds = 1}',
                                      "algorithms.fedavg.threshold=0.5"])
