"""Device computation (edgesim/compute.py): Eqs. (7), (23) of DoFed-SPP and CPU energy."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgesim.compute import (
    compute_energy_j,
    compute_time_s,
    dofed_compute_time_s,
    dofed_round_cycles,
    training_cycles,
    training_time_s,
)

SETTINGS = settings(max_examples=60, deadline=None)

CYCLES = st.floats(min_value=0.0, max_value=1e15)
FREQ_HZ = st.floats(min_value=1e6, max_value=1e11)
FACTOR = st.floats(min_value=1.01, max_value=100.0)
ITERATIONS = st.integers(min_value=0, max_value=50)
CYCLES_PER_SAMPLE = st.floats(min_value=0.0, max_value=1e9)
SAMPLES = st.integers(min_value=0, max_value=100_000)
N_MODELS = st.integers(min_value=0, max_value=100)

# A round: I = 1 iteration over D = 500 samples at C_tra = 1e6 cycles/sample (5e8 cycles),
# C_SR = 1e8 cycles, B = 3 pseudo-labelling models at C_pse = 2e8 cycles each (6e8 cycles).
ROUND = dict(
    local_iterations=1,
    cycles_per_sample=1e6,
    samples=500,
    sr_cycles=1e8,
    n_pseudo_label_models=3,
    pseudo_label_cycles_per_model=2e8,
)


# --- compute_time_s -----------------------------------------------------------


def test_compute_time_hand_values():
    assert compute_time_s(2e9, 1e9) == 2.0  # 2e9 cycles / 1e9 cycles/s
    assert compute_time_s(3e8, 1.5e9) == pytest.approx(0.2)  # 3e8 / 1.5e9


def test_compute_time_limits():
    assert compute_time_s(0.0, 1e9) == 0.0  # no work
    assert compute_time_s(1e9, 1e300) == pytest.approx(1e-291)  # -> 0 as f -> inf


@SETTINGS
@given(CYCLES, CYCLES, FREQ_HZ, FACTOR)
def test_compute_time_is_linear_in_cycles_and_decreasing_in_frequency(a, b, f, factor):
    assert compute_time_s(a + b, f) == pytest.approx(compute_time_s(a, f) + compute_time_s(b, f), rel=1e-12)
    assert compute_time_s(factor * a, f) == pytest.approx(factor * compute_time_s(a, f), rel=1e-12)
    assert compute_time_s(a, f * factor) <= compute_time_s(a, f)


@pytest.mark.parametrize(
    "cycles, f, match",
    [
        (-1.0, 1e9, r"cycles\(=-1.0\) must be >= 0"),
        (1e9, 0.0, r"cpu_freq_hz\(=0.0\) must be > 0"),
        (1e9, -1e9, r"cpu_freq_hz\(=-1000000000.0\)"),
        (math.nan, 1e9, r"cycles\(=nan\)"),
        (1e9, math.inf, r"cpu_freq_hz\(=inf\)"),
    ],
)
def test_compute_time_rejects_bad_inputs(cycles, f, match):
    with pytest.raises(ValueError, match=match):
        compute_time_s(cycles, f)


# --- training_cycles -------------------------------------------------------------


def test_training_cycles_hand_values():
    assert training_cycles(5, 1e6, 500) == 2.5e9  # I * C * D = 5 * 1e6 * 500
    assert training_cycles(1, 1e6, 500) == 5e8


def test_training_cycles_limits():
    assert training_cycles(0, 1e6, 500) == 0.0  # no local iteration
    assert training_cycles(5, 1e6, 0) == 0.0  # no data


@SETTINGS
@given(ITERATIONS, CYCLES_PER_SAMPLE, SAMPLES)
def test_training_cycles_is_a_product(i, c, d):
    assert training_cycles(i, c, d) == pytest.approx(i * c * d, rel=1e-12)
    assert training_cycles(i + 1, c, d) >= training_cycles(i, c, d)


@pytest.mark.parametrize(
    "args, name",
    [((-1, 1e6, 500), "local_iterations"), ((1, -1e6, 500), "cycles_per_sample"), ((1, 1e6, math.nan), "samples")],
)
def test_training_cycles_rejects_bad_inputs(args, name):
    with pytest.raises(ValueError, match=rf"{name}\(="):
        training_cycles(*args)


# --- training_time_s (Eq. 7) ---------------------------------------------


def test_local_training_time_hand_values():
    assert training_time_s(5, 1e6, 500, 1e9) == 2.5  # 5 * 1e6 * 500 / 1e9
    assert training_time_s(1, 1e6, 500, 2e9) == 0.25  # 5e8 / 2e9


def test_local_training_time_limits():
    assert training_time_s(0, 1e6, 500, 1e9) == 0.0
    assert training_time_s(5, 1e6, 500, 1e300) == pytest.approx(2.5e-291)  # -> 0 as f -> inf


@SETTINGS
@given(ITERATIONS, CYCLES_PER_SAMPLE, SAMPLES, FREQ_HZ, FACTOR)
def test_local_training_time_is_eq_7(i, c, d, f, factor):
    assert training_time_s(i, c, d, f) == pytest.approx(i * c * d / f, rel=1e-12)
    assert training_time_s(i, c, d, f * factor) <= training_time_s(i, c, d, f)


def test_local_training_time_rejects_bad_inputs():
    with pytest.raises(ValueError, match=r"cpu_freq_hz\(=0.0\)"):
        training_time_s(1, 1e6, 500, 0.0)
    with pytest.raises(ValueError, match=r"samples\(=-500.0\)"):
        training_time_s(1, 1e6, -500, 1e9)


# --- dofed_round_cycles (terms of Eq. 23) ----------------------------------------


def test_dofed_round_cycles_hand_values():
    # train: 1 * 1e6 * 500 = 5e8; sr: 1e8; pseudo_label: 3 * 2e8 = 6e8
    assert dofed_round_cycles(**ROUND) == {"train": 5e8, "sr": 1e8, "pseudo_label": 6e8}


def test_dofed_round_cycles_without_pseudo_labelling():
    assert dofed_round_cycles(**dict(ROUND, n_pseudo_label_models=0))["pseudo_label"] == 0.0


@SETTINGS
@given(N_MODELS, st.floats(min_value=0.0, max_value=1e12))
def test_pseudo_labelling_cycles_grow_by_c_pse_per_model(b, c_pse):
    cycles = dofed_round_cycles(**dict(ROUND, n_pseudo_label_models=b, pseudo_label_cycles_per_model=c_pse))
    more = dofed_round_cycles(**dict(ROUND, n_pseudo_label_models=b + 1, pseudo_label_cycles_per_model=c_pse))
    assert more["pseudo_label"] - cycles["pseudo_label"] == pytest.approx(c_pse, rel=1e-9, abs=1e-6)
    assert more["train"] == cycles["train"] and more["sr"] == cycles["sr"]


@pytest.mark.parametrize(
    "override, name",
    [
        (dict(n_pseudo_label_models=-1), "n_pseudo_label_models"),
        (dict(n_pseudo_label_models=2.5), "n_pseudo_label_models"),  # B counts whole models
        (dict(n_pseudo_label_models=True), "n_pseudo_label_models"),
        (dict(sr_cycles=-1.0), "sr_cycles"),
        (dict(pseudo_label_cycles_per_model=math.inf), "pseudo_label_cycles_per_model"),
        (dict(local_iterations=-2), "local_iterations"),
    ],
)
def test_dofed_round_cycles_rejects_bad_inputs(override, name):
    with pytest.raises(ValueError, match=rf"{name}\(="):
        dofed_round_cycles(**dict(ROUND, **override))


# --- dofed_compute_time_s (Eq. 23) -----------------------------------------------


def test_dofed_compute_time_hand_values():
    # (5e8 + 1e8 + 6e8) / 1e9 = 1.2 s
    assert dofed_compute_time_s(**ROUND, cpu_freq_hz=1e9) == pytest.approx(1.2)
    # the paper's split: I*C_tra*D/f + C_SR/f + B*C_pse/f = 0.25 + 0.05 + 0.3 at f = 2 GHz
    assert dofed_compute_time_s(**ROUND, cpu_freq_hz=2e9) == pytest.approx(0.25 + 0.05 + 0.3)


def test_dofed_compute_time_reduces_to_eq_7():
    # no similarity ratios, no pseudo-labelling: Eq. (23) is Eq. (7)
    plain = dict(ROUND, sr_cycles=0.0, n_pseudo_label_models=0)
    assert dofed_compute_time_s(**plain, cpu_freq_hz=1e9) == training_time_s(1, 1e6, 500, 1e9)


@SETTINGS
@given(ITERATIONS, CYCLES_PER_SAMPLE, SAMPLES, CYCLES, N_MODELS, CYCLES, FREQ_HZ)
def test_dofed_compute_time_is_eq_23(i, c_tra, d, c_sr, b, c_pse, f):
    expected = i * c_tra * d / f + c_sr / f + b * c_pse / f
    got = dofed_compute_time_s(i, c_tra, d, c_sr, b, c_pse, f)
    assert got == pytest.approx(expected, rel=1e-9)
    # each extra pseudo-labelling model costs C_pse / f more
    assert dofed_compute_time_s(i, c_tra, d, c_sr, b + 1, c_pse, f) >= got
    assert dofed_compute_time_s(i, c_tra, d, c_sr, b + 1, c_pse, f) - got == pytest.approx(
        c_pse / f, rel=1e-6, abs=1e-9 * max(1.0, got)
    )


def test_dofed_compute_time_rejects_bad_frequency():
    with pytest.raises(ValueError, match=r"cpu_freq_hz\(=-1.0\)"):
        dofed_compute_time_s(**ROUND, cpu_freq_hz=-1.0)


# --- compute_energy_j --------------------------------------------------------------


def test_compute_energy_hand_values():
    assert compute_energy_j(1e-28, 1e9, 1e9) == pytest.approx(0.1)  # 1e-28 * (1e9)**2 * 1e9
    assert compute_energy_j(1e-28, 2e9, 5e8) == pytest.approx(0.2)  # 1e-28 * 4e18 * 5e8


def test_compute_energy_limits():
    assert compute_energy_j(0.0, 1e9, 1e9) == 0.0  # kappa = 0: energy-free CPU
    assert compute_energy_j(1e-28, 1e9, 0.0) == 0.0  # no work


@SETTINGS
@given(st.floats(min_value=1e-30, max_value=1e-26), FREQ_HZ, CYCLES, FACTOR)
def test_compute_energy_is_quadratic_in_frequency_and_linear_in_cycles(kappa, f, cycles, factor):
    base = compute_energy_j(kappa, f, cycles)
    assert compute_energy_j(kappa, factor * f, cycles) == pytest.approx(factor**2 * base, rel=1e-12)
    assert compute_energy_j(kappa, f, factor * cycles) == pytest.approx(factor * base, rel=1e-12)


@pytest.mark.parametrize(
    "args, match",
    [
        ((-1e-28, 1e9, 1e9), r"kappa\(=-1e-28\)"),
        ((1e-28, 0.0, 1e9), r"cpu_freq_hz\(=0.0\)"),
        ((1e-28, 1e9, -1.0), r"cycles\(=-1.0\)"),
    ],
)
def test_compute_energy_rejects_bad_inputs(args, match):
    with pytest.raises(ValueError, match=match):
        compute_energy_j(*args)
