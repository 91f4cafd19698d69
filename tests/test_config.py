"""Configuration dataclasses (edgesim/config.py): every bad value names its field and its value."""

import math
import re
from dataclasses import FrozenInstanceError

import pytest

from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig, field_names


def raises_naming(field: str, value):
    """``pytest.raises`` for a ValueError whose message reads ``<field> = <repr(value)>: expected ...``."""
    return pytest.raises(ValueError, match=re.escape(f"{field} = {value!r}: expected"))


# --- SystemConfig ------------------------------------------------------------


def test_system_defaults_are_the_papers_cell():
    system = SystemConfig()
    assert (system.n_devices, system.bandwidth_hz, system.access) == (25, 1e6, "tdma")
    assert system.tx_power_w == (pytest.approx(0.19952623),) * 25  # 23 dBm = 10 ** -0.7 W
    assert system.cpu_freqs_hz == (1e9,) * 25
    assert system.fixed_gain is None  # path-loss model


def test_system_noise_psd_in_watts_per_hz():
    # -174 dBm/Hz = 10 ** -20.4 W/Hz = 3.981e-21 W/Hz
    assert SystemConfig().noise_psd_w_per_hz == pytest.approx(3.9810717e-21)
    # -144 dBm/Hz is 30 dB more: 1000 times as much
    assert SystemConfig(noise_psd_dbm_per_hz=-144).noise_psd_w_per_hz == pytest.approx(3.9810717e-18)


def test_system_per_device_power_and_cpu():
    system = SystemConfig(n_devices=3, tx_power_dbm=[30, 0, 20], cpu_freq_hz=[1e9, 2e9, 5e8])
    # 30 dBm = 1 W, 0 dBm = 1 mW, 20 dBm = 0.1 W
    assert system.tx_power_w == pytest.approx((1.0, 1e-3, 0.1))
    assert system.cpu_freqs_hz == (1e9, 2e9, 5e8)
    assert system.heterogeneous


def test_system_scalar_values_apply_to_every_device():
    system = SystemConfig(n_devices=4, tx_power_dbm=30, cpu_freq_hz=2e9, channel_gain_db=-100)
    assert system.tx_power_w == (1.0,) * 4
    assert system.cpu_freqs_hz == (2e9,) * 4
    assert system.fixed_gain == pytest.approx(1e-10)  # -100 dB
    assert not system.heterogeneous  # the paper's §4.4 case: identical devices


def test_system_per_device_tuple_is_accepted_too():
    assert SystemConfig(n_devices=2, cpu_freq_hz=(1e9, 3e9)).cpu_freqs_hz == (1e9, 3e9)


def test_system_with_path_loss_is_heterogeneous():
    # devices at different distances: different channels
    assert SystemConfig(n_devices=3, channel_gain_db=None).heterogeneous


@pytest.mark.parametrize(
    "field, value",
    [
        ("n_devices", 0),
        ("n_devices", -3),
        ("n_devices", 2.5),
        ("n_devices", True),
        ("n_devices", "25"),
        ("bandwidth_hz", -1e6),
        ("bandwidth_hz", 0),
        ("bandwidth_hz", math.nan),
        ("bandwidth_hz", math.inf),
        ("bandwidth_hz", True),
        ("bandwidth_hz", "1 MHz"),
        ("bandwidth_hz", None),
        ("noise_psd_dbm_per_hz", math.nan),
        ("noise_psd_dbm_per_hz", "-174"),
        ("tx_power_dbm", math.inf),
        ("tx_power_dbm", False),
        ("channel_gain_db", -math.inf),
        ("channel_gain_db", "low"),
        ("cpu_freq_hz", 0),
        ("cpu_freq_hz", -1e9),
        ("kappa", -1e-28),
        ("access", "cdma"),
        ("access", "TDMA"),
        ("downlink_rate_bps", -1.0),
        ("cell_radius_m", 0),
        ("min_distance_m", 0),
        ("path_loss_intercept_db", math.nan),
        ("path_loss_slope_db", -37.6),
        ("shadowing_std_db", -8.0),
        ("rayleigh_fading", 1),
        ("rayleigh_fading", "yes"),
        ("mobility", "brownian"),
        ("speed_m_per_s", -1.0),
        ("server_freq_hz", 0),
        ("server_freq_hz", -1e10),
        ("server_freq_hz", math.inf),
        ("server_freq_hz", "fast"),
    ],
)
def test_system_rejects_bad_values(field, value):
    with raises_naming(field, value):
        SystemConfig(**{field: value})


def test_system_rejects_a_min_distance_beyond_the_cell():
    with raises_naming("min_distance_m", 300.0) as info:
        SystemConfig(cell_radius_m=250.0, min_distance_m=300.0)
    assert "cell_radius_m (= 250.0)" in str(info.value)
    with raises_naming("min_distance_m", 250.0):
        SystemConfig(cell_radius_m=250.0, min_distance_m=250.0)


