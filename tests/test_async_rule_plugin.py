"""The worked example of docs/extend/writing_an_async_rule.md: an asynchronous rule installed as a package (offline,
into a ``--target`` folder on ``PYTHONPATH``), found by its entry point and run by name."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from cli_here import edgesim_here
from documented_plugin import edgesim, install, write_package

DOC = Path(__file__).resolve().parents[1] / "docs" / "extend" / "writing_an_async_rule.md"


@pytest.fixture
def example(tmp_path) -> Path:
    return write_package(DOC, tmp_path, {"edgesim_fedbuff_cutoff.py", "pyproject.toml", "cutoff.toml"})


def test_the_documented_rule_installs_and_runs(example, tmp_path):
    target, work, scenario = install(example, tmp_path, "cutoff.toml")
    done = edgesim("run", str(scenario), "--out", str(work / "run"), "-q", cwd=work, pythonpath=str(target))
    assert done.returncode == 0, done.stderr
    with open(work / "run" / "rounds.csv", newline="") as f:
        rounds = list(csv.DictReader(f))
    assert len(rounds) == 12 and [float(r["version"]) for r in rounds] == list(range(1, 13))
    with open(work / "run" / "devices.csv", newline="") as f:
        devices = list(csv.DictReader(f))
    assert sum(r["arrived"] == "True" for r in devices) == 12 * 2  # K = 2 arrivals per flush
    assert 'round_mode = "fedbuff_cutoff"' in (work / "run" / "config.toml").read_text()
    unknown = edgesim_here("run", scenario, "--out", work / "x", "-q")  # not installed in this process
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert "round_mode = 'fedbuff_cutoff': expected one of 'sync', 'deadline', 'fedasync', 'fedbuff'" in unknown.stderr
    assert not (work / "x").exists()
