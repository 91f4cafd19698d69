"""Choosing the uploaders (edgesim/selection.py): objective (27), Algorithm 1, Theorem 2."""

import itertools
import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from edgesim.selection import (
    Selection,
    assignment,
    best_selection,
    brute_force_select,
    coverage_value,
    greedy_select,
)

SETTINGS = settings(max_examples=60, deadline=None)

# Row n: how useful each device's model is to device n. Devices 0, 1 are best served by
# model 0 and devices 2, 3 by model 1 (1.0 each); model 2 is a fair all-rounder (0.75 for
# everyone); model 3 is of little use even to its owner. Column sums: 2.0, 2.0, 3.0, 0.25.
RHO = np.array(
    [
        [1.0, 0.0, 0.75, 0.0],
        [1.0, 0.0, 0.75, 0.0],
        [0.0, 1.0, 0.75, 0.0],
        [0.0, 1.0, 0.75, 0.25],
    ]
)


def square_matrices(max_n: int = 7):
    """Square matrices of similarity ratios in [0, 1], N <= max_n."""
    return st.integers(1, max_n).flatmap(
        lambda n: arrays(float, (n, n), elements=st.floats(0.0, 1.0, allow_subnormal=False))
    )


# --- coverage_value (27) ----------------------------------------------------------


def test_coverage_value_hand_example():
    # B = 1: each row takes its best selected model
    assert coverage_value(RHO, [2], 1) == 3.0  # 0.75 * 4
    assert coverage_value(RHO, [0, 1], 1) == 4.0  # rows 0, 1 take model 0 (1.0); rows 2, 3 model 1 (1.0)
    assert coverage_value(RHO, [2, 0], 1) == 3.5  # 1 + 1 + 0.75 + 0.75
    # B = 2: each row takes its two best selected models
    assert coverage_value(RHO, [0, 1, 2], 2) == 7.0  # every row: 1.0 + 0.75
    assert coverage_value(RHO, [2, 3], 2) == 3.25  # 0.75 * 4 + 0.25


def test_coverage_value_limits():
    assert coverage_value(RHO, [], 1) == 0.0  # nothing uploaded, nothing to use
    # B at least the number selected: every selected model is used, value = sum of their columns
    assert coverage_value(RHO, [2], 3) == 3.0
    assert coverage_value(RHO, range(4), 4) == RHO.sum() == 7.25


@SETTINGS
@given(st.data())
def test_coverage_value_is_monotone_in_the_set_and_in_b(data):
    rho = data.draw(square_matrices())
    n = rho.shape[0]
    subset = data.draw(st.lists(st.integers(0, n - 1), unique=True))
    extra = data.draw(st.integers(0, n - 1))
    b = data.draw(st.integers(1, n))
    value = coverage_value(rho, subset, b)
    assert coverage_value(rho, subset[::-1], b) == value  # a function of the set, not of its order
    # more uploads never hurt, nor does using more of them (up to float rounding)
    assert coverage_value(rho, set(subset) | {extra}, b) >= value * (1 - 1e-12)
    assert coverage_value(rho, subset, b + 1) >= value * (1 - 1e-12)


# --- greedy_select: Algorithm 1 ---------------------------------------------------------


def test_greedy_hand_example_b1():
    # Step 1, thresholds 0: gains = column sums 2.0, 2.0, 3.0, 0.25 -> device 2.
    # Step 2, thresholds 0.75 in every row: gains 2*0.25 = 0.5, 0.5, -, max(0.25-0.75, 0) = 0
    #         -> a tie between 0 and 1: the lower id, 0.
    assert greedy_select(RHO, 1, 2) == (2, 0)
    # Step 3, thresholds 1, 1, 0.75, 0.75: device 1 gains 0.25 + 0.25, device 3 gains 0 -> 1.
    assert greedy_select(RHO, 1, 3) == (2, 0, 1)
    assert greedy_select(RHO, 1, 4) == (2, 0, 1, 3)


