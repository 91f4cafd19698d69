"""The worked example of docs/extend/writing_an_access_scheme.md: an access scheme installed as a package (offline, into a
``--target`` folder on ``PYTHONPATH``) and run by name; the same module by ``[run] plugins``."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from cli_here import edgesim_here
from documented_plugin import edgesim, install, write_package

from edgesim.radio import shannon_rate_bps

DOC = Path(__file__).resolve().parents[1] / "docs" / "extend" / "writing_an_access_scheme.md"
N0 = 10 ** (-174 / 10) / 1e3  # the default noise PSD, -174 dBm/Hz, in W/Hz




@pytest.fixture
def example(tmp_path) -> Path:
    return write_package(DOC, tmp_path, {"edgesim_dedicated.py", "pyproject.toml", "dedicated.toml"})


def _check_airtimes(devices_csv: Path, channel_hz: float) -> None:
    rows = list(csv.DictReader(devices_csv.open()))
    assert rows
    for row in rows:
        assert float(row["bandwidth_hz"]) == channel_hz
        rate = shannon_rate_bps(channel_hz, float(row["channel_gain"]), float(row["tx_power_w"]), N0)
        assert float(row["upload_airtime_s"]) == pytest.approx(1e6 / rate, rel=1e-9)


def test_the_documented_scheme_installs_lists_and_runs(example, tmp_path):
    target, work, scenario = install(example, tmp_path, "dedicated.toml")
    listed = edgesim("list", "access", cwd=work, pythonpath=str(target))
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^dedicated\s+Dedicated channels: each device alone", listed.stdout, re.M)
    assert re.search(r"^\s+channel_hz\b", listed.stdout, re.M)
    assert re.search(r"^\s+channel_hz\b.*each device's own channel$", listed.stdout, re.M)  # its key(...) meaning
    done = edgesim("run", str(scenario), "--out", str(work / "run"), "-q", cwd=work, pythonpath=str(target))
    assert done.returncode == 0, done.stderr
    _check_airtimes(work / "run" / "devices.csv", 100e3)
    assert "channel_hz = 100000.0" in (work / "run" / "config.toml").read_text()
    wide = edgesim("run", str(scenario), "--set", "access.channel_hz=2e5", "--out", str(work / "w"), "-q", cwd=work,
                   pythonpath=str(target))
    assert wide.returncode == 2 and wide.stderr.count("\n") == 1, wide.stderr
    assert ("[access]: channel_hz = 200000.0: expected at most bandwidth_hz / n_devices = 100000.0 Hz"
            in wide.stderr)
    assert not (work / "w").exists()
    unknown = edgesim_here("run", scenario, "--out", work / "x", "-q")  # not installed in this process
    assert unknown.returncode == 2 and "access = 'dedicated': expected one of 'tdma', 'fdma'" in unknown.stderr


@pytest.mark.slow  # ~3 s, a process: the documented scheme installed and run by name (its airtimes checked) and
# test_plugins.py::test_run_plugins_imports_a_module_from_the_current_folder ([run] plugins from the current folder)
def test_run_plugins_imports_the_scheme_from_the_current_folder(example):
    scenario = example / "dedicated.toml"
    scenario.write_text(scenario.read_text().replace("[run]\n", '[run]\nplugins = ["edgesim_dedicated"]\n'))
    done = edgesim("run", str(scenario), "--out", str(example / "run"), "-q", cwd=example)
    assert done.returncode == 0, done.stderr
    assert 'access = "dedicated"' in (example / "run" / "config.toml").read_text()
    _check_airtimes(example / "run" / "devices.csv", 100e3)


def test_a_plugin_taking_a_builtin_name_is_refused_naming_both(example):
    module = example / "edgesim_clash.py"
    module.write_text((example / "edgesim_dedicated.py").read_text().replace('register_access("dedicated")',
                                                                          'register_access("fdma")'))
    scenario = example / "dedicated.toml"
    scenario.write_text(scenario.read_text().replace("[run]\n", '[run]\nplugins = ["edgesim_clash"]\n'))
    done = edgesim("run", str(scenario), "--out", str(example / "run"), "-q", cwd=example)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert ("access scheme 'fdma' is registered twice: by edgesim.access.classic.Fdma and again by "
            "edgesim_clash.Dedicated" in done.stderr)
