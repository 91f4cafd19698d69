"""The run folder's one owner, ``edgesim/results/``: no other module spells a run-folder file, and reading a
run folder needs neither torch nor matplotlib."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edgesim.results import files
from edgesim.results.fingerprint import dig, flatten, scenario_fingerprint
from edgesim.results.reading import RunFolderError, expand, folder_kind, load_run, read_rounds
from edgesim.results.writing import RunFolder, csv_text

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("edgesim", "learning", "scenarios", "plots")
RUN_FOLDER_FILES = (files.CONFIG, files.ROUNDS, files.DEVICES, files.EVENTS, files.SUMMARY, files.PROVENANCE,
                    files.MANIFEST, files.MARKER, files.SWEEP_SPEC, files.SWEEP_TABLE)


def _literals(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string literal of a module that is not a docstring (f-strings' parts included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            docstrings.add(id(body[0].value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def test_only_the_results_module_names_the_run_folder_files():
    pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in RUN_FOLDER_FILES) + r")(?!\w)")
    owner = REPO / "edgesim" / "results" / "files.py"
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if path == owner:
                continue
            found += [f"{path.relative_to(REPO)}:{line}: {m}" for line, text in _literals(path)
                      for m in pattern.findall(text)]
    assert not found, "\n".join(found)
    assert len(_literals(owner)) >= len(RUN_FOLDER_FILES)  # the owner does spell them (the test can fail)


PROBE = """
import importlib, pkgutil, sys
import edgesim.results
for m in pkgutil.iter_modules(edgesim.results.__path__, "edgesim.results."):
    importlib.import_module(m.name)
from edgesim.results.reading import load_run, load_runs
run = load_run(sys.argv[1])
assert run.algorithms and run.fingerprint and run.display is not None
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "matplotlib"))
if leaked:
    sys.exit("edgesim.results imported " + ", ".join(leaked[:5]))
"""


def _fake_run(folder: Path, accuracies=(0.2, 0.5, 0.8), seed: int = 0) -> Path:
    """A finished run folder as edgesim writes it (through the writer, so the manifest lists every file)."""
    rf = RunFolder(folder)
    rf.start()
    rf.write_text(files.CONFIG, f'name = "fake"\nseed = {seed}\n[system]\nbandwidth_hz = 1e6\n')
    rows = [["fedavg", i, 10.0 * (i + 1), a, 100 * (i + 1), 1.0 * (i + 1)] for i, a in enumerate(accuracies)]
    rf.write_text(files.ROUNDS, csv_text(("algorithm", "round", "time_s", "accuracy", "cum_bits_up", "cum_energy_j"),
                                         rows))
    rf.write_json(files.SUMMARY, {"algorithms": {"fedavg": {"display": "FedAvg"}}})
    return rf.finish()


def test_reading_a_run_folder_needs_neither_torch_nor_matplotlib(tmp_path):
    folder = _fake_run(tmp_path / "r")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    result = subprocess.run([sys.executable, "-c", PROBE, str(folder)], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout


def test_one_run_one_reader_one_expander(tmp_path):
    folder = _fake_run(tmp_path / "r")
    run = load_run(folder)
    assert run.algorithms == ["fedavg"] and run.display == {"fedavg": "FedAvg"} and run.seed == 0
    assert list(run.series["fedavg"]["accuracy"]) == [0.2, 0.5, 0.8]
    assert run.series["fedavg"].keys() == read_rounds(folder)["fedavg"].keys()
    assert folder_kind(folder) == "run" and folder_kind(tmp_path) is None
    # a folder holding run folders stands for them, sorted by name
    _fake_run(tmp_path / "a", seed=1)
    assert [f.folder.name for f in expand([tmp_path])] == ["a", "r"]
    with pytest.raises(RunFolderError, match="neither a run folder"):
        expand([_empty(tmp_path / "empty")])
    with pytest.raises(RunFolderError, match="no such folder"):
        expand([tmp_path / "missing"])


def _empty(p: Path) -> Path:
    p.mkdir()
    return p


def test_one_flatten_and_the_fingerprint_ignore_the_seed_only():
    a = {"name": "x", "seed": 0, "system": {"bandwidth_hz": 1e6, "powers": [1, 2]}, "run": {"threads": 1}}
    assert flatten(a) == {"name": "x", "seed": 0, "system.bandwidth_hz": 1e6, "system.powers": [1, 2],
                          "run.threads": 1}
    assert dig(a, "system.powers") == "[1, 2]" and dig(a, "system.nothing") is None
    assert scenario_fingerprint(a) == scenario_fingerprint({**a, "seed": 7, "run": {"threads": 4}})
    assert scenario_fingerprint(a) != scenario_fingerprint({**a, "system": {"bandwidth_hz": 2e6, "powers": [1, 2]}})