def test_greedy_hand_example_b2():
    # B = 2: thresholds stay 0 while fewer than 2 are selected, so the first two picks follow
    # the column sums: 2 (3.0), then 0 and 1 tie at 2.0 -> 0. Value: 1.75 * 2 + 0.75 * 2 = 5.0
    assert greedy_select(RHO, 2, 2) == (2, 0)
    # Step 3, thresholds = 2nd best of {0, 2} per row: 0.75, 0.75, 0, 0:
    #   device 1 gains 1 + 1 = 2, device 3 gains 0.25 -> 1
    assert greedy_select(RHO, 2, 3) == (2, 0, 1)


def test_greedy_is_suboptimal_on_the_hand_example_but_within_theorem_2():
    # greedy {2, 0} is worth 3.5; the optimum {0, 1} is worth 4.0: 3.5 / 4 = 0.875 >= 1 - 1/e
    greedy = greedy_select(RHO, 1, 2)
    best = brute_force_select(RHO, 1, 2)
    assert best == (0, 1)
    assert coverage_value(RHO, greedy, 1) == 3.5
    assert coverage_value(RHO, best, 1) == 4.0
    assert 3.5 / 4.0 >= 1 - 1 / math.e


def test_greedy_returns_the_pick_order_not_sorted_ids():
    assert greedy_select(RHO, 1, 2) == (2, 0)
    assert sorted(greedy_select(RHO, 1, 2)) == [0, 2]


@pytest.mark.parametrize("n, b, k", [(3, 1, 3), (5, 2, 3), (6, 3, 6)])
def test_greedy_ties_go_to_the_lowest_id(n, b, k):
    # every model equally useful to everyone: all gains tie at every step -> 0, 1, 2, ...
    assert greedy_select(np.ones((n, n)), b, k) == tuple(range(k))
    assert greedy_select(np.zeros((n, n)), b, k) == tuple(range(k))


def test_greedy_ties_allow_rounding_noise():
    # models 0 and 1 are equally useful up to float rounding (0.3 vs 0.1 + 0.2): a tie, so 0,
    # although model 1's gain is larger in floats: 0.30000000000000004 + 0.3 > 0.3 + 0.3
    rho = np.array([[0.3, 0.1 + 0.2, 0.0], [0.3, 0.3, 0.0], [0.0, 0.0, 0.1]])
    assert rho[:, 1].sum() > rho[:, 0].sum()
    assert greedy_select(rho, 1, 1) == (0,)


@SETTINGS
@given(st.data())
def test_greedy_matches_a_naive_algorithm_1(data):
    # quarter values are exact in floats, so the naive gains tie exactly when they should
    n = data.draw(st.integers(1, 6))
    rho = data.draw(arrays(float, (n, n), elements=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])))
    b = data.draw(st.integers(1, n))
    k = data.draw(st.integers(b, n))
    chosen: list[int] = []
    for _ in range(k):
        gains = {
            i: coverage_value(rho, chosen + [i], b) - coverage_value(rho, chosen, b) for i in range(n) if i not in chosen
        }
        best = max(gains.values())
        chosen.append(min(i for i, g in gains.items() if g == best))
    assert greedy_select(rho, b, k) == tuple(chosen)


@SETTINGS
@given(st.data())
def test_greedy_gains_shrink_step_by_step(data):
    # submodularity: each pick adds no more than the one before it
    rho = data.draw(square_matrices())
    n = rho.shape[0]
    b = data.draw(st.integers(1, n))
    picks = greedy_select(rho, b, n)
    values = [coverage_value(rho, picks[:j], b) for j in range(n + 1)]
    gains = np.diff(values)
    assert np.all(gains[1:] <= gains[:-1] + 1e-9)
    assert sorted(picks) == list(range(n))


def test_greedy_is_fast_for_two_thousand_devices():
    rho = np.random.default_rng((0, 2000)).random((2000, 2000))
    # CPU seconds of this process, not wall time: parallel test workers (pytest -n) and other jobs on a shared
    # machine stretch the wall clock, not the work greedy does (the wall bound failed at a load of 10 on 2 cores)
    start = time.process_time()
    picks = greedy_select(rho, 5, 10)
    assert time.process_time() - start < 1.0
    assert len(set(picks)) == 10


