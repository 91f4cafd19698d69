"""The least-energy round (``bandwidth = "min_energy"``, Yang et al., IEEE TWC 2021) against an independent solver."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq, minimize

from edgesim.resources import formulas as F
from edgesim.resources import min_energy as M

N0 = 10 ** (-174 / 10) / 1e3  # W/Hz
KAPPA = 1e-28


def _cell(seed: int, k: int):
    """A random FDMA cell (Yang's scale): gains from 128.1 + 37.6 log10(d km) dB at 10-500 m, 10 dBm, 1-2 GHz."""
    rng = np.random.default_rng(seed)
    dist_km = rng.uniform(0.01, 0.5, k)
    return dict(
        bandwidth_hz=float(rng.uniform(1e6, 20e6)),
        before_s=rng.uniform(0.0, 2e-3, k),
        cycles=rng.uniform(1e4, 3e4, k) * 500,
        upload_bits=rng.uniform(2e4, 4e4, k),
        channel_gain=10 ** (-(128.1 + 37.6 * np.log10(dist_km)) / 10),
        noise_psd_w_per_hz=N0, kappa=KAPPA,
        cpu_freq_min_hz=np.full(k, 1e3), cpu_freq_max_hz=rng.uniform(1e9, 2e9, k), tx_power_max_w=np.full(k, 0.01))


def _reference(cell, deadline_s):
    """Yang's problem written out and handed to SLSQP (scipy), variables x = (b_k / B, t_k / L_k): energy
    Σ κ C³/(L − t)² + (N0/g) b t (2^{s/(b t)} − 1) s.t. Σ b = B, b t log2(1 + g p_max/(N0 b)) ≥ s, C/(L − t) ≤ f_max.
    Started from a feasible point found by root finding (each device's least band at t = L − C/f_max, scaled)."""
    B = cell["bandwidth_hz"]
    c, s, g = cell["cycles"], cell["upload_bits"], cell["channel_gain"]
    pmax, fmax = cell["tx_power_max_w"], cell["cpu_freq_max_hz"]
    left = deadline_s - cell["before_s"]
    t_hi = left - c / fmax
    k = c.size

    def rate(b, p):
        return b * np.log2(1 + g * p / (N0 * b))

    need = np.array([brentq(lambda b, i=i: b * math.log2(1 + g[i] * pmax[i] / (N0 * b)) * t_hi[i] - s[i], 1e-3, 1e12)
                     for i in range(k)])
    assert need.sum() < B
    b0 = need * B / need.sum()

    def energy(x):
        b, t = x[:k] * B, x[k:] * left
        with np.errstate(over="ignore"):
            return np.sum(KAPPA * c ** 3 / (left - t) ** 2 + N0 / g * b * t * np.expm1(math.log(2) * s / (b * t)))

    scale = energy(np.concatenate([b0 / B, t_hi / left]))
    cons = [{"type": "eq", "fun": lambda x: x[:k].sum() - 1.0},
            {"type": "ineq", "fun": lambda x: rate(x[:k] * B, pmax) * x[k:] * left / s - 1.0}]
    bounds = [(1e-9, 1.0)] * k + [(1e-9, float(th / L)) for th, L in zip(t_hi, left)]
    x = np.concatenate([b0 / B, t_hi / left])
    for _ in range(3):
        res = minimize(lambda x: energy(x) / scale, x, method="SLSQP", bounds=bounds, constraints=cons,
                       options={"ftol": 1e-16, "maxiter": 2000})
        x = res.x
    return energy(x), x[:k] * B


@pytest.mark.parametrize("seed, k, factor", [(0, 5, 1.3), (1, 8, 2.0), (2, 12, 4.0), (3, 6, 1.05), (4, 10, 10.0)])
def test_min_energy_matches_an_independent_solver(seed, k, factor):
    cell = _cell(seed, k)
    args = {key: cell[key] for key in ("before_s", "cycles", "upload_bits", "channel_gain", "noise_psd_w_per_hz",
                                       "kappa", "cpu_freq_min_hz", "cpu_freq_max_hz", "tx_power_max_w")}
    t_min = M.least_finish_s(cell["bandwidth_hz"], args["before_s"], args["cycles"], args["upload_bits"],
                             args["channel_gain"], N0, args["cpu_freq_max_hz"], args["tx_power_max_w"])
    tau = factor * t_min
    bands = M.min_energy_bands_hz(cell["bandwidth_hz"], tau, **args)
    ours = M.round_energy_j(bands, tau, **args)
    ref, ref_bands = _reference(cell, tau)
    assert abs(ours - ref) <= 1e-6 * ref
    assert bands.sum() == pytest.approx(cell["bandwidth_hz"], rel=1e-12)
    assert np.allclose(bands, ref_bands, rtol=1e-3, atol=1e-6 * cell["bandwidth_hz"])


ARGS = ("before_s", "cycles", "upload_bits", "channel_gain", "noise_psd_w_per_hz", "kappa", "cpu_freq_min_hz",
        "cpu_freq_max_hz", "tx_power_max_w")


def _feasible(cell, bands, tau):
    """Every device ends by τ at full power and frequency on its band."""
    ready = cell["before_s"] + cell["cycles"] / cell["cpu_freq_max_hz"]
    ends = F.finish_times_s(ready, cell["upload_bits"], bands, cell["channel_gain"], cell["tx_power_max_w"], N0)
    return bool(np.all(ends <= tau))


@pytest.mark.parametrize("seed", range(6))
def test_min_energy_never_spends_more_than_the_static_splits_with_joint(seed):
    cell = _cell(100 + seed, 4 + 2 * seed)
    args = [cell[key] for key in ARGS]
    B = cell["bandwidth_hz"]
    t_min = M.least_finish_s(B, cell["before_s"], cell["cycles"], cell["upload_bits"], cell["channel_gain"], N0,
                             cell["cpu_freq_max_hz"], cell["tx_power_max_w"])
    compared = 0
    for factor in (1.02, 1.5, 3.0, 8.0):
        tau = factor * t_min
        ours = M.round_energy_j(M.min_energy_bands_hz(B, tau, *args), tau, *args)
        ready = cell["before_s"] + cell["cycles"] / cell["cpu_freq_max_hz"]
        for bands in (F.equal_bands_hz(B, cell["upload_bits"]),
                      F.min_max_time_bands_hz(B, ready, cell["upload_bits"], cell["channel_gain"],
                                              cell["tx_power_max_w"], N0)):
            if _feasible(cell, bands, tau):  # an infeasible split "saves" by missing τ: no comparison
                compared += 1
                assert ours <= M.round_energy_j(bands, tau, *args) * (1 + 1e-9)
    assert compared >= 4


def test_min_energy_two_devices_by_hand():
    """No compute (C = 0), equal gains, s_2 = 2 s_1: the marginal energy of a band depends on s / (b t) alone, so the
    optimum splits B in proportion to the bits, b = (1, 2) MHz, and each device uploads for all of T = 1 s at
    s / (b T) = 1 bit/s/Hz: p_k = (2¹ − 1) N0 b_k / g = (1e-4, 2e-4) W, energy p_k · 1 s = 3e-4 J in all."""
    one = np.ones(2)
    args = dict(before_s=np.zeros(2), cycles=np.zeros(2), upload_bits=np.array([1e6, 2e6]),
                channel_gain=1e-10 * one, noise_psd_w_per_hz=1e-20, kappa=KAPPA, cpu_freq_min_hz=1e6 * one,
                cpu_freq_max_hz=1e9 * one, tx_power_max_w=one)
    bands = M.min_energy_bands_hz(3e6, 1.0, **args)
    assert bands == pytest.approx([1e6, 2e6], rel=1e-9)
    assert M.round_energy_j(bands, 1.0, **args) == pytest.approx(3e-4, rel=1e-9)
    f, p = F.joint_split(args["cycles"], args["upload_bits"], bands, 1.0, args["channel_gain"], 1e-20, KAPPA,
                         args["cpu_freq_min_hz"], args["cpu_freq_max_hz"], args["tx_power_max_w"])
    assert p == pytest.approx([1e-4, 2e-4], rel=1e-9)
    # min-max-time bands at 1 W (equal finish, not equal bits per hertz) spend more
    mm = F.min_max_time_bands_hz(3e6, np.zeros(2), args["upload_bits"], args["channel_gain"], one, 1e-20)
    assert M.round_energy_j(mm, 1.0, **args) > 3e-4 * (1 + 1e-6)


def test_energy_weight_trades_energy_for_time():
    """w = 1: the round ends at τ; w = 0: at T_min; between, T minimises w E*(T) + (1 − w) λ T: no point of a grid
    over [T_min, τ] (each priced by the independent solver) nor T ± 1 % does better."""
    cell = _cell(7, 3)
    args = [cell[key] for key in ARGS]
    B = cell["bandwidth_hz"]
    t_min = M.least_finish_s(B, cell["before_s"], cell["cycles"], cell["upload_bits"], cell["channel_gain"], N0,
                             cell["cpu_freq_max_hz"], cell["tx_power_max_w"])
    tau = 5 * t_min
    assert M.weighted_round_time_s(1.0, 1.0, B, tau, *args) == tau
    assert M.weighted_round_time_s(0.0, 1.0, B, tau, *args) == t_min
    w, price = 0.5, 0.02  # J/s: the energy saved by a longer round is worth about as much as its time
    ours = M.weighted_round_time_s(w, price, B, tau, *args)

    def reference(t):
        return w * _reference(cell, t)[0] + (1 - w) * price * t

    assert t_min < ours < tau
    best = reference(ours)
    for t in [*np.linspace(1.01 * t_min, tau, 6), 0.99 * ours, 1.01 * ours]:
        assert best <= reference(t) * (1 + 1e-9)


def test_min_energy_in_the_engine_meets_tau_below_the_static_splits():
    """The engine runs the plan: every device ends by τ (the round budget) and the round's device energy is at most
    that of equal_static + joint and min_max_time + joint (same devices and channels: common random numbers)."""
    from test_resources import _sim

    from edgesim.resources import ResourcesConfig

    joint = dict(power="min_energy", cpu_freq="joint")
    runs = {name: _sim("fdma", ResourcesConfig(bandwidth=name, **joint), total=80.0).run()
            for name in ("min_energy", "equal_static", "min_max_time")}
    tau = 80.0 / 4
    for ours, eq, mm in zip(*runs.values()):
        assert ours.duration_s <= tau * (1 + 1e-9)
        spent = ours.radio_energy_j + ours.compute_energy_j
        for other in (eq, mm):
            if other.duration_s <= tau:
                assert spent <= (other.radio_energy_j + other.compute_energy_j) * (1 + 1e-6)
        assert sum(row.bandwidth_hz for row in ours.devices if row.upload_airtime_s > 0) == pytest.approx(2e6)


@pytest.mark.parametrize("key, value, expected", [
    ("energy_weight", 1.5, "a weight in [0, 1]"), ("energy_weight", -0.1, "a number >= 0"),
    ("time_price_j_per_s", -1.0, "a number >= 0"), ("time_price_j_per_s", float("nan"), "a finite number")])
def test_weight_and_price_out_of_range_are_one_line(key, value, expected):
    from edgesim.resources import ResourcesConfig

    with pytest.raises(ValueError) as e:
        ResourcesConfig(**{key: value})
    assert key in str(e.value) and expected in str(e.value) and "\n" not in str(e.value)


def test_min_energy_needs_the_joint_split():
    from edgesim.config import SystemConfig
    from edgesim.resources import ResourcesConfig, check_config

    with pytest.raises(ValueError, match="bandwidth = 'min_energy' needs power = 'min_energy'"):
        check_config(ResourcesConfig(bandwidth="min_energy"), SystemConfig(n_devices=4, access="fdma"))
    with pytest.raises(ValueError, match="applies to \\[system\\] access = 'fdma'"):
        check_config(ResourcesConfig(bandwidth="equal_static"), SystemConfig(n_devices=4, access="tdma"))


def test_equal_static_is_b_over_k_by_hand():
    """EB-FDMA: three uploaders with one fixed gain g = 1e-10 at 23 dBm on a 1.2 MHz band hold B/K = 0.4 MHz each for
    the round: each 1 Mbit upload takes s / (b log2(1 + g p / (N0 b))) on its band, and devices.csv says 0.4 MHz; under
    processor sharing the round ends sooner (a property: the static split never hands a finished device's band on)."""
    from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
    from edgesim.curve import ParametricBackend
    from edgesim.engine import Simulation
    from edgesim.resources import ResourcesConfig

    system = SystemConfig(n_devices=3, bandwidth_hz=1.2e6, channel_gain_db=-100.0, cpu_freq_hz=[1e9, 2e9, 4e9],
                          access="fdma")
    work = WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=100, model_bits=1e6)
    rec = Simulation(system, BudgetConfig(total_time_s=10.0, rounds=1), ParametricBackend(3, 3, work, seed=0), seed=0,
                     resources=ResourcesConfig(bandwidth="equal_static")).run_round()
    b, p = 0.4e6, 10 ** (23 / 10) / 1e3
    for row in rec.devices:
        assert row.bandwidth_hz == pytest.approx(b, rel=1e-12)
        assert row.upload_airtime_s == pytest.approx(1e6 / (b * math.log2(1 + 1e-10 * p / (N0 * b))), rel=1e-9)
    # processor sharing (equal) hands a finished device's band on: the last device ready (the slowest CPU) ends sooner
    shared = Simulation(system, BudgetConfig(total_time_s=10.0, rounds=1), ParametricBackend(3, 3, work, seed=0),
                        seed=0).run_round()
    assert shared.duration_s < rec.duration_s and shared.devices[0].bandwidth_hz > b
