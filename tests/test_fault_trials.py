"""Issue 40, item 2: fault trials over what the other issues added — the ones no other test covers (the covering
tests are listed in docs/use/run_folders.md, "Faults: what you see, what is kept").

- a resource policy plugin: negative or NaN powers (one line naming it and the round); one that raises mid-run,
  then ``--resume`` once fixed: the folder stays resumable and ends as an uninterrupted run with the fixed plugin;
- an asynchronous run: SIGTERM mid-run (one line, exit 143) then SIGKILL after ``--resume``, then ``--resume`` to
  the bytes of an uninterrupted run, while ``rounds.csv`` is read over and over: no reader sees a torn line;
- a plugin written with the old imports (``import learning``, ``from scenarios ...``): one line with the new names.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from test_resources import _sim
from test_safety import PHYSICS, cwd, one_error_line, run  # noqa: F401 - fixtures

from edgesim.resources import ResourcesConfig
from edgesim.resources.policies import POLICIES, register_policy
from edgesim.resources.round import PolicyError
from edgesim.results.reading import read_live_csv
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

OUTPUTS = ("rounds.csv", "devices.csv", "events.csv", "summary.json", "config.toml")


# --- resource policies ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer, words", [
    (lambda r: -np.ones(r.devices.size), "got -1.0; expected finite powers in W > 0"),
    (lambda r: np.full(r.devices.size, np.nan), "got nan; expected finite powers in W > 0"),
    (lambda r: np.zeros(r.devices.size), "got 0.0; expected finite powers in W > 0"),
    (lambda r: r.tx_power_max_w * 2, "at most its configured maximum"),
])
def test_a_plugin_power_policy_out_of_range_is_one_line_naming_it_and_the_round(answer, words):
    @register_policy("power", "_test_bad_power")
    class Bad:
        def allocate(self, r):
            return answer(r)

    try:
        sim = _sim("fdma", ResourcesConfig(power="_test_bad_power"))
        with pytest.raises(PolicyError) as e:
            sim.run_round()
        msg = str(e.value)
        assert msg.startswith("[resources] power = '_test_bad_power': round 0: device ") and words in msg, msg
        assert "\n" not in msg and sim.round_index == 0
    finally:
        POLICIES["power"].pop("_test_bad_power")


POLICY_PLUGIN = '''
import numpy as np
from edgesim.resources.policies import register_policy

FAIL_AT = [None]  # the round in which the policy raises (None: it never does)


@register_policy("bandwidth", "flaky_share")
class FlakyShare:
    """Bands in proportion to 1 + the device id (a share that differs from the equal one)."""

    def allocate(self, r):
        if FAIL_AT[0] is not None and r.round_index >= FAIL_AT[0]:
            raise RuntimeError("the share table is not loaded")
        w = 1.0 + r.devices.astype(float)
        return r.bandwidth_hz * w / w.sum()
'''


def test_a_policy_plugin_that_raises_mid_run_leaves_a_resumable_folder(cwd):
    """Round 2 raises: one line naming the policy and the round, exit 2, the unfinished folder with its checkpoints;
    fixed, --resume ends with the bytes of a run that never failed."""
    (cwd / "flaky_policy.py").write_text(POLICY_PLUGIN)
    (cwd / "p.toml").write_text(PHYSICS.replace("[system]\n", '[system]\naccess = "fdma"\n') + 'plugins = ["flaky_policy"]\n'
                                + '\n[resources]\nbandwidth = "flaky_share"\n')
    sets = ["--set", "run.checkpoint_every=1", "-q"]
    try:
        assert run("run", "p.toml", "--out", "clean", *sets).exit_code == 0
        sys.modules["flaky_policy"].FAIL_AT[0] = 2
        line = one_error_line(run("run", "p.toml", "--out", "R", *sets))
        assert "[resources] bandwidth = 'flaky_share': round 2: raised RuntimeError: the share table is not loaded" \
            in line and "R.incomplete" in line and "--resume" in line, line
        assert sorted(p.name for p in (cwd / "R.incomplete" / "checkpoints").iterdir()) == ["parametric.pt"]
        sys.modules["flaky_policy"].FAIL_AT[0] = None  # fixed
        result = run("run", "p.toml", "--out", "R", "--resume", *sets)
        assert result.exit_code == 0, result.output
    finally:
        sys.modules.pop("flaky_policy", None)
        POLICIES["bandwidth"].pop("flaky_share", None)
    for f in OUTPUTS:
        assert (cwd / "R" / f).read_bytes() == (cwd / "clean" / f).read_bytes(), f


# --- the namespace move ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source, old, new", [
    ("from learning.algorithms import register\n", "learning", "edgesim.learning"),
    ("import scenarios.schema\n", "scenarios", "edgesim.scenarios"),
    ("from plots.curves import plot_accuracy\n", "plots", "edgesim.plots"),
])
def test_a_plugin_with_the_old_imports_is_one_line_with_the_new_names(cwd, source, old, new):
    module = f"oldstyle_{old}"  # one name per case: an earlier case's folder stays on sys.path
    (cwd / f"{module}.py").write_text(source)
    (cwd / "p.toml").write_text(PHYSICS + f'plugins = ["{module}"]\n')
    for command in ("plan", "run"):
        line = one_error_line(run(command, "p.toml", "--out", "R") if command == "run" else run(command, "p.toml"))
        assert f"[run] plugins: '{module}' imports '{old}', which is now '{new}'" in line, line
        assert "learning -> edgesim.learning, scenarios -> edgesim.scenarios, plots -> edgesim.plots" in line
    assert not list(cwd.glob("R*"))
    assert old not in sys.modules or "edgesim" in str(getattr(sys.modules[old], "__file__", ""))  # no second copy


# --- an asynchronous run: SIGTERM, SIGKILL, resume, and rounds.csv read all along -------------------------------


ASYNC = ["budget.round_mode=fedasync", "budget.rounds=6000", "run.checkpoint_every=500", "run.max_time_s=1e9"]


def _start(scenario: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "edgesim.scenarios.cli", "run", str(scenario), "--out", str(out), "-q", *extra]
    for s in ASYNC:
        cmd += ["--set", s]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _when(proc: subprocess.Popen, ready, timeout_s: float = 300) -> None:
    t0 = time.monotonic()
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the run ended (rc={proc.returncode}) first: {proc.stderr.read()}")
        if time.monotonic() - t0 > timeout_s:
            proc.kill()
            pytest.fail("the run did not get there in time")
        time.sleep(0.01)


@pytest.mark.slow
def test_an_async_run_stopped_by_sigterm_and_sigkill_resumes_and_its_rows_are_never_torn(tmp_path):
    scenario = tmp_path / "phys.toml"
    scenario.write_text(PHYSICS)
    reference = run_scenario(load_scenario(scenario, ASYNC), tmp_path / "reference")
    out, work = tmp_path / "a", tmp_path / "a.incomplete"
    torn, reads, stop = [], [0], threading.Event()

    def reader():  # the live rounds.csv, read over and over through the kills
        while not stop.is_set():
            try:
                header, rows = read_live_csv(work / "rounds.csv")
            except OSError:
                continue
            reads[0] += 1
            torn.extend(r for r in rows if len(r) != len(header))

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        ckpt = work / "checkpoints" / "parametric.pt"
        proc = _start(scenario, out)
        _when(proc, ckpt.exists)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        lines = [line for line in stderr.splitlines() if line.startswith("error:")]
        assert proc.returncode == 143 and len(lines) == 1 and "Traceback" not in stderr, stderr
        assert lines[0].startswith(f"error: interrupted: the unfinished run is in {work}") and "--resume" in lines[0]
        assert "interrupted" in (work / "INCOMPLETE").read_text()
        first = ckpt.stat().st_mtime_ns
        proc = _start(scenario, out, "--resume")
        _when(proc, lambda: ckpt.stat().st_mtime_ns != first)  # a checkpoint further on
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        time.sleep(0.2)  # the reader reads the file as the kill left it
    finally:
        stop.set()
        thread.join()
    assert reads[0] > 0 and not torn
    done = subprocess.run([sys.executable, "-m", "edgesim.scenarios.cli", "run", str(scenario), "--out", str(out),
                           "-q", "--resume", *[a for s in ASYNC for a in ("--set", s)]], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    for f in OUTPUTS:
        assert (out / f).read_bytes() == (reference / f).read_bytes(), f


def test_an_async_runs_trace_with_overlapping_intervals_is_one_line(cwd):
    """tests/test_availability.py reads such traces; here the whole command, asynchronous: one line, nothing written."""
    (cwd / "trace.csv").write_text("device,start_s,end_s\n0,0,5\n0,4,6\n")
    (cwd / "p.toml").write_text(PHYSICS + '\n[availability]\nmodel = "trace"\ntrace = "trace.csv"\n')
    for command in ("plan", "run"):
        args = ["--out", "R"] if command == "run" else []
        line = one_error_line(run(command, "p.toml", *args, "--set", "budget.round_mode=fedasync"))
        assert f"{cwd / 'trace.csv'}: row 3: start_s = 4.0: device 0's interval overlaps [0.0, 5.0) of row 2" in line
    assert not list(cwd.glob("R*"))
