"""Never lose a user's files, and one clear line for every bad input (issue 9's reproductions).

Most cases run the torch-free physics-only backend (``[run] backend = "parametric"``):
what is checked is the run folder and the error, not the learning, and it takes milliseconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgesim.config import ConfigError
from edgesim.results.files import MARKER
from edgesim.scenarios.cli import app
from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import load_scenario

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()

PHYSICS = """
name = "phys"
seed = 1

[system]
n_devices = 8
bandwidth_hz = 1e6
cpu_freq_hz = 1e9
channel_gain_db = -100

[budget]
total_time_s = 20
rounds = 4

[workload]
cycles_per_sample = 1e6
samples_per_device = 100
model_bits = 1e6

[run]
backend = "parametric"
clients_per_round = 3
"""


@pytest.fixture
def phys(tmp_path) -> Path:
    p = tmp_path / "phys.toml"
    p.write_text(PHYSICS)
    return p


@pytest.fixture
def cwd(tmp_path, monkeypatch) -> Path:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def snapshot(root: Path) -> dict:
    """Every file and folder under ``root``: relative path → bytes (``None`` for a folder)."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def one_error_line(result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


# --- 1. nothing a user made is ever deleted or renamed ------------------------------------------------------


def test_existing_user_folder_is_refused_byte_for_byte(phys, cwd):
    (cwd / "mine" / "sub").mkdir(parents=True)
    (cwd / "mine" / "thesis.txt").write_text("draft\n")
    (cwd / "mine" / "sub" / "data.bin").write_bytes(bytes(range(256)))
    before = snapshot(cwd)
    line = one_error_line(run("run", phys, "--out", "mine", "-q"))
    assert "not an edgesim run folder" in line and str(Path("mine") / "sub") in line
    assert snapshot(cwd) == before  # nothing renamed, nothing created beside it
    # --overwrite does not change that: only an edgesim run folder is ever replaced
    one_error_line(run("run", phys, "--out", "mine", "-q", "--overwrite"))
    assert snapshot(cwd) == before


def test_a_users_out_old_folder_survives_a_replaced_run(phys, cwd):
    assert run("run", phys, "--out", "r", "-q").exit_code == 0
    (cwd / "r.old").mkdir()
    (cwd / "r.old" / "keep.txt").write_text("mine\n")
    line = one_error_line(run("run", phys, "--out", "r", "-q"))
    assert "holds a finished run; add --overwrite" in line
    result = run("run", phys, "--out", "r", "-q", "--overwrite", "--set", "seed=2")
    assert result.exit_code == 0, result.output
    assert (cwd / "r.old" / "keep.txt").read_text() == "mine\n"
    assert sorted(p.name for p in cwd.iterdir()) == ["r", "r.old"]  # the old run is gone, no temporary left
    assert "seed = 2" in (cwd / "r" / "config.toml").read_text()


def test_a_user_file_inside_a_run_folder_blocks_overwrite(phys, cwd):
    assert run("run", phys, "--out", "r", "-q").exit_code == 0
    (cwd / "r" / "notes.md").write_text("my notes\n")
    before = snapshot(cwd)
    line = one_error_line(run("run", phys, "--out", "r", "-q", "--overwrite"))
    assert str(Path("r") / "notes.md") in line
    assert snapshot(cwd) == before


def test_empty_name_is_an_error_and_runs_is_untouched(phys, cwd):
    (cwd / "runs" / "earlier").mkdir(parents=True)
    (cwd / "runs" / "earlier" / "rounds.csv").write_text("precious\n")
    before = snapshot(cwd)
    bad = phys.with_name("noname.toml")
    bad.write_text(PHYSICS.replace('name = "phys"', 'name = ""'))
    line = one_error_line(run("run", bad, "-q"))
    assert "noname.toml" in line and "name = ''" in line and "folder name" in line
    assert snapshot(cwd) == before


@pytest.mark.parametrize("out", ["afile.txt", "", ".", "..", "/proc/x", "/proc/x/y", "afile.txt/below"])
def test_bad_out_is_refused_before_any_work(phys, cwd, out):
    (cwd / "afile.txt").write_text("a user's file\n")
    before = snapshot(cwd.parent)
    line = one_error_line(run("run", phys, "--out", out, "-q"))
    assert "--out" in line
    assert snapshot(cwd.parent) == before


