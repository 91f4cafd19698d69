"""The worked examples of the plugin guides (docs/writing_*.md): the page's ``lang file=NAME`` blocks written as a
package, installed offline into a ``--target`` folder, and edgesim run on ``PYTHONPATH`` from another folder —
one harness for the algorithm, policy, codec, access-scheme and asynchronous-rule guides' tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def doc_files(doc: Path) -> dict[str, str]:
    """The page's ```lang file=NAME blocks, by file name."""
    return dict(re.findall(r"```\w+ file=(\S+)\n(.*?)```", doc.read_text(), flags=re.S))


def edgesim(*args: str, cwd: Path, pythonpath: str = "") -> subprocess.CompletedProcess:
    """``edgesim ARGS`` in a fresh interpreter, in ``cwd``, with only ``pythonpath`` on ``PYTHONPATH``."""
    env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "edgesim.scenarios.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def write_package(doc: Path, tmp_path: Path, names: set[str]) -> Path:
    """The page's files (exactly ``names``) written into ``tmp_path/pkg``."""
    files = doc_files(doc)
    assert set(files) == names
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name, text in files.items():
        (pkg / name).write_text(text)
    return pkg


def install(pkg: Path, tmp_path: Path, scenario: str) -> tuple[Path, Path, Path]:
    """``pkg`` installed offline into ``tmp_path/site``; ``(site, work, scenario file)``: a work folder that is not
    the package's (so only the entry point can find the module) holding a copy of the package's ``scenario``."""
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(target), str(pkg)], capture_output=True, text=True,
                         timeout=300)
    assert pip.returncode == 0, pip.stderr
    work = tmp_path / "work"
    work.mkdir()
    (work / scenario).write_text((pkg / scenario).read_text())
    return target, work, work / scenario
