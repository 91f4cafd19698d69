"""Issue 40, round four of bad input and faults: a failing run keeps its unfinished folder and names the real cause;
``run`` checks DoFed-SPP's budget as ``plan`` does, before anything runs; physics keys have plausible ranges;
plugins that register nothing or call ``sys.exit``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_here import main_here
from hypothesis import given, settings
from hypothesis import strategies as st
from test_safety import PHYSICS, cwd, one_error_line, phys, run, snapshot  # noqa: F401 - fixtures

from edgesim.config import ConfigError, SystemConfig
from edgesim.results.writing import MARKER

REPO = Path(__file__).resolve().parents[1]

NAN_PLUGIN = '''
from edgesim.learning.algorithms import register
from edgesim.learning.algorithms.fedavg.algorithm import FedAvg, FedAvgConfig


class NanAfterOne(FedAvg):
    """FedAvg whose second round reports accuracy = NaN (a plugin's bug)."""

    def complete_round(self, outcome):
        metrics = super().complete_round(outcome)
        return {**metrics, "accuracy": float("nan")} if outcome.round_index >= 1 else metrics


@register("nan_after_one", FedAvgConfig, display="NaN")
def build(ctx, cfg):
    return NanAfterOne(ctx, "nan_after_one", cfg)
'''


def _cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "edgesim.scenarios.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _one_line(proc: subprocess.CompletedProcess, code: int) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip() and not line.startswith("note: ")]
    assert proc.returncode == code and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


# --- a failing run keeps its unfinished folder, and the line names the cause ------------------------------------


def test_a_nan_metric_of_a_plugin_names_the_algorithm_and_keeps_the_folder(tiny_scenario, tmp_path):
    (tmp_path / "nan_plugin.py").write_text(NAN_PLUGIN)
    proc = _cli("run", str(tiny_scenario), "--out", "r", "-q", "--set", 'run.plugins=["nan_plugin"]',
                "--set", 'run.algorithms=["fedavg", "nan_after_one"]', "--set", "run.checkpoint_every=1",
                cwd=tmp_path)
    line = _one_line(proc, 2)
    assert "nan_after_one, round 1" in line and "accuracy = nan" in line and "complete_round" in line, line
    assert "rounds.csv" not in line and "r.incomplete" in line and "--resume" in line
    work = tmp_path / "r.incomplete"
    assert "failed" in (work / MARKER).read_text()
    assert (work / "checkpoints" / "fedavg.pt").is_file()  # FedAvg's finished state is kept


def test_a_plugin_that_calls_sys_exit_on_import_is_one_line(tiny_scenario, tmp_path):
    (tmp_path / "quits.py").write_text("import sys\nsys.exit(0)\n")
    proc = _cli("run", str(tiny_scenario), "--out", "r", "-q", "--set", 'run.plugins=["quits"]', cwd=tmp_path)
    line = _one_line(proc, 2)
    assert "[run] plugins: cannot import 'quits'" in line and "SystemExit" in line
    assert not (tmp_path / "r").exists() and not (tmp_path / "r.incomplete").exists()


def test_a_plugin_that_registers_nothing_gets_a_note(phys, cwd):
    result = run("plan", phys, "--set", 'run.plugins=["os"]')
    assert result.exit_code == 0, result.output
    assert "'os' registered no algorithm, model, data set or partition" in result.stderr


def test_a_configuration_error_mid_run_keeps_the_unfinished_folder(phys, cwd, monkeypatch):
    """Any error raised mid-run (here: a record the run refuses) leaves ``OUT.incomplete`` marked, never deleted."""
    from edgesim.scenarios import algorithm_run as run_module

    calls = []

    def refuse_second(sc, name, rec):
        calls.append(rec.round_index)
        if rec.round_index == 1:
            raise ConfigError(f"{sc.path}: refused for the test")

    monkeypatch.setattr(run_module, "check_record", refuse_second)
    line = one_error_line(run("run", phys, "--out", "R", "-q", "--set", "run.checkpoint_every=1"))
    assert "refused for the test" in line and "R.incomplete" in line and "--resume" in line
    assert (cwd / "R.incomplete" / "checkpoints").is_dir() and "failed" in (cwd / "R.incomplete" / MARKER).read_text()


# --- DoFed-SPP: run checks the budget as plan computes it, before anything runs ------------------------------------


def _dofed_t8(tmp_path) -> Path:
    """The issue's ``t8.toml``: the default scenario with 8 devices, 4 a round, DoFed-SPP only (T/G = 3 s)."""
    text = (REPO / "scenarios" / "default.toml").read_text()
    text = text.replace("n_devices = 20", "n_devices = 8").replace("clients_per_round = 10", "clients_per_round = 4")
    text = text.replace('algorithms = ["fedavg", "fedprox", "local"]', 'algorithms = ["dofed_spp"]')
    path = tmp_path / "t8.toml"
    path.write_text(text)
    return path


def test_run_refuses_an_infeasible_dofed_budget_before_anything_runs_as_plan_does(tmp_path, cwd):
    t8 = _dofed_t8(tmp_path)
    planned = run("plan", t8, "--json")
    plan = json.loads(planned.stdout[: planned.stdout.rindex("}") + 1])
    # C1 counts the student's E_tar = 10 epochs over D = 72 samples: T/G = 3 s minus 14.4 + 1.44 s of training
    assert planned.exit_code == 1 and plan["pairs"] == [] and plan["feasible_count"] == 0
    assert plan["c1_s"] == pytest.approx(3 - (10 + 1) * 2e7 * 72 / 1e9)
    assert "No (B, K) pair fits the budget" in planned.stderr
    ran = one_error_line(run("run", t8, "--out", "R", "-q"))
    # the same check and message, with each device's own data (the largest device holds more than D)
    assert "dofed_spp: No (B, K) pair fits the budget" in ran and str(t8) in ran and "T/G gives only 3 s" in ran
    assert not (cwd / "R").exists() and not (cwd / "R.incomplete").exists()


def test_run_checks_the_budget_with_the_backends_own_numbers(tmp_path):
    """The run's check is the backend's plan of a round t >= 1 (Ineq. 26 with its own cycles), before round 0."""
    from edgesim.engine import Simulation
    from edgesim.scenarios.algorithm_run import make_backends
    from edgesim.scenarios.schema import load_scenario

    sc = load_scenario(_dofed_t8(tmp_path), ["budget.total_time_s=15000"])
    backend = make_backends(sc)[0]("dofed_spp")
    view = Simulation(sc.system, sc.budget, backend, seed=sc.seed).system_view()
    consts = backend.budget_constants(view)
    slowest = max((r + t) / f for r, t, f in zip(backend.rec_cycles, backend.tar_cycles, view.cpu_freq_hz))
    assert consts.c1_s == pytest.approx(sc.budget.round_budget_s - slowest)  # C_SR = 0 here
    backend.check_budget(view)  # feasible: no error


# --- physics keys: plausible ranges, checked up front with the key named -------------------------------------------


@pytest.mark.parametrize("key, value", [
    ("path_loss_intercept_db", -1e6), ("path_loss_intercept_db", 1e6), ("path_loss_intercept_db", 1e300),
    ("path_loss_intercept_db", -1e300), ("path_loss_slope_db", 1e300), ("shadowing_std_db", 1e300),
    ("kappa", 1e300), ("kappa", -1.0),
])
def test_physics_keys_out_of_range_are_one_line_naming_the_key(phys, cwd, key, value):
    """Without a fixed gain: the physics scenario with the path-loss model."""
    model = phys.with_name("pl.toml")
    model.write_text(PHYSICS.replace("channel_gain_db = -100\n", ""))
    for command in ("plan", "run"):
        args = [command, model, "--set", f"system.{key}={value!r}"] + (["--out", "R", "-q"] if command == "run" else [])
        line = one_error_line(run(*args))
        assert f"{key} = " in line and "expected" in line and "np.float64" not in line, line
    assert not (cwd / "R").exists() and not (cwd / "R.incomplete").exists()


def test_the_path_gain_over_the_cell_is_checked_with_both_keys():
    with pytest.raises(ValueError, match=r"path_loss_intercept_db = 0.*path_loss_slope_db = 100.*at 10 m"):
        SystemConfig(path_loss_intercept_db=0, path_loss_slope_db=100, min_distance_m=10, cell_radius_m=250)
    SystemConfig()  # the defaults: 52.9 to 105.5 dB of loss over 10-250 m


@settings(max_examples=40, deadline=None)
@given(intercept=st.floats(0, 250), slope=st.floats(0, 100), shadow=st.floats(0, 30))
def test_an_accepted_path_loss_model_gives_positive_finite_gains(intercept, slope, shadow):
    """Property: whatever the ranges accept yields gains the engine can use (> 0, finite) for every device."""
    import numpy as np

    from edgesim.channel import ChannelModel

    try:
        system = SystemConfig(n_devices=16, path_loss_intercept_db=intercept, path_loss_slope_db=slope,
                              shadowing_std_db=shadow)
    except ValueError:
        return
    gains = ChannelModel(system, 0).gains(0)
    assert np.all(np.isfinite(gains)) and np.all(gains > 0)


def test_too_many_devices_for_the_data_names_the_key(tiny_scenario, cwd):
    line = one_error_line(run("run", tiny_scenario, "--out", "R", "-q", "--set", "system.n_devices=100000",
                              "--set", "run.clients_per_round=3"))
    assert "system.n_devices = 100000" in line and "expected at most" in line and "min_size" not in line, line


# --- the command line: usage errors, --out, names --------------------------------------------------------------------


@pytest.mark.parametrize("args, fragment", [
    (["run", "--jobs", "abc"], "--jobs abc: expected an integer >= 1"),
    (["sweep", "--jobs", "two"], "--jobs two: expected an integer >= 1"),
    (["sweep", "--seeds", "x"], "--seeds x: expected an integer >= 1"),
    (["run", "--no-such-option"], "No such option: --no-such-option"),
    (["plan", "--json", "--json", "extra", "args"], "edgesim plan"),
])
def test_usage_errors_are_one_line(tmp_path, args, fragment):
    line = _one_line(main_here(*args, cwd=tmp_path, timeout_s=120), 2)  # the entry point's main(), in this process
    assert line.startswith("error: ") and fragment in line and "╭" not in line, line


def test_list_takes_several_kinds(tmp_path):
    proc = main_here("list", "algorithms", "models", cwd=tmp_path, timeout_s=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("algorithms:") and "\nmodels:" in proc.stdout and "datasets:" not in proc.stdout


@pytest.mark.parametrize("out, fragment", [
    ("", "expected the path of a folder"),
    ("a\nb", "control character '\\n'"),
    ("x" * 300, "expected at most"),
    ("/proc/no_such_place", "cannot write in /proc"),
])
def test_every_out_goes_through_one_checker(phys, cwd, out, fragment):
    """run, sweep, report and plot refuse the same --out with the same line, before anything is written."""
    done = run("run", phys, "--out", "done", "-q")
    assert done.exit_code == 0, done.output
    before = snapshot(cwd)
    for args in (["run", phys, "-q"], ["sweep", phys, "-q"], ["report", "done"], ["plot", "done"]):
        line = one_error_line(run(*args, "--out", out))
        assert fragment in line and "Traceback" not in line, (args, line)
    assert snapshot(cwd) == before


def test_a_250_character_run_name_is_too_long_not_in_use(phys, cwd):
    """A run renames its folder (``.incomplete``, set aside): 250 characters leave no room; no lock is blamed."""
    line = one_error_line(run("run", phys, "--out", "x" * 250, "-q"))
    assert "is 250 bytes; expected at most 225" in line and "in use" not in line
    assert list(cwd.iterdir()) == []


def test_a_read_only_place_is_one_line_for_report_and_plot(phys, cwd):
    if os.geteuid() == 0:
        pytest.skip("root writes through read-only permissions")
    done = run("run", phys, "--out", "done", "-q")
    assert done.exit_code == 0, done.output
    locked = cwd / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        for command in ("report", "plot"):
            assert "cannot write in" in one_error_line(run(command, "done", "--out", locked / "x"))
    finally:
        locked.chmod(0o700)


def test_a_control_character_in_a_scenario_name_is_refused(phys, cwd):
    line = one_error_line(run("plan", phys, "--set", 'name="bell\\u0007"'))
    assert "name = 'bell\\x07'" in line and "folder name" in line


def test_a_full_disk_during_a_report_is_one_line(phys, cwd, monkeypatch):
    done = run("run", phys, "--out", "done", "-q")
    assert done.exit_code == 0, done.output
    import errno

    import edgesim.scenarios.report as report_module  # imported before the patch: else it would keep the patched
    from edgesim.results import writing as runfolder  # writer for every later test of this process (xdist)

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(runfolder, "atomic_write_bytes", full)
    for name in dir(report_module):
        if name == "atomic_write_bytes":
            monkeypatch.setattr(report_module, name, full)
    result = run("report", "done", "--out", "rep")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "No space left on device" in result.stderr


# --- the Python API checks its arguments up front --------------------------------------------------------------------


@pytest.mark.parametrize("call, fragment", [
    (lambda e, s: e.sweep(s, grid="system.bandwidth_hz=1e6"), "sweep(grid='system.bandwidth_hz=1e6'): expected a dict"),
    (lambda e, s: e.sweep(s, grid={"system.bandwidth_hz": 1e6}), "sweep(grid={'system.bandwidth_hz': 1000000.0})"),
    (lambda e, s: e.sweep(s, seeds=0), "sweep(seeds=0): expected an integer >= 1"),
    (lambda e, s: e.sweep(s, jobs="2"), "sweep(jobs='2')"),
    (lambda e, s: e.scenario_fingerprint("x"), "scenario_fingerprint(config='x'): expected a resolved scenario"),
    (lambda e, s: e.run(s, out="a", on_round=5), "run(on_round=5): expected a function"),
    (lambda e, s: e.run(s, out=123), "run(out=123): expected a path"),
    (lambda e, s: e.run(s, out="a", jobs=0), "run(jobs=0): expected an integer >= 1"),
    (lambda e, s: e.run(s, out="a", formats=5), "run(formats=5)"),
])
def test_api_arguments_are_checked_before_anything_starts(phys, cwd, call, fragment):
    import edgesim

    with pytest.raises(ConfigError) as info:
        call(edgesim, str(phys))
    assert fragment in str(info.value) and "\n" not in str(info.value)
    assert list(cwd.iterdir()) == []


def test_api_formats_as_text_is_the_command_lines(phys, cwd):
    import edgesim

    result = edgesim.run(str(phys), out="r", formats="png,svg", plots=True)
    assert (result.path / "accuracy_vs_time.svg").is_file() and (result.path / "accuracy_vs_time.png").is_file()