def test_sweep_out_that_is_a_user_folder_or_file_is_refused(phys, cwd):
    (cwd / "mine").mkdir()
    (cwd / "mine" / "thesis.txt").write_text("draft\n")
    (cwd / "afile").write_text("x\n")
    before = snapshot(cwd)
    for out in ("mine", "afile", "."):
        line = one_error_line(run("sweep", phys, "--grid", "seed=1,2", "--out", out, "-q", "--jobs", "1"))
        assert "--out" in line
    assert snapshot(cwd) == before


# --- 2. resume that cannot mix runs -------------------------------------------------------------------------


def _interrupted_run(phys: Path, out: Path, after_rounds: int = 2) -> None:
    """A physics-only run with a checkpoint every round, interrupted (Ctrl-C) after ``after_rounds`` rounds."""
    seen = []

    def stop(name, record):
        seen.append(record)
        if len(seen) == after_rounds:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_scenario(load_scenario(phys, ["run.checkpoint_every=1"]), out, on_round=stop)
    assert (out.with_name(out.name + ".incomplete") / "checkpoints" / "parametric.pt").is_file()


def test_ctrl_c_prints_where_the_folder_is_and_how_to_resume(phys, cwd, monkeypatch):
    from edgesim.scenarios import progress

    calls = []

    def interrupt(self, algorithm, record):
        calls.append(record)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(progress.RunProgress, "update", interrupt)
        line = one_error_line(run("run", phys, "--out", "r", "--set", "run.checkpoint_every=1"), code=130)
    assert "interrupted" in line and "r.incomplete" in line and "--resume" in line
    assert "interrupted: KeyboardInterrupt" in (cwd / "r.incomplete" / MARKER).read_text()
    result = run("run", phys, "--out", "r", "-q", "--set", "run.checkpoint_every=1", "--resume")
    assert result.exit_code == 0, result.output
    assert "resuming" in result.stderr
    reference = run_scenario(load_scenario(phys, ["run.checkpoint_every=1"]), cwd / "ref")
    assert (cwd / "r" / "rounds.csv").read_bytes() == (reference / "rounds.csv").read_bytes()


@pytest.mark.parametrize("damage", ["missing", "garbage", "not_ours"])
def test_resume_refuses_a_folder_whose_scenario_is_unknown(phys, cwd, damage):
    _interrupted_run(phys, cwd / "r")
    config = cwd / "r.incomplete" / "config.toml"
    if damage == "missing":
        config.unlink()
        # without config.toml it is no run folder of ours: refused as a user's folder would be
    elif damage == "garbage":
        config.write_bytes(b"\xff\xfe not toml [[[")
    else:
        config.write_text('title = "some other tool"\n')
    before = snapshot(cwd)
    line = one_error_line(run("run", phys, "--out", "r", "-q", "--set", "run.checkpoint_every=1", "--resume"))
    assert "r.incomplete" in line
    assert snapshot(cwd) == before


def test_resume_of_a_different_scenario_names_the_keys(phys, cwd):
    _interrupted_run(phys, cwd / "r")
    before = snapshot(cwd)
    line = one_error_line(run("run", phys, "--out", "r", "-q", "--set", "run.checkpoint_every=1", "--resume",
                              "--set", "system.bandwidth_hz=2e6"))
    assert "different scenario (system.bandwidth_hz: 1000000.0 -> 2000000.0)" in line
    assert snapshot(cwd) == before


def test_a_finished_run_of_another_scenario_is_refused_not_reported(phys, cwd):
    assert run("run", phys, "--out", "r", "-q").exit_code == 0
    before = snapshot(cwd)
    line = one_error_line(run("run", phys, "--out", "r", "-q", "--resume", "--set", "seed=7"))
    assert "different scenario (seed: 1 -> 7)" in line
    assert snapshot(cwd) == before
    same = run("run", phys, "--out", "r", "-q", "--resume")
    assert same.exit_code == 0 and "already finished; nothing to resume" in same.stderr


def test_truncated_checkpoint_is_one_line_naming_the_file(phys, cwd):
    _interrupted_run(phys, cwd / "r")
    ckpt = cwd / "r.incomplete" / "checkpoints" / "parametric.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:40])
    before = snapshot(cwd)
    line = one_error_line(run("run", phys, "--out", "r", "-q", "--set", "run.checkpoint_every=1", "--resume"))
    assert "r.incomplete/checkpoints/parametric.pt: corrupt checkpoint" in line
    after = snapshot(cwd)
    assert {k: v for k, v in after.items() if k != f"r.incomplete/{MARKER}"} == \
        {k: v for k, v in before.items() if k != f"r.incomplete/{MARKER}"}


