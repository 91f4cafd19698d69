"""Plugins: the worked example of docs/extend/writing_an_algorithm.md, installed as a package and run by name.

The package is installed into a temporary ``--target`` folder (offline, no
dependencies, the test's venv untouched) that the edgesim subprocesses get on
``PYTHONPATH``; its ``*.dist-info`` carries the entry point.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from cli_here import edgesim_here, main_here
from documented_plugin import edgesim, install, write_package
from typer.testing import CliRunner

from edgesim.scenarios.cli import app

DOC = Path(__file__).resolve().parents[1] / "docs" / "extend" / "writing_an_algorithm.md"
runner = CliRunner()




@pytest.fixture
def example(tmp_path) -> Path:
    return write_package(DOC, tmp_path, {"edgesim_trimmed_mean.py", "pyproject.toml", "trimmed.toml"})


def test_the_documented_plugin_installs_and_runs_by_name(example, tmp_path):
    target, work, scenario = install(example, tmp_path, "trimmed.toml")
    assert list(target.glob("edgesim_trimmed_mean-*.dist-info"))
    listed = edgesim("list", "algorithms", cwd=work, pythonpath=str(target))
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^trimmed_mean\b.*TrimmedMean: FedAvg with a coordinate-wise trimmed mean", listed.stdout, re.M)
    assert re.search(r"^\s+trim\s+float\s+0\.2\b", listed.stdout, re.M)
    done = edgesim("run", str(scenario), "--out", str(work / "run"), "-q", cwd=work, pythonpath=str(target))
    assert done.returncode == 0, done.stderr
    summary = json.loads((work / "run" / "summary.json").read_text())
    assert summary["algorithms"]["trimmed_mean"]["display"] == "TrimmedMean"
    assert summary["algorithms"]["trimmed_mean"]["rounds"] == 2
    assert "trim = 0.2" in (work / "run" / "config.toml").read_text()
    bad = edgesim("run", str(scenario), "--set", "algorithms.trimmed_mean.trim=0.7", "--out", str(work / "bad"),
                  "-q", cwd=work, pythonpath=str(target))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == (f"error: --set algorithms.trimmed_mean.trim=0.7: {scenario}: "
                                  f"[algorithms.trimmed_mean]: trim = 0.7: expected a fraction in [0, 0.5)")
    unknown = edgesim_here("run", scenario, "--out", work / "x", "-q")  # not installed in this process
    assert unknown.returncode == 2 and "unknown algorithm 'trimmed_mean'" in unknown.stderr


def test_run_plugins_imports_a_module_from_the_current_folder(example):
    scenario = example / "trimmed.toml"
    scenario.write_text(scenario.read_text().replace("[run]\n", '[run]\nplugins = ["edgesim_trimmed_mean"]\n'))
    done = edgesim("run", str(scenario), "--out", str(example / "run"), "-q", "--set", "run.rounds=1", cwd=example)
    assert done.returncode == 0, done.stderr
    assert 'plugins = [\n    "edgesim_trimmed_mean",\n]' in (example / "run" / "config.toml").read_text()
    record = json.loads((example / "run" / "run.json").read_text())["plugins"]
    assert record == [{"module": "edgesim_trimmed_mean", "version": None,
                       "path": str(example / "edgesim_trimmed_mean.py"),
                       "sha256": hashlib.sha256((example / "edgesim_trimmed_mean.py").read_bytes()).hexdigest()}]
    listed = edgesim("list", "algorithms", "--scenario", str(scenario), cwd=example)
    assert listed.returncode == 0 and re.search(r"^trimmed_mean\b", listed.stdout, re.M), listed.stderr
    plain = main_here("list", "algorithms", cwd=example)  # without the scenario: the folder's module is not imported
    assert plain.returncode == 0 and not re.search(r"^trimmed_mean\b", plain.stdout, re.M), plain.stderr


def test_a_plugin_beside_the_scenario_is_found_from_another_folder(example, tmp_path):
    """``[run] plugins`` are looked for in the scenario file's folder first (as ``data_dir`` is): run from elsewhere,
    with nothing on PYTHONPATH; run.json names the file and its SHA-256."""
    scenario = example / "trimmed.toml"
    scenario.write_text(scenario.read_text().replace("[run]\n", '[run]\nplugins = ["edgesim_trimmed_mean"]\n'))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = edgesim("run", str(scenario), "--out", str(elsewhere / "run"), "-q", "--set", "run.rounds=1", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    source = example / "edgesim_trimmed_mean.py"
    record = json.loads((elsewhere / "run" / "run.json").read_text())["plugins"]
    assert record == [{"module": "edgesim_trimmed_mean", "version": None, "path": str(source),
                       "sha256": hashlib.sha256(source.read_bytes()).hexdigest()}]
    planned = edgesim("plan", str(scenario), cwd=elsewhere)
    assert planned.returncode == 0 and "trimmed_mean" in planned.stdout, planned.stderr
    source.rename(example / "moved_away.py")  # not beside the scenario, not on the path: one clear line
    missing = edgesim("run", str(scenario), "--out", str(elsewhere / "r2"), "-q", cwd=elsewhere)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "[run] plugins: cannot import 'edgesim_trimmed_mean'" in missing.stderr
    assert "beside the scenario file" in missing.stderr


def test_a_missing_plugin_is_one_clear_line(tiny_scenario, tmp_path):
    result = runner.invoke(app, ["run", str(tiny_scenario), "--set", "run.plugins=[\"no_such_plugin\"]",
                                 "--out", str(tmp_path / "r"), "-q"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "[run] plugins: cannot import 'no_such_plugin'" in result.stderr
    assert not (tmp_path / "r").exists()


def test_a_broken_entry_point_names_itself(monkeypatch):
    from edgesim.learning import entry_points as plugins

    class Broken:
        name, value, dist = "broken", "broken_pkg.mod", None

        def load(self):
            raise ImportError("No module named 'broken_pkg'")

    monkeypatch.setattr(plugins, "entry_points", lambda group: [Broken()] if group == "edgesim.models" else [])
    monkeypatch.setattr(plugins, "_loaded", set())
    with pytest.raises(plugins.PluginError, match=r"plugin entry point 'broken' = 'broken_pkg.mod' \(group "
                                                  r"'edgesim.models'.*ImportError: No module named 'broken_pkg'"):
        plugins.load_entry_points("models")


MODEL_PLUGIN = '''
"""A model plugin: registered torch-free, its builder imported (with torch) only to build."""
from edgesim.learning.model_specs import MODELS, ModelSpec

MODELS.add(ModelSpec("tiny_mlp", "image", "my_models:build", "a one-hidden-layer MLP (a plugin)"))


def build(shape, n_classes, vocab_size=None):
    import math

    import torch.nn as nn

    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(shape), 16), nn.ReLU(), nn.Linear(16, n_classes))
'''


def test_a_model_from_an_entry_point_is_listed_validated_and_trained(tiny_scenario, tmp_path):
    site = tmp_path / "site"
    info = site / "my_models-0.1.dist-info"  # what pip writes for a package with an entry point, by hand
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-models\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[edgesim.models]\ntiny_mlp = my_models\n")
    (site / "my_models.py").write_text(MODEL_PLUGIN)
    listed = edgesim("list", "models", cwd=tmp_path, pythonpath=str(site))
    assert listed.returncode == 0 and re.search(r"^tiny_mlp\s+a one-hidden-layer MLP \(a plugin\)", listed.stdout, re.M)
    done = edgesim("run", str(tiny_scenario), "--set", "train.model=tiny_mlp", "--set", "run.rounds=1",
                   "--set", "run.algorithms=fedavg", "--out", str(tmp_path / "run"), "-q", cwd=tmp_path,
                   pythonpath=str(site))
    assert done.returncode == 0, done.stderr
    assert 'model = "tiny_mlp"' in (tmp_path / "run" / "config.toml").read_text()
    without = edgesim("run", str(tiny_scenario), "--set", "train.model=tiny_mlp", "--out", str(tmp_path / "x"),
                      cwd=tmp_path)  # not installed: one line naming the key, the value and the choices
    assert without.returncode == 2 and "[train]: model = 'tiny_mlp': expected one of 'cnn'" in without.stderr
