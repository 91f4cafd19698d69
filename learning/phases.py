"""What this process's round is doing now, for the run's round watch (``edgesim run --round-timeout-s``).

A round of a synchronous run goes through five phases, named as a user asks "where is it stuck?":

- ``training``: the devices' local training (:func:`edgesim.learning.algorithms.common.train_devices`, the
  server's own training, FedBE's distillation);
- ``evaluation``: the models' test accuracy (``evaluate_shared``, ``evaluate_personal``, UM-pFSSL's own);
- ``labelling``: the labelling diagnostics on the unlabelled rows (``labeling_accuracy``, the one-rule
  pseudo-label rates);
- outside those three, ``planning`` before the round's first training (the engine's round set-up, the
  algorithm's choice of devices and, for UM-pFSSL, its helpers' evaluations) and ``aggregation`` after it (the
  server's steps: averaging, DoFed-SPP's downsizing, similarity and pseudo-labels, the engine's records).

:func:`phase` marks a block (a stack: a block inside another is the current one until it ends);
:func:`start_round` begins a round at ``planning``; :func:`current` is read by the watch's thread. The marks
cost two list operations and a clock read; nothing is recorded, so they change no result.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

MARKED = ("training", "evaluation", "labelling")
BEFORE_TRAINING, AFTER_TRAINING = "planning", "aggregation"

_stack: list[tuple[str, float]] = []  # the marked blocks open now: (phase, when it started, monotonic s)
_base: list = [BEFORE_TRAINING, time.monotonic()]  # the unmarked phase and when it started


def start_round() -> None:
    """A new round: ``planning`` from now, no marked block open."""
    _stack.clear()
    _base[:] = [BEFORE_TRAINING, time.monotonic()]


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Mark the block as ``name`` (one of :data:`MARKED`); after a ``training`` block the unmarked time is
    ``aggregation``."""
    if name not in MARKED:
        raise ValueError(f"phase {name!r}: expected one of {', '.join(MARKED)}")
    _stack.append((name, time.monotonic()))
    try:
        yield
    finally:
        _stack.pop()
        now = time.monotonic()
        if name == "training":
            _base[0] = AFTER_TRAINING
        if _stack:  # the enclosing block is current again, from now
            _stack[-1] = (_stack[-1][0], now)
        else:
            _base[1] = now


def current() -> tuple[str, float]:
    """``(phase, monotonic s when it began)`` of the round now (safe to call from another thread)."""
    try:
        return _stack[-1]
    except IndexError:
        return _base[0], _base[1]
