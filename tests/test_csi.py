"""Imperfect CSI: the base station plans on estimated or outdated gains, the devices transmit on the true ones."""

from __future__ import annotations

import numpy as np
import pytest

from edgesim.channel import STREAM_CSI, ChannelModel, estimated_gains, gauss_markov_fading
from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation
from edgesim.resources import ResourcesConfig

WORK = WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=200, model_bits=2e6)


def _sim(csi=None, std=None, resources=None, mode="sync", deadline=None, rounds=5, rho=None):
    system = SystemConfig(n_devices=6, bandwidth_hz=2e6, cpu_freq_hz=[1e9, 2e9] * 3, access="fdma",
                          cell_radius_m=300, rayleigh_fading=True, csi=csi, csi_error_std=std, csi_correlation=rho)
    budget = BudgetConfig(total_time_s=10.0 * rounds, rounds=rounds, round_mode=mode, deadline_s=deadline)
    return Simulation(system, budget, ParametricBackend(6, 4, WORK, seed=1), seed=5,
                      resources=resources or ResourcesConfig())


def test_estimated_gains_by_hand_and_their_own_stream():
    """ĝ = g · max(1 + e, 1e-3), e ~ N(0, σ) from default_rng((seed, round, 0xC5)); σ = 0: the true gains."""
    g = np.array([1e-10, 2e-10, 3e-10])
    e = np.random.default_rng((7, 3, STREAM_CSI)).normal(0.0, 0.2, 3)
    assert estimated_gains(g, 0.2, 7, 3) == pytest.approx(g * np.maximum(1 + e, 1e-3), rel=1e-15)
    assert (estimated_gains(g, 0.0, 7, 3) == g).all()
    assert (estimated_gains(g, 50.0, 7, 3) > 0).all()  # the floor keeps an estimate positive


def test_the_view_is_the_estimate_and_the_devices_transmit_on_the_truth():
    perfect, est = _sim(), _sim("estimated", 0.3)
    for r in range(3):
        pv, ev = perfect.system_view(), est.system_view()
        truth = np.asarray(pv.channel_gain)
        assert np.asarray(ev.channel_gain) == pytest.approx(estimated_gains(truth, 0.3, 5, r), rel=1e-15)
        rec = est.run_round()
        perfect.run_round()
        assert all(row.channel_gain == truth[row.device] for row in rec.devices)


def test_estimated_with_no_error_is_the_perfect_run():
    a, b = _sim(), _sim("estimated", 0.0)
    assert a.run() == b.run()


def test_outdated_plans_on_the_previous_rounds_gains():
    perfect, old = _sim(), _sim("outdated")
    truths = []
    for r in range(4):
        truths.append(np.asarray(perfect.system_view().channel_gain))
        view = np.asarray(old.system_view().channel_gain)
        assert (view == (truths[r - 1] if r else truths[0])).all()
        perfect.run_round()
        old.run_round()


def test_resume_with_outdated_csi_is_identical():
    whole = _sim("outdated")
    full = whole.run()
    first = _sim("outdated")
    first.run(rounds=2)
    again = _sim("outdated")
    again.load_state_dict(first.state_dict())
    again.backend.load_state_dict(first.backend.state_dict())
    assert again.run() == full[2:]


def test_overestimated_channels_miss_the_deadline():
    """Deadline rounds with the least-energy power and frequency: planned on the true gains every upload ends by τ;
    planned on noisy estimates, a device whose gain was overestimated sends too little power and is dropped."""
    res = ResourcesConfig(power="min_energy", cpu_freq="joint")
    perfect = _sim(resources=res, mode="deadline", deadline=2.0, rounds=8).run()
    noisy = _sim("estimated", 0.5, resources=res, mode="deadline", deadline=2.0, rounds=8).run()
    assert sum(len(r.dropped) for r in perfect) == 0
    assert sum(len(r.dropped) for r in noisy) > 0


