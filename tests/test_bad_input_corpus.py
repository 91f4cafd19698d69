"""Issue 40: the command line over a corpus of bad scenarios, options and paths. Each case must end within its
timeout (no hang), with a non-zero exit, and print no traceback: one ``error:`` line (``note:`` lines aside).

The cases run the real ``edgesim`` entry point (``python -m edgesim.scenarios.cli``'s ``main()``: its one line for a
usage error, its exit status), each with its own arguments, working folder, stdout and stderr, in the test's process
(tests/cli_here.py: a fresh interpreter for each of the 41 cases cost ~28 s of CPU); the finished run they refer to is
made by a fresh process, as a user's. Most use the torch-free physics-only scenario so that the corpus stays quick.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_here import main_here
from test_safety import PHYSICS

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 120

SCENARIOS = {
    "phys.toml": PHYSICS,
    "not_toml.toml": "[system\nn_devices = 3\n",
    "unknown_key.toml": PHYSICS.replace("[system]\n", "[system]\nbandwith_hz = 1e6\n"),
    "bad_type.toml": PHYSICS.replace("n_devices = 8", 'n_devices = "eight"'),
    "bell_name.toml": PHYSICS.replace('name = "phys"', 'name = "ph\\u0007ys"'),
    "huge_kappa.toml": PHYSICS.replace("[system]\n", "[system]\nkappa = 1e300\n"),
    "path_loss.toml": PHYSICS.replace("channel_gain_db = -100\n", "path_loss_intercept_db = -1e6\n"),
    "slope.toml": PHYSICS.replace("channel_gain_db = -100\n", "path_loss_slope_db = 1e300\n"),
    "shadowing.toml": PHYSICS.replace("channel_gain_db = -100\n", "shadowing_std_db = 1e300\n"),
    "nan_rounds.toml": PHYSICS.replace("rounds = 4", "rounds = nan"),
    "k_above_n.toml": PHYSICS.replace("clients_per_round = 3", "clients_per_round = 30"),
}

CASES = [
    # bad scenario files
    ("plan", "missing.toml"),
    ("plan", "a_folder"),
    ("plan", "latin1.toml"),
    ("plan", "not_toml.toml"),
    ("plan", "unknown_key.toml"),
    ("plan", "bad_type.toml"),
    ("plan", "bell_name.toml"),
    ("plan", "huge_kappa.toml"),
    ("plan", "path_loss.toml"),
    ("plan", "slope.toml"),
    ("run", "shadowing.toml", "--out", "R", "-q"),
    ("run", "nan_rounds.toml", "--out", "R", "-q"),
    ("run", "k_above_n.toml", "--out", "R", "-q"),
    # bad overrides and options
    ("plan", "phys.toml", "--set", "system.bandwidth_hz=-5"),
    ("plan", "phys.toml", "--set", "system.nope=1"),
    ("plan", "phys.toml", "--set", "novalue"),
    ("run", "phys.toml", "--jobs", "abc", "--out", "R"),
    ("run", "phys.toml", "--jobs", "0", "--out", "R"),
    ("run", "phys.toml", "--format", "bmp", "--out", "R"),
    ("run", "phys.toml", "--threads", "many", "--out", "R"),
    ("run", "phys.toml", "--no-such-option"),
    ("sweep", "phys.toml", "--seeds", "two", "--out", "S"),
    ("sweep", "phys.toml", "--grid", "system.bandwidth_hz", "--out", "S"),
    ("sweep", "phys.toml", "--grid", "seed=-1", "--out", "S"),
    ("list", "algorithms", "nonsense"),
    # bad paths
    ("run", "phys.toml", "--out", "", "-q"),
    ("run", "phys.toml", "--out", "a\nb", "-q"),
    ("run", "phys.toml", "--out", "x" * 250, "-q"),
    ("run", "phys.toml", "--out", "/proc/edgesim", "-q"),
    ("run", "phys.toml", "--out", "a_file", "-q"),
    ("run", "phys.toml", "--out", "users_folder", "-q"),
    ("sweep", "phys.toml", "--out", "x" * 300, "-q"),
    ("sweep", "phys.toml", "--out", "users_folder", "-q"),
    ("plot", "missing_folder"),
    ("plot", "users_folder"),
    ("plot", "done", "--out", "a_file"),
    ("plot", "done", "--threshold", "2"),
    ("report", "missing_folder"),
    ("report", "done", "--out", ""),
    ("report", "done", "--out", "x" * 300),
    ("report", "users_folder", "--out", "rep"),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A folder with the corpus's scenarios, a finished run ``done``, a user's folder and file."""
    work = tmp_path_factory.mktemp("corpus")
    for name, text in SCENARIOS.items():
        (work / name).write_text(text)
    (work / "latin1.toml").write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    (work / "a_folder").mkdir()
    (work / "a_file").write_text("mine\n")
    (work / "users_folder").mkdir()
    (work / "users_folder" / "notes.txt").write_text("mine\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "edgesim.scenarios.cli", "run", "phys.toml", "--out", "done", "-q"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return work


def _edgesim(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return main_here(*args, cwd=cwd, timeout_s=TIMEOUT_S)


@pytest.mark.parametrize("args", CASES, ids=[" ".join(a)[:60].replace("\n", "\\n") for a in CASES])
def test_bad_input_is_one_line_never_a_traceback_or_a_hang(corpus, args):
    before = {p.name for p in corpus.iterdir()}
    try:
        result = _edgesim(*args, cwd=corpus)
    except subprocess.TimeoutExpired:
        pytest.fail(f"edgesim {' '.join(args)!r} did not end within {TIMEOUT_S} s")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Traceback" not in output and "╭" not in output, output
    errors = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("note: ")]
    assert len(errors) == 1 and errors[0].startswith("error: "), result.stderr
    # nothing new was made beside the corpus (a refused command writes nothing)
    assert {p.name for p in corpus.iterdir()} == before, sorted({p.name for p in corpus.iterdir()} - before)
