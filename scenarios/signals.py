"""Signals across a process tree: Ctrl-C and ``kill`` end a run or a sweep and every worker it started.

One rule for ``edgesim run --jobs N`` and ``edgesim sweep --jobs N`` (both use
spawned worker processes, :mod:`edgesim.scenarios.parallel` and
:mod:`edgesim.scenarios.sweep`):

- The parent (the ``edgesim`` process) turns SIGINT (Ctrl-C) into
  :class:`Interrupted` and SIGTERM (``kill``, a batch system's time limit) into
  :class:`Terminated`, both ``KeyboardInterrupt``; only the first signal is acted
  on, later ones are ignored while it cleans up (:func:`handle_signals`). Its run
  folders are marked ``interrupted`` and it prints one line; exit 130 or 143.
- On the way out it stops its workers (:func:`stop_workers`): SIGTERM to each,
  ``grace_s`` for them to end, then SIGKILL to whichever is left; it never waits on
  a worker's algorithm to finish.
- A worker (:func:`worker_signals`, from the pool's initializer) ignores SIGINT
  (Ctrl-C reaches the whole terminal's process group: the parent decides), turns
  SIGTERM into :class:`Terminated` while it runs a task (:func:`busy`: a sweep's
  run marks its own folder ``interrupted``) and exits at once when idle, and ends
  itself when its parent is gone (``kill -9`` of the parent: no orphan keeps
  training or holding a run folder's lock; :func:`watch_parent`).

A signal's exception can be lost: one that lands while Python runs a finalizer (an object's ``__del__``, a
generator closed as it is collected — the engine leaves SimPy processes behind at deadlines) is printed as
"Exception ignored" and dropped, and the later signals are ignored by then. So each handler also records the
signal, and :func:`raise_if_signalled` (called by a run before each round) raises it again: a dropped interrupt
ends the run at the next round instead of never.

Every edgesim process — the parent and each worker — also prints the Python stack of each of its threads to its
stderr on SIGUSR1 and goes on (:func:`stack_dumps`): ``kill -USR1 PID`` shows where a run that seems stuck is.

Nothing is lost by stopping a worker: every file a run writes is written to a
temporary name and renamed into place, and a run resumes from its last checkpoint
(docs/use/run_folders.md, "Faults").
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterable

EXIT_SIGINT = 130  # 128 + SIGINT, as a shell reports it
EXIT_SIGTERM = 143  # 128 + SIGTERM
GRACE_S = 3.0  # how long stopped workers get before SIGKILL
PARENT_POLL_S = 0.5  # how often a worker checks that its parent is alive


class Interrupted(KeyboardInterrupt):
    """SIGINT (Ctrl-C); exit 130."""

    exit_code = EXIT_SIGINT


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a batch system's time limit), handled as Ctrl-C is; exit 143."""

    exit_code = EXIT_SIGTERM


_received: list[int] = []  # the signal this process is acting on (the first one), once its handler has run


def _interrupt(signum: int) -> KeyboardInterrupt:
    return (Terminated if signum == signal.SIGTERM else Interrupted)(f"signal {signum}")


def raise_if_signalled() -> None:
    """Raise the interrupt of a signal this process has already received (module docstring: a finalizer can drop
    the handler's exception). In the main thread only; nothing when no signal came or it was handled
    (:func:`interrupt_handled`)."""
    if _received and threading.current_thread() is threading.main_thread():
        raise _interrupt(_received[0])


def interrupt_handled(e: BaseException) -> int:
    """Called where an interrupt is caught and answered: forgets its signal, so that a later run in this process (a
    test's, a notebook's) is not stopped by it, and returns the shell's status (143 for SIGTERM, else 130)."""
    _received.clear()
    return getattr(e, "exit_code", EXIT_SIGINT)


def stack_dumps() -> None:
    """On SIGUSR1, every thread's Python stack to stderr, and the process goes on (``faulthandler``; not on a
    platform without SIGUSR1)."""
    if not hasattr(signal, "SIGUSR1"):
        return
    for stream in (sys.stderr, sys.__stderr__):  # a captured stderr (a test's, a notebook's) has no file descriptor
        try:
            faulthandler.register(signal.SIGUSR1, file=stream, all_threads=True, chain=False)
            return
        except (AttributeError, OSError, ValueError, RuntimeError):  # io.UnsupportedOperation is an OSError
            continue


def handle_signals() -> None:
    """In the ``edgesim`` process: SIGINT → :class:`Interrupted`, SIGTERM → :class:`Terminated`, the first one only
    (the others are ignored while the process stops its workers and marks its folders). Not the main thread (an
    embedding application's worker): its own handling is kept."""

    def handler(signum, frame):
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
        _received.append(signum)
        raise _interrupt(signum)

    _received.clear()  # an earlier command of this process (a test's, a notebook's) was interrupted: not this one
    try:
        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return
    stack_dumps()


# --------------------------------------------------------------------------- in a worker

_busy = threading.Event()


@contextmanager
def busy():
    """A worker's task: SIGTERM raises :class:`Terminated` inside it (outside, the idle worker just exits)."""
    _busy.set()
    try:
        yield
    finally:
        _busy.clear()


def worker_signals() -> None:
    """A spawned worker's signal handling (module docstring); call first in the pool's initializer."""

    def on_term(signum, frame):
        if _busy.is_set():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the task unwinds, marking what it must
            _received.append(signum)
            raise _interrupt(signum)
        os._exit(EXIT_SIGTERM)

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, on_term)
    stack_dumps()
    watch_parent()


def watch_parent(poll_s: float = PARENT_POLL_S) -> None:
    """End this process (exit 143) within ``poll_s`` of its parent's death (a daemon thread).

    Its files are safe as after any ``kill -9`` (atomic writes; a stale lock is taken over)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(EXIT_SIGTERM)

    threading.Thread(target=watch, name="edgesim-parent-watch", daemon=True).start()


# --------------------------------------------------------------------------- in the parent


def stop_workers(processes: Iterable, grace_s: float = GRACE_S) -> None:
    """SIGTERM every live process of ``processes`` (``multiprocessing.Process``), give them ``grace_s`` together to
    end, then SIGKILL the rest and reap them all."""
    procs = [p for p in processes if p is not None]
    for p in procs:
        if p.is_alive():
            try:
                p.terminate()
            except (OSError, ValueError):
                pass
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.join(max(0.0, deadline - time.monotonic()))
        except (AssertionError, ValueError):
            continue
    for p in procs:
        try:
            if p.is_alive():
                p.kill()
                p.join(grace_s)
        except (OSError, ValueError, AssertionError):
            pass


def pool_processes(pool) -> list:
    """The worker processes of a ``concurrent.futures.ProcessPoolExecutor`` (empty when it has none yet)."""
    return list((getattr(pool, "_processes", None) or {}).values())


def stop_pool(pool, grace_s: float = GRACE_S) -> None:
    """End a process pool now: its queued work cancelled, its workers stopped (:func:`stop_workers`)."""
    procs = pool_processes(pool)
    pool.shutdown(wait=False, cancel_futures=True)
    stop_workers(procs, grace_s)
