"""A deadline no device meets even alone with the whole band (issue 53 item 4): ``deadline_feasible`` would choose no
device in any round, so the run is refused before any round, in one line (docs/use/run_folders.md, the fault matrix)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from edgesim.config import ConfigError, SystemConfig
from edgesim.scenarios.feasibility import least_round_times_s
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

PHYSICS = """
name = "deadline_physics"
seed = 1

[system]
n_devices = 4
bandwidth_hz = 1e6
cpu_freq_hz = [5e8, 1e9, 1.5e9, 2e9]
access = "fdma"
rayleigh_fading = {fading}

[budget]
rounds = 3
round_mode = "deadline"
deadline_s = {deadline_s}

[workload]
cycles_per_sample = 1e7
samples_per_device = 50
model_bits = 1e6

[run]
backend = "parametric"
clients_per_round = 2

[resources]
scheduling = "deadline_feasible"
"""


def _system(**kw) -> SystemConfig:
    return SystemConfig(**{"n_devices": 2, "bandwidth_hz": 1e6, "tx_power_dbm": 30.0, "noise_psd_dbm_per_hz": -174.0,
                           "cpu_freq_hz": [1e9, 2e9], **kw})


def _unit_snr_gain(system: SystemConfig) -> float:
    """The gain with g p / (N0 B) = 1, so that r(B) = B log2(2) = B."""
    return system.noise_psd_w_per_hz * float(system.bandwidth_hz) / system.tx_power_w[0]


def test_least_round_time_is_compute_at_full_speed_plus_upload_over_the_whole_band_by_hand():
    system = _system()
    g = _unit_snr_gain(system)
    # device 0: 2e9 cycles / 1e9 Hz = 2 s, 1e6 bits / 1e6 bit/s = 1 s; device 1: 2e9 / 2e9 = 1 s, 3e6 / 1e6 = 3 s
    times = least_round_times_s([(2e9, 1e6), (2e9, 3e6)], system, [g, g])
    np.testing.assert_allclose(times, [3.0, 4.0], rtol=1e-12)


def test_least_round_time_without_upload_is_compute_alone_and_falls_with_a_better_channel():
    system = _system()
    g = _unit_snr_gain(system)
    np.testing.assert_allclose(least_round_times_s([(1e9, 0.0), (1e9, 0.0)], system, [g, 0.0]), [1.0, 0.5])
    gains = g * np.array([1.0, 10.0])
    worse, better = least_round_times_s([(1e9, 1e6), (1e9, 1e6)], _system(cpu_freq_hz=1e9), gains)
    assert better < worse


def _cli(scenario: Path, out: Path, *sets: str, timeout_s: float = 90) -> tuple[int, list[str]]:
    cmd = [sys.executable, "-m", "edgesim.scenarios.cli", "run", str(scenario), "--out", str(out), "-q"]
    for s in sets:
        cmd += ["--set", s]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout_s} s: {' '.join(sets)}")
    return done.returncode, [line for line in done.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("mode", [
    ["budget.round_mode=deadline", "budget.deadline_s=1e-6"],
    ["budget.round_mode=fedasync", "budget.deadline_s=1e-6"],
])
def test_a_deadline_no_device_meets_alone_is_refused_in_one_line_before_any_round(tiny_scenario, tmp_path, mode):
    t0 = time.monotonic()
    code, lines = _cli(tiny_scenario, tmp_path / "out", "run.algorithms=[fedavg]", "budget.rounds=3",
                       "resources.scheduling=deadline_feasible", *mode)
    assert time.monotonic() - t0 < 90
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    line = lines[0]
    assert "[budget] deadline_s = 1e-06 s" in line and "the quickest, device" in line and "expected a deadline >=" in line
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.incomplete").exists()


def test_physics_only_deadline_below_the_quickest_device_is_refused_naming_its_time(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(PHYSICS.format(fading="false", deadline_s=1e-3))
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as e:
        run_scenario(load_scenario(p), tmp_path / "out")
    assert time.monotonic() - t0 < 30
    msg = str(e.value)
    assert "\n" not in msg and "[budget] deadline_s = 0.001 s" in msg and "'deadline_feasible'" in msg, msg
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.incomplete").exists()


def test_a_feasible_deadline_still_runs_with_devices_in_every_round(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(PHYSICS.format(fading="false", deadline_s=10.0))
    out = run_scenario(load_scenario(p), tmp_path / "out")
    a = json.loads((out / "summary.json").read_text())["algorithms"]
    (alg,) = a.values()
    assert alg["rounds"] == 3 and alg["empty_rounds"] == [] and not alg["no_device_scheduled"]


def test_with_rayleigh_fading_a_lucky_round_might_meet_it_so_it_is_not_refused(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(PHYSICS.format(fading="true", deadline_s=1e-3))
    out = run_scenario(load_scenario(p), tmp_path / "out")  # runs; the empty-round warning speaks after it
    summary = json.loads((out / "summary.json").read_text())
    assert summary["warnings"] and all(a["no_device_scheduled"] for a in summary["algorithms"].values())
