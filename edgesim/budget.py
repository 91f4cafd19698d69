"""The training-time budget and the B/K feasibility of DoFed-SPP, Eqs. (12)–(13), (23)–(26).

With ``C1 = T/G − (I·C_tra·D + C_SR)/f`` (seconds left for pseudo-labelling
and uploads), ``C2 = C_pse/f`` (seconds per pseudo-labelling model) and
``C3 = m / (b·log2(1 + g·p/(N0·b)))`` (seconds per full-band upload), a pair
(B, K) is feasible iff ``1 <= B <= K <= N`` and ``B·C2 + K·C3 <= C1``.

Floors and comparisons carry a relative tolerance of 1e-12 so that a budget
that is met exactly (``B·C2 + K·C3 == C1`` up to rounding) counts as met.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._checks import count, finite, non_negative, positive

REL_TOL = 1e-12  # also the engine's deadline tolerance (edgesim.engine)
_REL_TOL = REL_TOL


def _floor(x: float) -> int:
    """``floor(x)``, forgiving float rounding just below an integer."""
    return math.floor(x + _REL_TOL * max(1.0, abs(x)))


def round_budget_s(total_time_s: float, rounds: int) -> float:
    """Eq. (13): each of the G rounds may last ``T / G`` seconds."""
    return positive("total_time_s", total_time_s) / count("rounds", rounds, 1)


@dataclass(frozen=True)
class FeasibilityConstants:
    """C1, C2, C3 of Ineq. (26), all in seconds."""

    c1_s: float
    c2_s: float
    c3_s: float


class InfeasibleBudgetError(ValueError):
    """No (B, K) pair fits the per-round budget; the message gives the numbers."""


def feasibility_constants(
    round_budget_s: float,
    training_cycles: float,
    sr_cycles: float,
    pseudo_label_cycles_per_model: float,
    cpu_freq_hz: float,
    model_bits: float,
    uplink_rate_bps: float,
) -> FeasibilityConstants:
    """C1, C2, C3 of Ineq. (26) in seconds.

    ``training_cycles`` is ``I·C_tra·D``; ``uplink_rate_bps`` the full-band
    Shannon rate ``b·log2(1 + g·p/(N0·b))`` (Eq. 8).
    """
    f = positive("cpu_freq_hz", cpu_freq_hz)
    c1 = finite("round_budget_s", round_budget_s) - (
        non_negative("training_cycles", training_cycles) + non_negative("sr_cycles", sr_cycles)
    ) / f
    c2 = non_negative("pseudo_label_cycles_per_model", pseudo_label_cycles_per_model) / f
    c3 = positive("model_bits", model_bits) / positive("uplink_rate_bps", uplink_rate_bps)
    return FeasibilityConstants(c1, c2, c3)


def is_feasible(b: int, k: int, consts: FeasibilityConstants, n_devices: int) -> bool:
    """Ineq. (26) with ``1 <= B <= K <= N``."""
    if not (1 <= b <= k <= n_devices):
        return False
    need = b * consts.c2_s + k * consts.c3_s
    return need <= consts.c1_s + _REL_TOL * max(1.0, abs(consts.c1_s))


def _floor_capped(x: float, cap: int) -> int:
    """``min(cap, floor(x))``, -1 for negative ``x``; safe for ``x = ±inf`` (a tiny C2 or C3)."""
    if x >= cap:
        return cap
    return -1 if x < 0 else _floor(x)


def _settle(guess: int, low: int, high: int, fits) -> int:
    """The largest j in ``low..high`` with ``fits(j)`` (``fits`` true up to some j, false after), from ``guess``.

    ``low - 1`` when none fits. The floors of §4.4 give ``guess``; checking it
    against :func:`is_feasible` applies that function's tolerance, not the
    floor's, so both always agree.
    """
    j = min(max(guess, low - 1), high)
    while j < high and fits(j + 1):
        j += 1
    while j >= low and not fits(j):
        j -= 1
    return j


def _largest_b(k: int, consts: FeasibilityConstants, n: int) -> int:
    """``min(K, ⌊(C1 − K·C3)/C2⌋)``: the largest feasible B for this K (K when C2 = 0), 0 when none."""
    c2 = consts.c2_s
    guess = k if c2 == 0 else _floor_capped((consts.c1_s - k * consts.c3_s) / c2, k)
    return max(0, _settle(guess, 1, k, lambda b: is_feasible(b, k, consts, n)))


def examined_pairs(consts: FeasibilityConstants, n_devices: int) -> list[tuple[int, int]]:
    """The (B, K) pairs DoFed-SPP examines (§4.4), in increasing K.

    For each K from ``max(1, ⌊C1/(C2+C3)⌋)`` to ``⌊(C1−C2)/C3⌋`` (both capped at
    N), the largest feasible B: ``B = min(K, ⌊(C1 − K·C3)/C2⌋)``, kept when
    B >= 1. With ``C2 = 0`` (free pseudo-labelling) B = K. Empty when no pair
    is feasible. Every feasible pair is dominated (smaller or equal B and K)
    by one of these.
    """
    n = count("n_devices", n_devices, 1)
    c1, c2, c3 = consts.c1_s, consts.c2_s, consts.c3_s
    k_high = _settle(_floor_capped((c1 - c2) / c3, n), 1, n, lambda k: is_feasible(1, k, consts, n))
    if k_high < 1:
        return []
    k_low = max(1, _settle(_floor_capped(c1 / (c2 + c3), k_high), 1, k_high, lambda k: is_feasible(k, k, consts, n)))
    pairs = []
    for k in range(k_low, k_high + 1):
        b = _largest_b(k, consts, n)
        if b >= 1:
            pairs.append((b, k))
    return pairs


def feasible_count(consts: FeasibilityConstants, n_devices: int) -> int:
    """How many pairs with ``1 <= B <= K <= N`` satisfy ``B·C2 + K·C3 <= C1``."""
    n = count("n_devices", n_devices, 1)
    pairs = examined_pairs(consts, n)
    if not pairs:
        return 0
    # Below the examined range every K admits B = K (K·(C2 + C3) <= C1 holds for all smaller K): 1 + ... + (k_low − 1).
    k_low = pairs[0][1]
    return (k_low - 1) * k_low // 2 + sum(b for b, _ in pairs)


def feasible_pairs(consts: FeasibilityConstants, n_devices: int) -> list[tuple[int, int]]:
    """Every feasible (B, K), sorted by K then B (the full feasible set of Ineq. (26))."""
    n = count("n_devices", n_devices, 1)
    return [(b, k) for k in range(1, n + 1) for b in range(1, k + 1) if is_feasible(b, k, consts, n)]


def infeasibility_message(consts: FeasibilityConstants, round_budget_s: float) -> str:
    """One paragraph with the numbers: what one round needs and what T/G gives."""
    fixed_s = round_budget_s - consts.c1_s
    need_s = fixed_s + consts.c2_s + consts.c3_s
    return (
        f"No (B, K) pair fits the budget: the smallest DoFed-SPP round (B = K = 1) needs "
        f"{need_s:.6g} s — {fixed_s:.6g} s of local training and similarity ratios, "
        f"{consts.c2_s:.6g} s to pseudo-label with one model and {consts.c3_s:.6g} s for one upload — "
        f"but T/G gives only {round_budget_s:.6g} s per round "
        f"(C1 = {consts.c1_s:.6g} s < C2 + C3 = {consts.c2_s + consts.c3_s:.6g} s). "
        f"Raise budget.total_time_s, lower budget.rounds, or lighten the workload."
    )