# --- Theorem 2 against brute force ---------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_greedy_reaches_one_minus_one_over_e_of_the_optimum(data):
    rho = data.draw(square_matrices())
    n = rho.shape[0]
    b = data.draw(st.integers(1, n))
    k = data.draw(st.integers(b, n))
    greedy_value = coverage_value(rho, greedy_select(rho, b, k), b)
    best = brute_force_select(rho, b, k)
    best_value = coverage_value(rho, best, b)
    assert best_value >= greedy_value - 1e-9
    assert greedy_value >= (1 - 1 / math.e) * best_value - 1e-9
    assert len(best) == k and list(best) == sorted(set(best))


def test_brute_force_ties_go_to_the_smallest_subset():
    # B = 2, K = 2: {0, 2} and {1, 2} are both worth 5.0 (1.75 * 2 + 0.75 * 2), {0, 1} 4.0
    assert brute_force_select(RHO, 2, 2) == (0, 2)
    assert brute_force_select(np.ones((5, 5)), 2, 3) == (0, 1, 2)


@SETTINGS
@given(st.data())
def test_brute_force_is_the_exhaustive_maximum(data):
    rho = data.draw(square_matrices(5))
    n = rho.shape[0]
    b = data.draw(st.integers(1, n))
    k = data.draw(st.integers(b, n))
    values = {s: coverage_value(rho, s, b) for s in itertools.combinations(range(n), k)}
    # within the selection's tie tolerance: sums of the same values in another order differ in the last bit
    assert coverage_value(rho, brute_force_select(rho, b, k), b) == pytest.approx(max(values.values()), rel=1e-12)


def test_brute_force_refuses_too_many_subsets():
    # C(30, 10) = 30 045 015 > 200 000
    with pytest.raises(ValueError, match=r"C\(30, 10\) = 30045015"):
        brute_force_select(np.ones((30, 30)), 2, 10)
    # C(20, 5) = 15 504 is fine
    assert brute_force_select(np.ones((20, 20)), 1, 5) == (0, 1, 2, 3, 4)


# --- best_selection: the pair (B, K) with the best greedy set -------------------------------


def test_best_selection_hand_example():
    # (B, K) = (2, 2): greedy (2, 0) is worth 5.0; (1, 3): greedy (2, 0, 1) is worth 4.0
    assert best_selection(RHO, [(2, 2), (1, 3)]) == Selection(b=2, k=2, devices=(2, 0), value=5.0)
    # (1, 2): 3.5 < (1, 3): 4.0
    assert best_selection(RHO, [(1, 2), (1, 3)]) == Selection(b=1, k=3, devices=(2, 0, 1), value=4.0)


def test_best_selection_ties_go_to_the_earlier_pair():
    # (1, 3) and (1, 4) are both worth 4.0: device 3 adds nothing to B = 1
    assert best_selection(RHO, [(1, 3), (1, 4)]).k == 3
    # all-equal ratios: (1, 1) and (1, 2) are both worth 3 * 1 = 3
    assert best_selection(np.ones((3, 3)), [(1, 1), (1, 2)]) == Selection(1, 1, (0,), 3.0)


def test_best_selection_is_frozen():
    with pytest.raises(AttributeError):
        best_selection(RHO, [(1, 1)]).k = 2


@SETTINGS
@given(st.data())
def test_best_selection_takes_the_maximum_over_pairs(data):
    rho = data.draw(square_matrices())
    n = rho.shape[0]
    pairs = data.draw(
        st.lists(st.integers(1, n).flatmap(lambda k: st.tuples(st.integers(1, k), st.just(k))), min_size=1, max_size=5)
    )
    chosen = best_selection(rho, pairs)
    values = [coverage_value(rho, greedy_select(rho, b, k), b) for b, k in pairs]
    assert chosen.value == pytest.approx(max(values))
    first = next(j for j, v in enumerate(values) if v >= max(values) * (1 - 1e-12))
    assert (chosen.b, chosen.k) == pairs[first]
    assert chosen.devices == greedy_select(rho, chosen.b, chosen.k)


