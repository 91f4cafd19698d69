"""Devices that come and go: when each device is online (docs/model/asynchrony.md, "Availability").

Three models, chosen by the scenario's ``[availability]`` table
(:class:`AvailabilityConfig`):

- ``"always"`` — every device is online all the time (the paper's setting, the default);
- ``"markov"`` — a two-state (on/off) continuous-time Markov process per
  device: on and off periods are independent exponentials with means
  ``mean_on_s`` and ``mean_off_s``; the first state is drawn from the
  stationary law, ``P(on) = on / (on + off)``, so the online fraction is the
  same at every instant (the alternating renewal process of e.g. Ross,
  *Stochastic Processes*, 2nd ed., Thm. 3.4.4: long-run fraction on
  ``E[on] / (E[on] + E[off])``). Device ``d``'s periods come from
  ``default_rng((seed, STREAM_AVAILABILITY, d))`` — independent of the
  algorithm, of the round mode and of every other device, so a sync and an
  async run of one scenario see the same comings and goings;
- ``"trace"`` — a CSV file with header ``device,start_s,end_s``: one row per
  online interval ``[start_s, end_s)``; a device with no row is never online.
  :func:`read_trace` checks every row (one clear line naming the file, row
  and value otherwise).

Intervals are half-open: a device is online at ``t`` when ``start <= t < end``.
Queries: :meth:`Availability.online_until_s` (when the current online period
ends, ``inf`` if never) and :meth:`Availability.next_online_s` (the first
instant at or after ``t`` the device is online, ``inf`` if never).
"""

from __future__ import annotations

import bisect
import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ._checks import count, non_negative
from .config import Choice, ConfigError, Finite, Text, check_keys, fail, key

AVAILABILITY_MODELS = ("always", "markov", "trace")
STREAM_AVAILABILITY = 0xA5
TRACE_COLUMNS = ("device", "start_s", "end_s")
_CHUNK = 64  # on/off periods drawn at a time per device (the stream is the same whatever the chunk)


@dataclass(frozen=True)
class AvailabilityConfig:
    """The ``[availability]`` table.

    ``model``: one of :data:`AVAILABILITY_MODELS`; ``mean_on_s`` / ``mean_off_s``:
    the Markov model's mean online and offline durations (seconds, > 0);
    ``trace``: the trace model's CSV file (a path; relative paths are resolved
    against the scenario file by the loader).
    """

    model: str = key("always", "when devices are online", allowed=Choice(choices=AVAILABILITY_MODELS))
    mean_on_s: float = key(600.0, "mean online duration of the Markov model", unit="s",
                           allowed=Finite(minimum=0, strict=True))
    mean_off_s: float = key(300.0, "mean offline duration of the Markov model", unit="s",
                            allowed=Finite(minimum=0, strict=True))
    trace: Optional[str] = key(None, "CSV of online/offline times (the trace model); relative to the scenario file",
                               allowed=Text(words="a file path", optional=True, also='required with model = "trace"'))

    def __post_init__(self):
        check_keys(self)
        if self.model == "trace" and not self.trace:
            fail("trace", self.trace, "the path of a CSV file (device,start_s,end_s) for model = 'trace'")

    @property
    def online_fraction(self) -> float:
        """The Markov model's stationary online probability ``on / (on + off)``."""
        return stationary_online_fraction(self.mean_on_s, self.mean_off_s)


def stationary_online_fraction(mean_on_s: float, mean_off_s: float) -> float:
    """``E[on] / (E[on] + E[off])``: the long-run fraction of time an alternating on/off process is on.

    Renewal-reward theorem (Ross, Stochastic Processes, Thm. 3.4.4); dimensionless, in (0, 1).
    """
    if not (mean_on_s > 0 and mean_off_s > 0 and math.isfinite(mean_on_s) and math.isfinite(mean_off_s)):
        raise ValueError(f"mean_on_s(={mean_on_s}) and mean_off_s(={mean_off_s}) must be finite and > 0")
    return mean_on_s / (mean_on_s + mean_off_s)


