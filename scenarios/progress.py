"""Progress of runs and sweeps on stderr: rich bars on a terminal, plain periodic lines in a log.

- :class:`RunProgress` (``edgesim run``): one row per algorithm — rounds done,
  simulated time, latest accuracy — and a total row with the elapsed and the
  remaining host time (estimated from the rounds done so far).
- :class:`SweepProgress` (``edgesim sweep``): one bar over the sweep's runs,
  with skipped and failed counts, elapsed and remaining host time.

When the stream is not a terminal (CI, ``> log``) both write plain lines
instead: a run every 10 % of its rounds or every 30 s, a sweep after each run.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Optional, Sequence

PLAIN_EVERY_S = 30.0


def clock(seconds: float) -> str:
    """``75`` → ``"1m15s"``; ``3900`` → ``"1h05m"`` (host time for people)."""
    s = int(round(max(seconds, 0.0)))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def remaining_s(elapsed_s: float, done: int, total: int) -> Optional[float]:
    """Host seconds left at the rate so far: ``elapsed · (total − done) / done`` (``None`` before any is done)."""
    return elapsed_s * (total - done) / done if done > 0 else None


class LastAccuracy:
    """The accuracy a progress line shows for each algorithm: this round's when it was evaluated, else the last
    evaluated round's, marked with that round (``[run] eval_every`` > 1 leaves the other rounds' accuracy empty),
    ``"-"`` before any (docs/use/metrics.md)."""

    def __init__(self):
        self._last: dict[str, tuple[int, float]] = {}

    def cell(self, algorithm: str, record) -> str:
        """``"acc 0.612"`` (evaluated now), ``"acc 0.612 (round 10)"`` (last evaluated at round 10), ``"acc -"``."""
        try:
            acc = float(record.metrics.get("accuracy"))
        except (TypeError, ValueError):  # absent (None) or not a number: not evaluated
            acc = math.nan
        if math.isfinite(acc):
            self._last[algorithm] = (record.round_index + 1, acc)
            return f"acc {acc:.3f}"
        if algorithm not in self._last:
            return "acc -"
        round_no, last = self._last[algorithm]
        return f"acc {last:.3f} (round {round_no})"


def _is_tty(stream) -> bool:
    return bool(getattr(stream, "isatty", None)) and stream.isatty()


def _rich_bars(stream, label: str, bar_width: int, fields: Sequence[str]):
    """rich's bars on ``stream``: ``label``, the bar, done/total, the ``fields`` (rich column templates), the
    elapsed and the remaining host time (rich is imported only when a terminal shows it)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn(label), BarColumn(bar_width=bar_width), MofNCompleteColumn(), *(TextColumn(f) for f in fields),
        TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=Console(file=stream), transient=False,
    )


