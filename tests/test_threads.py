"""Torch threads: ``[run] threads`` (default 1, ``"auto"`` = the cores), set by ``run`` and ``sweep`` alike."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from edgesim.config import ConfigError
from edgesim.scenarios.cli import app
from edgesim.scenarios.schema import load_scenario
from edgesim.scenarios.sweep import make_spec, run_sweep
from edgesim.scenarios.threads import resolve_threads, threads, usable_cores

runner = CliRunner()
FAST = ["run.algorithms=['fedavg', 'local']", "budget.rounds=2"]


def test_resolve_threads():
    assert resolve_threads(1) == 1 and resolve_threads(7) == 7
    assert resolve_threads("auto") == usable_cores() >= 1
    for bad in (0, -1, 1.5, "two", True, None):
        with pytest.raises(ValueError, match="threads"):
            resolve_threads(bad)


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "true", '"two"'])
def test_a_bad_thread_count_is_one_line_naming_the_key(tiny_scenario, value):
    with pytest.raises(ConfigError, match=r"run\.threads|threads = "):
        load_scenario(tiny_scenario, [f"run.threads={value}"])


def test_the_default_is_one_thread_and_auto_is_accepted(tiny_scenario):
    assert load_scenario(tiny_scenario).learning["run"].threads == 1
    assert load_scenario(tiny_scenario, ['run.threads="auto"']).learning["run"].threads == "auto"


def test_threads_sets_then_restores_the_process_setting():
    before, env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    with threads(before + 1):
        assert torch.get_num_threads() == before + 1 and os.environ["OMP_NUM_THREADS"] == str(before + 1)
    assert torch.get_num_threads() == before and os.environ.get("OMP_NUM_THREADS") == env


def test_run_trains_with_one_thread_whatever_the_process_had_and_records_it(tiny_scenario, tmp_path, monkeypatch):
    """A run started from a process with 2 torch threads trains with the scenario's 1, records it, and gives
    the process its 2 back; its rounds are byte for byte those of the same run in a sweep."""
    monkeypatch.chdir(tmp_path)
    torch.set_num_threads(2)
    try:
        args = ["run", str(tiny_scenario), "--out", "r", "-q", "--seed", "3", "--set", "system.bandwidth_hz=1e6"]
        for o in FAST:
            args += ["--set", o]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)
    config = tomllib.loads((tmp_path / "r" / "config.toml").read_text())
    provenance = json.loads((tmp_path / "r" / "run.json").read_text())
    assert config["run"]["threads"] == 1 and provenance["versions"]["torch_threads"] == 1
    sweep = run_sweep(make_spec(tiny_scenario, ["system.bandwidth_hz=1e6"], 1, FAST), tmp_path / "s", jobs=1,
                      progress=False, plots=False)
    assert not sweep.failed and sweep.threads == 1
    (folder,) = [p for p in (tmp_path / "s").iterdir() if p.is_dir()]
    for name in ("rounds.csv", "devices.csv", "events.csv"):
        assert (folder / name).read_bytes() == (tmp_path / "r" / name).read_bytes(), name


def test_threads_option_is_the_scenario_key(tiny_scenario, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["run", str(tiny_scenario), "--out", "r", "-q", "--threads", "2", "--set", "budget.rounds=1",
            "--set", "run.algorithms=['local']"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    config = tomllib.loads((tmp_path / "r" / "config.toml").read_text())
    provenance = json.loads((tmp_path / "r" / "run.json").read_text())
    assert config["run"]["threads"] == 2 and provenance["versions"]["torch_threads"] == 2
    bad = runner.invoke(app, ["run", str(tiny_scenario), "--out", "x", "--threads", "zero"])
    assert bad.exit_code == 2 and "--threads zero" in bad.stderr and "Traceback" not in bad.output
    assert not (tmp_path / "x").exists()


def test_the_command_ends_after_its_atexit_handlers_and_output_without_the_interpreter_teardown():
    """``exit_now``: the atexit handlers run, stdout and stderr are flushed, the code is sys.exit's."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    probe = ("import atexit, sys; from edgesim.scenarios.cli import exit_now; "
             "atexit.register(lambda: print('handler ran')); print('said', end=''); "
             "print('note', file=sys.stderr, end=''); exit_now({code!r})")
    for code, rc in ((3, 3), (None, 0), ("one line", 1)):
        done = subprocess.run([sys.executable, "-c", probe.format(code=code)], cwd=repo, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == rc and done.stdout == "saidhandler ran\n"
        assert done.stderr.startswith("note") and (code != "one line" or done.stderr.endswith("one line\n"))
