"""A per-round time limit that names where the round is: ``edgesim run --round-timeout-s S``.

A round that runs past ``S`` seconds of host time stops the run with one line on stderr naming the algorithm,
the round (counted from 0, as ``rounds.csv``) and the phase the round is in
(:mod:`edgesim.learning.phases`: planning, training, aggregation, evaluation, labelling), e.g.::

    error: --round-timeout-s 300: fixavg's round 0 has run 300.4 s; it is in its evaluation phase (for 241.9 s);
    stopping the run

The run then stops as on ``kill`` (SIGTERM: the rounds so far stay in ``<out>.incomplete/``, exit 143): from the
``edgesim`` process itself, or, when the algorithm trains in a ``--jobs`` worker, from that worker's parent. A
process whose main thread does not come back to Python within :data:`HARD_EXIT_S` (one long native call) exits at
once with the same status.

The limit reaches ``--jobs`` workers as the environment variable :data:`ENV` (``--round-timeout-s`` sets it; it
may be set by hand too). Only the host's wall-clock is watched: simulated time, results and the run folder's
bytes are the same with or without a limit, until it stops the run.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from edgesim.config import ConfigError
from edgesim.scenarios.signals import EXIT_SIGTERM

ENV = "EDGESIM_ROUND_TIMEOUT_S"
HARD_EXIT_S = 30.0  # after the stop signal: the process exits at once if it has not ended by then


def timeout_from_env() -> Optional[float]:
    """The limit in seconds from :data:`ENV`, ``None`` when unset or empty; a :class:`ConfigError` naming the
    variable and its value when it is not a positive number."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"{ENV}={text!r} (--round-timeout-s): expected a positive number of seconds, such as 300")
    return value


def timeout_line(limit_s: float, algorithm: str, round_index: int, ran_s: float, phase: str, phase_s: float) -> str:
    """The one line a stopped run prints (seconds to 0.1 s, or to 1 ms under a second)."""
    def sec(x: float) -> str:
        return f"{x:.1f}" if x >= 1 else f"{x:.3f}"

    return (f"error: --round-timeout-s {limit_s:g}: {algorithm}'s round {round_index} has run {sec(ran_s)} s; it is "
            f"in its {phase} phase (for {sec(phase_s)} s); stopping the run")


def stop_run(line: str) -> None:
    """Print ``line`` and stop the run: SIGTERM to the ``edgesim`` process (this one, or a ``--jobs`` worker's
    parent); exit at once if this process is still alive :data:`HARD_EXIT_S` later."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    parent = multiprocessing.parent_process()
    os.kill(parent.pid if parent is not None else os.getpid(), signal.SIGTERM)
    time.sleep(HARD_EXIT_S)
    os._exit(EXIT_SIGTERM)


class RoundWatch:
    """A daemon thread that calls ``stop(line)`` (default :func:`stop_run`) once when a round of ``algorithm`` has
    run ``limit_s`` seconds (:meth:`round` marks a round); it looks every tenth of the limit, within [5 ms, 1 s]."""

    def __init__(self, limit_s: float, algorithm: str, stop: Optional[Callable[[str], None]] = None) -> None:
        self.limit_s, self.algorithm, self.stop = limit_s, algorithm, stop
        self.poll_s = min(1.0, max(0.005, limit_s / 10))
        self._round: Optional[tuple[int, float]] = None  # (round index, monotonic s it began)
        self._done = threading.Event()
        self.fired: Optional[str] = None
        threading.Thread(target=self._watch, name="edgesim-round-watch", daemon=True).start()

    @contextmanager
    def round(self, round_index: int) -> Iterator[None]:
        from edgesim.learning.phases import start_round

        start_round()
        self._round = (round_index, time.monotonic())
        try:
            yield
        finally:
            self._round = None

    def close(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        from edgesim.learning.phases import current

        while not self._done.wait(self.poll_s):
            now_round = self._round
            if now_round is None:
                continue
            now = time.monotonic()
            if now - now_round[1] >= self.limit_s:
                name, since = current()
                self.fired = timeout_line(self.limit_s, self.algorithm, now_round[0], now - now_round[1], name,
                                          now - max(since, now_round[1]))
                (self.stop or stop_run)(self.fired)
                return


def round_watch(algorithm: str) -> Optional[RoundWatch]:
    """The watch of ``algorithm``'s rounds when :data:`ENV` sets a limit, else ``None``."""
    limit_s = timeout_from_env()
    return None if limit_s is None else RoundWatch(limit_s, algorithm)
