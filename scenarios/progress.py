"""A one-line progress bar on stderr for long runs (rounds done, algorithm, simulated time, accuracy)."""

from __future__ import annotations

import sys
import time


class Progress:
    """``update(algorithm, record)`` after each round; draws ``[####....] 12/150 fedavg t=35.2s acc=0.81``."""

    def __init__(self, total: int, enabled: bool = True, width: int = 28, stream=None):
        stream = stream if stream is not None else sys.stderr
        self.total, self.enabled, self.width, self.stream = max(total, 1), enabled, width, stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.done = 0
        self._last_draw = 0.0
        self._current = None

    def __enter__(self) -> "Progress":
        return self

    def update(self, algorithm: str, record) -> None:
        self._current = algorithm
        self.done += 1
        now = time.monotonic()
        # On a terminal redraw in place; in a log (CI) write a line every 10 %.
        due = now - self._last_draw > 0.2 if self.tty else self.done % max(1, self.total // 10) == 0
        if self.enabled and (due or self.done >= self.total):
            self._last_draw = now
            frac = min(self.done / self.total, 1.0)
            bar = "#" * int(frac * self.width) + "." * (self.width - int(frac * self.width))
            acc = record.metrics.get("accuracy", float("nan"))
            self.stream.write(
                ("\r" if self.tty else "") + f"[{bar}] {self.done}/{self.total} {algorithm:<10} t={record.end_time_s:8.1f}s acc={acc:.3f}  " + ("" if self.tty else "\n")
            )
            self.stream.flush()

    def __exit__(self, *exc) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
