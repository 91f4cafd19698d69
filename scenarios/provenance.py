"""``run.json``: where, when, how and with what a run was made — provenance kept apart from the scenario.

``config.toml`` is the resolved scenario and nothing else, so that
``edgesim run <run>/config.toml`` reproduces the run byte for byte;
everything that differs from one machine or one invocation to the next
(the command line, the host, the CPU and GPU, package versions, torch
threads, the git commit of the edgesim checkout, start and end times) goes
into ``run.json`` beside it (docs/use/run_folders.md).
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def versions(with_torch: bool = True) -> dict:
    """Package versions (torch's, its threads and CUDA's only when the run uses torch)."""
    from importlib.metadata import version

    import numpy
    import simpy

    out = {"edgesim": version("edgesim"), "python": platform.python_version(), "numpy": numpy.__version__,
           "simpy": simpy.__version__}
    if with_torch:
        import torch

        out.update(torch=torch.__version__, torch_threads=torch.get_num_threads(), cuda=torch.version.cuda)
    return out


def git_state(where: Path | None = None) -> dict | None:
    """``{"commit", "dirty"}`` of the git checkout holding edgesim's source, or ``None`` (an installed wheel,
    no git, not a checkout)."""
    where = where or Path(__file__).resolve().parent.parent
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, check=True,
                                  timeout=10).stdout.strip()

        top = Path(git("rev-parse", "--show-toplevel")).resolve()
        if not (top / "pyproject.toml").is_file() or top != where.resolve():
            return None  # edgesim installed inside someone else's repository: that commit is not ours
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_name(with_torch: bool) -> str | None:
    """The CUDA device torch sees (``None`` without one, or for a torch-free run)."""
    if not with_torch:
        return None
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def provenance(source: str, *, with_torch: bool, started: str, argv: list[str] | None = None,
               plugins: list[str] | tuple = ()) -> dict:
    """``run.json`` of a run started at ``started`` from the scenario file ``source`` (``finished``: ``None``);
    ``plugins``: the scenario's ``[run] plugins`` modules — they and any plugin entry point loaded are recorded
    (module, version, path) under ``plugins`` when there is any."""
    from edgesim.learning.plugins import plugin_record

    used = plugin_record(plugins)
    return {
        "source": source,
        "command": list(sys.argv if argv is None else argv),
        "cwd": os.getcwd(),
        "git": git_state(),
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu": {"name": cpu_name(), "cores": os.cpu_count()},
        "gpu": gpu_name(with_torch),
        "versions": versions(with_torch),
        **({"plugins": used} if used else {}),
        "started": started,
        "finished": None,
        "resumed": [],
    }


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _folder_sha256(root: Path) -> str:
    """One SHA-256 over every file under ``root``: each file's path relative to ``root`` and its own SHA-256."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(root).as_posix()}\0{_file_sha256(path)}\n".encode())
    return digest.hexdigest()


def input_files(sc) -> dict[str, str]:
    """``{path: SHA-256}`` of every file of the user's that the scenario ``sc`` reads: the ``npz`` archive, the
    ``image_folder`` (one hash over its files' names and contents) and the availability trace. ``run.json``
    records it as ``inputs``; ``--resume`` compares it with what it would read now (:func:`changed_inputs`). A file
    that cannot be found or read is left out: its loader says why in its own words."""
    out: dict[str, str] = {}
    try:
        data = None if sc.physics_only else sc.learning.data
        if data is not None and data.dataset == "npz":
            from edgesim.learning.data.npz import find_npz

            path = find_npz(data.data_dir, data.file).resolve()
            out[str(path)] = _file_sha256(path)
        elif data is not None and data.dataset == "image_folder" and data.data_dir is not None:
            root = Path(data.data_dir).expanduser().resolve()
            if root.is_dir():
                out[str(root)] = _folder_sha256(root)
        if sc.availability.model == "trace":
            path = Path(sc.availability.trace).expanduser().resolve()
            out[str(path)] = _file_sha256(path)
    except (OSError, ValueError):  # the loader refuses it in its own words (DatasetError is a ValueError)
        pass
    return out


def changed_inputs(recorded: dict, now: dict) -> str | None:
    """What differs between the ``inputs`` a run recorded and those it reads now, in words; ``None`` when nothing
    does (a file recorded but no longer read, or read but not recorded, counts as a change)."""
    for path in sorted(set(recorded) | set(now)):
        old, new = recorded.get(path), now.get(path)
        if old == new:
            continue
        if old is None:
            return f"it now reads {path}, which it did not read when it started"
        if new is None:
            return f"it started on {path} (SHA-256 {old[:12]}…), which it no longer reads"
        return f"{path} changed since it started (SHA-256 {old[:12]}… then, {new[:12]}… now)"
    return None
