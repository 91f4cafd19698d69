"""How many torch threads a run trains with: ``[run] threads`` (default 1), ``--threads``.

One thread per process is the default on purpose. The models of these
scenarios are small, so intra-op threads gain little on an idle machine, and
on a busy one they lose badly: OpenMP workers spin and wait for each other,
and a run with 2 threads on a 2-core machine whose other core is taken ran
about 12× slower than with 1 (``benchmarks/RESULTS.md``). Parallelism comes
from processes instead (``edgesim run --jobs``, ``edgesim sweep --jobs``),
one thread each.

The thread count changes the order of floating-point reductions, so results
depend on it: it is part of the scenario (recorded in ``config.toml``), and
``run`` and ``sweep`` of one scenario and seed train with the same count and
write the same numbers. ``"auto"`` is the cores this process may use.

Standard library only: nothing here imports torch (it sets torch's threads
only if torch is already loaded, and tells OpenMP/MKL through the
environment for when it is loaded later).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator, Union

AUTO = "auto"
ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask; ``os.cpu_count()`` elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def resolve_threads(value: Union[int, str]) -> int:
    """The thread count ``[run] threads`` asks for: an integer >= 1 as it is, ``"auto"`` = :func:`usable_cores`."""
    if value == AUTO:
        return usable_cores()
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'threads = {value!r}: expected an integer >= 1 or "auto"')
    return value


def set_threads(n: int) -> None:
    """This process trains with ``n`` torch threads (and OpenMP/MKL are told so); torch is not imported for it."""
    for var in ENV_VARS:
        os.environ[var] = str(n)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """:func:`set_threads` for the ``with`` block, then the process's earlier setting again."""
    torch = sys.modules.get("torch")
    before_torch = torch.get_num_threads() if torch is not None else None
    before_env = {v: os.environ.get(v) for v in ENV_VARS}
    set_threads(n)
    try:
        yield
    finally:
        for var, value in before_env.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(before_torch if before_torch is not None else n)
