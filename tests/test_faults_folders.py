"""Issue 40, folders: locks that are stale by a reused pid or are the user's, report's and sweep's manifests, and the
readers of ``load_runs`` refusing what ``plot`` and ``report`` refuse, naming the file."""

from __future__ import annotations

import json
import os
import re
import socket

import pytest
from test_safety import PHYSICS, cwd, one_error_line, phys, run, snapshot  # noqa: F401 - fixtures

from edgesim.config import ConfigError
from edgesim.results.writing import MANIFEST, lock_path, read_manifest


@pytest.fixture
def done(phys, cwd):
    result = run("run", phys, "--out", "done", "-q")
    assert result.exit_code == 0, result.output
    return cwd / "done"


# --- locks ---------------------------------------------------------------------------------------------------------


def test_a_lock_whose_pid_was_reused_is_stale(phys, cwd):
    """The lock names this very process (alive) but a start time it never had: the pid was reused; taken over."""
    lock_path(cwd / "R").write_text(f"{os.getpid()} {socket.gethostname()} 1\n")
    result = run("run", phys, "--out", "R", "-q")
    assert result.exit_code == 0, result.output
    assert not lock_path(cwd / "R").exists()


def test_a_live_lock_with_its_start_time_is_refused(phys, cwd):
    from edgesim.results.writing import lock_token

    lock_path(cwd / "R").write_text(lock_token())  # this process, as it is: alive
    line = one_error_line(run("run", phys, "--out", "R", "-q"))
    assert "in use by another edgesim process" in line and f"pid {os.getpid()}" in line


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_a_users_lock_named_file_or_folder_is_not_another_process(phys, cwd, kind):
    lock = lock_path(cwd / "R")
    if kind == "folder":
        lock.mkdir()
        (lock / "mine.txt").write_text("mine\n")
    else:
        lock.write_text("my shopping list\n")
    before = snapshot(cwd)
    line = one_error_line(run("run", phys, "--out", "R", "-q"))
    assert "is in the way" in line and "not" in line and "another edgesim process" not in line, line
    assert snapshot(cwd) == before


def test_a_lock_is_never_seen_empty(tmp_path):
    """The lock is linked into place whole: its content is the token from the first moment it exists."""
    from edgesim.results.writing import RunLock, lock_token

    with RunLock(tmp_path / "R") as held:
        assert lock_path(tmp_path / "R").read_text() == held.token == lock_token()
        assert not list(tmp_path.glob("*.tmp"))


# --- report and sweep folders --------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["done", "done_incomplete", "sweep"])
def test_report_refuses_to_write_into_a_run_or_sweep_folder(phys, done, cwd, where):
    if where == "done_incomplete":
        target = cwd / "x.incomplete"
        target.mkdir()
    elif where == "sweep":
        result = run("sweep", phys, "--out", "S", "-q", "--jobs", "1", "--no-plots")
        assert result.exit_code == 0, result.output
        target = cwd / "S"
    else:
        target = done
    before = snapshot(cwd)
    line = one_error_line(run("report", "done", "--out", target))
    assert "a report goes into a folder of its own" in line, line
    assert snapshot(cwd) == before


def test_report_knows_its_files_from_its_manifest_not_a_first_line(done, cwd):
    mine = cwd / "mine"
    mine.mkdir()
    (mine / "leaderboard.md").write_text("# Leaderboard\n\nmy own notes\n")
    (mine / "leaderboard.csv").write_text("my,own\n1,2\n")
    before = snapshot(cwd)
    line = one_error_line(run("report", "done", "--out", mine))
    assert "leaderboard.csv" in line and "did not write" in line
    assert snapshot(cwd) == before
    first = run("report", "done", "--out", "rep")
    assert first.exit_code == 0, first.output
    assert {"leaderboard.md", "leaderboard.csv", "paired.csv"} <= read_manifest(cwd / "rep")
    again = run("report", "done", "--out", "rep", "--overwrite")  # its own files: replaced (--overwrite: issue 52.6)
    assert again.exit_code == 0, again.output


def test_a_sweep_folder_lists_its_files_and_plot_may_redraw_them(phys, cwd):
    result = run("sweep", phys, "--out", "S", "-q", "--jobs", "1")
    assert result.exit_code == 0, result.output
    listed = read_manifest(cwd / "S")
    assert {"sweep.json", "sweep.csv", "accuracy_vs_time.png"} <= listed
    redraw = run("plot", "S")
    assert redraw.exit_code == 0, redraw.output
    assert json.loads((cwd / "S" / MANIFEST).read_text())["written_by"] == "edgesim"


# --- load_runs reads by the same rules as plot and report ----------------------------------------------------------


def test_load_runs_names_the_file_it_cannot_read(done, cwd):
    import edgesim

    (done / "rounds.csv").write_text("")
    with pytest.raises(ConfigError, match="rounds.csv"):
        edgesim.load_runs([done])


def test_load_runs_reads_an_accuracy_of_nan_as_plot_does(done, cwd):
    """A literal nan accuracy is divergence by the readers' one rule (tests/test_diverged_readers.py): in round 0
    of the run's only algorithm it leaves nothing to read, said alike by load_runs and plot."""
    import edgesim

    text = (done / "rounds.csv").read_text().splitlines()
    header = text[0].split(",")
    row = text[1].split(",")
    row[header.index("accuracy")] = "nan"
    (done / "rounds.csv").write_text("\n".join([text[0], ",".join(row), *text[2:]]) + "\n")
    said = r"every algorithm of this run diverged before its first result.*rounds.csv line 2: accuracy = nan"
    with pytest.raises(ConfigError, match=said):
        edgesim.load_runs([done])
    line = one_error_line(run("plot", done, "--out", cwd / "figs"))
    assert re.search(said, line), line


def test_load_runs_names_a_malformed_sweep_json(phys, cwd):
    import edgesim

    result = run("sweep", phys, "--out", "S", "-q", "--jobs", "1", "--no-plots")
    assert result.exit_code == 0, result.output
    (cwd / "S" / "sweep.json").write_text("{not json")
    with pytest.raises(ConfigError, match="sweep.json"):
        edgesim.load_runs([cwd / "S"])


# --- every JSON edgesim writes is JSON ------------------------------------------------------------------------------


def test_a_diverged_algorithm_leaves_no_nan_in_summary_json(tiny_scenario, cwd):
    """FedAvg diverges in its first round: its summary has no accuracy, written null (JSON has no NaN)."""
    result = run("run", tiny_scenario, "--out", "R", "-q", "--set", "budget.rounds=2", "--set", "train.lr=1e6",
                 "--set", 'run.algorithms=["fedavg", "local"]')
    assert result.exit_code == 1 and "diverged" in result.stderr, result.output
    text = (cwd / "R" / "summary.json").read_text()
    summary = json.loads(text, parse_constant=lambda c: pytest.fail(f"summary.json holds {c}"))
    assert summary["algorithms"]["fedavg"]["diverged"]


def test_report_on_a_killed_runs_folder_says_it_is_unfinished(phys, cwd):
    from edgesim.results.writing import RunFolder

    work = RunFolder(cwd / "R").work
    work.mkdir()
    RunFolder(cwd / "R").mark("started; the run has not finished.")
    for command in ("report", "plot"):
        line = one_error_line(run(command, work, "--out", cwd / "x"))
        assert "an unfinished run" in line and "--resume" in line, line
