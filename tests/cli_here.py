"""``edgesim ARGS`` in this test's own process (typer's CliRunner), answered as a subprocess would be: its exit status,
stdout and stderr. A fresh interpreter costs 1–3 s of CPU (torch's import) and is needed only where the test is about
the process itself (its environment, entry points, signals, a worker's start, the entry point's own handling of usage
errors): a scenario refused in one line, or a run's files, are the same here."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import traceback
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
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


def main_here(*args, cwd: Path, timeout_s: Optional[float] = None) -> subprocess.CompletedProcess:
    """``python -m edgesim.scenarios.cli *args`` in ``cwd``, but in this process: the entry point's own ``main()``
    (its one line for a usage error, its exit status) with ``sys.argv``, the working folder, stdout and stderr set
    for the call and put back after it; its ``exit_now`` raises ``SystemExit`` instead of ending this process, and
    glibc's allocator is left as this process has it (``EDGESIM_KEEP_FREED_MEMORY=0``)."""
    from edgesim.scenarios import cli

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv, os.getcwd(), cli.exit_now, os.environ.get("EDGESIM_KEEP_FREED_MEMORY")

    def exit_here(code) -> None:
        raise SystemExit(code)

    sys.argv, cli.exit_now, os.environ["EDGESIM_KEEP_FREED_MEMORY"] = ["edgesim", *argv], exit_here, "0"
    os.chdir(cwd)
    try:
        with _guard(argv, timeout_s), redirect_stdout(out), redirect_stderr(err):
            try:
                cli.main()
                code = 0
            except SystemExit as e:
                code = 0 if e.code is None else e.code
                if not isinstance(code, int):  # as exit_now: any other object is printed, and the status is 1
                    print(code, file=sys.stderr)
                    code = 1
            except Exception:  # noqa: BLE001 - what the interpreter would print: the traceback, status 1
                traceback.print_exc()
                code = 1
    finally:
        sys.argv, cli.exit_now = saved[0], saved[2]
        os.chdir(saved[1])
        if saved[3] is None:
            os.environ.pop("EDGESIM_KEEP_FREED_MEMORY", None)
        else:
            os.environ["EDGESIM_KEEP_FREED_MEMORY"] = saved[3]
    return subprocess.CompletedProcess(["edgesim", *argv], code, out.getvalue(), err.getvalue())