def test_truncated_torch_checkpoint_is_one_error_naming_the_file(tmp_path):
    import io

    import torch

    from edgesim.scenarios import checkpoint

    buf = io.BytesIO()
    torch.save({"format": 1, "weights": torch.zeros(1000)}, buf)
    path = checkpoint.path_for(tmp_path, "fedavg")
    path.parent.mkdir()
    path.write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    with pytest.raises(ConfigError, match=rf"^{path}: corrupt checkpoint \(.*\); it is left as it is"):
        checkpoint.load(tmp_path, "fedavg", "fp")


def test_resume_with_nothing_to_resume_says_it_starts_from_scratch(phys, cwd):
    result = run("run", phys, "--out", "r", "-q", "--resume")
    assert result.exit_code == 0 and "nothing to resume" in result.stderr and "starting from scratch" in result.stderr


def test_resume_without_checkpoints_says_it_starts_from_scratch(phys, cwd):
    with pytest.raises(KeyboardInterrupt):
        run_scenario(load_scenario(phys), cwd / "r", on_round=lambda n, r: (_ for _ in ()).throw(KeyboardInterrupt))
    result = run("run", phys, "--out", "r", "-q", "--resume")
    assert result.exit_code == 0, result.output
    assert "has no checkpoint" in result.stderr and "starting from scratch" in result.stderr


def test_unfinished_run_needs_resume_or_overwrite(phys, cwd):
    _interrupted_run(phys, cwd / "r")
    before = snapshot(cwd)
    line = one_error_line(run("run", phys, "--out", "r", "-q"))
    assert "holds an unfinished run; add --resume" in line
    assert snapshot(cwd) == before
    line = one_error_line(run("run", phys, "--out", "r", "-q", "--resume", "--overwrite"))
    assert "give one of them" in line
    assert run("run", phys, "--out", "r", "-q", "--overwrite").exit_code == 0
    assert sorted(p.name for p in cwd.iterdir()) == ["r"]


# --- 3. every bad input is one line ---------------------------------------------------------------------------


BAD_VALUES = [
    ("system.noise_psd_dbm_per_hz=3.98e-21", ["noise_psd_dbm_per_hz = 3.98e-21", "[-220, -100] dBm/Hz",
                                              "looks like W/Hz", "-174.0 dBm/Hz"]),
    ("system.bandwidth_hz=1e-30", ["bandwidth_hz = 1e-30", "[1, 1e+12] Hz"]),
    ("system.bandwidth_hz=1e308", ["bandwidth_hz = 1e+308", "[1, 1e+12] Hz"]),
    ("system.tx_power_dbm=200", ["tx_power_dbm = 200", "dBm"]),
    ("system.n_devices=1000000", ["n_devices = 1000000", "[1, 100000]"]),
    ("system.n_devices=1000000000", ["n_devices = 1000000000", "[1, 100000]"]),
    ("run.evaluate_every=2", ["[run]", "unknown key 'evaluate_every'"]),
    ("run.clients_per_round=9", ["clients_per_round = 9", "n_devices (= 8)"]),
]


@pytest.mark.parametrize("command, override, fragments", [
    (command, override, fragments) for override, fragments in BAD_VALUES for command in ("run", "plan")
    if command == "run" or not override.startswith("run.")  # plan does not read [run]
])
def test_implausible_or_unused_values_are_one_line(phys, cwd, override, fragments, command):
    line = one_error_line(run(command, phys, "--set", override, *(["--out", "r", "-q"] if command == "run" else [])))
    assert f"--set {override}" in line and str(phys) in line
    for frag in fragments:
        assert frag in line, line
    assert list(cwd.iterdir()) == []


