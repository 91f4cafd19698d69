"""What both clocks share: the run loop, the read-only views and the garbage collector pause.

:class:`Clock` is the common base of :class:`edgesim.engine.Simulation` (rounds) and
:class:`edgesim.asynchrony.AsyncSimulation` (aggregations): a SimPy environment, an
:class:`~edgesim.records.EventLog`, the kept :class:`~edgesim.records.RoundRecord` s and the run's
:class:`~edgesim.records.Totals`. A subclass sets them up and supplies :meth:`Clock.run_round` and
:attr:`Clock.round_index`.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any, Callable, Iterator, Optional

import simpy

from ._checks import count, finite
from .config import BudgetConfig
from .records import Event, EventLog, RoundRecord, Totals


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (then as the caller had it).

    A round of N devices keeps ~N generators, events and device objects alive
    at once; the generational collector would traverse them again and again
    (about 0.5× the cost of the events themselves at N = 10,000,
    benchmarks/RESULTS.md) while reference counting frees them anyway. Only
    the engine's own work runs in the block, never a backend's.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class Clock:
    """The shared part of both engines (module docstring)."""

    budget: BudgetConfig
    keep_records: bool
    _env: simpy.Environment
    _log: EventLog
    _records: list[RoundRecord]
    _totals: Totals

    # -- read-only views
    @property
    def now_s(self) -> float:
        """The simulated clock in seconds."""
        return float(self._env.now)

    @property
    def round_index(self) -> int:
        """The index of the next round (aggregation) = rounds (aggregations) run so far."""
        raise NotImplementedError

    @property
    def record_events(self) -> bool:
        """Whether the trace is kept (every event is counted in :attr:`event_count` either way)."""
        return self._log.record

    @record_events.setter
    def record_events(self, value: bool) -> None:
        self._log.record = bool(value)

    @property
    def events(self) -> list[Event]:
        """The trace since construction or the last ``load_state_dict``, in processing (= time) order."""
        return list(self._log.events)

    @property
    def event_count(self) -> int:
        """Events emitted so far, recorded or not."""
        return self._log.count

    @property
    def records(self) -> list[RoundRecord]:
        """The round records since construction or the last ``load_state_dict``."""
        return list(self._records)

    # -- running
    def run_round(self) -> Optional[RoundRecord]:
        """Run the clock to the end of the next round (aggregation); its record (``None``: no more can happen)."""
        raise NotImplementedError

    def run(
        self,
        rounds: Optional[int] = None,
        max_time_s: Optional[float] = None,
        on_round: Optional[Callable[[RoundRecord], Any]] = None,
    ) -> list[RoundRecord]:
        """Run ``rounds`` rounds (default: those left to reach ``budget.rounds``); return their records.

        No round starts at or after the simulated time ``max_time_s``.
        ``on_round(record)`` is called after each round; a truthy return stops the run.
        """
        rounds = max(0, self.budget.rounds - self.round_index) if rounds is None else count("rounds", rounds)
        if max_time_s is not None:
            max_time_s = finite("max_time_s", max_time_s)
        out = []
        for _ in range(rounds):
            if max_time_s is not None and self.now_s >= max_time_s:
                break
            record = self.run_round()
            if record is None:
                break
            out.append(record)
            if on_round is not None and on_round(record):
                break
        return out
