"""The training-time budget and B/K feasibility (edgesim/budget.py): Eqs. (12)-(13), (23)-(26)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesim.budget import (
    FeasibilityConstants,
    InfeasibleBudgetError,
    examined_pairs,
    feasibility_constants,
    feasible_count,
    feasible_pairs,
    infeasibility_message,
    is_feasible,
    round_budget_s,
)
from edgesim.compute import dofed_compute_time_s, training_cycles
from edgesim.radio import shannon_rate_bps, shared_uplink_time_s

SETTINGS = settings(max_examples=80, deadline=None)

# The hand-sized example used throughout: C1 = 10 s, C2 = 1 s per model, C3 = 2 s per upload.
#   K = 1: B + 2 <= 10       -> B = 1            (1 pair)
#   K = 2: B + 4 <= 10       -> B = 1, 2         (2 pairs)
#   K = 3: B + 6 <= 10       -> B = 1, 2, 3      (3 pairs; B <= K binds, not the budget)
#   K = 4: B + 8 <= 10       -> B = 1, 2         (2 pairs)
#   K = 5: B + 10 <= 10      -> none
# Examined: K from max(1, floor(10/3)) = 3 to min(25, floor((10-1)/2)) = 4, with
#   B = min(K, floor((10 - 2K)/1)): K = 3 -> min(3, 4) = 3; K = 4 -> min(4, 2) = 2.
HAND = FeasibilityConstants(c1_s=10.0, c2_s=1.0, c3_s=2.0)
HAND_FEASIBLE = [(1, 1), (1, 2), (2, 2), (1, 3), (2, 3), (3, 3), (1, 4), (2, 4)]


def constants():
    """C1 from clearly infeasible to generous, C2 including 0 (free pseudo-labelling), C3 > 0."""
    return st.builds(
        FeasibilityConstants,
        c1_s=st.floats(min_value=-5.0, max_value=60.0),
        c2_s=st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=5.0)),
        c3_s=st.floats(min_value=0.05, max_value=5.0),
    )


N_DEVICES = st.integers(min_value=1, max_value=30)


# --- round_budget_s (Eq. 13) ---------------------------------------------------


def test_round_budget_hand_values():
    assert round_budget_s(250.0, 100) == 2.5  # T/G = 250 s / 100 rounds
    assert round_budget_s(12.0, 1) == 12.0  # one round gets everything


@SETTINGS
@given(st.floats(min_value=1e-3, max_value=1e6), st.integers(min_value=1, max_value=10_000))
def test_round_budgets_add_up_to_the_total(total_s, rounds):
    assert round_budget_s(total_s, rounds) * rounds == pytest.approx(total_s, rel=1e-12)
    assert round_budget_s(total_s, rounds + 1) < round_budget_s(total_s, rounds)


@pytest.mark.parametrize(
    "total, rounds, match",
    [
        (0.0, 10, r"total_time_s\(=0.0\) must be > 0"),
        (-5.0, 10, r"total_time_s\(=-5.0\)"),
        (250.0, 0, r"rounds\(=0\) must be an integer >= 1"),
        (250.0, 2.5, r"rounds\(=2.5\)"),
        (250.0, True, r"rounds\(=True\)"),
        (250.0, math.inf, r"rounds\(=inf\)"),
        (math.nan, 10, r"total_time_s\(=nan\)"),
    ],
)
def test_round_budget_rejects_bad_inputs(total, rounds, match):
    with pytest.raises(ValueError, match=match):
        round_budget_s(total, rounds)


# --- feasibility_constants (Ineq. 26) ---------------------------------------------


def test_feasibility_constants_hand_values():
    # C1 = T/G - (I*C_tra*D + C_SR)/f = 12 - (1.5e9 + 0.5e9)/1e9 = 10 s
    # C2 = C_pse/f = 1e9/1e9 = 1 s;  C3 = m/r = 17.44e6 / 8.72e6 = 2 s
    consts = feasibility_constants(
        round_budget_s=12.0,
        training_cycles=1.5e9,
        sr_cycles=0.5e9,
        pseudo_label_cycles_per_model=1e9,
        cpu_freq_hz=1e9,
        model_bits=17.44e6,
        uplink_rate_bps=8.72e6,
    )
    assert consts == HAND


def test_feasibility_constants_limits():
    # all of T/G left when nothing is trained; C1 goes negative when training alone overruns T/G
    free = feasibility_constants(2.5, 0.0, 0.0, 0.0, 1e9, 1e6, 1e6)
    assert free == FeasibilityConstants(2.5, 0.0, 1.0)
    overrun = feasibility_constants(2.5, 3e9, 0.0, 0.0, 1e9, 1e6, 1e6)
    assert overrun.c1_s == pytest.approx(-0.5)  # 2.5 - 3e9/1e9


def test_eq_24_is_k_times_eq_9_with_eq_8_in_the_budget():
    # Ineq. (26) is Eq. (25) <= T/G with Eq. (23) + Eq. (24): B*C2 + K*C3 = t_l + t_u - fixed compute
    link = dict(bandwidth_hz=1e6, channel_gain=1e-10, tx_power_w=0.2, noise_psd_w_per_hz=4e-21)
    rate = shannon_rate_bps(**link)  # 1e6 * log2(1 + 5000) = 12.288e6 bit/s
    consts = feasibility_constants(2.5, training_cycles(1, 1e6, 500), 1e8, 2e8, 1e9, 17.44e6, rate)
    b, k = 2, 3
    t_l = dofed_compute_time_s(1, 1e6, 500, 1e8, b, 2e8, 1e9)  # 0.5 + 0.1 + 0.4 = 1.0 s
    t_u = shared_uplink_time_s(k, 17.44e6, **link)  # 3 * 17.44e6 / 12.288e6 = 4.2578 s
    assert t_l == pytest.approx(1.0)
    assert t_u == pytest.approx(3 * 17.44e6 / rate)
    assert t_u == pytest.approx(k * consts.c3_s)
    # T/G - (t_l + t_u) = C1 - (B*C2 + K*C3): the slack is the same whichever way it is computed
    assert 2.5 - (t_l + t_u) == pytest.approx(consts.c1_s - (b * consts.c2_s + k * consts.c3_s))


@SETTINGS
@given(
    st.floats(min_value=0.1, max_value=100.0),
    st.floats(min_value=0.0, max_value=1e10),
    st.floats(min_value=0.0, max_value=1e10),
    st.floats(min_value=0.0, max_value=1e10),
    st.floats(min_value=1e8, max_value=1e10),
    st.floats(min_value=1.0, max_value=1e9),
    st.floats(min_value=1e3, max_value=1e9),
)
def test_feasibility_constants_follow_ineq_26(budget_s, train, sr, pse, f, m, rate):
    consts = feasibility_constants(budget_s, train, sr, pse, f, m, rate)
    assert consts.c1_s == pytest.approx(budget_s - (train + sr) / f, rel=1e-9, abs=1e-9)
    assert consts.c2_s == pytest.approx(pse / f, rel=1e-12)
    assert consts.c3_s == pytest.approx(m / rate, rel=1e-12)
    # more training work leaves less of the round; a faster CPU leaves more
    assert feasibility_constants(budget_s, train + 1e9, sr, pse, f, m, rate).c1_s < consts.c1_s
    assert feasibility_constants(budget_s, train, sr, pse, 2 * f, m, rate).c1_s >= consts.c1_s


@pytest.mark.parametrize(
    "override, match",
    [
        (dict(cpu_freq_hz=0.0), r"cpu_freq_hz\(=0.0\)"),
        (dict(training_cycles=-1.0), r"training_cycles\(=-1.0\)"),
        (dict(sr_cycles=math.nan), r"sr_cycles\(=nan\)"),
        (dict(pseudo_label_cycles_per_model=-1.0), r"pseudo_label_cycles_per_model\(=-1.0\)"),
        (dict(model_bits=0.0), r"model_bits\(=0.0\) must be > 0"),
        (dict(uplink_rate_bps=0.0), r"uplink_rate_bps\(=0.0\) must be > 0"),
        (dict(round_budget_s=math.inf), r"round_budget_s\(=inf\)"),
    ],
)
def test_feasibility_constants_reject_bad_inputs(override, match):
    args = dict(
        round_budget_s=12.0,
        training_cycles=1.5e9,
        sr_cycles=0.5e9,
        pseudo_label_cycles_per_model=1e9,
        cpu_freq_hz=1e9,
        model_bits=17.44e6,
        uplink_rate_bps=8.72e6,
    )
    with pytest.raises(ValueError, match=match):
        feasibility_constants(**dict(args, **override))


# --- is_feasible ---------------------------------------------------------------


def test_is_feasible_hand_values():
    assert is_feasible(2, 4, HAND, 25)  # 2*1 + 4*2 = 10 <= 10: met exactly
    assert not is_feasible(3, 4, HAND, 25)  # 3 + 8 = 11 > 10
    assert is_feasible(3, 3, HAND, 25)  # 3 + 6 = 9
    assert not is_feasible(1, 5, HAND, 25)  # 1 + 10 = 11


def test_is_feasible_needs_one_le_b_le_k_le_n():
    assert not is_feasible(0, 1, HAND, 25)  # B >= 1
    assert not is_feasible(3, 2, HAND, 25)  # B <= K
    assert not is_feasible(1, 3, HAND, 2)  # K <= N


def test_is_feasible_forgives_rounding_at_the_boundary():
    # 0.1 + 0.2 = 0.30000000000000004 > 0.3 in floats; the budget is met
    assert is_feasible(1, 1, FeasibilityConstants(0.3, 0.1, 0.2), 1)


@SETTINGS
@given(constants(), N_DEVICES, st.integers(1, 30), st.integers(1, 30))
def test_feasibility_is_monotone(consts, n, b, k):
    # fewer models to pseudo-label with, or fewer uploads, never breaks the budget
    if is_feasible(b, k, consts, n):
        if b - 1 >= 1:
            assert is_feasible(b - 1, k, consts, n)
        if k - 1 >= b:
            assert is_feasible(b, k - 1, consts, n)


# --- examined_pairs (§4.4) ---------------------------------------------------------


def test_examined_pairs_hand_example():
    assert examined_pairs(HAND, 25) == [(3, 3), (2, 4)]


def test_examined_pairs_with_free_pseudo_labelling():
    # C2 = 0: B = K, K from floor(10/2) = 5 to floor((10 - 0)/2) = 5
    assert examined_pairs(FeasibilityConstants(10.0, 0.0, 2.0), 25) == [(5, 5)]
    # and K is still capped at N
    assert examined_pairs(FeasibilityConstants(10.0, 0.0, 2.0), 3) == [(3, 3)]


def test_examined_pairs_are_capped_at_n():
    # C1 = 100: K could reach floor(99/2) = 49, but there are 5 devices: K = 5, B = min(5, 100 - 10) = 5
    assert examined_pairs(FeasibilityConstants(100.0, 1.0, 2.0), 5) == [(5, 5)]
    # K range min(N, floor(C1/(C2+C3))) = 4 .. min(N, floor(49/1)) = 4 with N = 4
    assert examined_pairs(FeasibilityConstants(50.0, 1.0, 1.0), 4) == [(4, 4)]


def test_examined_pairs_when_uploads_dominate():
    # C1 = 10, C2 = 0.5, C3 = 3: K from floor(10/3.5) = 2 to floor(9.5/3) = 3
    #   K = 2: B = min(2, floor((10-6)/0.5) = 8) = 2;  K = 3: B = min(3, floor((10-9)/0.5) = 2) = 2
    assert examined_pairs(FeasibilityConstants(10.0, 0.5, 3.0), 25) == [(2, 2), (2, 3)]


def test_exactly_met_budget_gives_one_pair():
    # C1 = C2 + C3 = 3: only B = K = 1
    assert examined_pairs(FeasibilityConstants(3.0, 1.0, 2.0), 25) == [(1, 1)]


def test_rounding_level_overrun_agrees_with_is_feasible():
    # C2 + C3 = 10 + 5e-12 exceeds C1 = 10 by less than the 1e-12 relative tolerance: (1, 1) fits,
    # although floor((C1 - C2)/C3) = floor(1 - 2.5e-12) = 0 taken literally would say it does not
    consts = FeasibilityConstants(10.0, 8.0, 2.0 + 5e-12)
    assert is_feasible(1, 1, consts, 5)
    assert examined_pairs(consts, 5) == [(1, 1)]
    assert feasible_count(consts, 5) == 1


def test_a_negligible_pseudo_labelling_cost_does_not_overflow():
    # C2 = 5e-324 s: (C1 - K*C3)/C2 is +-inf; B = K wherever the uploads fit (K*0.5 <= 1: K <= 2)
    consts = FeasibilityConstants(1.0, 5e-324, 0.5)
    assert examined_pairs(consts, 4) == [(2, 2)]
    assert feasible_count(consts, 4) == 3  # (1, 1), (1, 2), (2, 2)
    nothing = FeasibilityConstants(0.0, 5e-324, 1.0)  # (0 - 1)/5e-324 = -inf
    assert examined_pairs(nothing, 4) == [] and feasible_count(nothing, 4) == 0


@pytest.mark.parametrize("c1_s", [2.5, 0.0, -4.0])
def test_infeasible_budget_examines_nothing(c1_s):
    # C1 < C2 + C3 = 3: even B = K = 1 does not fit
    consts = FeasibilityConstants(c1_s, 1.0, 2.0)
    assert examined_pairs(consts, 25) == []
    assert feasible_pairs(consts, 25) == []
    assert feasible_count(consts, 25) == 0


def test_examined_pairs_rejects_bad_device_counts():
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match=r"n_devices\(="):
            examined_pairs(HAND, bad)


@SETTINGS
@given(constants(), N_DEVICES)
def test_every_examined_pair_is_feasible_and_has_the_largest_b_for_its_k(consts, n):
    pairs = examined_pairs(consts, n)
    assert [k for _, k in pairs] == sorted({k for _, k in pairs})  # increasing K, one B each
    for b, k in pairs:
        assert is_feasible(b, k, consts, n)
        assert b == k or not is_feasible(b + 1, k, consts, n)


@SETTINGS
@given(constants(), N_DEVICES)
def test_examined_pairs_dominate_every_feasible_pair(consts, n):
    # value (27) grows with B and K, so examining these pairs suffices (§4.4)
    pairs = examined_pairs(consts, n)
    assert bool(pairs) == (feasible_count(consts, n) > 0)
    for b, k in feasible_pairs(consts, n):
        assert any(b2 >= b and k2 >= k for b2, k2 in pairs), (b, k, pairs)


# --- feasible_count / feasible_pairs -----------------------------------------------------


def test_feasible_pairs_hand_example():
    assert feasible_pairs(HAND, 25) == HAND_FEASIBLE
    assert feasible_count(HAND, 25) == 8  # 1 + 2 + 3 + 2


def test_feasible_pairs_with_free_pseudo_labelling():
    # C2 = 0, C3 = 2, C1 = 10: K <= 5 with any B <= K: 1 + 2 + 3 + 4 + 5 = 15 pairs
    consts = FeasibilityConstants(10.0, 0.0, 2.0)
    assert feasible_count(consts, 25) == 15
    assert len(feasible_pairs(consts, 25)) == 15


def test_feasible_pairs_capped_at_n():
    # a generous budget: every pair with B <= K <= 4 is feasible: 4 * 5 / 2 = 10
    consts = FeasibilityConstants(1000.0, 1.0, 1.0)
    assert feasible_count(consts, 4) == 10
    assert feasible_pairs(consts, 4) == [(b, k) for k in range(1, 5) for b in range(1, k + 1)]


@SETTINGS
@given(constants(), N_DEVICES)
def test_feasible_count_matches_the_pairs_and_a_naive_double_loop(consts, n):
    naive = sum(1 for k in range(0, n + 2) for b in range(0, n + 2) if is_feasible(b, k, consts, n))
    assert feasible_count(consts, n) == len(feasible_pairs(consts, n)) == naive
    assert feasible_pairs(consts, n) == sorted(feasible_pairs(consts, n), key=lambda bk: (bk[1], bk[0]))


def test_feasible_count_rejects_bad_device_counts():
    with pytest.raises(ValueError, match=r"n_devices\(=0\)"):
        feasible_count(HAND, 0)
    with pytest.raises(ValueError, match=r"n_devices\(=-1\)"):
        feasible_pairs(HAND, -1)


# --- infeasibility_message / InfeasibleBudgetError ------------------------------------------


def test_infeasibility_message_gives_the_numbers():
    # T/G = 4.5 s, C1 = 2.5 s -> 2 s of training + SR; one round needs 2 + 1 + 2 = 5 s
    message = infeasibility_message(FeasibilityConstants(2.5, 1.0, 2.0), round_budget_s=4.5)
    assert "needs 5 s" in message
    assert "2 s of local training" in message
    assert "1 s to pseudo-label" in message
    assert "2 s for one upload" in message
    assert "only 4.5 s per round" in message
    assert "C1 = 2.5 s < C2 + C3 = 3 s" in message
    assert "budget.total_time_s" in message and "budget.rounds" in message


@SETTINGS
@given(constants(), st.floats(min_value=0.0, max_value=100.0))
def test_infeasibility_message_quotes_c1_and_c2_plus_c3(consts, fixed_s):
    message = infeasibility_message(consts, round_budget_s=consts.c1_s + fixed_s)
    assert f"C1 = {consts.c1_s:.6g} s < C2 + C3 = {consts.c2_s + consts.c3_s:.6g} s" in message
    assert f"{consts.c3_s:.6g} s for one upload" in message


def test_infeasible_budget_error_is_a_value_error():
    consts = FeasibilityConstants(2.5, 1.0, 2.0)
    with pytest.raises(ValueError, match=r"needs 5 s"):
        raise InfeasibleBudgetError(infeasibility_message(consts, 4.5))
