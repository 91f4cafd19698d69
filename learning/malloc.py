"""Keep freed memory in the process: glibc's ``mallopt`` at start-up (benchmarks/RESULTS.md, "the malloc finding").

With glibc's default thresholds every training step unmaps the activation
memory it freed and page-faults it back in on the next step (~55–90 k minor
faults per client of the peer benchmark); raising the mmap threshold to
1 GiB and never trimming the heap keeps those pages, which made local
training 14–18 % faster at the same peak memory. This is what
``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=…:glibc.malloc.trim_threshold=…``
does, done in-process (no re-exec). The ``edgesim`` command calls
:func:`keep_freed_memory` at start-up and in each sweep worker; set
``EDGESIM_KEEP_FREED_MEMORY=0`` to keep the allocator's defaults.
"""

from __future__ import annotations

import os

ENV = "EDGESIM_KEEP_FREED_MEMORY"
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h> parameter numbers
MMAP_THRESHOLD_BYTES = 1 << 30
TRIM_THRESHOLD_BYTES = 2**31 - 1


def enabled(environ=os.environ) -> bool:
    """False when ``EDGESIM_KEEP_FREED_MEMORY`` is ``0``, ``false``, ``no`` or ``off`` (any case)."""
    return environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def keep_freed_memory(environ=os.environ) -> bool:
    """Set glibc's mmap threshold to 1 GiB and its trim threshold to 2³¹ − 1 bytes; True if both took effect.

    Does nothing (returns False) when opted out or where the C library is not glibc.
    """
    if not enabled(environ):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
            libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False
