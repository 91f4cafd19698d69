"""`edgesim sweep`: grid parsing and names, up-front validation, resume by skipping, executor-independent results."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import TINY_SCENARIO
from ray_head import ray_head
from typer.testing import CliRunner

from edgesim.config import ConfigError
from edgesim.results.writing import add_to_manifest
from edgesim.scenarios.cli import app
from edgesim.scenarios.sweep import make_spec, parse_grid, run_sweep, split_values

runner = CliRunner()
# 2 bandwidths x 2 seeds of a 2-round, 2-algorithm tiny scenario.
GRID = ["system.bandwidth_hz=2.5e5,1e6"]
FAST = ["run.algorithms=['fedavg', 'local']", "budget.rounds=2"]
RUN_FILES = ("rounds.csv", "devices.csv", "events.csv", "summary.json")


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("scenario") / "tiny.toml"
    p.write_text(TINY_SCENARIO)
    return p


@pytest.fixture(scope="module")
def local_sweep(scenario, tmp_path_factory) -> Path:
    """The reference: the local executor with one job (in this process)."""
    out = tmp_path_factory.mktemp("sweeps") / "jobs1"
    result = run_sweep(make_spec(scenario, GRID, 2, FAST), out, jobs=1, progress=False, plots=False)
    assert not result.failed, result.failed
    return out


def test_a_sweep_without_plots_draws_no_run_figures_either(local_sweep):
    runs = [p for p in local_sweep.iterdir() if p.is_dir()]
    assert runs and all((r / "rounds.csv").is_file() and not list(r.glob("accuracy_vs_*")) for r in runs)
    assert not list(local_sweep.glob("*.png"))


def assert_same_sweep(a: Path, b: Path) -> None:
    assert (a / "sweep.csv").read_bytes() == (b / "sweep.csv").read_bytes()
    runs = [r["run"] for r in csv.DictReader(open(a / "sweep.csv"))]
    for run in runs:
        for name in RUN_FILES:
            assert (a / run / name).read_bytes() == (b / run / name).read_bytes(), f"{run}/{name}"


def test_values_split_on_top_level_commas_only():
    assert split_values("1e6, 2e6") == ["1e6", "2e6"]
    assert split_values('["fedavg", "local"],["fedavg"]') == ['["fedavg", "local"]', '["fedavg"]']
    assert split_values("'a,b',c") == ["'a,b'", "c"]


def test_grid_values_are_parsed_as_toml():
    axis = parse_grid("system.bandwidth_hz=1e6,2e6")
    assert axis.key == "system.bandwidth_hz" and axis.values == (1e6, 2e6) and axis.texts == ("1e6", "2e6")
    assert parse_grid("system.access=tdma,fdma").values == ("tdma", "fdma")
    assert parse_grid("run.algorithms=['fedavg'],['local', 'fedavg']").values == (["fedavg"], ["local", "fedavg"])
    assert parse_grid("system.tx_power_dbm = 10, 23").values == (10, 23)
    for bad, message in [("system.bandwidth_hz", "expected KEY=V1,V2"), ("system.bandwidth_hz=1e6,,2e6", "empty value"),
                         ("system.bandwidth_hz=1e6,1000000.0", "appears twice")]:
        with pytest.raises(ConfigError, match=message):
            parse_grid(bad)


def test_run_names_are_the_grid_values_in_grid_order_seed_last(scenario):
    spec = make_spec(scenario, ["system.bandwidth_hz=1e6,2e6", "system.tx_power_dbm=20"], 2, [])
    runs = spec.runs()
    assert [r.name for r in runs] == [
        "system.bandwidth_hz=1e6,system.tx_power_dbm=20,seed=3",  # the tiny scenario's seed is 3
        "system.bandwidth_hz=1e6,system.tx_power_dbm=20,seed=4",
        "system.bandwidth_hz=2e6,system.tx_power_dbm=20,seed=3",
        "system.bandwidth_hz=2e6,system.tx_power_dbm=20,seed=4",
    ]
    assert runs[0].overrides == ("system.bandwidth_hz=1e6", "system.tx_power_dbm=20", "seed=3")
    assert runs[0].values == (("system.bandwidth_hz", 1e6), ("system.tx_power_dbm", 20), ("seed", 3))
    names = [r.name for r in make_spec(scenario, ["run.algorithms=['fedavg'],[\"local\"]", "seed=1,7"], None, []).runs()]
    assert names == ["run.algorithms=[fedavg],seed=1", "run.algorithms=[fedavg],seed=7",
                     "run.algorithms=[local],seed=1", "run.algorithms=[local],seed=7"]


@pytest.mark.parametrize("args, message", [
    (["--grid", "system.bandwith_hz=1e6,2e6"], "unknown key 'bandwith_hz'"),
    (["--grid", "system.bandwidth_hz=1e6,-5"], "bandwidth_hz = -5"),
    (["--grid", "run.algorithms=['fedavg'],['fedmagic']"], "unknown algorithm 'fedmagic'"),
    (["--grid", "seed=1,2", "--seeds", "2"], "give one of them"),
    (["--grid", "seed=:"], "value : is not a seed"),
    (["--grid", "seed=1,-2"], "value -2 is not a seed"),
    (["--grid", "seed=1.5"], "value 1.5 is not a seed"),
    (["--grid", "system.bandwidth_hz=1e6", "--executor", "spark"], "--executor 'spark'"),
])
def test_a_bad_grid_is_one_clear_error_before_anything_runs(scenario, tmp_path, args, message):
    out = tmp_path / "sweep"
    result = runner.invoke(app, ["sweep", str(scenario), *args, "--out", str(out), "-q"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()


def test_sweep_csv_has_one_row_per_run_from_the_summaries(local_sweep):
    rows = list(csv.DictReader(open(local_sweep / "sweep.csv")))
    assert [(r["system.bandwidth_hz"], r["seed"]) for r in rows] == [
        ("250000.0", "3"), ("250000.0", "4"), ("1000000.0", "3"), ("1000000.0", "4")]
    assert all(r["status"] == "ok" and r["fedavg_rounds"] == "2" and r["local_rounds"] == "2" for r in rows)
    for r in rows:
        assert 0 <= float(r["fedavg_final_accuracy"]) <= 1
        assert float(r["fedavg_bits_up"]) > 0 and float(r["local_bits_up"]) == 0  # Local never uploads
        assert float(r["fedavg_energy_j"]) > 0
        assert {"fedavg_time_to_0.5_s", "fedavg_time_to_0.9_s", "fedavg_bits_down"} <= set(r)
    # a narrower band makes the same rounds take longer on the clock
    assert float(rows[0]["fedavg_simulated_time_s"]) > float(rows[2]["fedavg_simulated_time_s"])


def test_two_jobs_give_the_same_bytes_as_one(scenario, local_sweep, tmp_path):
    out = tmp_path / "jobs2"
    result = run_sweep(make_spec(scenario, GRID, 2, FAST), out, jobs=2, progress=False, plots=False)
    assert not result.failed and result.jobs == 2
    assert_same_sweep(local_sweep, out)


def test_a_killed_sweep_resumes_by_skipping_finished_runs(scenario, local_sweep, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(local_sweep, out)
    victim = "system.bandwidth_hz=1e6,seed=4"
    os.rename(out / victim, out / f"{victim}.incomplete")  # as a run killed before it finished
    (out / f"{victim}.incomplete" / "INCOMPLETE").write_text("killed\n")
    add_to_manifest(out / f"{victim}.incomplete", "INCOMPLETE")  # a killed run had listed its marker
    (out / "sweep.csv").unlink()
    log = io.StringIO()
    result = run_sweep(make_spec(scenario, GRID, 2, FAST), out, jobs=1, plots=False, stream=log)
    assert not result.failed
    assert log.getvalue().count("skipped (finished)") == 3 and f"{victim}: ok" in log.getvalue()
    assert_same_sweep(local_sweep, out)
    # the same folder with other fixed overrides is refused, not silently mixed
    with pytest.raises(ConfigError, match=r"different scenario \(train\.lr: 0\.05 -> 0\.01\)"):
        run_sweep(make_spec(scenario, GRID, 2, [*FAST, "train.lr=0.01"]), out, jobs=1, progress=False, plots=False)


def test_a_run_records_the_sweeps_command_not_its_workers(scenario, tmp_path):
    """run.json's command is the sweep's, which the task carries (a Ray worker's own argv is Ray's)."""
    from edgesim.scenarios.sweep import run_one

    spec = make_spec(scenario, GRID, 1, FAST)
    run = spec.runs()[0]
    argv = ["edgesim", "sweep", "given.toml", "--grid", "x=1"]
    task = {"scenario": spec.scenario, "overrides": list(run.overrides), "out": str(tmp_path / run.name),
            "name": run.name, "threads": 1, "cwd": os.getcwd(), "argv": argv}
    assert run_one(task)["status"] == "ok"
    assert json.loads((tmp_path / run.name / "run.json").read_text())["command"] == argv


@pytest.mark.slow  # ~30 s: Ray's start
def test_ray_gives_the_same_bytes_as_the_local_executor(scenario, local_sweep, tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "ray"
    result = run_sweep(make_spec(scenario, GRID, 2, FAST), out, jobs=2, executor="ray", progress=False, plots=False)
    assert not result.failed, result.failed
    assert_same_sweep(local_sweep, out)
    assert {tuple(json.loads(p.read_text())["command"]) for p in out.glob("*/run.json")} == {tuple(sys.argv)}


@pytest.mark.slow  # ~30 s: `ray start --head`, then a sweep joins it by address
def test_sweep_joins_a_cluster_from_ray_start_head(scenario, local_sweep, tmp_path):
    pytest.importorskip("ray")
    with ray_head() as address:
        out = tmp_path / "cluster"
        result = runner.invoke(app, ["sweep", str(scenario), "--grid", GRID[0], "--seeds", "2", *[x for s in FAST for x in ("--set", s)],
                                     "--executor", "ray", "--ray-address", address, "--jobs", "2",
                                     "--out", str(out), "-q", "--no-plots"])
        assert result.exit_code == 0, result.output
        assert "2 at a time on ray" in result.stdout
        assert_same_sweep(local_sweep, out)
