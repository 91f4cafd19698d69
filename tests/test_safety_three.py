"""Issue 22, the third round of bad input and faults: nothing lost, nothing mixed, no traceback.

Like ``test_safety.py``, most cases run the torch-free physics-only backend: what is
checked is the folder and the message, not the learning.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_safety import PHYSICS, cwd, one_error_line, phys, run, snapshot  # noqa: F401 - fixtures

from edgesim.results.files import MANIFEST
from edgesim.results.writing import lock_path
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

REPO = Path(__file__).resolve().parents[1]


# --- harmful 1: --overwrite replaces only what the run's manifest lists ------------------------------------------


@pytest.mark.parametrize("user_file", ["my_diagram.png", "checkpoints/my_model.pt",
                                       "graphs/um_pfssl/my_analysis.json", ".my_notes.tmp"])
def test_overwrite_keeps_a_user_file_that_looks_like_a_run_file(phys, cwd, user_file):
    assert run("run", phys, "--out", "R", "-q").exit_code == 0
    target = cwd / "R" / user_file
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"\x89PNG mine")
    before = snapshot(cwd)
    line = one_error_line(run("run", phys, "--out", "R", "-q", "--overwrite"))
    assert str(Path("R") / user_file) in line and "edgesim did not write" in line  # the file, not its folder
    assert snapshot(cwd) == before


def test_the_manifest_lists_every_file_of_a_finished_run(phys, cwd):
    assert run("run", phys, "--out", "R", "-q", "--plots").exit_code == 0
    listed = set(json.loads((cwd / "R" / MANIFEST).read_text())["files"])
    on_disk = {str(p.relative_to(cwd / "R")) for p in (cwd / "R").rglob("*") if p.is_file()} - {MANIFEST}
    assert listed == on_disk and "config.toml" in listed and "accuracy_vs_time.png" in listed and "run.json" in listed
    assert run("run", phys, "--out", "R", "-q", "--overwrite", "--set", "seed=2").exit_code == 0
    assert "seed = 2" in (cwd / "R" / "config.toml").read_text()


def test_a_folder_without_a_manifest_is_a_users_folder(phys, cwd):
    assert run("run", phys, "--out", "R", "-q").exit_code == 0
    (cwd / "R" / MANIFEST).unlink()
    before = snapshot(cwd)
    line = one_error_line(run("run", phys, "--out", "R", "-q", "--overwrite"))
    assert MANIFEST in line and "R" in line
    assert snapshot(cwd) == before


# --- harmful 2: plot never overwrites a figure it did not draw ----------------------------------------------------


def test_plot_keeps_a_users_figure_in_out(phys, cwd):
    assert run("run", phys, "--out", "R", "-q").exit_code == 0
    (cwd / "U").mkdir()
    (cwd / "U" / "accuracy_vs_time.png").write_bytes(b"my own figure")
    before = snapshot(cwd)
    line = one_error_line(run("plot", "R", "--out", "U"))
    assert str(Path("U") / "accuracy_vs_time.png") in line and "did not" in line
    assert snapshot(cwd) == before


def test_plot_may_redraw_its_own_figures(phys, cwd):
    assert run("run", phys, "--out", "R", "-q").exit_code == 0
    for _ in range(2):  # into a folder of the user's (recorded in its manifest), then into the run folder itself
        result = run("plot", "R", "--out", "U")
        assert result.exit_code == 0, result.output
    assert run("plot", "R").exit_code == 0
    # the figures the plot drew into the run folder are in its manifest: --overwrite still replaces the run
    assert run("run", phys, "--out", "R", "-q", "--overwrite").exit_code == 0


# --- harmful 3: one run at a time in a folder ---------------------------------------------------------------------


def test_a_second_run_into_the_same_out_is_refused_while_the_first_runs(phys, cwd):
    sc = load_scenario(phys)
    seen = []

    def meanwhile(name, rec):
        if not seen:
            seen.append(run("run", phys, "--out", "R", "-q"))
            seen.append(run("run", phys, "--out", "R", "-q", "--resume"))
            seen.append(run("run", phys, "--out", "R", "-q", "--overwrite"))

    run_scenario(sc, cwd / "R", on_round=meanwhile)
    for result in seen:
        line = one_error_line(result)
        assert "is in use by another edgesim process" in line and f"pid {os.getpid()}" in line
        assert socket.gethostname() in line
    assert (cwd / "R" / "config.toml").is_file() and not lock_path(cwd / "R").exists()


def test_a_stale_lock_of_a_dead_process_is_taken_over(phys, cwd):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock_path(cwd / "R").write_text(f"{dead.pid} {socket.gethostname()}\n")
    result = run("run", phys, "--out", "R", "-q")
    assert result.exit_code == 0, result.output
    assert not lock_path(cwd / "R").exists()


def test_a_live_lock_of_another_process_is_refused(phys, cwd):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock_path(cwd / "R").write_text(f"{other.pid} {socket.gethostname()}\n")
        line = one_error_line(run("run", phys, "--out", "R", "-q"))
        assert f"pid {other.pid}" in line
        assert not (cwd / "R").exists() and not (cwd / "R.incomplete").exists()
    finally:
        other.kill()
        other.wait()


# --- a full disk (ulimit -f) while a checkpoint or a figure is written: one line, no partial file ---------------

FULL_DISK = """
import resource, sys
from typer.testing import CliRunner
from edgesim.scenarios.cli import app
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY))
r = CliRunner().invoke(app, sys.argv[2:])
print(r.exit_code)
print(r.stderr)
if r.exception is not None and not isinstance(r.exception, SystemExit):
    import traceback; traceback.print_exception(r.exception)
