"""The worked example of docs/extend/writing_a_policy.md: a resource policy installed as a package (offline, into a
``--target`` folder on ``PYTHONPATH``) and run by name; the same module by ``[run] plugins``."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest
from cli_here import edgesim_here
from documented_plugin import edgesim, install, write_package

from edgesim.resources.formulas import rate_bps

DOC = Path(__file__).resolve().parents[1] / "docs" / "extend" / "writing_a_policy.md"




@pytest.fixture
def example(tmp_path) -> Path:
    return write_package(DOC, tmp_path, {"edgesim_airtime_share.py", "pyproject.toml", "airtime.toml"})


def _check_bands(devices_csv: Path, bandwidth_hz: float, n0: float) -> None:
    rows = list(csv.DictReader(devices_csv.open()))
    assert rows
    by_round: dict[str, list] = {}
    for row in rows:
        by_round.setdefault(row["round"], []).append(row)
    for rows_r in by_round.values():
        g = np.array([float(r["channel_gain"]) for r in rows_r])
        p = np.array([float(r["tx_power_w"]) for r in rows_r])
        b = np.array([float(r["bandwidth_hz"]) for r in rows_r])
        airtime_alone = 1e6 / rate_bps(bandwidth_hz, g, p, n0)
        assert b == pytest.approx(bandwidth_hz * airtime_alone / airtime_alone.sum(), rel=1e-9)


def test_the_documented_policy_installs_lists_and_runs(example, tmp_path):
    target, work, scenario = install(example, tmp_path, "airtime.toml")
    listed = edgesim("list", "policies", cwd=work, pythonpath=str(target))
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^bandwidth\.airtime_share\s+FDMA: each uploader's band in proportion", listed.stdout, re.M)
    done = edgesim("run", str(scenario), "--out", str(work / "run"), "-q", cwd=work, pythonpath=str(target))
    assert done.returncode == 0, done.stderr
    n0 = 10 ** (-174 / 10) / 1e3  # the default noise PSD, -174 dBm/Hz, in W/Hz
    _check_bands(work / "run" / "devices.csv", 1e6, n0)
    plan = edgesim("plan", str(scenario), cwd=work, pythonpath=str(target))
    assert plan.returncode == 0 and "Round 0 under [resources]" in plan.stdout and "airtime_share" in plan.stdout
    tdma = edgesim("run", str(scenario), "--set", "system.access=tdma", "--out", str(work / "t"), "-q", cwd=work,
                   pythonpath=str(target))
    assert tdma.returncode == 2 and tdma.stderr.count("\n") == 1
    assert "bandwidth = 'airtime_share' applies to [system] access = 'fdma'" in tdma.stderr
    assert not (work / "t").exists()
    unknown = edgesim_here("run", scenario, "--out", work / "x", "-q")  # not installed in this process
    assert unknown.returncode == 2 and "bandwidth = 'airtime_share': expected one of" in unknown.stderr


@pytest.mark.slow  # ~3 s, a process: the documented policy installed and run by name (its bands checked) and
# test_plugins.py::test_run_plugins_imports_a_module_from_the_current_folder ([run] plugins from the current folder)
def test_run_plugins_imports_the_policy_from_the_current_folder(example):
    scenario = example / "airtime.toml"
    scenario.write_text(scenario.read_text().replace("[run]\n", '[run]\nplugins = ["edgesim_airtime_share"]\n'))
    done = edgesim("run", str(scenario), "--out", str(example / "run"), "-q", cwd=example)
    assert done.returncode == 0, done.stderr
    assert 'bandwidth = "airtime_share"' in (example / "run" / "config.toml").read_text()


def test_the_documented_lyapunov_policy_holds_the_average_energy_budget(tmp_path):
    """The drift-plus-penalty example of docs/extend/writing_a_policy.md, 60 rounds of 6 devices (K = 3, 1e8 cycles at
    1-2 GHz and 1 Mbit a round at 23 dBm): every device ends within E_k ≤ t Ē + V/ê_k + ê_k of its budget; the
    uniform draw of the same cell spends above t Ē on every device."""
    import importlib.util

    from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
    from edgesim.curve import ParametricBackend
    from edgesim.engine import Simulation
    from edgesim.resources import POLICIES, ResourcesConfig

    text = dict(re.findall(r"```python example=(\S+)\n(.*?)```", DOC.read_text(), flags=re.S))
    path = tmp_path / "edgesim_lyapunov_energy.py"
    path.write_text(text["edgesim_lyapunov_energy.py"])
    spec = importlib.util.spec_from_file_location("edgesim_lyapunov_energy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        def run(scheduling):
            system = SystemConfig(n_devices=6, bandwidth_hz=1e6, cpu_freq_hz=[1e9, 1.5e9, 2e9] * 2, access="fdma",
                                  cell_radius_m=200, min_distance_m=10)
            work = WorkloadConfig(cycles_per_sample=1e6, samples_per_device=100, model_bits=1e6)
            sim = Simulation(system, BudgetConfig(total_time_s=600.0, rounds=60), ParametricBackend(6, 3, work, seed=1),
                             seed=4, resources=ResourcesConfig(scheduling=scheduling))
            recs = sim.run()
            spent = np.zeros(6)
            taken = np.zeros(6)
            for rec in recs:
                for row in rec.devices:
                    spent[row.device] += row.radio_energy_j + row.compute_energy_j
                    taken[row.device] += 1
            return spent, taken

        t = 60
        spent, taken = run("lyapunov_energy")
        assert taken.min() > 0  # every device takes part
        per_round = spent / taken
        assert (spent <= t * module.AVERAGE_ENERGY_J + module.V_J2 / per_round + per_round * (1 + 1e-9)).all()
        uniform, _ = run("random")
        assert (uniform > t * module.AVERAGE_ENERGY_J).all()
    finally:
        POLICIES["scheduling"].pop("lyapunov_energy", None)