class Availability:
    """When each of ``n_devices`` devices is online: a sorted list of switch times per device.

    Device ``d`` is online on ``[s[0], s[1]), [s[2], s[3]), …`` of its switch
    list ``s`` (an odd-length list ends with an online period that never
    ends). The Markov model grows each list lazily, ``_CHUNK`` periods at a
    time, from the device's own stream.
    """

    def __init__(self, n_devices: int, intervals: Optional[Sequence[list[float]]] = None, *,
                 markov: Optional[tuple[float, float, int]] = None):
        self.n_devices = count("n_devices", n_devices, 1)
        self._markov = markov
        self._always = intervals is None and markov is None
        self._switch: list[list[float]] = [list(s) for s in intervals] if intervals is not None else []
        self._rng: list[np.random.Generator] = []
        self._on_next: list[bool] = []  # Markov: whether the next period to draw is an online one
        if markov is not None:
            on_s, off_s, seed = markov
            p_on = stationary_online_fraction(on_s, off_s)
            for d in range(self.n_devices):
                rng = np.random.default_rng((seed, STREAM_AVAILABILITY, d))
                starts_on = bool(rng.random() < p_on)
                # Memoryless periods: the residual of the period in force at t = 0 is again exponential.
                self._switch.append([0.0] if starts_on else [])
                self._rng.append(rng)
                self._on_next.append(starts_on)  # the period in force at t = 0 is drawn first
        elif intervals is not None and len(self._switch) != self.n_devices:
            raise ValueError(f"intervals for {len(self._switch)} devices, expected {self.n_devices}")

    @property
    def always(self) -> bool:
        """Every device online all the time."""
        return self._always

    def _extend(self, d: int, t: float) -> list[float]:
        """Device ``d``'s switch list, drawn (Markov) until it reaches past ``t``."""
        s = self._switch[d]
        if self._markov is None:
            return s
        on_s, off_s, _ = self._markov
        while not s or s[-1] <= t:
            last = s[-1] if s else 0.0
            on = self._on_next[d]
            for x in self._rng[d].standard_exponential(_CHUNK).tolist():
                last += x * (on_s if on else off_s)
                s.append(last)
                on = not on
            self._on_next[d] = on
        return s

    def online(self, d: int, t: float) -> bool:
        """Whether device ``d`` is online at time ``t`` (seconds)."""
        if self._always:
            return True
        s = self._extend(d, t)
        return bisect.bisect_right(s, t) % 2 == 1

    def online_until_s(self, d: int, t: float) -> float:
        """The end of device ``d``'s online period holding ``t`` (``inf`` if it never ends; ``t`` if offline)."""
        if self._always:
            return math.inf
        s = self._extend(d, t)
        i = bisect.bisect_right(s, t)
        if i % 2 == 0:
            return t
        return s[i] if i < len(s) else math.inf

    def next_online_s(self, d: int, t: float) -> float:
        """The first instant at or after ``t`` at which device ``d`` is online (``inf`` if never)."""
        if self._always:
            return t
        s = self._extend(d, t)
        i = bisect.bisect_right(s, t)
        if i % 2 == 1:
            return t
        return s[i] if i < len(s) else math.inf

    def online_fraction(self, d: int, horizon_s: float) -> float:
        """The fraction of ``[0, horizon_s)`` device ``d`` is online."""
        horizon_s = non_negative("horizon_s", horizon_s)
        if self._always or horizon_s == 0:
            return 1.0
        s = self._extend(d, horizon_s)
        on = 0.0
        for i in range(0, len(s), 2):
            start = s[i]
            end = s[i + 1] if i + 1 < len(s) else math.inf
            if start >= horizon_s:
                break
            on += min(end, horizon_s) - start
        return on / horizon_s


