"""Packaging: edgesim installs beside the torch an environment already holds, and runs beside a user's folders.

``pyproject.toml`` admits a range of torch 2.x releases (the exact CPU pin lives in
``constraints.txt`` only). The install tests build a fresh virtual environment that "already
holds a torch": it sees this test environment's packages (torch 2.13.0 among them, edgesim's own
editable install left out) through a ``.pth`` file, and nothing is ever downloaded (``--no-index``;
pip's own configuration, which may hold a machine-wide constraints file, is switched off). If pip
wanted to replace or add a torch, ``--no-index`` makes it fail, and the plan's install list is checked
to hold edgesim alone. Then ``pip install .`` (a wheel built from a copy of the working tree) goes into
that environment and a small scenario runs from a folder holding the user's own ``plots/``,
``learning/`` and ``scenarios/`` packages: an install claims no top-level name but ``edgesim``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]


def _torch_requirement(pyproject: Path) -> Requirement:
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    found = [Requirement(d) for d in deps if Requirement(d).name == "torch"]
    assert len(found) == 1, f"pyproject.toml names torch {len(found)} times: {deps}"
    return found[0]


def test_torch_is_a_range_of_2x_releases_and_the_exact_pin_is_in_constraints():
    spec = _torch_requirement(REPO / "pyproject.toml").specifier
    for admitted in ("2.3.0", "2.5.1", "2.13.0", "2.14.1"):
        assert spec.contains(admitted), f"torch {admitted} refused by {spec}"
    for refused in ("1.13.1", "3.0.0"):
        assert not spec.contains(refused), f"torch {refused} admitted by {spec}"
    assert not any(s.operator in ("==", "===") for s in spec), f"pyproject.toml pins torch exactly: {spec}"
    pins = [line.split("#")[0].strip() for line in (REPO / "constraints.txt").read_text().splitlines()]
    assert "torch==2.13.0" in pins, "constraints.txt must keep the exact CPU pin the README and CI install"


def _source_copy(dest: Path) -> Path:
    """The working tree's files (tracked and untracked, not ignored) copied to ``dest``: nothing is built in the checkout."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _venv_holding_this_torch(root: Path) -> Path:
    """A fresh venv that sees this environment's packages, edgesim's own install excepted; its python."""
    import torch

    host_site = Path(torch.__file__).resolve().parents[1]
    host = root / "host"
    host.mkdir()
    for entry in host_site.iterdir():
        if entry.name.lower().startswith(("edgesim", "__editable__")):
            continue
        (host / entry.name).symlink_to(entry)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_host_packages.pth").write_text(f"{host}\n")
    return python


def _pip(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PIP_CONSTRAINT", None)
    return subprocess.run([str(python), "-m", "pip", *args], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python of a fresh venv holding torch 2.13.0 and, installed from a wheel, edgesim; pip's dry-run report)."""
    import torch

    if not torch.__version__.startswith("2.13.0"):
        pytest.skip(f"the environment holds torch {torch.__version__}; the check is written for the 2.13.0 build")
    root = tmp_path_factory.mktemp("packaging")
    src = _source_copy(root / "src")
    python = _venv_holding_this_torch(root)
    report = root / "plan.json"
    plan = _pip(python, "install", "--dry-run", "--report", str(report), "--no-index", "--no-build-isolation", ".",
                cwd=src)
    assert plan.returncode == 0, f"pip cannot plan `pip install .` with the torch at hand:\n{plan.stderr}"
    done = _pip(python, "install", "--no-index", "--no-build-isolation", ".", cwd=src)
    assert done.returncode == 0, f"`pip install .` failed:\n{done.stderr}"
    return python, json.loads(report.read_text())


def test_pip_plans_to_install_edgesim_alone_keeping_the_torch_it_finds(installed):
    python, report = installed
    planned = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report["install"]}
    assert planned == {"edgesim": "0.1.0"}, f"pip's plan installs more than edgesim: {planned}"
    version = subprocess.run([str(python), "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version.startswith("2.13.0"), version


def test_the_wheel_installs_edgesim_as_its_only_top_level_name(installed):
    """The installed files (the wheel's RECORD) sit under ``edgesim/`` only, besides the dist-info and the script."""
    python, _ = installed
    code = ("import importlib.metadata as m, json\n"
            "print(json.dumps(sorted({f.parts[0] for f in m.distribution('edgesim').files})))")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True,
                         cwd=python.parent).stdout  # not the checkout, whose edgesim.egg-info lists the sources
    names = [n for n in json.loads(out) if n != ".." and not n.endswith(".dist-info")]
    assert names == ["edgesim"], names
    listed = subprocess.run([str(python), "-c", "import edgesim.learning.algorithms as a, edgesim.results.reading; "
                             "print(len(a.ALGORITHMS))"], capture_output=True, text=True, check=True,
                            cwd=python.parent).stdout
    assert int(listed) >= 20  # the algorithm folders and the results module are in the wheel


# the only test that the installed wheel runs (~20 s): in the default run, not marked slow
def test_the_installed_wheel_runs_a_scenario_beside_a_users_plots_learning_and_scenarios_folders(installed, tmp_path):
    python, _ = installed
    user = tmp_path / "my_study"
    for name in ("plots", "learning", "scenarios"):
        (user / name).mkdir(parents=True)
        (user / name / "__init__.py").write_text(f"raise ImportError('the user\\'s own {name} package was imported')\n")
    (user / "plots" / "curves.py").write_text("raise ImportError('the user\\'s own plots/curves.py was imported')\n")
    script = (
        "import edgesim, pathlib\n"
        "r = edgesim.run(None, 'out', formats=['png'], seed=1,\n"
        "                run={'algorithms': ['fedavg'], 'clients_per_round': 3},\n"
        "                system={'n_devices': 4}, budget={'rounds': 2})\n"
        "assert pathlib.Path(edgesim.__file__).resolve().is_relative_to(pathlib.Path(__import__('sys').prefix).resolve()),"
        " edgesim.__file__\n"
        "print(len(r.rounds))\n")
    done = subprocess.run([str(python), "-c", script], cwd=user, capture_output=True, text=True,
                          env={**os.environ, "EDGESIM_DATA": "", "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "2"
    assert (user / "out" / "rounds.csv").is_file()


def test_the_readmes_first_command_installs_the_main_job_alone_and_ci_runs_its_second():
    """The README's first command installs edgesim without extras (no Ray, no test tools) and runs the main job;
    its second adds the test extras and runs the tests, and .ci/run runs that same install and test command."""
    import re

    block = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)[0]
    first, second = [line for line in block.splitlines() if line.startswith("python3 -m venv")][:2]
    assert first == "python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e . && .venv/bin/edgesim run"
    install, _, test = second.rpartition(" && ")
    assert test == ".venv/bin/python -m pytest -q -n auto --dist loadfile" and '-e ".[test,ray,tensorboard]"' in install
    ci = (REPO / ".ci" / "run").read_text().replace("\\\n", " ")
    assert " ".join(install.split()) in " ".join(ci.split()) and test in ci
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {Requirement(d).name for d in project["dependencies"]}
    assert not core & {"ray", "pytest", "pytest-xdist", "hypothesis", "ruff", "tensorboard", "mlflow-skinny"}
    assert {Requirement(d).name for d in project["optional-dependencies"]["test"]} >= {"pytest", "pytest-xdist"}