class RunProgress:
    """``update(algorithm, record)`` after each round of each algorithm (a context manager)."""

    def __init__(self, algorithms: Sequence[str], rounds: int, enabled: bool = True, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.algorithms, self.rounds, self.enabled = list(algorithms), max(int(rounds), 1), enabled
        self.total = self.rounds * len(self.algorithms)
        self.done = 0
        self.t0 = time.monotonic()
        self._last_line_s = self.t0
        self._next_tenth = 1
        self._rich = None
        self._tasks: dict[str, int] = {}
        self._acc = LastAccuracy()

    def __enter__(self) -> "RunProgress":
        self.t0 = self._last_line_s = time.monotonic()
        if self.enabled and _is_tty(self.stream):
            self._rich = _rich_bars(self.stream, "{task.description:<12}", 24,
                                    ("{task.fields[sim]}", "{task.fields[acc]}"))
            self._rich.start()
            for name in self.algorithms:
                self._tasks[name] = self._rich.add_task(name, total=self.rounds, sim="sim      -", acc="acc   -")
            self._tasks[""] = self._rich.add_task("all", total=self.total, sim="", acc="")
        return self

    def update(self, algorithm: str, record) -> None:
        self.done += 1
        if not self.enabled:
            return
        acc = self._acc.cell(algorithm, record)
        if self._rich is not None:
            self._rich.update(self._tasks[algorithm], advance=1, sim=f"sim {record.end_time_s:8.1f} s", acc=acc)
            self._rich.update(self._tasks[""], advance=1)
            return
        now = time.monotonic()
        tenth = self.done * 10 // self.total
        if tenth >= self._next_tenth or now - self._last_line_s >= PLAIN_EVERY_S or self.done == self.total:
            self._next_tenth = tenth + 1
            self._last_line_s = now
            left = remaining_s(now - self.t0, self.done, self.total)
            self.stream.write(
                f"{self.done}/{self.total} rounds  {algorithm} round {record.round_index + 1}  "
                f"sim {record.end_time_s:.1f} s  {acc}  elapsed {clock(now - self.t0)}"
                + (f"  left ~{clock(left)}" if left is not None and self.done < self.total else "") + "\n"
            )
            self.stream.flush()

    def __exit__(self, *exc) -> None:
        if self._rich is not None:
            self._rich.stop()


class NotebookProgress:
    """``edgesim.run()``'s progress: one text bar rewritten in place (``\\r``, which a Jupyter cell's output and a
    terminal both honour), a new line when an algorithm finishes::

        fedavg   [##########----------]  25/50 rounds  sim 75.0 s  acc 0.612  0m12s, ~0m24s left

    ``update(algorithm, record)`` after each round; :meth:`close` ends the last line."""

    WIDTH = 20

    def __init__(self, algorithms: Sequence[str], rounds: int, stream=None):
        self.stream = stream if stream is not None else sys.stdout
        self.rounds, self.n = max(int(rounds), 1), len(algorithms)
        self.done, self.current, self.t0, self._width = 0, None, time.monotonic(), 0
        self._acc = LastAccuracy()

    def update(self, algorithm: str, record) -> None:
        self.done += 1
        if self.current not in (None, algorithm):
            self.stream.write("\n")
            self._width = 0
        self.current = algorithm
        r = min(record.round_index + 1, self.rounds)
        filled = self.WIDTH * r // self.rounds
        elapsed = time.monotonic() - self.t0
        left = remaining_s(elapsed, self.done, self.rounds * self.n)
        acc = self._acc.cell(algorithm, record)
        line = (f"{algorithm:<12} [{'#' * filled}{'-' * (self.WIDTH - filled)}] {r:>4}/{self.rounds} rounds  "
                f"sim {record.end_time_s:.1f} s  {acc}  {clock(elapsed)}"
                + (f", ~{clock(left)} left" if left and self.done < self.rounds * self.n else ""))
        self.stream.write("\r" + line.ljust(self._width))  # blanks cover the rest of a longer line before it
        self._width = len(line)
        self.stream.flush()

    def close(self) -> None:
        if self.current is not None:
            self.stream.write("\n")
            self.stream.flush()


class SweepProgress:
    """``update(result, skipped)`` after each run of a sweep: a rich bar, or one plain line per run.

    Plain line: ``5/12 runs (2 skipped, 0 failed) 1m05s elapsed, ~2m10s left  NAME: ok (31 s)``.
    """

    def __init__(self, total: int, enabled: bool = True, stream=None):
        self.total, self.enabled = max(total, 1), enabled
        self.stream = stream if stream is not None else sys.stderr
        self.done = self.skipped = self.failed = 0
        self.t0 = time.monotonic()
        self._rich = None
        if enabled and _is_tty(self.stream):
            self._rich = _rich_bars(self.stream, "sweep", 30, ("{task.fields[note]}",))
            self._task = self._rich.add_task("sweep", total=self.total, note="")
            self._rich.start()

    def update(self, result: dict, skipped: bool = False) -> None:
        self.done += 1
        self.skipped += skipped
        self.failed += result["status"] != "ok"
        if not self.enabled:
            return
        what = "skipped (finished)" if skipped else f"{result['status']} ({result['seconds']:.0f} s)"
        if self._rich is not None:
            self._rich.console.print(f"{result['name']}: {what}", markup=False, highlight=False)
            self._rich.update(self._task, advance=1, note=f"({self.skipped} skipped, {self.failed} failed)")
            if self.done >= self.total:
                self._rich.stop()
            return
        elapsed = time.monotonic() - self.t0
        ran, left = self.done - self.skipped, self.total - self.done
        eta = f", ~{clock(elapsed / ran * left)} left" if ran and left else ""
        self.stream.write(
            f"{self.done}/{self.total} runs ({self.skipped} skipped, {self.failed} failed) {clock(elapsed)} elapsed"
            f"{eta}  {result['name']}: {what}\n"
        )
        self.stream.flush()

    def close(self) -> None:
        if self._rich is not None and not self._rich.finished:
            self._rich.stop()
