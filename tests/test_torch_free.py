"""Boundaries: the simulator ``edgesim/`` never imports torch (the project's layering, README "Layout"), nor do the name registries."""

import os
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
from learning.data.datasets import DATASETS
from learning.data.partitions import PARTITIONS
from learning.model_registry import MODELS
from scenarios.schema import load_scenario
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