def test_plan_is_fast_at_the_device_ceiling(phys):
    import time

    # CPU seconds of this process, not wall time: parallel test workers (pytest -n) and other jobs on a shared
    # machine stretch the wall clock, not the work the plan does (12.7 s wall at a load of 9 on 2 cores)
    t0 = time.process_time()
    result = run("plan", phys, "--set", "system.n_devices=100000", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n_devices"] == 100000
    assert time.process_time() - t0 < 10  # well under a second on a laptop; generous for a shared CI core


def test_a_deadline_that_drops_every_upload_says_so(phys, cwd):
    result = run("run", phys, "--out", "r", "-q", "--set", "budget.round_mode='deadline'",
                 "--set", "budget.deadline_s=0.01")
    assert result.exit_code == 0, result.output
    assert "warning: parametric: every upload of every round was dropped" in result.stderr
    summary = json.loads((cwd / "r" / "summary.json").read_text())
    assert summary["algorithms"]["parametric"]["every_upload_dropped"] is True
    assert summary["warnings"] and "budget.deadline_s = 0.01 s" in summary["warnings"][0]
    assert run("run", phys, "--out", "ok", "-q").exit_code == 0
    assert json.loads((cwd / "ok" / "summary.json").read_text())["warnings"] == []


def test_scenario_that_is_not_utf8_or_is_a_folder(tmp_path, cwd):
    bad = tmp_path / "latin1.toml"
    bad.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    assert "not a UTF-8 text file" in one_error_line(run("plan", bad))
    assert "is a folder" in one_error_line(run("run", tmp_path, "-q"))
    assert "scenario file not found" in one_error_line(run("plan", tmp_path / "nope.toml"))


def test_plan_with_missing_data_is_one_line(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text('[data]\ndataset = "mnist"\ndata_dir = "nowhere"\n[workload]\nmodel_bits = "auto"\n')
    line = one_error_line(run("plan", scenario))
    assert str(scenario) in line and "[data]" in line and "nowhere" in line


def test_bad_set_and_grid_values_are_blamed_on_the_option(phys, cwd):
    line = one_error_line(run("run", phys, "--set", "budget.rounds=0", "--out", "r", "-q"))
    assert line.startswith("error: --set budget.rounds=0: ") and "rounds = 0" in line
    line = one_error_line(run("sweep", phys, "--grid", "budget.rounds=1,0", "--out", "s", "-q"))
    assert "--grid budget.rounds=0" in line and "rounds = 0" in line and "--set" not in line
    line = one_error_line(run("sweep", phys, "--grid", "=1,2", "--out", "s", "-q"))
    assert line.startswith("error: --grid '=1,2'") and "--set" not in line
    line = one_error_line(run("run", phys, "--set", "=1", "-q"))
    assert "--set '=1'" in line


# --- plot -------------------------------------------------------------------------------------------------------


@pytest.fixture
def finished(phys, tmp_path) -> Path:
    return run_scenario(load_scenario(phys), tmp_path / "done")


@pytest.mark.parametrize("text, fragment", [
    ("algorithm,round,time_s,accuracy\n", "a header and no rounds"),
    ("algorithm,round,time_s,accuracy\nfedavg,0,abc,0.5\n", "line 2, column time_s = 'abc'"),
    ("algorithm,round,time_s,accuracy\nfedavg,0,1.0\n", "line 2 has 3 fields"),
    ("algorithm,round,time_s,accuracy\nfedavg,0,1.0,high\n", "column accuracy = 'high'"),
    ("round,time_s\n0,1\n", "no column 'algorithm'"),
    ("", "empty"),
])
def test_plot_on_a_malformed_rounds_csv_is_one_line(finished, tmp_path, text, fragment):
    (finished / "rounds.csv").write_text(text)
    line = one_error_line(run("plot", finished, "--out", tmp_path / "figs"))
    assert "rounds.csv" in line and fragment in line


def test_plot_errors_for_paths_out_and_threshold(finished, tmp_path):
    assert "no such folder" in one_error_line(run("plot", tmp_path / "missing"))
    afile = tmp_path / "afile.png"
    afile.write_text("x")
    line = one_error_line(run("plot", finished, "--out", afile))
    assert "--out" in line and "not a folder" in line and afile.read_text() == "x"
    assert "--threshold 'abc'" in one_error_line(run("plot", finished, "--threshold", "abc"))


def test_plot_on_a_malformed_sweep_csv_is_one_line(phys, tmp_path):
    out = tmp_path / "sw"
    assert run("sweep", phys, "--grid", "system.bandwidth_hz=1e6,2e6", "--out", out, "-q", "--jobs", "1",
               "--no-plots").exit_code == 0
    csv_text = (out / "sweep.csv").read_text().splitlines()
    header, row = csv_text[0], csv_text[1].split(",")
    row[-1] = "many"
    (out / "sweep.csv").write_text(header + "\n" + ",".join(row) + "\n")
    assert "sweep.csv: line 2" in one_error_line(run("plot", out, "--out", tmp_path / "figs"))
    (out / "sweep.json").write_text("{not json")
    assert "sweep.json: not valid JSON" in one_error_line(run("plot", out, "--out", tmp_path / "figs"))


# --- 7. physics-only runs: no torch ---------------------------------------------------------------------------

NO_TORCH = """
import sys
from typer.testing import CliRunner
from edgesim.scenarios.cli import app
r = CliRunner().invoke(app, ["run", sys.argv[1], "--out", sys.argv[2], "-q"])
assert r.exit_code == 0, r.output
r = CliRunner().invoke(app, ["sweep", sys.argv[1], "--out", sys.argv[3], "-q", "--jobs", "1",
                             "--grid", "system.bandwidth_hz=1e6,2e6"])
assert r.exit_code == 0, r.output
leaked = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
assert not leaked, leaked
print("ok")
"""


def test_physics_only_run_and_sweep_never_import_torch(phys, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", NO_TORCH, str(phys), str(tmp_path / "r"), str(tmp_path / "s")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr + result.stdout
    assert (tmp_path / "r" / "rounds.csv").is_file() and (tmp_path / "s" / "sweep.csv").is_file()
    config = (tmp_path / "r" / "config.toml").read_text()
    assert 'backend = "parametric"' in config and "[data]" not in config and "torch" not in config


def test_physics_only_refuses_what_it_does_not_use(phys):
    with pytest.raises(ConfigError, match=r"\[data\] is not used by a physics-only run"):
        load_scenario(phys, ["data.dataset='digits'"])
    with pytest.raises(ConfigError, match=r"model_bits = 'auto': a physics-only run has no model"):
        load_scenario(phys, ["workload.model_bits='auto'"])
    with pytest.raises(ConfigError, match=r"algorithms = \['fedavg'\]"):
        load_scenario(phys, ["run.algorithms=['fedavg']"])


def test_shipped_physics_scenario_validates():
    sc = load_scenario(REPO / "scenarios" / "physics_10k.toml")
    assert sc.physics_only and sc.system.n_devices == 10_000 and sc.learning["run"].algorithms == ["parametric"]


# --- 6. progress ----------------------------------------------------------------------------------------------


class _Tty:
    """A text stream that says it is a terminal."""

    def __init__(self):
        import io

        self.buf = io.StringIO()

    def write(self, text):
        return self.buf.write(text)

    def flush(self):
        pass

    def isatty(self):
        return True


def _records(phys, n=4):
    from edgesim.curve import ParametricBackend
    from edgesim.engine import Simulation

    sc = load_scenario(phys)
    sim = Simulation(sc.system, sc.budget, ParametricBackend(8, 3, sc.workload, 1), seed=1)
    return sim.run(rounds=n)


def test_progress_prints_plain_lines_when_not_a_terminal(phys):
    import io

    from edgesim.scenarios.progress import RunProgress

    log = io.StringIO()
    with RunProgress(["a", "b"], 4, stream=log) as p:
        for name in ("a", "b"):
            for rec in _records(phys):
                p.update(name, rec)
    lines = log.getvalue().splitlines()
    assert 1 <= len(lines) <= 10 and "\r" not in log.getvalue()
    assert lines[-1].startswith("8/8 rounds  b round 4  sim ") and " acc " in lines[-1] and "elapsed" in lines[-1]


def test_progress_on_a_terminal_has_a_row_per_algorithm(phys):
    from edgesim.scenarios.progress import RunProgress, SweepProgress

    tty = _Tty()
    with RunProgress(["fedavg", "local"], 4, stream=tty) as p:
        for name in ("fedavg", "local"):
            for rec in _records(phys):
                p.update(name, rec)
    out = tty.buf.getvalue()
    assert "fedavg" in out and "local" in out and "all" in out and "acc 0." in out and "sim" in out
    tty = _Tty()
    bar = SweepProgress(2, stream=tty)
    bar.update({"name": "r1", "status": "ok", "seconds": 1.0})
    bar.update({"name": "r2", "status": "ok", "seconds": 1.0}, skipped=True)
    bar.close()
    assert "r1: ok" in tty.buf.getvalue() and "2/2" in tty.buf.getvalue()
