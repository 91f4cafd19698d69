"""Boundary: the simulator ``edgesim/`` never imports torch (ARCHITECTURE.md; STYLE.md "Do this" 6)."""

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