def test_best_selection_needs_a_pair():
    with pytest.raises(ValueError, match=r"pairs\(=\[\]\)"):
        best_selection(RHO, [])


def test_best_selection_rejects_invalid_pairs():
    with pytest.raises(ValueError, match=r"must satisfy 1 <= b <= k <= N \(= 4\)"):
        best_selection(RHO, [(1, 5)])


# --- assignment: the x_ni -------------------------------------------------------------------


def test_assignment_hand_example():
    # uploaders {0, 1}, B = 1: rows 0, 1 prefer model 0 (1.0 vs 0); rows 2, 3 model 1
    assert assignment(RHO, [0, 1], 1) == {0: (0,), 1: (0,), 2: (1,), 3: (1,)}
    # uploaders {0, 1, 2}, B = 2: most useful first; row 2: 1 (1.0), 2 (0.75)
    assert assignment(RHO, [2, 1, 0], 2) == {0: (0, 2), 1: (0, 2), 2: (1, 2), 3: (1, 2)}


def test_assignment_ties_and_small_sets():
    # equal ratios: lower ids first
    assert assignment(np.ones((3, 3)), [2, 0, 1], 2) == {0: (0, 1), 1: (0, 1), 2: (0, 1)}
    # fewer uploaders than B: everyone uses all of them
    assert assignment(RHO, [3], 2) == {0: (3,), 1: (3,), 2: (3,), 3: (3,)}
    assert assignment(RHO, [], 1) == {0: (), 1: (), 2: (), 3: ()}


@SETTINGS
@given(st.data())
def test_assignment_realises_the_coverage_value(data):
    rho = data.draw(square_matrices())
    n = rho.shape[0]
    selected = data.draw(st.lists(st.integers(0, n - 1), unique=True))
    b = data.draw(st.integers(1, n))
    x = assignment(rho, selected, b)
    assert sorted(x) == list(range(n))
    for row, used in x.items():
        assert len(used) == min(b, len(selected)) and set(used) <= set(selected)  # (28), (30)
        unused = set(selected) - set(used)
        assert all(rho[row, i] <= min(rho[row, j] for j in used) for i in unused)
        assert [rho[row, i] for i in used] == sorted((rho[row, i] for i in used), reverse=True)
    # objective (27) with these x_ni is the coverage value
    total = sum(rho[row, i] for row, used in x.items() for i in used)
    assert total == pytest.approx(coverage_value(rho, selected, b), rel=1e-12, abs=1e-12)


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rho, match",
    [
        (np.ones((2, 3)), r"rho\(shape=\(2, 3\)\)"),
        (np.ones(3), r"rho\(shape=\(3,\)\)"),
        (np.ones((0, 0)), r"rho\(shape=\(0, 0\)\)"),
        (np.array([[1.0, math.nan], [0.0, 1.0]]), r"rho\[0, 1\]\(=nan\) must be finite and >= 0"),
        (np.array([[1.0, 0.0], [math.inf, 1.0]]), r"rho\[1, 0\]\(=inf\)"),
        (np.array([[1.0, 0.0], [0.0, -0.5]]), r"rho\[1, 1\]\(=-0.5\)"),
        ([[1.0, 0.0], [0.0]], r"rho must be an \(N, N\) matrix"),
    ],
)
def test_bad_rho_is_refused_everywhere(rho, match):
    for call in (
        lambda: coverage_value(rho, [0], 1),
        lambda: greedy_select(rho, 1, 1),
        lambda: brute_force_select(rho, 1, 1),
        lambda: best_selection(rho, [(1, 1)]),
        lambda: assignment(rho, [0], 1),
    ):
        with pytest.raises(ValueError, match=match):
            call()


