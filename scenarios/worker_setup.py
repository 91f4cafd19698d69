"""What a spawned sweep worker inherits from the ``edgesim sweep`` process: the figure style and a GPU of its own.

``--style``/``--width`` live in a context variable (:mod:`edgesim.plots.style`) that a spawned process does
not inherit, so it travels here. GPUs: every worker of ``sweep --jobs N`` used to train on the first GPU;
now the workers take the visible GPUs round-robin — the k-th worker to start (a counter shared by the pool)
gets ``CUDA_VISIBLE_DEVICES`` = the (k mod G)-th of the G GPUs this process sees, set before torch starts
CUDA in it, so ``device = "auto"``/``"cuda"`` means that GPU. Visible GPUs: ``CUDA_VISIBLE_DEVICES`` when
set (its entries, ids or UUIDs, as given; empty: none), else one per ``/proc/driver/nvidia/gpus/`` entry
(counted without importing torch). With one GPU or none nothing changes. Standard library only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")


def visible_gpus(environ: Mapping[str, str] = os.environ, proc: Path = NVIDIA_GPUS) -> tuple[str, ...]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` entries (module docstring)."""
    if "CUDA_VISIBLE_DEVICES" in environ:
        return tuple(e.strip() for e in environ["CUDA_VISIBLE_DEVICES"].split(",") if e.strip())
    try:
        return tuple(str(i) for i in range(sum(1 for _ in proc.iterdir())))
    except OSError:
        return ()


def gpu_for(worker_index: int, gpus: tuple[str, ...]) -> Optional[str]:
    """The GPU of the ``worker_index``-th worker: round-robin over ``gpus``; ``None`` without any."""
    return gpus[worker_index % len(gpus)] if gpus else None


@dataclass(frozen=True)
class WorkerSetup:
    """``style``: the figure style; ``gpus``: the GPUs to share; ``counter``: a ``multiprocessing.Value`` the
    pool's workers count themselves with."""

    style: Any = None
    gpus: tuple[str, ...] = ()
    counter: Any = None

    def apply(self) -> Optional[str]:
        """In the worker: set its figure style and its GPU; returns the GPU (``None``: left as it was)."""
        if self.style is not None:
            from edgesim.plots.style import set_style

            set_style(self.style.name, self.style.width_in)
        if len(self.gpus) < 2 or self.counter is None:
            return None
        with self.counter.get_lock():
            index = self.counter.value
            self.counter.value += 1
        gpu = gpu_for(index, self.gpus)
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
        return gpu


def worker_setup(ctx) -> WorkerSetup:
    """What the workers of a pool made with the multiprocessing context ``ctx`` inherit from this process."""
    from edgesim.plots.style import current_style

    return WorkerSetup(current_style(), visible_gpus(), ctx.Value("i", 0))
