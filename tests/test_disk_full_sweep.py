"""Issue 40: a full disk during a sweep (and ``run --jobs 2``) is one ``error:`` line naming the file and "No space
left", exit 1, no traceback, and every folder resumable: the same command, once there is space, writes the bytes of
a sweep that never stopped. The disk is "filled" by making edgesim's writers raise ``ENOSPC`` (monkeypatched here, or
by a plugin in the worker processes), never by filling the real disk."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest
from test_safety import PHYSICS, cwd, one_error_line, run  # noqa: F401 - fixtures

from edgesim.results.writing import LiveCsv, RunFolder

GRID = ["--grid", "system.bandwidth_hz=1e6,2e6,3e6", "--set", "run.checkpoint_every=1", "-q", "--no-plots"]
FILES = ("rounds.csv", "devices.csv", "events.csv", "summary.json", "config.toml")

# A plugin that fills the disk in worker processes only (the parent and the test process are left alone): the
# writer of rounds.csv and devices.csv rows, or a checkpoint, raises ENOSPC after DISKFULL_AFTER calls.
PLUGIN = '''
import errno, multiprocessing, os
from edgesim.results.writing import LiveCsv
from edgesim.scenarios import checkpoint

AFTER = int(os.environ.get("DISKFULL_AFTER", "1000000"))
calls = [0]


def full(path):
    calls[0] += 1
    if calls[0] > AFTER and multiprocessing.parent_process() is not None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))


append, write = LiveCsv.append, checkpoint.atomic_write_bytes


def append_(self, header, rows):
    full(self.path)
    return append(self, header, rows)


def write_(path, data):
    full(path)
    return write(path, data)


LiveCsv.append, checkpoint.atomic_write_bytes = append_, write_
'''


def same_sweeps(a: Path, b: Path) -> None:
    assert (a / "sweep.csv").read_bytes() == (b / "sweep.csv").read_bytes()
    runs = sorted(p.name for p in a.iterdir() if p.is_dir())
    assert runs and runs == sorted(p.name for p in b.iterdir() if p.is_dir())
    for name in runs:
        for f in FILES:
            assert (a / name / f).read_bytes() == (b / name / f).read_bytes(), f"{name}/{f}"


@pytest.mark.slow  # five physics-only runs with their figures: ~20 s on the shared 2-core machine at load 13
def test_a_full_disk_stops_the_sweep_in_one_line_and_it_resumes(cwd, monkeypatch):
    """--jobs 1: the second run's rows meet a full disk; the sweep stops there (the third never starts)."""
    (cwd / "phys.toml").write_text(PHYSICS)
    grid = [*GRID, "--set", "budget.rounds=2"]
    assert run("sweep", "phys.toml", *grid, "--out", "clean", "--jobs", "1").exit_code == 0
    calls, append = [0], LiveCsv.append

    def full_after_five(self, header, rows):
        calls[0] += 1
        if calls[0] > 5:  # a run appends rounds.csv and devices.csv rows each round (4): the second run's round 0
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        return append(self, header, rows)

    monkeypatch.setattr(LiveCsv, "append", full_after_five)
    line = one_error_line(run("sweep", "phys.toml", *grid, "--out", "S", "--jobs", "1"), code=1)
    assert line.startswith("error: cannot write ") and "No space left on device" in line
    assert "system.bandwidth_hz=2e6,seed=1.incomplete" in line and "the sweep stopped" in line
    assert "run the same command again" in line
    assert (cwd / "S" / "system.bandwidth_hz=1e6,seed=1" / "summary.json").is_file()
    assert (cwd / "S" / "system.bandwidth_hz=2e6,seed=1.incomplete" / "INCOMPLETE").is_file()
    assert not list((cwd / "S").glob("system.bandwidth_hz=3e6*"))  # not started after the disk was full
    monkeypatch.setattr(LiveCsv, "append", append)  # space again
    result = run("sweep", "phys.toml", *grid, "--out", "S", "--jobs", "1")
    assert result.exit_code == 0, result.output
    same_sweeps(cwd / "clean", cwd / "S")


