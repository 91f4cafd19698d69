"""Work dealt to workers: Graham's longest-processing-time rule (torch-free).

One rule for both places edgesim spreads work over processes: a round's clients over its client workers
(:mod:`edgesim.learning.client_workers`, the work a client's rows) and a run's algorithms over ``--jobs``
(:func:`edgesim.scenarios.parallel.assign`, the work an algorithm's planned cycles).
"""

from __future__ import annotations

from typing import Sequence


def deal(work: Sequence[float], n: int) -> list[list[int]]:
    """Items ``0..k-1`` (clients, algorithms) dealt to ``min(n, k)`` workers: the largest ``work`` first (ties: the
    lower index), each to the worker with the least work so far (ties: fewer items, then the lower worker) —
    Graham's longest-processing-time rule, whose busiest worker has at most 4/3 of the best split's work (Graham,
    SIAM J. Appl. Math. 17(2), 1969). Each share in the items' order. The deal decides where an item runs, never
    what it computes: a run folder is the same bytes for any deal."""
    shares: list[list[int]] = [[] for _ in range(min(n, len(work)))]
    load = [0] * len(shares)
    for i in sorted(range(len(work)), key=lambda i: (-work[i], i)):
        w = min(range(len(shares)), key=lambda w: (load[w], len(shares[w]), w))
        shares[w].append(i)
        load[w] += work[i]
    return [sorted(s) for s in shares]
