"""Which devices upload: DoFed-SPP's choice of the set [K]_B (Ching et al., IEEE TSC 2023, §4.4).

``rho`` is the N×N matrix of similarity ratios ρ̂: ``rho[n, i]`` is how useful
device i's reciprocal model is to device n (dimensionless, finite, >= 0).

Given B and K, Definition 4 asks for the K uploaders S maximising objective
(27) subject to (28)–(31): every device n uses (x_ni = 1) at most B uploaded
models (y_i = 1), so its best choice is the B uploaded models with the largest
ρ̂ in its row, and

    value(S) = Σ_n (sum of the B largest rho[n, i] for i in S).

This is a weighted max-coverage / facility-location objective: monotone and
submodular, so Algorithm 1 — add, K times, the device with the largest marginal
gain — reaches at least (1 − 1/e) of the optimum (Theorem 2). Among the pairs
(B, K) that fit the time budget (Ineq. (26), ``budget.examined_pairs``) the
round uses the one whose greedy set has the largest value.

**Coverage variant** (``select_b``, our option, docs/studies/dofed_spp.md): once B is
at least the number of useful models per device, (27) is a plain sum of column
totals and Algorithm 1 picks the K models with the largest totals, which can
leave whole groups of devices without a useful upload. Running Algorithm 1 at a
smaller B_sel = ``select_b`` (< B) makes (27) reward each device's few best
models, so the K picks spread over the devices' needs (B_sel = 1 is facility
location: each device counts only its best uploaded model). The pair (B, K) is
still chosen by objective (27) at its own B, and each device still uses its
top-B uploaded models (:func:`assignment`).

Ties are broken deterministically: gains (and values) within a relative 1e-12
of each other count as equal, and the lowest device id (the earlier pair,
the lexicographically smallest subset) wins.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from ._checks import count

_REL_TOL = 1e-12
_MAX_SUBSETS = 200_000


@dataclass(frozen=True)
class Selection:
    """The chosen pair (B, K), the K uploaders in the order Algorithm 1 picked them, and value (27)."""

    b: int
    k: int
    devices: tuple[int, ...]
    value: float


def _check_rho(rho) -> np.ndarray:
    """``rho`` as a float (N, N) array, or ``ValueError`` naming the bad shape or entry."""
    try:
        arr = np.asarray(rho, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"rho must be an (N, N) matrix of numbers: {exc}") from None
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"rho(shape={arr.shape}) must be a square (N, N) matrix with N >= 1")
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        n, i = (int(j) for j in np.argwhere(bad)[0])
        raise ValueError(f"rho[{n}, {i}](={arr[n, i]}) must be finite and >= 0")
    return arr


def _check_selected(selected: Iterable[int], n_devices: int) -> list[int]:
    """Device ids as a list of distinct ints in ``0..n_devices-1``."""
    ids = [count("device id", i) for i in selected]
    for i in ids:
        if i >= n_devices:
            raise ValueError(f"device id(={i}) must be < n_devices (= {n_devices})")
    if len(set(ids)) != len(ids):
        raise ValueError(f"selected(={ids}) must not repeat a device")
    return ids


def _check_b_k(b: int, k: int, n_devices: int) -> tuple[int, int]:
    b = count("b", b, 1)
    k = count("k", k, 1)
    if not b <= k <= n_devices:
        raise ValueError(f"(b, k)(=({b}, {k})) must satisfy 1 <= b <= k <= N (= {n_devices})")
    return b, k


def _value(rho: np.ndarray, ids: Sequence[int], b: int) -> float:
    vals = rho[:, sorted(ids)]  # a set function: the same sum whatever order ids come in
    if vals.shape[1] > b:
        vals = -np.partition(-vals, b - 1, axis=1)[:, :b]
    return float(vals.sum())


def coverage_value(rho, selected: Iterable[int], b: int) -> float:
    """Objective (27) for the uploaders ``selected``: Σ_n of the ``b`` largest ``rho[n, i]``, i in ``selected``.

    With fewer than ``b`` selected, each row sums all of them; the empty set is worth 0.
    """
    arr = _check_rho(rho)
    ids = _check_selected(selected, arr.shape[0])
    return _value(arr, ids, count("b", b, 1))


def greedy_select(rho, b: int, k: int) -> tuple[int, ...]:
    """Algorithm 1: K times, add the device with the largest marginal gain of (27).

    Candidate i gains ``Σ_n max(rho[n, i] − thresh_n, 0)``, where ``thresh_n`` is
    the b-th largest selected value in row n (0 while fewer than b are selected).
    Returns the devices in the order they were picked; among equal gains the
    lowest id. Cost O(K·N·(N + B)).
    """
    arr = _check_rho(rho)
    n_devices = arr.shape[0]
    b, k = _check_b_k(b, k, n_devices)
    rows = np.arange(n_devices)
    top = np.zeros((n_devices, b))  # the b largest selected values of each row, zero-padded
    work = np.empty_like(arr)
    available = np.ones(n_devices, dtype=bool)
    picked: list[int] = []
    for _ in range(k):
        thresh = top.min(axis=1)
        np.subtract(arr, thresh[:, None], out=work)
        np.maximum(work, 0.0, out=work)
        gains = work.sum(axis=0)
        gains[~available] = -np.inf
        best = gains.max()
        i = int(np.flatnonzero(gains >= best - _REL_TOL * best)[0])
        picked.append(i)
        available[i] = False
        slot = top.argmin(axis=1)
        better = arr[:, i] > top[rows, slot]
        top[rows[better], slot[better]] = arr[better, i]
    return tuple(picked)


def brute_force_select(rho, b: int, k: int) -> tuple[int, ...]:
    """The exact optimum of (27)–(31) over all k-subsets, for small N only.

    Ties go to the lexicographically smallest subset (returned sorted).
    ``ValueError`` when there are more than 200 000 subsets.
    """
    arr = _check_rho(rho)
    n_devices = arr.shape[0]
    b, k = _check_b_k(b, k, n_devices)
    n_subsets = math.comb(n_devices, k)
    if n_subsets > _MAX_SUBSETS:
        raise ValueError(f"C(N, k)(=C({n_devices}, {k}) = {n_subsets}) subsets exceed {_MAX_SUBSETS}; "
                         f"use greedy_select")
    best_set: tuple[int, ...] | None = None
    best_value = 0.0
    for subset in itertools.combinations(range(n_devices), k):
        value = _value(arr, subset, b)
        if best_set is None or value > best_value + _REL_TOL * best_value:
            best_set, best_value = subset, value
    return best_set


def best_selection(rho, pairs: Iterable[tuple[int, int]], select_b: int | None = None) -> Selection:
    """§4.4: run Algorithm 1 for every (B, K) in ``pairs``; keep the set with the largest value (27).

    ``select_b``: ``None`` runs Algorithm 1 at each pair's own B (the paper);
    a number runs it at ``min(select_b, B)`` (the coverage variant, module
    docstring), the set then valued by (27) at the pair's B. Ties go to the
    earlier pair (``budget.examined_pairs`` lists K increasing, so the smaller
    K). ``ValueError`` if ``pairs`` is empty.
    """
    arr = _check_rho(rho)
    pairs = list(pairs)
    if not pairs:
        raise ValueError("pairs(=[]) must hold at least one (B, K); is the budget infeasible?")
    if select_b is not None:
        select_b = count("select_b", select_b, 1)
    best: Selection | None = None
    for b, k in pairs:
        devices = greedy_select(arr, b if select_b is None else min(select_b, b), k)
        value = _value(arr, devices, b)
        if best is None or value > best.value + _REL_TOL * abs(best.value):
            best = Selection(int(b), int(k), devices, value)
    return best


def assignment(rho, selected: Iterable[int], b: int) -> dict[int, tuple[int, ...]]:
    """The x_ni of (27)–(31): for each device n, the ``b`` selected devices with the largest ``rho[n, i]``.

    Each tuple lists them most useful first, equal ratios by lower id; with
    fewer than ``b`` selected, every device gets all of them.
    """
    arr = _check_rho(rho)
    ids = np.array(sorted(_check_selected(selected, arr.shape[0])), dtype=int)
    b = count("b", b, 1)
    order = np.argsort(-arr[:, ids], axis=1, kind="stable")[:, :b]
    return {n: tuple(int(i) for i in ids[order[n]]) for n in range(arr.shape[0])}