@pytest.mark.parametrize(
    "b, k, match",
    [
        (0, 2, r"b\(=0\) must be an integer >= 1"),
        (3, 2, r"\(b, k\)\(=\(3, 2\)\) must satisfy 1 <= b <= k <= N \(= 4\)"),
        (1, 5, r"\(b, k\)\(=\(1, 5\)\)"),
        (1, 0, r"k\(=0\)"),
        (1.5, 2, r"b\(=1.5\)"),
        (True, 2, r"b\(=True\)"),
    ],
)
def test_bad_b_and_k_are_refused(b, k, match):
    with pytest.raises(ValueError, match=match):
        greedy_select(RHO, b, k)
    with pytest.raises(ValueError, match=match):
        brute_force_select(RHO, b, k)


@pytest.mark.parametrize(
    "selected, match",
    [
        ([4], r"device id\(=4\) must be < n_devices \(= 4\)"),
        ([-1], r"device id\(=-1\)"),
        ([1, 1], r"selected\(=\[1, 1\]\) must not repeat a device"),
        ([0.5], r"device id\(=0.5\)"),
    ],
)
def test_bad_selected_sets_are_refused(selected, match):
    with pytest.raises(ValueError, match=match):
        coverage_value(RHO, selected, 1)
    with pytest.raises(ValueError, match=match):
        assignment(RHO, selected, 1)


def test_bad_b_in_value_and_assignment():
    with pytest.raises(ValueError, match=r"b\(=0\)"):
        coverage_value(RHO, [0], 0)
    with pytest.raises(ValueError, match=r"b\(=-1\)"):
        assignment(RHO, [0], -1)


# --- the coverage variant (select_b) -------------------------------------------------------

# Three groups of two devices; each group's two models serve it (0.5 each), group {4, 5} less well
# (0.3). Column totals: 1.0, 1.0, 1.0, 1.0, 0.6, 0.6.
GROUPS = np.zeros((6, 6))
for lo, v in ((0, 0.5), (2, 0.5), (4, 0.3)):
    GROUPS[lo:lo + 2, lo:lo + 2] = v


def test_literal_objective_with_b_equal_k_sums_columns_and_leaves_a_group_out():
    sel = best_selection(GROUPS, [(3, 3)])
    assert sel.devices == (0, 1, 2)  # the three largest column totals
    assert sel.value == pytest.approx(3.0)
    uncovered = [n for n, ids in assignment(GROUPS, sel.devices, 3).items() if GROUPS[n, list(ids)].sum() == 0]
    assert uncovered == [4, 5]


def test_coverage_selection_serves_every_group():
    sel = best_selection(GROUPS, [(3, 3)], select_b=1)
    assert sel.devices == (0, 2, 4)  # Algorithm 1 at B_sel = 1: each group's first model
    assert sel.b == 3 and sel.k == 3
    assert sel.value == pytest.approx(1.0 + 1.0 + 0.6)  # valued by (27) at the pair's own B = 3
    assert all(GROUPS[n, list(ids)].sum() > 0 for n, ids in assignment(GROUPS, sel.devices, 3).items())


def test_coverage_with_select_b_at_least_b_is_the_literal_selection():
    for b, k in [(1, 2), (2, 2), (2, 3), (3, 4)]:
        assert best_selection(GROUPS, [(b, k)], select_b=b) == best_selection(GROUPS, [(b, k)])
        assert best_selection(GROUPS, [(b, k)], select_b=b + 3) == best_selection(GROUPS, [(b, k)])


@SETTINGS
@given(st.data())
def test_coverage_never_covers_fewer_devices_at_select_b_1(data):
    # Algorithm 1 at B_sel = 1 maximises the sum of each row's best pick greedily; every device whose row
    # has a positive entry among the columns picked literally is also served by some coverage pick, or the
    # coverage set has a larger total of row maxima.
    rho = data.draw(square_matrices())
    n = rho.shape[0]
    k = data.draw(st.integers(1, n))
    lit = best_selection(rho, [(k, k)]).devices
    cov = best_selection(rho, [(k, k)], select_b=1).devices
    assert coverage_value(rho, cov, 1) >= (1 - 1 / math.e) * coverage_value(rho, lit, 1) - 1e-12


def test_select_b_must_be_a_positive_count():
    with pytest.raises(ValueError, match="select_b"):
        best_selection(GROUPS, [(1, 1)], select_b=0)
