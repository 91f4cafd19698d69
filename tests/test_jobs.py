"""``edgesim run --jobs N``: a scenario's algorithms in N processes, the same run folder byte for byte."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgesim.scenarios.cli import app
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

runner = CliRunner()
CKPT = ["run.checkpoint_every=1", "budget.rounds=4"]


def files(folder: Path) -> dict[str, bytes]:
    """Every file of a run folder but run.json (provenance: start and end times, the command line)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "run.json"}


def test_two_jobs_write_the_same_run_folder_as_one(tiny_scenario, tmp_path):
    sc = load_scenario(tiny_scenario, ["budget.rounds=3"])
    one = run_scenario(sc, tmp_path / "one")
    seen = []
    two = run_scenario(sc, tmp_path / "two", jobs=2, on_round=lambda name, rec: seen.append((name, rec.round_index)))
    a, b = files(one), files(two)
    assert sorted(a) == sorted(b) and {"rounds.csv", "events.csv", "summary.json", "config.toml"} <= set(a)
    for name in a:
        assert a[name] == b[name], name
    # every round of every algorithm was reported to the progress display, each algorithm's in order
    for alg in ("fedavg", "fedprox", "local"):
        assert [r for n, r in seen if n == alg] == [0, 1, 2]


def test_a_bad_jobs_value_is_one_line(tiny_scenario, tmp_path):
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "x"), "--jobs", "0"])
    assert result.exit_code == 2 and "--jobs 0" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "x").exists()


def test_a_diverging_algorithm_in_a_worker_is_reported_as_in_one_process(tiny_scenario, tmp_path):
    """Divergence stops only that algorithm: exit 1, the others' results kept, the same folder as --jobs 1."""
    args = ["--set", "budget.rounds=2", "--set", "train.lr=1e6", "--set", 'run.algorithms=["fedavg", "local"]', "-q"]
    one = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "one"), *args])
    two = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "two"), "--jobs", "2", *args])
    for result in (one, two):
        assert result.exit_code == 1 and "diverged" in result.stderr and "Traceback" not in result.output
    a, b = files(tmp_path / "one"), files(tmp_path / "two")
    assert sorted(a) == sorted(b) and all(a[n] == b[n] for n in a)


def test_a_killed_parallel_run_resumes_to_the_same_bytes(tiny_scenario, tmp_path):
    reference = run_scenario(load_scenario(tiny_scenario, CKPT), tmp_path / "reference")
    out = tmp_path / "killed"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "edgesim.scenarios.cli", "run", str(tiny_scenario), "--out", str(out), "-q", "--jobs", "2"]
    for s in CKPT:
        cmd += ["--set", s]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    ckpts = tmp_path / "killed.incomplete" / "checkpoints"
    t0 = time.monotonic()
    while not any(ckpts.glob("*.pt")):
        if proc.poll() is not None:
            pytest.fail(f"the run ended (rc={proc.returncode}) before a checkpoint: {proc.stderr.read().decode()}")
        assert time.monotonic() - t0 < 180, "no checkpoint within 180 s"
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its workers
    proc.wait(timeout=30)
    assert not out.exists()
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--resume", "-q", "--jobs", "2",
                                 *[a for s in CKPT for a in ("--set", s)]])
    assert result.exit_code == 0, result.output
    for name in ("rounds.csv", "devices.csv", "events.csv", "summary.json"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name


def test_algorithms_are_assigned_longest_first_to_the_least_loaded_process(tiny_scenario):
    """Local trains every device, FedAvg and FedProx only K of them: Local's first plan charges the most cycles."""
    from edgesim.scenarios.algorithm_run import make_backends
    from edgesim.scenarios.parallel import costs_longest_first, planned_cycles

    sc = load_scenario(tiny_scenario)
    build = make_backends(sc)[0]
    cycles = {n: planned_cycles(sc, build, n) for n in ("fedavg", "fedprox", "local")}
    assert cycles["local"] > cycles["fedavg"] > 0
    assert costs_longest_first(sc, build, ["fedavg", "fedprox", "local"])[0][0] == "local"
    assert planned_cycles(sc, lambda name: 1 / 0, "fedavg") == 0.0  # an estimate never fails the run


def test_assign_is_greedy_longest_first_with_this_process_first():
    from edgesim.scenarios.parallel import assign

    costs = [("local", 8.0), ("fedprox", 5.5), ("fedavg", 5.0)]
    assert assign(costs, 1) == (["local"], ["fedprox", "fedavg"])
    assert assign(costs, 2) == (["local"], ["fedprox", "fedavg"])  # one each to the two workers
    assert assign([("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)], 1) == (["a", "c"], ["b", "d"])
    assert assign([], 3) == ([], [])
