"""AirComp (issue 48.4): the airtime and the noise variance by hand, the noiseless limit equals FedAvg's aggregate,
a device below the threshold is excluded (dropped, reason "excluded"), and what AirComp refuses, each in one line."""

from __future__ import annotations

import csv
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_here import edgesim_here

from edgesim.access.aircomp import Aircomp, AircompOptions
from edgesim.access.formulas import aircomp_airtime_s, aircomp_eta, aircomp_noise_var
from edgesim.backend import DeviceWork, RoundPlan
from edgesim.config import BudgetConfig, SystemConfig
from edgesim.engine import Simulation
from edgesim.learning.aggregation import over_the_air_average, weighted_average

TINY = (Path(__file__).resolve().parent / "conftest.py").read_text().split('TINY_SCENARIO = """', 1)[1].split('"""')[0]


def test_airtime_by_hand():
    # P = 1000 parameters over S = 64 sub-channels: ⌈1000/64⌉ = 16 symbols each, at 15625 symbols/s (1 MHz / 64)
    assert aircomp_airtime_s(1000, 64, 1e6 / 64) == pytest.approx(16 / 15625, rel=1e-15)
    assert aircomp_airtime_s(1024, 64, 1e6 / 64) == aircomp_airtime_s(1000, 64, 1e6 / 64)  # ⌈·⌉: same 16 symbols
    assert aircomp_airtime_s(1000, 1, 1e6) == pytest.approx(1e-3, rel=1e-15)  # one channel: P symbols at B


def test_eta_and_noise_variance_by_hand():
    # P = 0.1, 0.2 W; g = 1e-10, 2e-11: P g = 1e-11, 4e-12 -> η = 4e-12 W (the weaker one's limit)
    eta = aircomp_eta([0.1, 0.2], [1e-10, 2e-11])
    assert eta == pytest.approx(4e-12, rel=1e-15)
    # N0 = 1e-20 W/Hz on b = 1 MHz: N0 b = 1e-14 W; / η = 2.5e-3 per parameter
    assert aircomp_noise_var(1e-20, 1e6, eta) == pytest.approx(2.5e-3, rel=1e-12)


class _Plan:
    def __init__(self, cycles, bits):
        self.cycles, self.bits = cycles, bits

    def plan_round(self, view):
        return RoundPlan(tuple(DeviceWork(d, {"train": c}, b, 0.0) for d, (c, b) in enumerate(zip(self.cycles,
                                                                                                  self.bits))))

    def complete_round(self, outcome):
        self.outcome = outcome
        return {}


def _round(gain_db, threshold_db=None, powers_dbm=20.0, subcarriers=4):
    system = SystemConfig(n_devices=3, access="aircomp", channel_gain_db=gain_db, tx_power_dbm=powers_dbm,
                          cpu_freq_hz=1e9, noise_psd_dbm_per_hz=-170.0)
    backend = _Plan([1e8, 3e8, 2e8], [32e3, 32e3, 32e3])
    sim = Simulation(system, BudgetConfig(rounds=1), backend, seed=0,
                     access_options=AircompOptions(subcarriers=subcarriers, gain_threshold_db=threshold_db))
    return sim.run_round(), backend.outcome, system


def test_on_the_clock_all_transmit_at_once_after_the_last_is_ready():
    rec, outcome, system = _round(-100.0)
    # 1000 parameters over 4 sub-channels of 250 kHz: 250 symbols at 250 kS/s = 1 ms, from the last ready (0.3 s)
    rows = {r.device: r for r in rec.devices}
    for row in rows.values():
        assert row.upload_airtime_s == pytest.approx(1e-3, rel=1e-12)
        assert row.arrived and row.tx_power_w == pytest.approx(0.1, rel=1e-12)  # η / g with equal P g: P
        assert row.radio_energy_j == pytest.approx(0.1 * 1e-3, rel=1e-12)
    assert rec.end_time_s == pytest.approx(0.3 + 1e-3, rel=1e-12)
    n0 = system.noise_psd_w_per_hz
    assert outcome.over_the_air_noise_var == pytest.approx(n0 * 250e3 / (0.1 * 1e-10), rel=1e-12)


def test_a_device_below_the_threshold_is_excluded():
    rec, outcome, _ = _round(-100.0, threshold_db=-100.0)
    assert all(r.arrived for r in rec.devices)  # -100 dB >= the threshold: all included
    # a path-loss cell: the device farthest away falls below a threshold between the gains
    cell = SystemConfig(n_devices=3, access="aircomp", cpu_freq_hz=1e9)
    from edgesim.channel import ChannelModel

    gains = ChannelModel(cell, 0).gains(0)
    threshold_db = 10 * math.log10(float(np.sort(gains)[1])) - 1e-6  # excludes the weakest only
    backend = _Plan([1e8, 3e8, 2e8], [32e3, 32e3, 32e3])
    sim = Simulation(cell, BudgetConfig(rounds=1), backend, seed=0,
                     access_options=AircompOptions(gain_threshold_db=threshold_db))
    rec = sim.run_round()
    weakest = int(np.argmin(gains))
    rows = {r.device: r for r in rec.devices}
    assert rows[weakest].dropped and rows[weakest].drop_reason == "excluded" and rows[weakest].upload_airtime_s == 0
    assert rows[weakest].radio_energy_j == 0.0
    assert all(rows[d].arrived for d in rows if d != weakest)
    included = [d for d in rows if d != weakest]
    eta = min(0.19952623149688797 * gains[d] for d in included)
    assert backend.outcome.over_the_air_noise_var == pytest.approx(cell.noise_psd_w_per_hz * 1e6 / eta, rel=1e-9)