def test_gauss_markov_step_by_hand():
    """c(t) = ρ c(t−1) + √(1 − ρ²) w(t): ρ = 0.6 on c = 1 + 1j, w = 2 − 1j is 0.6 + 0.6j + 0.8 (2 − 1j) = 2.2 − 0.2j;
    ρ = 1 keeps c, ρ = 0 is w."""
    c, w = np.array([1 + 1j]), np.array([2 - 1j])
    assert gauss_markov_fading(c, w, 0.6)[0] == pytest.approx(2.2 - 0.2j, abs=1e-15)
    assert gauss_markov_fading(c, w, 1.0)[0] == c[0] and gauss_markov_fading(c, w, 0.0)[0] == w[0]
    with pytest.raises(ValueError, match="correlation"):
        gauss_markov_fading(c, w, 1.1)


def _channels(rho, n=4000):
    """The fading powers |c(t)|² of n devices (gains over the same cell's large-scale gains), rounds 0..3."""
    kw = dict(n_devices=n, cell_radius_m=300, shadowing_std_db=8)
    large = ChannelModel(SystemConfig(**kw), 3).gains(0)
    fading = ChannelModel(SystemConfig(**kw, rayleigh_fading=True, csi_correlation=rho), 3)
    return [fading.gains(t) / large for t in range(4)]


def test_correlated_fading_is_rayleigh_with_its_correlation():
    """Each round's power is Exp(1) (mean 1, variance 1) and the powers of consecutive rounds are correlated by ρ²
    (jointly Gaussian coefficients correlated by ρ); round 0 is the independent model's draw; ρ = 1 freezes the
    fading, ρ = 0 is the independent model exactly."""
    rho = 0.8
    powers = _channels(rho)
    assert powers[3].mean() == pytest.approx(1.0, abs=0.06) and powers[3].var() == pytest.approx(1.0, abs=0.15)
    assert np.corrcoef(powers[2], powers[3])[0, 1] == pytest.approx(rho ** 2, abs=0.05)
    independent = _channels(None)
    assert np.corrcoef(independent[2], independent[3])[0, 1] == pytest.approx(0.0, abs=0.05)
    assert powers[0] == pytest.approx(independent[0], rel=1e-12)
    frozen = _channels(1.0, n=50)
    assert all((p == frozen[0]).all() for p in frozen[1:])
    assert all((a == b).all() for a, b in zip(_channels(0.0, n=50), _channels(None, n=50)))


def test_outdated_under_correlated_fading_plans_on_the_previous_truth():
    """csi = "outdated" with ρ: the view is the previous round's true gains of the correlated channel (the perfect
    run's with the same ρ); ρ = 1 (the channel frozen) is perfect CSI, the same run record for record."""
    perfect, old = _sim(rho=0.7), _sim("outdated", rho=0.7)
    truths = []
    for r in range(3):
        truths.append(np.asarray(perfect.system_view().channel_gain))
        assert (np.asarray(old.system_view().channel_gain) == (truths[r - 1] if r else truths[0])).all()
        rec = old.run_round()
        perfect.run_round()
        assert all(row.channel_gain == truths[r][row.device] for row in rec.devices)
    assert _sim("outdated", rho=1.0).run() == _sim(rho=1.0).run()


def test_resume_under_correlated_fading_is_identical():
    whole = _sim("outdated", rho=0.9).run()
    first = _sim("outdated", rho=0.9)
    first.run(rounds=2)
    again = _sim("outdated", rho=0.9)
    again.load_state_dict(first.state_dict())
    again.backend.load_state_dict(first.backend.state_dict())
    assert again.run() == whole[2:]


@pytest.mark.parametrize("kw, expected", [
    (dict(csi_correlation=1.5, rayleigh_fading=True), "a correlation in [0, 1]"),
    (dict(csi_correlation=-0.1, rayleigh_fading=True), "a correlation in [0, 1]"),
    (dict(csi_correlation=0.5), "rayleigh_fading = false"),
    (dict(csi_correlation=0.5, rayleigh_fading=True, channel_gain_db=-100), "channel_gain_db"),
    (dict(csi_correlation=0.5, rayleigh_fading=True, cells=[{"x_m": 0, "y_m": 0}, {"x_m": 1000, "y_m": 0}]),
     "several cells")])
def test_bad_csi_correlation_is_one_line(kw, expected):
    with pytest.raises(ValueError) as e:
        SystemConfig(n_devices=3, **kw)
    assert "csi_correlation" in str(e.value) and expected in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("kw, expected", [
    (dict(csi="guess"), "csi"), (dict(csi="estimated"), "csi_error_std"),
    (dict(csi="estimated", csi_error_std=-0.1), "a number >= 0"), (dict(csi_error_std=0.1), "unset")])