"""


def _full_disk(limit: int, *args) -> tuple[int, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", FULL_DISK, str(limit), *map(str, args)], env=env,
                            capture_output=True, text=True, timeout=120)
    code, _, stderr = result.stdout.partition("\n")
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    return int(code), stderr


def test_a_full_disk_while_writing_a_checkpoint_is_one_line_and_leaves_no_partial_file(phys, cwd):
    big = phys.with_name("big.toml")
    big.write_text(PHYSICS.replace("rounds = 4", "rounds = 400"))
    code, stderr = _full_disk(20_000, "run", big, "--out", "R", "-q", "--set", "run.checkpoint_every=1")
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: cannot write "), stderr
    assert str(Path("R.incomplete") / "checkpoints" / "parametric.pt") in lines[0]
    assert not [p for p in cwd.rglob("*.tmp")]


def test_a_full_disk_while_drawing_a_figure_leaves_no_truncated_png(phys, cwd):
    assert run("run", phys, "--out", "R", "-q").exit_code == 0
    code, stderr = _full_disk(5_000, "plot", "R", "--out", "U")
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "cannot write the figures" in lines[0], stderr
    assert not list((cwd / "U").glob("*.png")) and not list((cwd / "U").glob(".*.tmp"))


# --- silent: refused with one line, or made to work ------------------------------------------------------------------


def test_a_parametric_table_in_a_torch_run_and_a_data_dir_for_digits_are_refused(tiny_scenario):
    from edgesim.config import ConfigError

    with pytest.raises(ConfigError, match=r"\[parametric\] is used only by a physics-only run"):
        load_scenario(tiny_scenario, ["parametric.a0=0.2"])
    with pytest.raises(ConfigError, match=r"data_dir = 'x': expected left out: dataset = 'digits' is bundled"):
        load_scenario(tiny_scenario, ['data.data_dir="x"'])


def test_a_sweep_of_another_grid_into_the_same_out_is_refused(phys, cwd):
    grid = ["--grid", "system.bandwidth_hz=1e6,2e6"]
    assert run("sweep", phys, *grid, "--out", "S", "-q", "--jobs", "1", "--no-plots").exit_code == 0
    before = snapshot(cwd)
    line = one_error_line(run("sweep", phys, "--grid", "system.bandwidth_hz=3e6", "--out", "S", "-q", "--jobs", "1"))
    assert "another grid" in line and "system.bandwidth_hz=1e6,2e6" in line and "system.bandwidth_hz=3e6" in line
    assert snapshot(cwd) == before
    assert run("sweep", phys, *grid, "--out", "S", "-q", "--jobs", "1", "--no-plots").exit_code == 0  # same: goes on


@pytest.fixture
def done(phys, tmp_path) -> Path:
    return run_scenario(load_scenario(phys), tmp_path / "done")


@pytest.mark.parametrize("column, value, fragment", [
    ("accuracy", "-5", "an accuracy in [0, 1]"), ("accuracy", "1.5", "an accuracy in [0, 1]"),
    ("time_s", "-1", "a number >= 0"), ("round", "1.5", "an integer >= 0"),
])
def test_plot_refuses_a_tampered_rounds_csv(done, tmp_path, column, value, fragment):
    import csv

    path = done / "rounds.csv"
    rows = list(csv.DictReader(path.open()))
    rows[1][column] = value
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    line = one_error_line(run("plot", done, "--out", tmp_path / "figs"))
    assert f"line 3, column {column} = {value!r}" in line and fragment in line
    assert not (tmp_path / "figs").exists() or not list((tmp_path / "figs").glob("*.png"))


def test_a_one_round_run_is_drawn_with_markers():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from edgesim.plots.curves import draw_accuracy

    fig, ax = plt.subplots()
    draw_accuracy(ax, {"fedavg": [(np.array([2.0]), np.array([0.5]))]}, {"fedavg": "C0"})
    (line,) = ax.get_lines()
    assert line.get_marker() == "o"  # one point and no marker is a blank figure
    plt.close(fig)


def test_plot_of_a_sweep_without_a_finished_run_is_one_line(phys, tmp_path):
    out = tmp_path / "sw"
    assert run("sweep", phys, "--grid", "system.bandwidth_hz=1e6", "--out", out, "-q", "--jobs", "1",
               "--no-plots").exit_code == 0
    header = (out / "sweep.csv").read_text().splitlines()[0]
    (out / "sweep.csv").write_text(header + "\n")
    line = one_error_line(run("plot", out, "--out", tmp_path / "figs"))
    assert "sweep.csv" in line and "no finished run" in line


# --- weak: the right message ----------------------------------------------------------------------------------------


def test_out_messages_name_what_was_given(phys, cwd):
    (cwd / "elsewhere").mkdir()
    os.symlink(cwd / "elsewhere", cwd / "link")
    line = one_error_line(run("run", phys, "--out", "link", "-q"))
    assert "'link' is a symbolic link" in line
    assert "--out '':" in one_error_line(run("run", phys, "--out", "", "-q"))
    line = one_error_line(run("run", phys, "--out", "R", "-q", "--seed", "99999999999999999999"))
    assert "seed = 99999999999999999999" in line and "2**63 - 1" in line and "--seed" in line


def test_plan_of_a_scenario_without_dofed_spp_is_not_an_error_of_infeasible_pairs(phys):
    """Only DoFed-SPP picks (B, K): a scenario without it plans with exit 0 and shows none of DoFed-SPP's pairs."""
    tight = ["--set", "budget.total_time_s=0.01"]
    result = run("plan", phys, *tight)
    assert result.exit_code == 0, result.output
    assert "(B, K)" not in result.output and "error" not in result.output