def make_availability(cfg: AvailabilityConfig, n_devices: int, seed: int, base: Optional[Path] = None) -> Availability:
    """The :class:`Availability` of ``cfg`` for ``n_devices`` devices (trace paths relative to ``base``)."""
    if cfg.model == "always":
        return Availability(n_devices)
    if cfg.model == "markov":
        return Availability(n_devices, markov=(float(cfg.mean_on_s), float(cfg.mean_off_s), count("seed", seed)))
    path = Path(cfg.trace)
    if base is not None and not path.is_absolute():
        path = base / path
    return Availability(n_devices, read_trace(path, n_devices))


def read_trace(path: Path, n_devices: int) -> list[list[float]]:
    """Each device's switch list from a trace CSV (header ``device,start_s,end_s``, one online interval a row).

    Every row is checked: a device id in ``0..n_devices-1``, finite times
    ``0 <= start_s < end_s``, no two intervals of one device overlapping
    (touching ones, ``end = next start``, merge). A bad file is one
    :class:`ConfigError` line: ``<file>: row <n>: <column> = <value>: expected …``
    (rows numbered as in the file, the header being row 1).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a spreadsheet's "CSV UTF-8" starts with a byte-order mark
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the availability trace ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not a UTF-8 text file (byte {e.start}); expected the availability trace, a CSV "
                          f"file with the columns device,start_s,end_s") from None
    if "\0" in text:
        raise ConfigError(f"{path}: holds a NUL byte (line {text[:text.index(chr(0))].count(chr(10)) + 1}); expected "
                          f"the availability trace, a CSV text file with the columns device,start_s,end_s")
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None:
        raise ConfigError(f"{path}: empty file; expected a header device,start_s,end_s")
    header = [h.strip() for h in header]
    missing = [c for c in TRACE_COLUMNS if c not in header]
    if missing:
        raise ConfigError(f"{path}: row 1: missing column {missing[0]!r} (header = {','.join(header)!r}); "
                          f"expected the columns device,start_s,end_s")
    col = {c: header.index(c) for c in TRACE_COLUMNS}
    per_device: list[list[tuple[float, float, int]]] = [[] for _ in range(n_devices)]
    for row_no, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < len(header):
            raise ConfigError(f"{path}: row {row_no}: {len(row)} values ({','.join(row)!r}); expected {len(header)} "
                              f"({','.join(header)})")
        raw = row[col["device"]].strip()
        try:
            d = int(raw)
        except ValueError:
            raise ConfigError(f"{path}: row {row_no}: device = {raw!r}: expected a device id in "
                              f"0..{n_devices - 1}") from None
        if not 0 <= d < n_devices:
            raise ConfigError(f"{path}: row {row_no}: device = {d}: unknown device; expected an id in "
                              f"0..{n_devices - 1}")
        times = []
        for c in ("start_s", "end_s"):
            raw = row[col[c]].strip()
            try:
                v = float(raw)
            except ValueError:
                v = math.nan
            if not math.isfinite(v) or v < 0:
                raise ConfigError(f"{path}: row {row_no}: {c} = {raw!r}: expected a finite number of seconds >= 0")
            times.append(v)
        start, end = times
        if not end > start:
            raise ConfigError(f"{path}: row {row_no}: end_s = {row[col['end_s']].strip()!r}: expected more than "
                              f"start_s = {row[col['start_s']].strip()!r} (an online interval [start_s, end_s))")
        per_device[d].append((start, end, row_no))
    out = []
    for d, rows in enumerate(per_device):
        rows.sort()
        s: list[float] = []
        for (start, end, row_no), prev in zip(rows, [None, *rows[:-1]]):
            if prev is not None and start < prev[1]:
                raise ConfigError(f"{path}: row {row_no}: start_s = {start!r}: device {d}'s interval overlaps "
                                  f"[{prev[0]!r}, {prev[1]!r}) of row {prev[2]}; expected disjoint intervals")
            if s and start == s[-1]:
                s[-1] = end  # touching intervals are one online period
            else:
                s.extend((start, end))
        out.append(s)
    return out
