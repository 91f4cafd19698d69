"""Registries refuse clashes and plugins fail loudly (issue 53, item 5): a name taken twice is one line naming both
sources; ``sys.exit`` inside a plugin's call is a plugin failure that keeps the folder; the ``[run] plugins`` note
counts policies and codecs; ``--jobs 2`` says what one process says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_here import main_here
from conftest import TINY_SCENARIO
from test_safety import PHYSICS, cwd, one_error_line, run  # noqa: F401 - fixtures

from edgesim.registries import RegistryClash, claim
from edgesim.resources.policies import POLICIES

FDMA = PHYSICS.replace("[system]\n", '[system]\naccess = "fdma"\n')


class Mine:
    pass


class Theirs:
    pass


def test_claim_refuses_another_source_in_one_line_and_takes_the_same_source_again():
    table = {"a": Mine}
    claim(table, "b", Theirs, "widget")
    assert table == {"a": Mine, "b": Theirs}
    claim(table, "a", Mine, "widget")  # the same class again (a module imported twice): no clash
    with pytest.raises(RegistryClash) as e:
        claim(table, "a", Theirs, "widget")
    message = str(e.value)
    assert message == (f"widget 'a' is registered twice: by {__name__}.Mine and again by {__name__}.Theirs; "
                       "expected a name not taken (rename the plugin's widget)")
    assert table["a"] is Mine  # the first keeps its name


def test_a_policy_plugin_that_takes_a_builtin_name_is_refused_naming_both(cwd):
    equal = POLICIES["bandwidth"]["equal"]
    (cwd / "my_equal.py").write_text("from edgesim.resources import register_policy\n\n\n"
                                     "@register_policy('bandwidth', 'equal')\nclass MyEqual:\n"
                                     "    def allocate(self, r):\n        return None\n")
    (cwd / "p.toml").write_text(PHYSICS + 'plugins = ["my_equal"]\n')
    try:
        line = one_error_line(run("run", "p.toml", "--out", "R", "-q"))
    finally:
        sys.modules.pop("my_equal", None)
    assert ("policy bandwidth 'equal' is registered twice: by edgesim.resources.policies.EqualBandwidth and again "
            "by my_equal.MyEqual; expected a name not taken") in line, line
    assert POLICIES["bandwidth"]["equal"] is equal  # the built-in keeps its name
    assert not list(cwd.glob("R*"))


EXITS = '''
import sys
from edgesim.resources.policies import register_policy

CODE = [0]


@register_policy("bandwidth", "exits_share")
class ExitsShare:
    """Calls sys.exit in round 1."""

    def allocate(self, r):
        if r.round_index >= 1:
            sys.exit(CODE[0])
        w = 1.0 + r.devices
        return r.bandwidth_hz * w / w.sum()
'''


@pytest.mark.parametrize("code", [0, 3])
def test_sys_exit_inside_a_policy_is_a_plugin_failure_that_keeps_the_folder(cwd, code):
    module = f"exits_{code}"
    (cwd / f"{module}.py").write_text(EXITS.replace("CODE = [0]", f"CODE = [{code}]"))
    (cwd / "p.toml").write_text(FDMA + f'plugins = ["{module}"]\n\n[resources]\nbandwidth = "exits_share"\n')
    try:
        line = one_error_line(run("run", "p.toml", "--out", "R", "-q", "--set", "run.checkpoint_every=1"))
    finally:
        sys.modules.pop(module, None)
        POLICIES["bandwidth"].pop("exits_share", None)
    assert f"[resources] bandwidth = 'exits_share': round 1: raised SystemExit: {code}" in line, line
    assert "R.incomplete" in line and "--resume" in line
    assert (cwd / "R.incomplete" / "checkpoints").is_dir() and not (cwd / "R").exists()


def test_sys_exit_anywhere_in_a_run_is_one_line_and_keeps_the_folder(cwd, monkeypatch):
    """An algorithm's or a codec's code that calls sys.exit (here: the algorithm's run itself) ends the run as a
    plugin failure, not as edgesim's own exit 0."""
    from edgesim.scenarios import run as run_module

    def exits(*args, **kwargs):
        sys.exit(0)

    monkeypatch.setattr(run_module, "run_algorithm", exits)
    (cwd / "p.toml").write_text(PHYSICS)
    line = one_error_line(run("run", "p.toml", "--out", "R", "-q"))
    assert "the run's code called sys.exit(0) (a plugin's algorithm, policy or codec?)" in line, line
    assert "R.incomplete" in line
    assert "failed" in (cwd / "R.incomplete" / "INCOMPLETE").read_text()


def test_a_policy_plugin_gets_no_note_that_it_registered_nothing(cwd):
    (cwd / "quiet_share.py").write_text(EXITS.replace("exits_share", "quiet_share").replace("if r.round_index >= 1",
                                                                                           "if False"))
    (cwd / "p.toml").write_text(FDMA + 'plugins = ["quiet_share"]\n\n[resources]\nbandwidth = "quiet_share"\n')
    try:
        result = run("plan", "p.toml")
    finally:
        sys.modules.pop("quiet_share", None)
        POLICIES["bandwidth"].pop("quiet_share", None)
    assert result.exit_code == 0, result.output
    assert "registered no" not in result.stderr, result.stderr
    # a module of this test's own, never imported before: the note is said once per process (another test of the
    # same xdist worker may have had it for a module such as "os")
    (cwd / "registers_nothing_here.py").write_text("VALUE = 1\n")
    (cwd / "nothing.toml").write_text(PHYSICS + 'plugins = ["registers_nothing_here"]\n')
    try:
        result = run("plan", "nothing.toml")
    finally:
        sys.modules.pop("registers_nothing_here", None)
    assert ("'registers_nothing_here' registered no algorithm, model, data set or partition, nor a resource policy "
            "or codec" in result.stderr), result.stderr


def _edgesim(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "edgesim.scenarios.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("plugin, source, code", [
    ("nothing_here", "x = 1\n", 0),  # registers nothing: one note
    ("old_names", "import learning\n", 2),  # the old top-level name: one error line
])
def test_jobs_2_says_what_one_process_says(tmp_path, plugin, source, code):
    (tmp_path / f"{plugin}.py").write_text(source)
    (tmp_path / "s.toml").write_text(TINY_SCENARIO)
    said = {}
    for jobs in (1, 2):
        args = ("run", "s.toml", "--out", f"r{jobs}", "-q", "--jobs", str(jobs), "--set", f'run.plugins=["{plugin}"]',
                "--set", "run.algorithms=['fedavg', 'local']", "--set", "budget.rounds=1")
        if jobs == 1:  # one process: this one, through the entry point's main() (the plugin module put back after)
            try:
                done = main_here(*args, cwd=tmp_path, timeout_s=300)
            finally:
                sys.modules.pop(plugin, None)
        else:  # a process of its own, with its --jobs worker
            done = _edgesim(*args, cwd=tmp_path)
        assert done.returncode == code, done.stderr
        said[jobs] = [line.replace(f"r{jobs}", "r") for line in done.stderr.splitlines()]
    assert said[1] == said[2]
    assert sum("[run] plugins" in line for line in said[2]) == 1, said[2]
