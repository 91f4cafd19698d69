"""The command line as a user meets it: `edgesim plan` (table, JSON, infeasible budgets) and `edgesim run`."""

from __future__ import annotations

import json
import math

from typer.testing import CliRunner

from scenarios.cli import app

runner = CliRunner()

# Identical devices with a fixed gain, so every number can be checked by hand.
HAND = """
[system]
n_devices = 25
bandwidth_hz = 1e6
noise_psd_dbm_per_hz = -174
tx_power_dbm = 30          # 1 W
channel_gain_db = -100     # g = 1e-10
cpu_freq_hz = 1e9

[budget]
total_time_s = 100
rounds = 10                # T/G = 10 s

[workload]
local_iterations = 2
cycles_per_sample = 1e6
samples_per_device = 1000  # I*C*D = 2e9 cycles = 2 s
sr_cycles = 1e9            # 1 s
pseudo_label_cycles_per_model = 5e8   # C2 = 0.5 s
model_bits = 1e7
"""


def hand_numbers():
    n0_w_per_hz = 10 ** ((-174 - 30) / 10)
    snr = 1e-10 * 1.0 / (n0_w_per_hz * 1e6)
    rate = 1e6 * math.log2(1 + snr)
    c1, c2, c3 = 10 - 3, 0.5, 1e7 / rate
    return rate, c1, c2, c3


def test_plan_json_matches_hand_computation(tmp_path):
    p = tmp_path / "hand.toml"
    p.write_text(HAND)
    result = runner.invoke(app, ["plan", str(p), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    # N0·b = 3.981e-15 W, SNR = 1e-10 / 3.981e-15 = 25118.9, rate = 1e6·log2(25119.9) = 14.6165 Mbit/s,
    # C1 = 10 - (2e9 + 1e9)/1e9 = 7 s, C2 = 0.5 s, C3 = 1e7 / 14.6165e6 = 0.68416 s
    rate, c1, c2, c3 = hand_numbers()
    assert out["round_budget_s"] == 10
    assert math.isclose(out["uplink_rate_bps"], rate, rel_tol=1e-12)
    assert math.isclose(out["c1_s"], c1) and math.isclose(out["c2_s"], c2) and math.isclose(out["c3_s"], c3, rel_tol=1e-12)
    # K from max(1, floor(7 / 1.18416)) = 5 to floor((7 - 0.5) / 0.68416) = 9; B = min(K, floor((7 - K*C3)/0.5)):
    # K=5: min(5, floor(7.16)) = 5; K=6: floor(5.79) = 5; K=7: floor(4.42) = 4; K=8: floor(3.05) = 3; K=9: floor(1.68) = 1
    assert out["pairs"] == [[5, 5], [5, 6], [4, 7], [3, 8], [1, 9]]
    naive = sum(1 for k in range(1, 26) for b in range(1, k + 1) if b * c2 + k * c3 <= c1)
    assert out["feasible_count"] == naive
    assert out["heterogeneous"] is False


def test_plan_table_and_heterogeneous_note(tmp_path):
    p = tmp_path / "hand.toml"
    p.write_text(HAND.replace("cpu_freq_hz = 1e9", "cpu_freq_hz = [1e9, 2e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, "
                              "1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 1e9, 0.5e9]"))
    result = runner.invoke(app, ["plan", str(p)])
    assert result.exit_code == 0, result.output
    assert "heterogeneous" in result.stdout and "slowest device" in result.stdout
    # planned for the slowest CPU (0.5 GHz): C1 = 10 - 3e9/0.5e9 = 4 s, C2 = 5e8/0.5e9 = 1 s
    assert "C1 = 4 s" in result.stdout and "C2 = 1 s" in result.stdout


def test_plan_infeasible_budget_exits_nonzero_with_the_numbers(tmp_path):
    p = tmp_path / "hand.toml"
    p.write_text(HAND)
    result = runner.invoke(app, ["plan", str(p), "--set", "budget.total_time_s=30",  # T/G = 3 s: C1 = 0
                                 "--set", 'run.algorithms=["dofed_spp"]'])
    assert result.exit_code == 1
    err = result.stderr
    assert err.startswith(f"error: {p}: No (B, K) pair fits the budget")
    assert "T/G gives only 3 s" in err and "3 s of local training" in err
    # a scenario without DoFed-SPP needs no (B, K) pair: a note, exit 0 (issue 22)
    result = runner.invoke(app, ["plan", str(p), "--set", "budget.total_time_s=30"])
    assert result.exit_code == 0 and result.stderr.startswith(f"note: {p}: No (B, K) pair fits the budget")


def test_plan_bad_scenario_is_one_clear_error(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[system]\nbandwidth_hz = -5\n")
    result = runner.invoke(app, ["plan", str(p)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert str(p) in result.stderr and "bandwidth_hz = -5" in result.stderr
    assert "Traceback" not in result.output


def test_run_writes_the_run_folder(tiny_scenario, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--seed", "5", "-q"])
    assert result.exit_code == 0, result.output
    for name in ("config.toml", "rounds.csv", "devices.csv", "events.csv", "summary.json", "time_to_accuracy.png"):
        assert (out / name).exists(), name
    assert not (tmp_path / "run.incomplete").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seed"] == 5 and set(summary["algorithms"]) == {"fedavg", "fedprox", "local"}
    assert "seed = 5" in (out / "config.toml").read_text()


def test_run_bad_data_dir_is_a_clear_error_and_writes_nothing(tiny_scenario, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--set", "data.dataset=mnist",
                                 "--data-dir", str(tmp_path / "missing"), "-q"])
    assert result.exit_code == 2
    assert "error:" in result.stderr and "missing" in result.stderr
    assert not out.exists() and not (tmp_path / "run.incomplete").exists()
