"""The worked example of docs/writing_an_async_rule.md: an asynchronous rule installed as a package (offline,
into a ``--target`` folder on ``PYTHONPATH``), found by its entry point and run by name."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_policy_plugin import edgesim  # the CLI in a subprocess with a PYTHONPATH

DOC = Path(__file__).resolve().parents[1] / "docs" / "writing_an_async_rule.md"


@pytest.fixture
def example(tmp_path) -> Path:
    files = dict(re.findall(r"```\w+ file=(\S+)\n(.*?)```", DOC.read_text(), flags=re.S))
    assert set(files) == {"edgesim_fedbuff_cutoff.py", "pyproject.toml", "cutoff.toml"}
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name, text in files.items():
        (pkg / name).write_text(text)
    return pkg


def test_the_documented_rule_installs_and_runs(example, tmp_path):
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(target), str(example)], capture_output=True, text=True,
                         timeout=300)
    assert pip.returncode == 0, pip.stderr
    work = tmp_path / "work"  # not the package's folder: only the entry point can find the module
    work.mkdir()
    scenario = work / "cutoff.toml"
    scenario.write_text((example / "cutoff.toml").read_text())
    done = edgesim("run", str(scenario), "--out", str(work / "run"), "-q", cwd=work, pythonpath=str(target))
    assert done.returncode == 0, done.stderr
    with open(work / "run" / "rounds.csv", newline="") as f:
        rounds = list(csv.DictReader(f))
    assert len(rounds) == 12 and [float(r["version"]) for r in rounds] == list(range(1, 13))
    with open(work / "run" / "devices.csv", newline="") as f:
        devices = list(csv.DictReader(f))
    assert sum(r["arrived"] == "True" for r in devices) == 12 * 2  # K = 2 arrivals per flush
    assert 'round_mode = "fedbuff_cutoff"' in (work / "run" / "config.toml").read_text()
    unknown = edgesim("run", str(scenario), "--out", str(work / "x"), "-q", cwd=work)  # not installed here
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert "round_mode = 'fedbuff_cutoff': expected one of 'sync', 'deadline', 'fedasync', 'fedbuff'" in unknown.stderr
    assert not (work / "x").exists()