def test_system_rejects_per_device_lists_of_the_wrong_length():
    with raises_naming("tx_power_dbm", [23, 20]) as info:
        SystemConfig(n_devices=3, tx_power_dbm=[23, 20])
    assert "n_devices (= 3)" in str(info.value) and "got 2" in str(info.value)
    with raises_naming("cpu_freq_hz", [1e9] * 4):
        SystemConfig(n_devices=3, cpu_freq_hz=[1e9] * 4)


def test_system_names_the_bad_entry_of_a_per_device_list():
    with raises_naming("cpu_freq_hz[1]", -2e9):
        SystemConfig(n_devices=3, cpu_freq_hz=[1e9, -2e9, 1e9])
    with raises_naming("tx_power_dbm[2]", "23"):
        SystemConfig(n_devices=3, tx_power_dbm=[23, 23, "23"])
    with raises_naming("cpu_freq_hz[0]", True):
        SystemConfig(n_devices=1, cpu_freq_hz=[True])


def test_system_is_frozen():
    with pytest.raises(FrozenInstanceError):
        SystemConfig().n_devices = 3


# --- BudgetConfig ---------------------------------------------------------------


def test_budget_round_budget_is_t_over_g():
    assert BudgetConfig().round_budget_s == 2.5  # 250 s / 100 rounds
    assert BudgetConfig(total_time_s=90, rounds=4).round_budget_s == 22.5  # 90 / 4


def test_budget_deadline_defaults_to_the_round_budget():
    assert BudgetConfig(total_time_s=90, rounds=4, round_mode="deadline").round_deadline_s == 22.5
    assert BudgetConfig(round_mode="deadline", deadline_s=1.5).round_deadline_s == 1.5


@pytest.mark.parametrize(
    "field, value",
    [
        ("total_time_s", 0),
        ("total_time_s", -250.0),
        ("total_time_s", math.inf),
        ("total_time_s", True),
        ("rounds", 0),
        ("rounds", 100.0),
        ("rounds", True),
        ("rounds", "100"),
        ("round_mode", "async"),
        ("deadline_s", 0),
        ("deadline_s", -1.0),
        ("deadline_s", math.nan),
    ],
)
def test_budget_rejects_bad_values(field, value):
    with raises_naming(field, value):
        BudgetConfig(**{field: value})


# --- WorkloadConfig -----------------------------------------------------------------


def test_workload_defaults():
    workload = WorkloadConfig()
    # one pass at 1e6 cycles a sample; the model's own bits and the partition's samples (issue 52: no paper constants)
    assert (workload.local_iterations, workload.samples_per_device, workload.cycles_per_sample) == (1, "auto", 1e6)
    assert workload.model_bits == "auto"
    assert workload.cycles_source == "given"


def test_workload_model_bits_may_come_from_the_model():
    assert WorkloadConfig(model_bits="auto").model_bits == "auto"
    assert WorkloadConfig(cycles_source="flops").cycles_source == "flops"


def test_workload_allows_free_similarity_ratios_and_pseudo_labelling():
    workload = WorkloadConfig(sr_cycles=0, pseudo_label_cycles_per_model=0, cycles_per_sample=0)
    assert (workload.sr_cycles, workload.pseudo_label_cycles_per_model) == (0, 0)


@pytest.mark.parametrize(
    "field, value",
    [
        ("local_iterations", 0),
        ("local_iterations", 1.5),
        ("cycles_per_sample", -1e6),
        ("cycles_per_sample", math.nan),
        ("samples_per_device", 0),
        ("samples_per_device", 500.0),
        ("samples_per_device", False),
        ("sr_cycles", -1.0),
        ("pseudo_label_cycles_per_model", -2e8),
        ("pseudo_label_cycles_per_model", True),
        ("model_bits", 0),
        ("model_bits", -8.0),
        ("model_bits", "big"),
        ("model_bits", math.inf),
        ("cycles_source", "guess"),
        ("flops_per_cycle", 0),
        ("flops_per_cycle", -8.0),
    ],
)
def test_workload_rejects_bad_values(field, value):
    with raises_naming(field, value):
        WorkloadConfig(**{field: value})


def test_error_messages_say_what_was_expected():
    with pytest.raises(ValueError, match=r"access = 'cdma': expected one of 'tdma', 'fdma'"):
        SystemConfig(access="cdma")
    with pytest.raises(ValueError, match=r"rounds = 0: expected an integer >= 1"):
        BudgetConfig(rounds=0)
    with pytest.raises(ValueError, match=r"bandwidth_hz = -1000000.0: expected a plausible value in \[1, 1e\+12\] Hz"):
        SystemConfig(bandwidth_hz=-1e6)
    with pytest.raises(ValueError, match=r"kappa = -1: expected a plausible value in \[0, 1e-20\]"):
        SystemConfig(kappa=-1)


# --- field_names ----------------------------------------------------------------------


def test_field_names_are_the_toml_keys():
    assert field_names(BudgetConfig) == ("total_time_s", "rounds", "round_mode", "deadline_s")
    assert "tx_power_dbm" in field_names(SystemConfig) and "access" in field_names(SystemConfig)
    assert "model_bits" in field_names(WorkloadConfig)