def test_the_aggregate_carries_the_noise_divided_by_the_count():
    a = {"w": torch.tensor([1.0, 2.0, 3.0]), "n": torch.tensor(4)}
    b = {"w": torch.tensor([3.0, 2.0, 1.0]), "n": torch.tensor(7)}
    exact = over_the_air_average([(a, 1.0), (b, 1.0)], 0.0, torch.Generator().manual_seed(0))
    assert torch.equal(exact["w"], weighted_average([(a, 1.0), (b, 1.0)])["w"]) and exact["n"] == 7
    noisy = over_the_air_average([(a, 1.0), (b, 1.0)], 4.0, torch.Generator().manual_seed(5))
    z = torch.randn((3,), generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    assert torch.allclose(noisy["w"], torch.tensor([2.0, 2.0, 2.0]) + (z * 2.0 / 2).float())  # σ = 2, / K = 2
    big = {"w": torch.zeros(200_000)}
    sample = over_the_air_average([(big, 1.0)] * 4, 9.0, torch.Generator().manual_seed(1))["w"]
    assert float(sample.var()) == pytest.approx(9.0 / 16, rel=0.02)  # variance σ² / K²


def _edgesim(tmp_path: Path, text: str, out: str, *extra: str) -> subprocess.CompletedProcess:
    """``edgesim run`` of ``text`` in this process (tests/cli_here.py: no fresh interpreter's start)."""
    (tmp_path / "s.toml").write_text(text)
    return edgesim_here("run", tmp_path / "s.toml", "--out", tmp_path / out, "-q", *extra)


def test_the_noiseless_limit_is_fedavg(tmp_path):
    text = TINY.replace('algorithms = ["fedavg", "fedprox", "local"]', 'algorithms = ["fedavg"]').replace(
        "cpu_freq_hz = 1e9", "cpu_freq_hz = 1e9\nchannel_gain_db = 30\ntx_power_dbm = 60\nnoise_psd_dbm_per_hz = -220")
    fed = _edgesim(tmp_path, text, "tdma")
    air = _edgesim(tmp_path, text, "air", "--set", "system.access=aircomp")
    assert fed.returncode == 0 and air.returncode == 0, fed.stderr + air.stderr
    acc = [[row["accuracy"] for row in csv.DictReader((tmp_path / o / "rounds.csv").open())] for o in ("tdma", "air")]
    assert acc[0] == acc[1]  # noise variance 1e-25 / 1e6 per parameter: FedAvg's aggregate to float precision


SCENARIO = TINY.replace('algorithms = ["fedavg", "fedprox", "local"]', 'algorithms = ["fedavg"]').replace(
    "cpu_freq_hz = 1e9", 'cpu_freq_hz = 1e9\naccess = "aircomp"')


@pytest.mark.parametrize("extra, message", [
    (("--set", "budget.round_mode=fedbuff"),
     "access = 'aircomp' has no asynchronous mode ([budget] round_mode = 'fedbuff'): over-the-air aggregation needs "
     "every device of a round to transmit at once"),
    (("--set", "run.algorithms=local"),
     "[run] algorithms: 'local' with access = 'aircomp': the base station receives only the sum"),
    (("--set", "compression.uplink=fp16"),
     "[compression] for 'fedavg': access = 'aircomp' sends analog symbols, one per parameter"),
    (("--set", "access.gain_threshold_db=10"), "[access]: gain_threshold_db = 10: expected at most the best device's "
                                                "gain in round 0"),
    (("--set", "system.channel_gain_db=-100", "--set", "access.gain_threshold_db=-90"),
     "[access]: gain_threshold_db = -90: expected at most [system] channel_gain_db = -100"),
    (("--set", "access.subcarriers=0"), "[access]: subcarriers = 0: expected an integer >= 1"),
    (("--set", "availability.model=markov"), "access = 'aircomp' with [availability] model = 'markov'"),
])
def test_what_aircomp_refuses_is_one_line(tmp_path, extra, message):
    done = _edgesim(tmp_path, SCENARIO, "r", *extra)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr, done.stderr
    assert Aircomp.digital is False and Aircomp.asynchronous is False


def test_jobs_two_writes_the_bytes_of_jobs_one(tmp_path):
    text = TINY.replace('algorithms = ["fedavg", "fedprox", "local"]', 'algorithms = ["fedavg", "fedprox"]').replace(
        "cpu_freq_hz = 1e9", 'cpu_freq_hz = 1e9\naccess = "aircomp"\ntx_power_dbm = 0')
    one = _edgesim(tmp_path, text, "one", "--jobs", "1")
    two = _edgesim(tmp_path, text, "two", "--jobs", "2")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    for name in ("rounds.csv", "devices.csv", "config.toml"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