def test_bad_csi_is_one_line(kw, expected):
    with pytest.raises(ValueError) as e:
        SystemConfig(n_devices=3, **kw)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_planned_and_realised_rates_by_hand_and_the_drop_they_cause():
    """Two devices with one fixed gain g = 1e-10, FDMA, static equal bands b = B/2, least-energy power planned on the
    estimate ĝ = g (1 + e) (e from default_rng((2, 0, 0xC5)), σ = 0.3: −0.0730 and +0.2264) to end each 1 Mbit upload
    at the 1 s deadline after 0.1 s of compute. The row records ĝ and the full-band rate on it beside g and the rate
    the device got; the device whose gain was overestimated transmits too little power: its band rate times the
    0.9 s it had is below 1 Mbit, so it misses the deadline and is dropped with the bits it sent by then."""
    seed, sigma, g, big_b, bits, tau = 2, 0.3, 1e-10, 1e6, 1e6, 1.0
    system = SystemConfig(n_devices=2, bandwidth_hz=big_b, channel_gain_db=-100.0, cpu_freq_hz=1e9, access="fdma",
                          csi="estimated", csi_error_std=sigma)
    budget = BudgetConfig(total_time_s=tau, rounds=1, round_mode="deadline", deadline_s=tau)
    work = WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=100, model_bits=bits)
    sim = Simulation(system, budget, ParametricBackend(2, 2, work, seed=0), seed=seed,
                     resources=ResourcesConfig(bandwidth="equal_static", power="min_energy"))
    rows = sim.run_round().devices
    e = np.random.default_rng((seed, 0, STREAM_CSI)).normal(0.0, sigma, 2)
    n0 = 10 ** (-174 / 10) / 1e3  # W/Hz
    b, left = big_b / 2, tau - 0.1  # each device's band (Hz) and the time its upload has (s)
    for row, err in zip(rows, e):
        g_hat = g * (1 + err)
        p = (2 ** (bits / (b * left)) - 1) * n0 * b / g_hat  # the least power for 1 Mbit in 0.9 s on ĝ
        assert row.planned_channel_gain == pytest.approx(g_hat, rel=1e-12) and row.channel_gain == g
        assert row.tx_power_w == pytest.approx(p, rel=1e-9)
        assert row.planned_rate_bps == pytest.approx(big_b * np.log2(1 + g_hat * p / (n0 * big_b)), rel=1e-9)
        assert row.rate_bps == pytest.approx(big_b * np.log2(1 + g * p / (n0 * big_b)), rel=1e-9)
        band_rate = b * np.log2(1 + g * p / (n0 * b))  # what it got on its band; planned: exactly bits / left
        if err > 0:  # overestimated: planned to end at τ, too slow on the true gain
            assert band_rate * left < bits and row.dropped and not row.arrived
            assert row.wasted_bits == pytest.approx(band_rate * left, rel=1e-9)
        else:
            assert row.arrived and row.upload_airtime_s == pytest.approx(bits / band_rate, rel=1e-9)
            assert row.upload_airtime_s < left
    assert (e[0] < 0 < e[1]) and rows[0].planned_rate_bps < rows[0].rate_bps and \
        rows[1].planned_rate_bps > rows[1].rate_bps
    assert rows[1].planned_rate_bps - rows[1].rate_bps == pytest.approx(
        big_b * np.log2((1 + g * (1 + e[1]) * rows[1].tx_power_w / (n0 * big_b))
                        / (1 + g * rows[1].tx_power_w / (n0 * big_b))), rel=1e-9)


def test_devices_csv_has_the_planned_columns_only_under_imperfect_csi():
    from types import SimpleNamespace

    from edgesim.results.tables import PLANNED_FIELDS
    from edgesim.scenarios.run import device_fields

    def fields(**csi):
        system = SystemConfig(n_devices=3, access="fdma", rayleigh_fading=True, **csi)
        return device_fields(SimpleNamespace(system=system, asynchronous=False,
                                             availability=SimpleNamespace(model="always")))

    assert not set(PLANNED_FIELDS) & set(fields()) and fields() == fields(csi="perfect")
    assert fields(csi="outdated")[-2:] == PLANNED_FIELDS == fields(csi="estimated", csi_error_std=0.1)[-2:]