def test_sigterm_ends_a_run_as_ctrl_c_does(phys, cwd):
    import signal
    import time

    big = phys.with_name("long.toml")
    big.write_text(PHYSICS.replace("rounds = 4", "rounds = 2000000").replace("total_time_s = 20", "total_time_s = 1e7"))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "edgesim.scenarios.cli", "run", str(big), "--out", "R", "-q"], cwd=cwd,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (cwd / "R.incomplete" / "config.toml").exists() and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # say where it was: every thread's stack (SIGUSR1), then end it
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        pytest.fail(f"still running 60 s after SIGTERM; its stderr: {proc.communicate()[1][-4000:]}")
    # the one error line (a "note:" of the host time the long run may take can come before it)
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("note: ")]
    assert proc.returncode == 143 and len(lines) == 1, stderr
    assert lines[0].startswith("error: interrupted: the unfinished run is in R.incomplete")
    assert "interrupted" in (cwd / "R.incomplete" / "INCOMPLETE").read_text()
    assert not lock_path(cwd / "R").exists()


def test_a_run_of_a_huge_number_of_rounds_says_how_long_it_may_take(phys, cwd):
    result = run("run", phys, "--out", "R", "-q", "--set", "run.rounds=100000000", "--set", "run.max_time_s=3")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: at ")]
    assert len(notes) == 1 and "100000000 rounds of 1 algorithm(s) take up to about" in notes[0]


def test_a_bad_grid_point_is_refused_before_any_run_starts(tiny_scenario, cwd, monkeypatch):
    monkeypatch.delenv("EDGESIM_DATA", raising=False)  # mnist then has no data folder
    grid = ["--grid", "system.n_devices=6,4", "--set", 'run.algorithms=["um_pfssl"]']
    line = one_error_line(run("sweep", tiny_scenario, *grid, "--out", "S", "-q", "--jobs", "1"))
    assert "system.n_devices=4" in line and "helpers = 5" in line
    line = one_error_line(run("sweep", tiny_scenario, "--grid", 'data.dataset="digits","mnist"', "--out", "S", "-q",
                              "--jobs", "1"))
    assert "dataset = 'mnist' needs data_dir" in line
    assert not (cwd / "S").exists()
