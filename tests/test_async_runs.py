"""Asynchronous runs end to end: scenario tables, run folders, the FedAvg family's FedAsync/FedBuff, refusals,
FedBuff = synchronous FedAvg on the learning side, and a killed async run resumed to the same bytes."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest
import torch

from edgesim.config import ConfigError
from edgesim.scenarios.algorithm_run import make_backends, make_simulation
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

PHYSICS = """
name = "async_physics"
seed = 1

[system]
n_devices = 12
bandwidth_hz = 1e6
cpu_freq_hz = [5e8, 6e8, 7e8, 8e8, 9e8, 1e9, 1.1e9, 1.2e9, 1.4e9, 1.6e9, 1.8e9, 2e9]
access = "fdma"
rayleigh_fading = true

[budget]
rounds = 30
round_mode = "fedbuff"

[workload]
cycles_per_sample = 1e7
samples_per_device = 50
model_bits = 1e6

[run]
backend = "parametric"
clients_per_round = 4

[async]
concurrency = 6
buffer_size = 3

[availability]
model = "markov"
mean_on_s = 20
mean_off_s = 10
"""


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_physics_only_fedbuff_run_folder(tmp_path):
    out = run_scenario(load_scenario(write(tmp_path, PHYSICS)), tmp_path / "out")
    r = rows(out / "rounds.csv")
    assert len(r) == 30 and [float(x["version"]) for x in r] == list(range(1, 31))
    assert all(float(x["staleness_max"]) >= float(x["staleness_mean"]) >= 0 for x in r)
    d = rows(out / "devices.csv")
    assert {"update", "version", "staleness", "start_time_s", "end_time_s", "drop_reason"} <= set(d[0])
    assert sum(x["arrived"] == "True" for x in d) == 30 * 3  # K = 3 arrivals per flush
    lost = [x for x in d if x["dropped"] == "True"]
    assert lost and all(x["drop_reason"] == "offline" and x["staleness"] == "-1" for x in lost)
    cfg = (out / "config.toml").read_text()
    assert "[async]" in cfg and "[availability]" in cfg
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algorithms"]["parametric"]["rounds"] == 30


def test_sync_run_with_churn_records_why_devices_dropped(tmp_path):
    out = run_scenario(load_scenario(write(tmp_path, PHYSICS), ["budget.round_mode=sync"]), tmp_path / "out")
    d = rows(out / "devices.csv")
    assert "drop_reason" in d[0] and "version" not in d[0]
    assert {x["drop_reason"] for x in d if x["dropped"] == "True"} == {"offline"}
    assert {x["drop_reason"] for x in d if x["dropped"] == "False"} == {""}


def test_sync_runs_write_no_async_columns(tmp_path):
    text = PHYSICS.replace('round_mode = "fedbuff"', 'round_mode = "sync"').split("[availability]")[0]
    out = run_scenario(load_scenario(write(tmp_path, text)), tmp_path / "out")
    assert "version" not in rows(out / "devices.csv")[0] and "staleness_mean" not in rows(out / "rounds.csv")[0]
    assert "[async]" not in (out / "config.toml").read_text()


@pytest.mark.parametrize("override, expected", [
    (["async.concurrency=13"], r"\[async\] concurrency = 13: expected at most \[system\] n_devices \(= 12\)"),
    (["async.staleness=exp"], r"\[async\]: staleness = 'exp'"),
    (["availability.model=trace", "availability.trace=nowhere.csv"],
     r"nowhere.csv: cannot read the availability trace"),
])
def test_bad_async_tables_are_one_line(tmp_path, override, expected):
    with pytest.raises(ConfigError, match=expected) as info:
        load_scenario(write(tmp_path, PHYSICS), override)
    assert "\n" not in str(info.value)


def test_a_scheduling_policy_fills_free_slots_in_an_async_run_folder(tmp_path):
    plain = run_scenario(load_scenario(write(tmp_path, PHYSICS)), tmp_path / "plain")
    fast = run_scenario(load_scenario(write(tmp_path, PHYSICS), ["resources.scheduling=fastest"]), tmp_path / "fast")
    assert "[resources]" in (fast / "config.toml").read_text()
    starts = [int(x["device"]) for x in sorted(rows(fast / "devices.csv"), key=lambda x: int(x["update"]))]
    assert starts != [int(x["device"]) for x in sorted(rows(plain / "devices.csv"), key=lambda x: int(x["update"]))]
    assert starts.count(11) > starts.count(0)  # the 2 GHz device is chosen more often than the 0.5 GHz one


@pytest.mark.parametrize("override, expected", [
    (["resources.bandwidth=min_max_time"], r"s.toml: \[resources\] bandwidth = 'min_max_time' does not apply to "
                                           r"round_mode = 'fedbuff'"),
    (["resources.scheduling=oort"], r"s.toml: \[resources\] scheduling = 'oort' with round_mode = 'fedbuff' needs "
                                    r"\[budget\] deadline_s"),
    (["resources.scheduling=nobody"], r"s.toml: \[resources\] scheduling = 'nobody': expected one of"),
])
def test_resources_refused_in_async_runs_are_one_line(tmp_path, override, expected):
    with pytest.raises(ConfigError, match=expected) as info:
        load_scenario(write(tmp_path, PHYSICS), override)
    assert "\n" not in str(info.value)


def test_trace_file_relative_to_the_scenario_and_its_errors(tmp_path):
    (tmp_path / "avail.csv").write_text("device,start_s,end_s\n0,0,100\n13,0,5\n")
    text = PHYSICS.replace('model = "markov"', 'model = "trace"\ntrace = "avail.csv"')
    with pytest.raises(ConfigError, match=r"avail.csv: row 3: device = 13: unknown device"):
        load_scenario(write(tmp_path, text))


def test_algorithms_outside_the_fedavg_family_are_refused(tiny_scenario):
    with pytest.raises(ConfigError, match=r"'local' has no asynchronous mode") as info:
        load_scenario(tiny_scenario, ["budget.round_mode=fedasync"])
    assert "\n" not in str(info.value)


EQUAL = ["budget.rounds=3", "run.algorithms=fedavg", "system.n_devices=3", "run.clients_per_round=3",
         "system.access=fdma", "system.channel_gain_db=-100", "data.partition=iid"]  # 479 samples each


def test_fedbuff_with_equal_devices_learns_exactly_sync_fedavg(tiny_scenario):
    """All three devices equal (iid shares of 479, one CPU, one gain, FDMA), K = concurrency = N (the defaults:
    clients_per_round): the same models and times."""
    sync = load_scenario(tiny_scenario, EQUAL)
    buff = load_scenario(tiny_scenario, [*EQUAL, "budget.round_mode=fedbuff"])
    build, _, _ = make_backends(sync)
    a = make_simulation(sync, build("fedavg"), "fedavg")
    b = make_simulation(buff, build("fedavg"), "fedavg")
    ra, rb = a.run(), b.run()
    assert [r.end_time_s for r in ra] == [r.end_time_s for r in rb]
    assert [r.metrics for r in ra] == [r.metrics for r in rb]
    ga, gb = a.backend.global_state, b.backend.inner.global_state
    assert ga.keys() == gb.keys() and all(torch.equal(ga[k], gb[k]) for k in ga)


def test_oort_in_an_async_run_ranks_by_the_devices_losses(tiny_scenario):
    """The devices' loss statistics reach the free slot's policy (Oort's utility) and its checkpoint's log."""
    sc = load_scenario(tiny_scenario, ["budget.round_mode=fedasync", "run.algorithms=fedavg", "budget.rounds=4",
                                       "resources.scheduling=oort", "budget.deadline_s=5"])
    build, _, _ = make_backends(sc)
    sim = make_simulation(sc, build("fedavg"), "fedavg", device_losses=build.device_losses)
    recs = sim.run()
    trained = {a for r in recs for a in r.arrived}
    utility = sim._scheduler.utility  # noqa: SLF001 - what the policy sees
    assert trained and all(utility[d] > 0 for d in trained)
    assert {d for _, d, _ in sim.state_dict()["utility_log"]} == trained


def test_fedasync_and_fedbuff_learn_with_stale_updates(tiny_scenario):
    for mode in ("fedasync", "fedbuff"):
        sc = load_scenario(tiny_scenario, ["budget.rounds=8", "run.algorithms=fedavg,fixavg",
                                           f"budget.round_mode={mode}",
                                           "async.concurrency=3", "async.buffer_size=2",
                                           "system.cpu_freq_hz=[5e8,1e9,2e9,5e8,1e9,2e9]"])
        build, _, _ = make_backends(sc)
        for name in ("fedavg", "fixavg"):
            sim = make_simulation(sc, build(name), name)
            recs = sim.run()
            assert len(recs) == 8 and max(r.info["staleness_max"] for r in recs) >= 1
            assert all(0 <= r.metrics["accuracy"] <= 1 for r in recs)
            live = {v for _, v in sim.backend.in_flight.values()}
            assert set(sim.backend.versions) == live | {sim.backend.version}  # only models still in use are kept


ASYNC_CKPT = ["run.checkpoint_every=1", "budget.rounds=6", "budget.round_mode=fedbuff", "async.concurrency=3",
              "async.buffer_size=2", "run.algorithms=fedavg,fedprox", "availability.model=markov",
              "availability.mean_on_s=2", "availability.mean_off_s=1"]


def _start_async_run(scenario: Path, out: Path, *extra: str):
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "edgesim.scenarios.cli", "run", str(scenario), "--out", str(out), "-q", *extra]
    for s in ASYNC_CKPT:
        cmd += ["--set", s]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.parametrize("policy", [[], ["resources.scheduling=age"]], ids=["uniform", "age"])
def test_a_crashed_async_run_resumes_to_the_same_bytes(tiny_scenario, tmp_path, monkeypatch, policy):
    """In this process: FedProx raises at its third aggregation (FedAvg has finished, FedProx has checkpoints), and
    a resume ends with the bytes of an uninterrupted run — with the uniform draw and with a scheduling policy
    choosing each free slot's device. (A killed process's resume: `test_resume.py::test_killed_run_resumes_to_the_same_bytes`;
    both together, a SIGKILLed asynchronous run: `test_killed_async_run_resumes_to_the_same_bytes`, slow.)"""
    from test_resume import OUTPUTS

    from edgesim.learning.algorithms import REGISTRY

    reference = run_scenario(load_scenario(tiny_scenario, ASYNC_CKPT + policy), tmp_path / "reference")
    spec = REGISTRY["fedprox"]

    def build(ctx, cfg):
        backend, calls = spec.build(ctx, cfg), []
        aggregate = backend.aggregate

        def crashing(*args, **kwargs):
            calls.append(1)
            if len(calls) == 3:
                raise RuntimeError("simulated crash")
            return aggregate(*args, **kwargs)

        backend.aggregate = crashing
        return backend

    with monkeypatch.context() as m:
        m.setitem(REGISTRY, "fedprox", dataclasses.replace(spec, build=build))
        with pytest.raises(RuntimeError, match="simulated crash"):
            run_scenario(load_scenario(tiny_scenario, ASYNC_CKPT + policy), tmp_path / "r")
    assert (tmp_path / "r.incomplete" / "checkpoints" / "fedprox.pt").is_file()
    out = run_scenario(load_scenario(tiny_scenario, ASYNC_CKPT + policy), tmp_path / "r", resume=True)
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name


@pytest.mark.slow  # ~5 s a case: two killed processes; covered by test_a_crashed_async_run_resumes_to_the_same_bytes
@pytest.mark.parametrize("policy", [pytest.param([], id="uniform"), pytest.param(["resources.scheduling=age"], id="age")])
def test_killed_async_run_resumes_to_the_same_bytes(tiny_scenario, tmp_path, policy):
    """SIGKILL during the first algorithm, again during the second after --resume; the last --resume finishes
    (with the uniform draw and with a scheduling policy choosing each free slot's device)."""
    from test_resume import OUTPUTS, _kill_when, runner

    from edgesim.scenarios.cli import app

    reference = run_scenario(load_scenario(tiny_scenario, ASYNC_CKPT + policy), tmp_path / "reference")
    out = tmp_path / "killed"
    ckpts = tmp_path / "killed.incomplete" / "checkpoints"
    extra = [a for s in policy for a in ("--set", s)]
    # A shared machine may take minutes to import torch and load the data: wait long for the first checkpoint.
    _kill_when(_start_async_run(tiny_scenario, out, *extra), ckpts / "fedavg.pt", timeout_s=900)
    _kill_when(_start_async_run(tiny_scenario, out, "--resume", *extra), ckpts / "fedprox.pt", timeout_s=900)
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--resume", "-q",
                                 *[a for s in ASYNC_CKPT + policy for a in ("--set", s)]])
    assert result.exit_code == 0, result.output
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name

def test_compression_is_refused_in_asynchronous_runs(tiny_scenario):
    with pytest.raises(ConfigError, match=r"compressed transfers are not simulated in asynchronous runs"):
        load_scenario(tiny_scenario, ["budget.round_mode=fedbuff", "run.algorithms=fedavg",
                                      "compression.uplink.method=qsgd", "compression.uplink.bits=8"])
