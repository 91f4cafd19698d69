"""Run-level metrics over a sequence of rounds: time-to-accuracy and the papers' final-accuracy rule.

Pure functions of plain lists (and of ``rounds.csv``'s columns as arrays,
:func:`algorithm_metrics`). Times are simulated seconds (never host time).

Per-run metrics (:func:`algorithm_metrics`) are computed from ``rounds.csv``
by the rules ``summary.json`` uses — the final accuracy by the run's plateau
rule, the crossing of an accuracy threshold held for k rounds by :func:`first_crossing` — so a
threshold chosen after the run gives the same time as one chosen before it,
and also the uplink bits, downlink bits and device energy spent by then.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Sequence

import numpy as np

DEFAULT_SUSTAIN_ROUNDS = 3
"""Rounds a crossing must hold (``[run] sustain_rounds`` unset, ``edgesim report`` without ``--sustain``): an
accuracy that touches a threshold for one or two rounds and falls back has not reached it (docs/use/metrics.md)."""


def sustain_rounds(config: Mapping) -> int:
    """The crossing rule's k of a run: its ``[run] sustain_rounds``, else :data:`DEFAULT_SUSTAIN_ROUNDS`."""
    k = config.get("run", {}).get("sustain_rounds")
    return DEFAULT_SUSTAIN_ROUNDS if k is None else int(k)


def first_crossing(accuracies: Sequence[float], threshold: float, sustain: int = 1) -> Optional[int]:
    """Index of the first round from which the accuracy stays ``>= threshold`` for ``sustain`` evaluated rounds
    (that round and the next ``sustain − 1`` with an accuracy; missing/NaN accuracies skipped); ``None`` if none.

    The one crossing rule: ``summary.json``'s times to accuracy and ``edgesim
    report``'s times, bits and energy to any threshold all use it, with the run's
    k (:func:`sustain_rounds`). A run that ends fewer than k evaluated rounds after a
    crossing has not sustained it. ``sustain = 1``: the first round at or above.
    """
    if not isinstance(sustain, int) or isinstance(sustain, bool) or sustain < 1:
        raise ValueError(f"sustain(={sustain!r}) must be an integer >= 1")
    evaluated = [(i, a) for i, a in enumerate(accuracies) if a is not None and not math.isnan(a)]
    held = 0
    for j, (_, a) in enumerate(evaluated):
        held = held + 1 if a >= threshold else 0
        if held == sustain:
            return evaluated[j - sustain + 1][0]
    return None


def time_to_accuracy(times_s: Sequence[float], accuracies: Sequence[float], threshold: float,
                     sustain: int = 1) -> Optional[float]:
    """The simulated time of :func:`first_crossing` (the end of that round); ``None`` if never reached."""
    if len(times_s) != len(accuracies):
        raise ValueError(f"times_s and accuracies differ in length ({len(times_s)} vs {len(accuracies)})")
    i = first_crossing(accuracies, threshold, sustain)
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
    """(accuracy, index, settled): the accuracy where the plateau rule first holds, else the last one.

    The rule runs over the evaluated rounds (missing/NaN accuracies skipped: ``[run] eval_every``), so the change
    it compares is from one evaluated round to the next and ``patience`` counts evaluated rounds; the index is
    into ``accuracies``. With no accuracy at all: (NaN, last index, False)."""
    if not accuracies:
        raise ValueError("final_accuracy needs at least one accuracy")
    evaluated = [i for i, a in enumerate(accuracies) if a is not None and not math.isnan(a)]
    if len(evaluated) == len(accuracies):
        i = plateau_index(accuracies, tol, patience)
        if i is None:
            return float(accuracies[-1]), len(accuracies) - 1, False
        return float(accuracies[i]), i, True
    if not evaluated:
        return math.nan, len(accuracies) - 1, False
    final, j, settled = final_accuracy([accuracies[i] for i in evaluated], tol, patience)
    return final, evaluated[j], settled


def crossing(cols: Mapping[str, np.ndarray], threshold: float, sustain: int = 1) -> Optional[dict]:
    """What it took to first reach ``threshold`` accuracy for ``sustain`` rounds: ``{"time_s", "bits_up",
    "bits_down", "energy_j", "round"}`` at the end of the crossing round (cumulative), or ``None`` if never (the rule
    of ``summary.json``)."""
    i = first_crossing(list(cols["accuracy"]), threshold, sustain)
    if i is None:
        return None
    def get(k):
        return float(cols[k][i]) if k in cols else math.nan

    return {"time_s": get("time_s"), "bits_up": get("cum_bits_up"), "bits_down": get("cum_bits_down"),
            "energy_j": get("cum_energy_j"), "round": int(cols["round"][i])}


THRESHOLD_METRICS = {"time_s": "time_to_accuracy_s", "bits_up": "bits_up_to_accuracy",
                     "energy_j": "energy_to_accuracy_j"}


def algorithm_metrics(cols: Mapping[str, np.ndarray], config: Mapping, thresholds: Sequence[float],
                      sustain: Optional[int] = None) -> dict:
    """One algorithm's metrics in one run: ``{(metric, threshold or None): value}`` (NaN where undefined).

    ``final_accuracy`` and ``final_accuracy_var`` by the run's plateau rule
    (``run.plateau_tol``, ``run.plateau_patience``); totals at the last round;
    per threshold: simulated seconds, uplink bits and device energy to reach it and stay there for ``sustain``
    rounds (default: the run's, :func:`sustain_rounds`; NaN if never).
    """
    sustain = sustain_rounds(config) if sustain is None else sustain
    run = config.get("run", {})
    accs = [float(a) for a in cols["accuracy"]]
    ok = [a for a in accs if not math.isnan(a)]
    last = -1
    out: dict = {}
    if ok:
        tol, patience = float(run.get("plateau_tol", 0.01)), int(run.get("plateau_patience", 5))
        final, i, settled = final_accuracy(accs, tol, patience)
        out[("final_accuracy", None)] = final
        out[("final_accuracy_var", None)] = float(cols["accuracy_var"][i]) if "accuracy_var" in cols else math.nan
        out[("best_accuracy", None)] = max(ok)
    else:
        out[("final_accuracy", None)] = out[("final_accuracy_var", None)] = out[("best_accuracy", None)] = math.nan
    out[("rounds", None)] = float(len(accs))
    for key, col in (("simulated_time_s", "time_s"), ("total_bits_up", "cum_bits_up"),
                     ("total_bits_down", "cum_bits_down"), ("total_energy_j", "cum_energy_j")):
        out[(key, None)] = float(cols[col][last]) if col in cols and len(cols[col]) else math.nan
    for t in thresholds:
        c = crossing(cols, t, sustain)
        for k, metric in THRESHOLD_METRICS.items():
            out[(metric, float(t))] = c[k] if c is not None else math.nan
    return out
