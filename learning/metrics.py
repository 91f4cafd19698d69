"""Run-level metrics over a sequence of rounds: time-to-accuracy and the papers' final-accuracy rule.

Pure functions of plain lists. Times are simulated seconds (never host time).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence


def first_crossing(accuracies: Sequence[float], threshold: float) -> Optional[int]:
    """Index of the first round whose accuracy is ``>= threshold`` (missing/NaN accuracies skipped); ``None`` if none.

    The one crossing rule: ``summary.json``'s times to accuracy and ``edgesim
    report``'s times, bits and energy to any threshold all use it.
    """
    for i, a in enumerate(accuracies):
        if a is not None and not math.isnan(a) and a >= threshold:
            return i
    return None


def time_to_accuracy(times_s: Sequence[float], accuracies: Sequence[float], threshold: float) -> Optional[float]:
    """The first simulated time at which ``accuracy >= threshold``; ``None`` if never reached."""
    if len(times_s) != len(accuracies):
        raise ValueError(f"times_s and accuracies differ in length ({len(times_s)} vs {len(accuracies)})")
    i = first_crossing(accuracies, threshold)
    return None if i is None else float(times_s[i])


def plateau_index(accuracies: Sequence[float], tol: float, patience: int = 1) -> Optional[int]:
    """DoFed-SPP's stopping rule: mean accuracy changes by less than ``tol`` between rounds.

    Returns the first index i such that ``|acc[j] − acc[j−1]| < tol`` for the
    ``patience`` consecutive rounds j = i−patience+1 … i; ``None`` if the
    accuracy never settles within the rounds given. ``patience = 1`` is the
    paper's literal rule (one calm round); a larger patience keeps a single
    chance small step of a noisy early curve from counting as convergence.
    """
    if tol < 0:
        raise ValueError(f"tol(={tol}) must be >= 0")
    if patience < 1:
        raise ValueError(f"patience(={patience}) must be >= 1")
    calm = 0
    for i in range(1, len(accuracies)):
        calm = calm + 1 if abs(accuracies[i] - accuracies[i - 1]) < tol else 0
        if calm >= patience:
            return i
    return None


def final_accuracy(accuracies: Sequence[float], tol: float, patience: int = 1) -> tuple[float, int, bool]:
    """(accuracy, index, settled): the accuracy where the plateau rule first holds, else the last one."""
    if not accuracies:
        raise ValueError("final_accuracy needs at least one accuracy")
    i = plateau_index(accuracies, tol, patience)
    if i is None:
        return float(accuracies[-1]), len(accuracies) - 1, False
    return float(accuracies[i]), i, True
