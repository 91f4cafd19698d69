"""Errors carry their parts; the command line and the Python API each word the options an error advises.

A lower layer raises :class:`edgesim.config.ConfigError` with its parts (where, key, value, expected) and marks
the options its advice names (``⟨out⟩``, ``⟨+overwrite⟩``, ``⟨out=⟩VALUE``); ``edgesim.scenarios.cli`` words
them ``--out`` / ``add --overwrite``, ``edgesim.scenarios.api`` ``out`` / ``pass overwrite=True``. No module below
those two spells a command-line flag in a message (the last test greps the string literals).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgesim.config import MARK, MISSING, ConfigError, SystemConfig, build_config, cli_word, marked_options, worded
from edgesim.scenarios.api import python_word
from edgesim.scenarios.cli import app

REPO = Path(__file__).resolve().parents[1]

PHYSICS = """
name = "phys"
seed = 1

[system]
n_devices = 4
bandwidth_hz = 1e6
cpu_freq_hz = 1e9
channel_gain_db = -100

[budget]
total_time_s = 10
rounds = 2

[workload]
cycles_per_sample = 1e6
samples_per_device = 100
model_bits = 1e6

[run]
backend = "parametric"
clients_per_round = 2
"""


def test_a_config_error_carries_its_parts():
    with pytest.raises(ConfigError) as caught:
        build_config(SystemConfig, {"n_devices": 0}, "s.toml: [system]")
    e = caught.value
    assert (e.where, e.key, e.value, e.expected) == ("s.toml: [system]", "n_devices", 0, "an integer >= 1")
    assert str(e) == "s.toml: [system]: n_devices = 0: expected an integer >= 1"
    assert e.options == ()
    bare = ConfigError("something is wrong")  # a message alone: no parts
    assert (bare.where, bare.key, bare.value, bare.expected, bare.options) == (None, None, MISSING, None, ())
    assert str(ConfigError(key="seed", expected="an integer")) == "seed: expected an integer"


def test_marks_name_the_options_and_each_front_end_words_them():
    text = "⟨out=⟩'r': r holds a finished run; ⟨+overwrite⟩ to replace it, or choose another ⟨out⟩ (⟨data-dir⟩)"
    assert marked_options(text) == ("out", "overwrite", "data-dir")
    assert worded(text, cli_word) == ("--out 'r': r holds a finished run; add --overwrite to replace it, "
                                      "or choose another --out (--data-dir)")
    assert worded(text, python_word) == ("out='r': r holds a finished run; pass overwrite=True to replace it, "
                                         "or choose another out (data={'data_dir': ...})")
    assert worded("⟨set=⟩a.b=1, ⟨rank-by=⟩x, ⟨jobs⟩", python_word) == "override a.b=1, rank_by=x, jobs"
    assert worded("no marks, --not-ours either", cli_word) == "no marks, --not-ours either"


def test_prefixing_or_rewording_an_error_keeps_its_parts_and_marks():
    e = ConfigError("⟨out=⟩r: busy; choose another ⟨out⟩", key="out", value="r", expected="a free folder")
    at = e.at("sweep run a")
    assert str(at) == "sweep run a: ⟨out=⟩r: busy; choose another ⟨out⟩"
    assert (at.where, at.key, at.value, at.expected, at.options) == ("sweep run a", "out", "r", "a free folder",
                                                                     ("out",))
    more = e.reworded(f"{e} (⟨+resume⟩ later)")
    assert type(more) is ConfigError and more.options == ("out", "resume") and more.key == "out"


def test_the_same_error_through_the_command_line_and_the_python_api(tmp_path, monkeypatch):
    """A finished run in the way: one error, its parts, worded by each front end."""
    import edgesim
    from edgesim.results.reading import RunFolderError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "phys.toml").write_text(PHYSICS)
    runner = CliRunner()
    assert runner.invoke(app, ["run", "phys.toml", "--out", "r", "-q"]).exit_code == 0

    result = runner.invoke(app, ["run", "phys.toml", "--out", "r", "-q"])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: --out 'r': r holds a finished run; add --overwrite to replace it, "
                                     "or choose another --out")
    with pytest.raises(RunFolderError) as caught:
        edgesim.run("phys.toml", out="r", quiet=True)
    e = caught.value
    assert str(e) == "out='r': r holds a finished run; pass overwrite=True to replace it, or choose another out"
    assert (e.where, e.key, e.value, e.expected, e.options) == ("out", "out", "r", "a new run folder",
                                                                ("out", "overwrite"))
    assert not MARK.search(str(e)) and "--" not in str(e)


def test_an_unfinished_run_advises_resume_in_each_front_ends_words(tmp_path, monkeypatch):
    import edgesim
    from edgesim.results.files import CONFIG
    from edgesim.results.writing import RunFolder

    monkeypatch.chdir(tmp_path)
    (tmp_path / "phys.toml").write_text(PHYSICS)
    killed = RunFolder(tmp_path / "r")  # what a killed run leaves: r.incomplete, its marker and its scenario
    killed.start()
    killed.write_text(CONFIG, PHYSICS)
    line = CliRunner().invoke(app, ["run", "phys.toml", "--out", "r", "-q"]).stderr.strip()
    assert line.endswith("holds an unfinished run; add --resume to go on with it, or --overwrite to start it again")
    with pytest.raises(ConfigError, match=r"pass resume=True to go on with it, or overwrite=True to start it again$"):
        edgesim.run("phys.toml", out="r", quiet=True)


def test_reading_an_unfinished_run_advises_resume_in_each_front_ends_words(tmp_path):
    import edgesim
    from edgesim.results.reading import RunFolderError
    from edgesim.results.writing import RunFolder

    killed = RunFolder(tmp_path / "r")
    killed.start()
    line = CliRunner().invoke(app, ["plot", str(killed.work), "--out", str(tmp_path / "figs")]).stderr.strip()
    assert line.startswith("error: ") and line.endswith("finish it by running it again with --resume, then use "
                                                       "the finished folder")
    with pytest.raises(RunFolderError, match=r"running it again with resume=True, then use the finished folder$"):
        edgesim.load_runs([killed.work])


# --- no command-line flag below the front ends -------------------------------------------------------------------

FRONT_ENDS = {"scenarios/cli.py", "scenarios/api.py"}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
# Modules whose string literals may spell a flag, each with its reason.
ALLOWED = {
    "scenarios/augment_grid.py": "a command-line program of its own (python -m edgesim.scenarios.augment_grid): "
                                 "its argparse options and their errors",
    "scenarios/provenance.py": "the arguments of the git commands it runs (--show-toplevel, --porcelain), not ours",
    "scenarios/round_watch.py": "the watch of `edgesim run --round-timeout-s` alone (no other front end has the "
                                "limit): its lines name the option they enforce",
}


def _message_literals(path: Path):
    """The string literals of ``path`` that are not documentation (a docstring, or a bare string statement)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def test_no_layer_below_the_front_ends_spells_a_command_line_flag():
    found = []
    for folder in ("edgesim", "learning", "scenarios", "plots"):
        for path in sorted((REPO / folder).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if name in FRONT_ENDS or name in ALLOWED:
                continue
            found += [f"{name}:{line}: {FLAG.findall(text)}" for line, text in _message_literals(path)
                      if FLAG.search(text)]
    assert not found, "mark the option (⟨out⟩, ⟨+overwrite⟩, ⟨out=⟩VALUE: edgesim.config.MARK) instead:\n" + \
        "\n".join(found)
    assert all(reason for reason in ALLOWED.values())
    for name in ALLOWED:  # an allowance for a module that no longer needs it goes
        assert any(FLAG.search(t) for _, t in _message_literals(REPO / name)), name


def test_every_marked_option_is_a_command_line_option():
    """A mark names an option the command line has (its words are --NAME), so that the advice can be followed."""
    import typer

    command = typer.main.get_command(app)
    flags = set()

    def walk(cmd):
        for param in cmd.params:
            flags.update(o for o in param.opts if o.startswith("--"))
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(command)
    assert "--out" in flags and "--rank-by" in flags
    marked = set()
    for folder in ("edgesim", "learning", "scenarios", "plots"):
        for path in (REPO / folder).rglob("*.py"):
            for _, text in _message_literals(path):
                marked.update(m.group(2) for m in MARK.finditer(text))
    marked.discard("")  # an f-string's mark whose name is filled in at run time ("⟨{option}=⟩")
    assert marked and not {f"--{n}" for n in marked} - flags, sorted({f"--{n}" for n in marked} - flags)


# --- files keep the command line's words -------------------------------------------------------------------------

def test_an_incomplete_note_and_a_sweep_status_keep_no_marks(tmp_path, monkeypatch, tiny_scenario):
    """What edgesim writes into a file (``INCOMPLETE``, sweep.csv's status) says the options as the docs do."""
    from edgesim.config import as_written
    from edgesim.scenarios import run as run_module
    from edgesim.scenarios.run import failure_note
    from edgesim.scenarios.sweep import run_one

    error = ConfigError("⟨out=⟩r: holds an unfinished run; ⟨+resume⟩ to go on, or choose another ⟨out⟩")
    note = failure_note(error)
    assert note.startswith("failed: --out r: holds an unfinished run; add --resume to go on, or choose another --out (")
    assert "⟨" not in failure_note(RuntimeError("⟨+resume⟩ after a fix"))
    assert as_written("no marks") == "no marks"

    def refuse(*args, **kwargs):
        raise error

    monkeypatch.setattr(run_module, "run_scenario", refuse)
    result = run_one({"name": "s0", "scenario": str(tiny_scenario), "overrides": [], "out": str(tmp_path / "s0"),
                      "threads": 1, "cwd": str(Path.cwd())})
    assert result["status"] == ("failed: ConfigError: --out r: holds an unfinished run; add --resume to go on, "
                                "or choose another --out")
