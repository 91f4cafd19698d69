"""A per-round time limit that names the round's phase (``edgesim run --round-timeout-s``, ``EDGESIM_ROUND_TIMEOUT_S``):
the phases a round goes through, the watch's one line, the option's checks, and a run stopped by it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from edgesim.config import ConfigError
from edgesim.learning import phases
from edgesim.scenarios import round_watch
from edgesim.scenarios.cli import app
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario


def test_a_round_is_planning_then_its_marked_blocks_then_aggregation():
    phases.start_round()
    assert phases.current()[0] == "planning"
    with phases.phase("labelling"):  # the one-rule diagnostic before the local training
        assert phases.current()[0] == "labelling"
    assert phases.current()[0] == "planning"  # no training yet
    with phases.phase("training"):
        assert phases.current()[0] == "training"
    assert phases.current()[0] == "aggregation"
    with phases.phase("evaluation"):
        with phases.phase("labelling"):
            assert phases.current()[0] == "labelling"
        name, since = phases.current()
        assert name == "evaluation" and since <= time.monotonic()  # the enclosing block again
    assert phases.current()[0] == "aggregation"
    phases.start_round()
    assert phases.current()[0] == "planning"
    with pytest.raises(ValueError, match="phase 'engine': expected one of training, evaluation, labelling"):
        with phases.phase("engine"):
            pass


def test_the_watch_names_the_algorithm_the_round_and_the_phase_once():
    lines = []
    watch = round_watch.RoundWatch(0.05, "fixavg", stop=lines.append)
    with watch.round(4):
        with phases.phase("training"):
            pass
        with phases.phase("evaluation"):
            time.sleep(0.3)
    watch.close()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: --round-timeout-s 0.05: fixavg's round 4 has run 0.")
    assert "; it is in its evaluation phase (for 0." in lines[0] and lines[0].endswith("; stopping the run")
    quick = round_watch.RoundWatch(5.0, "fedavg", stop=lines.append)
    with quick.round(0):
        pass
    quick.close()
    assert len(lines) == 1  # a round within its limit: nothing


@pytest.mark.parametrize("value", ["0", "-3", "abc", "inf", "nan"])
def test_a_bad_limit_in_the_environment_is_one_line(monkeypatch, value):
    monkeypatch.setenv(round_watch.ENV, value)
    with pytest.raises(ConfigError, match=rf"EDGESIM_ROUND_TIMEOUT_S='{value}' \(--round-timeout-s\): expected a "
                                          r"positive number of seconds"):
        round_watch.timeout_from_env()
    monkeypatch.setenv(round_watch.ENV, " 2.5 ")
    assert round_watch.timeout_from_env() == 2.5
    monkeypatch.delenv(round_watch.ENV)
    assert round_watch.timeout_from_env() is None and round_watch.round_watch("fedavg") is None


def test_the_option_refuses_a_bad_value_before_any_work(tiny_scenario, tmp_path):
    result = CliRunner().invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "r"), "-q",
                                      "--round-timeout-s", "soon"])
    assert result.exit_code == 2
    assert "--round-timeout-s soon: expected a positive number of seconds" in result.output
    assert not (tmp_path / "r").exists() and not (tmp_path / "r.incomplete").exists()
    assert round_watch.ENV not in os.environ


def test_a_run_past_its_limit_is_told_where_its_round_is(tiny_scenario, tmp_path, monkeypatch):
    lines = []
    monkeypatch.setattr(round_watch, "stop_run", lines.append)  # the line, without stopping this test's process
    monkeypatch.setenv(round_watch.ENV, "0.001")
    sc = load_scenario(tiny_scenario, ['run.algorithms=["fixavg"]', "budget.rounds=1"])
    run_scenario(sc, tmp_path / "r")
    time.sleep(0.05)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("error: --round-timeout-s 0.001: fixavg's round 0 has run ")
    assert any(f"in its {p} phase" in line for p in ("planning", "training", "aggregation", "evaluation",
                                                      "labelling")), line


@pytest.mark.slow
def test_edgesim_run_stops_at_the_limit_keeping_its_rounds(tiny_scenario, tmp_path):
    """The whole command in a process of its own (SIGTERM, exit 143, the unfinished folder kept). The default
    run covers the watch's line (test_a_run_past_its_limit_is_told_where_its_round_is) and the phases."""
    out = tmp_path / "r"
    done = subprocess.run([sys.executable, "-m", "edgesim.scenarios.cli", "run", str(tiny_scenario), "--out", str(out),
                           "-q", "--set", 'run.algorithms=["fixavg"]', "--round-timeout-s", "0.001"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 143, done.stderr[-2000:]
    assert "error: --round-timeout-s 0.001: fixavg's round 0 has run " in done.stderr
    assert (tmp_path / "r.incomplete").is_dir() and not out.exists()


def test_the_line_gives_seconds_to_a_tenth_or_under_a_second_to_a_millisecond():
    assert round_watch.timeout_line(60.0, "feddure", 3, 61.27, "labelling", 0.0412) == (
        "error: --round-timeout-s 60: feddure's round 3 has run 61.3 s; it is in its labelling phase (for 0.041 s); "
        "stopping the run")
