"""``run.json``: where, when, how and with what a run was made — provenance kept apart from the scenario.

``config.toml`` is the resolved scenario and nothing else, so that
``edgesim run <run>/config.toml`` reproduces the run byte for byte;
everything that differs from one machine or one invocation to the next
(the command line, the host, the CPU and GPU, package versions, torch
threads, the git commit of the edgesim checkout, start and end times) goes
into ``run.json`` beside it (docs/run_folders.md).
"""

from __future__ import annotations

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
