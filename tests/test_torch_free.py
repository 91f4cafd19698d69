"""Boundaries: the simulator ``edgesim/`` never imports torch (the project's layering, README "Layout"), nor do the name registries."""

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import importlib, pkgutil, sys
import edgesim, edgesim.engine, edgesim.channel, edgesim.curve, edgesim.budget
names = sorted(m.name for m in pkgutil.walk_packages(edgesim.__path__, "edgesim."))
for name in names:
    importlib.import_module(name)
leaked = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
print(len(names), "modules")
if leaked:
    sys.exit("torch imported by edgesim: " + ", ".join(leaked[:5]))
"""


def test_importing_every_edgesim_module_leaves_torch_out():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "modules" in result.stdout


SCENARIO_PROBE = """
import sys
from edgesim.learning.data.datasets import DATASETS
from edgesim.learning.data.partitions import PARTITIONS
from edgesim.learning.model_specs import MODELS
from edgesim.scenarios.schema import load_scenario
sc = load_scenario(sys.argv[1], learning=True)
assert sc.learning["data"].dataset == "bloodmnist" and sc.learning["train"].model == "resnet9"
leaked = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
if leaked:
    sys.exit("torch imported by loading a scenario: " + ", ".join(leaked[:5]))
print(len(DATASETS), len(PARTITIONS), len(MODELS))
"""


def test_the_name_registries_and_loading_a_scenario_leave_torch_out(tmp_path):
    """Scenario validation reads the model/dataset/partition registries without torch (no [algorithms.*] tables)."""
    scenario = tmp_path / "s.toml"
    scenario.write_text('[data]\ndataset = "bloodmnist"\ndata_dir = "."\npartition = "labels_at_server"\n'
                        '[train]\nmodel = "resnet9"\n[run]\nalgorithms = ["fedavg", "dofed_spp"]\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    result = subprocess.run([sys.executable, "-c", SCENARIO_PROBE, str(scenario)], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout


TABLES_PROBE = """
import sys
from typer.testing import CliRunner
from edgesim.learning.algorithms import ALGORITHMS
from edgesim.scenarios.cli import app
from edgesim.scenarios.schema import load_scenario
sc = load_scenario(sys.argv[1])
assert set(sc.learning["algorithms"]) == set(ALGORITHMS), sorted(ALGORITHMS)
r = CliRunner().invoke(app, ["plan", sys.argv[1]])
assert r.exit_code in (0, 1) and ("error" not in r.output or "No (B, K) pair fits" in r.output), r.output
r = CliRunner().invoke(app, ["plot", sys.argv[2], "--out", sys.argv[3]])
assert r.exit_code == 0, r.output
leaked = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
if leaked:
    sys.exit("torch imported by loading, planning or plotting: " + ", ".join(leaked[:5]))
print(len(ALGORITHMS), "algorithms")
"""


def test_algorithm_tables_plan_and_plot_leave_torch_out(tmp_path):
    """A scenario with an [algorithms.NAME] table for every registered algorithm loads, validates and plans
    torch-free; so does plotting a run folder; and learning/config.py reads the algorithms' registry, no folder."""
    from edgesim.learning.algorithms import ALGORITHMS
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    tables = "".join(f"[algorithms.{name}]\n" for name in ALGORITHMS)
    scenario = tmp_path / "s.toml"
    scenario.write_text('[data]\ndataset = "fashion_mnist"\ndata_dir = "."\npartition = "labels_at_server"\n'
                        '[workload]\nmodel_bits = 1e6\nsamples_per_device = 500\n'  # given: planned without data
                        '[train]\nmodel = "cnn"\n[run]\nalgorithms = ["fedavg", "dofed_spp"]\n' + tables)
    phys = tmp_path / "p.toml"
    phys.write_text('[workload]\nmodel_bits = 1e6\nsamples_per_device = 500\n[run]\nbackend = "parametric"\nclients_per_round = 2\n')
    folder = run_scenario(load_scenario(phys), tmp_path / "r")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    result = subprocess.run([sys.executable, "-c", TABLES_PROBE, str(scenario), str(folder), str(tmp_path / "figs")],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout
    config_source = (REPO / "learning" / "config.py").read_text()
    assert re.search(r"edgesim\.learning\.algorithms\.[a-z_]+\.", config_source) is None  # the registry only, no folder
