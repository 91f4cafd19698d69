"""Runs that survive: checkpoints, kill -9 and --resume to the same bytes, clear divergence and resume errors."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgesim.config import ConfigError
from edgesim.learning.algorithms import REGISTRY
from edgesim.results.files import MARKER
from edgesim.scenarios.cli import app
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

runner = CliRunner()
OUTPUTS = ("rounds.csv", "devices.csv", "events.csv", "summary.json")
# 4 rounds of 3 algorithms, a checkpoint after every round.
CKPT = ["run.checkpoint_every=1", "budget.rounds=4"]


def _start_run(scenario: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # as the in-process runs (conftest)
    cmd = [sys.executable, "-m", "edgesim.scenarios.cli", "run", str(scenario), "--out", str(out), "-q", *extra]
    for s in CKPT:
        cmd += ["--set", s]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_when(proc: subprocess.Popen, path: Path, timeout_s: float = 120) -> None:
    """SIGKILL ``proc`` as soon as ``path`` exists; fail if the run ended first."""
    t0 = time.monotonic()
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the run ended (rc={proc.returncode}) before {path.name} appeared: {proc.stderr.read().decode()}")
        if time.monotonic() - t0 > timeout_s:
            proc.kill()
            pytest.fail(f"{path} did not appear within {timeout_s} s")
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL


def test_killed_run_resumes_to_the_same_bytes(tiny_scenario, tmp_path):
    reference = run_scenario(load_scenario(tiny_scenario, CKPT), tmp_path / "reference")
    assert not (reference / "checkpoints").exists()  # a finished run keeps no checkpoints
    out = tmp_path / "killed"
    ckpts = tmp_path / "killed.incomplete" / "checkpoints"

    # killed during the first algorithm, as soon as its first checkpoint is on disk
    _kill_when(_start_run(tiny_scenario, out), ckpts / "fedavg.pt")
    assert not out.exists() and (tmp_path / "killed.incomplete" / MARKER).exists()
    # resumed, and killed again once the second algorithm has a checkpoint (the first one has finished)
    _kill_when(_start_run(tiny_scenario, out, "--resume"), ckpts / "fedprox.pt")
    assert not out.exists()

    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--resume", "-q",
                                 *[a for s in CKPT for a in ("--set", s)]])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "killed.incomplete").exists() and not (out / "checkpoints").exists()
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    provenance = json.loads((out / "run.json").read_text())  # the first start, both resumptions, the end
    assert len(provenance["resumed"]) == 2 and provenance["started"] <= provenance["resumed"][0]
    assert provenance["resumed"][-1] <= provenance["finished"]

    # resuming a finished run returns it untouched; another scenario in its place is refused
    mtime = (out / "rounds.csv").stat().st_mtime_ns
    assert run_scenario(load_scenario(tiny_scenario, CKPT), out, resume=True) == out
    assert (out / "rounds.csv").stat().st_mtime_ns == mtime
    with pytest.raises(ConfigError, match="different scenario"):
        run_scenario(load_scenario(tiny_scenario, [*CKPT, "seed=9"]), out, resume=True)


def _crashing(name: str, round_index: int, on_build=None):
    """A registry entry for ``name`` whose backend raises in ``round_index``; ``on_build(ctx)`` runs at each build."""
    spec = REGISTRY[name]

    def build(ctx, cfg):
        if on_build is not None:
            on_build(ctx)
        backend = spec.build(ctx, cfg)
        complete = backend.complete_round

        def complete_round(outcome):
            if outcome.round_index == round_index:
                raise RuntimeError("simulated crash")
            return complete(outcome)

        backend.complete_round = complete_round
        return backend

    return dataclasses.replace(spec, build=build)


def test_resume_refuses_checkpoints_of_another_scenario(tiny_scenario, tmp_path, monkeypatch):
    overrides = [*CKPT, "run.algorithms=['fedavg']"]
    with monkeypatch.context() as m:
        m.setitem(REGISTRY, "fedavg", _crashing("fedavg", 1))
        with pytest.raises(RuntimeError, match="simulated crash"):
            run_scenario(load_scenario(tiny_scenario, overrides), tmp_path / "r")
    assert (tmp_path / "r.incomplete" / "checkpoints" / "fedavg.pt").exists()
    before = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "r.incomplete").rglob("*") if p.is_file()}
    with pytest.raises(ConfigError, match=r"different scenario \(train\.lr: 0\.05 -> 0\.01\)"):
        run_scenario(load_scenario(tiny_scenario, [*overrides, "train.lr=0.01"]), tmp_path / "r", resume=True)
    after = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "r.incomplete").rglob("*") if p.is_file()}
    assert after == before  # refused and left untouched
    # without --resume or --overwrite the unfinished run is not touched either; --overwrite replaces it
    with pytest.raises(ConfigError, match=r"holds an unfinished run; ⟨\+resume⟩"):
        run_scenario(load_scenario(tiny_scenario, [*overrides, "budget.rounds=1"]), tmp_path / "r")
    assert run_scenario(load_scenario(tiny_scenario, [*overrides, "budget.rounds=1"]), tmp_path / "r",
                        overwrite=True).exists()


def test_algorithm_without_state_dict_cannot_be_checkpointed(tiny_scenario, tmp_path, monkeypatch):
    spec = REGISTRY["fedavg"]

    class Opaque:  # plans and learns, but has no state_dict()/load_state_dict()
        def __init__(self, inner):
            self.plan_round, self.complete_round = inner.plan_round, inner.complete_round

    monkeypatch.setitem(REGISTRY, "fedavg", spec.__class__(
        spec.name, spec.config_cls, lambda ctx, cfg: Opaque(spec.build(ctx, cfg)), spec.summary))
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "r"), "-q",
                                 "--set", "run.checkpoint_every=2", "--set", "run.algorithms=['fedavg']"])
    assert result.exit_code == 2
    assert "algorithm 'fedavg' (Opaque) has no state_dict() or load_state_dict()" in result.stderr
    assert "run.checkpoint_every = 0" in result.stderr
    assert (tmp_path / "r.incomplete").is_dir()  # a failing run keeps its unfinished folder (docs/use/run_folders.md)
    # without checkpoints it runs (starting that folder again)
    ok = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "r"), "-q", "--overwrite",
                             "--set", "run.algorithms=['fedavg']", "--set", "budget.rounds=1"])
    assert ok.exit_code == 0, ok.output


def test_divergence_is_one_clear_line_and_keeps_the_other_algorithms(tiny_scenario, tmp_path):
    """Issue 22: the diverged algorithm is marked in summary.json, the others' results are kept, exit 1, and the
    message blames the learning rate in effect (the algorithm's own lr when it sets one)."""
    out = tmp_path / "r"
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "-q",
                                 "--set", "algorithms.fedprox.lr=1e6", "--set", "run.algorithms=['fedavg', 'fedprox']"])
    assert result.exit_code == 1
    lines = [line for line in result.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and result.stderr.strip().splitlines()[-1] == lines[0]  # notes first, the error last
    assert lines[0].startswith("error: fedprox: training diverged on device ")
    assert "lower [algorithms.fedprox] lr (= 1e+06)" in lines[0] and "train.lr" not in lines[0]
    assert " in round " in lines[0] and str(out) in lines[0]
    assert "Traceback" not in result.output
    summary = json.loads((out / "summary.json").read_text())["algorithms"]
    assert summary["fedavg"]["diverged"] is None and summary["fedavg"]["rounds"] == 3
    assert summary["fedprox"]["diverged"].startswith("fedprox: training diverged")
    assert "fedavg" in (out / "rounds.csv").read_text()