def test_a_run_stopped_before_its_config_starts_again(cwd):
    """A run folder stopped in its first instants holds only edgesim's marker: --resume (and a sweep) start it again
    instead of refusing it as not edgesim's; a file of yours in it still makes it refused."""
    (cwd / "phys.toml").write_text(PHYSICS)
    RunFolder(cwd / "R").start()
    assert sorted(p.name for p in (cwd / "R.incomplete").iterdir()) == ["INCOMPLETE", "manifest.json"]
    line = one_error_line(run("run", "phys.toml", "--out", "R", "-q"))
    assert "holds an unfinished run; add --resume" in line
    result = run("run", "phys.toml", "--out", "R", "-q", "--resume")
    assert result.exit_code == 0 and "starting from scratch in it" in result.stderr, result.output
    assert (cwd / "R" / "summary.json").is_file() and not (cwd / "R.incomplete").exists()
    RunFolder(cwd / "U").start()
    (cwd / "U.incomplete" / "mine.txt").write_text("mine\n")
    line = one_error_line(run("run", "phys.toml", "--out", "U", "-q", "--resume"))
    assert "is not an unfinished edgesim run" in line and (cwd / "U.incomplete" / "mine.txt").exists()


def edgesim(*args: str, env: dict, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgesim.scenarios.cli", *args], cwd=cwd, env=env, timeout=timeout,
                          capture_output=True, text=True)


@pytest.fixture
def plugin_env(cwd, monkeypatch) -> dict:
    import os

    (cwd / "diskfull.py").write_text(PLUGIN)
    return {**os.environ, "PYTHONPATH": str(cwd), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def errors(proc: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in proc.stderr, proc.stderr
    return [line for line in proc.stderr.splitlines() if line.startswith("error:")]


@pytest.mark.slow
def test_a_full_disk_in_a_sweep_worker_stops_every_worker_and_resumes(cwd, plugin_env):
    """--jobs 2: a worker's run meets the full disk; one line, exit 1, the other worker stopped, the folders
    resumable to a clean sweep's bytes."""
    (cwd / "phys.toml").write_text(PHYSICS + 'plugins = ["diskfull"]\n')
    clean = edgesim("sweep", "phys.toml", *GRID, "--out", "clean", "--jobs", "2", env=plugin_env, cwd=cwd)
    assert clean.returncode == 0, clean.stderr
    proc = edgesim("sweep", "phys.toml", *GRID, "--out", "S", "--jobs", "2", env={**plugin_env, "DISKFULL_AFTER": "3"},
                   cwd=cwd)
    lines = errors(proc)
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: cannot write ") and "No space left on device" in lines[0]
    assert "the sweep stopped" in lines[0] and "(failed:" not in proc.stderr  # no per-run OSError dump
    again = edgesim("sweep", "phys.toml", *GRID, "--out", "S", "--jobs", "2", env=plugin_env, cwd=cwd)
    assert again.returncode == 0, again.stderr
    same_sweeps(cwd / "clean", cwd / "S")


@pytest.mark.slow
def test_a_full_disk_in_a_run_jobs_worker_is_one_line_and_resumes(cwd, plugin_env, tiny_scenario):
    """run --jobs 2: the worker's second checkpoint meets the full disk; one line naming the checkpoint and where
    the run is, exit 1; --resume finishes it with the bytes of an uninterrupted run."""
    (cwd / "t.toml").write_text(tiny_scenario.read_text().replace('algorithms = ["fedavg", "fedprox", "local"]',
                                                                  'algorithms = ["fedavg", "fedprox"]\n'
                                                                  'plugins = ["diskfull"]\ncheckpoint_every = 1'))
    args = ("run", "t.toml", "--jobs", "2", "-q")
    clean = edgesim(*args, "--out", "clean", env=plugin_env, cwd=cwd)
    assert clean.returncode == 0, clean.stderr
    proc = edgesim(*args, "--out", "R", env={**plugin_env, "DISKFULL_AFTER": "1"}, cwd=cwd)
    lines = errors(proc)
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "No space left on device" in lines[0] and "checkpoints" in lines[0] and "R.incomplete" in lines[0]
    again = edgesim(*args, "--out", "R", "--resume", env=plugin_env, cwd=cwd)
    assert again.returncode == 0, again.stderr
    for f in FILES:
        assert (cwd / "clean" / f).read_bytes() == (cwd / "R" / f).read_bytes(), f
