"""``edgesim ARGS`` in this test's own process (typer's CliRunner), answered as a subprocess would be: its exit status,
stdout and stderr. A fresh interpreter costs 1–3 s of CPU (torch's import) and is needed only where the test is about
the process itself (its environment, entry points, signals, a worker's start, the entry point's own handling of usage
errors): a scenario refused in one line, or a run's files, are the same here."""

from __future__ import annotations

import signal
import subprocess
import threading
import traceback
from contextlib import contextmanager
from typing import Optional

from typer.testing import CliRunner

from edgesim.scenarios.cli import app


class _Hang(BaseException):
    """Raised by the wall-clock guard; a BaseException, so that no ``except Exception`` of the command swallows it."""


@contextmanager
def _guard(argv: list[str], timeout_s: Optional[float]):
    """``subprocess.TimeoutExpired`` when the block runs longer than ``timeout_s`` wall seconds (SIGALRM; only on the
    main thread, where pytest runs the tests; elsewhere, or without ``timeout_s``, no guard)."""
    if timeout_s is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum, frame):
        raise _Hang

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        yield
    except _Hang:
        raise subprocess.TimeoutExpired(["edgesim", *argv], timeout_s) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def edgesim_here(*args, timeout_s: Optional[float] = None) -> subprocess.CompletedProcess:
    """``edgesim *args`` run by the CLI's app in this process; an exception the app did not turn into an exit status
    is appended to stderr with its traceback, as the interpreter would print it (status 1). ``timeout_s``: as
    ``subprocess.run``'s, ``subprocess.TimeoutExpired`` when the command has not ended by then."""
    argv = [str(a) for a in args]
    with _guard(argv, timeout_s):
        result = CliRunner().invoke(app, argv)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["edgesim", *argv], result.exit_code, result.stdout, stderr)
