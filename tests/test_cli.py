"""The command line as a user meets it: `edgesim plan` (table, JSON, infeasible budgets) and `edgesim run`."""

from __future__ import annotations

import json
import math
import re

from typer.testing import CliRunner

from edgesim.scenarios.cli import app

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

[run]
algorithms = ["dofed_spp"]  # the plan's C1/C2/C3 and (B, K) pairs are DoFed-SPP's

[algorithms.dofed_spp]
target_epochs = 1          # the student: E_tar*C*D = 1e9 cycles = 1 s (a drawn split: its sets are the D samples)
"""


def hand_numbers():
    n0_w_per_hz = 10 ** ((-174 - 30) / 10)
    snr = 1e-10 * 1.0 / (n0_w_per_hz * 1e6)
    rate = 1e6 * math.log2(1 + snr)
    c1, c2, c3 = 10 - 4, 0.5, 1e7 / rate
    return rate, c1, c2, c3


def test_plan_json_matches_hand_computation(tmp_path):
    p = tmp_path / "hand.toml"
    p.write_text(HAND)
    result = runner.invoke(app, ["plan", str(p), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    # N0·b = 3.981e-15 W, SNR = 1e-10 / 3.981e-15 = 25118.9, rate = 1e6·log2(25119.9) = 14.6165 Mbit/s,
    # C1 = 10 - (2e9 + 1e9 + 1e9)/1e9 = 6 s (training, student, SR), C2 = 0.5 s, C3 = 1e7 / 14.6165e6 = 0.68416 s
    rate, c1, c2, c3 = hand_numbers()
    assert out["round_budget_s"] == 10
    assert math.isclose(out["uplink_rate_bps"], rate, rel_tol=1e-12)
    assert math.isclose(out["c1_s"], c1) and math.isclose(out["c2_s"], c2) and math.isclose(out["c3_s"], c3, rel_tol=1e-12)
    # K from max(1, floor(6 / 1.18416)) = 5 to floor((6 - 0.5) / 0.68416) = 8; B = min(K, floor((6 - K*C3)/0.5)):
    # K=5: min(5, floor(5.16)) = 5; K=6: floor(3.79) = 3; K=7: floor(2.42) = 2; K=8: floor(1.05) = 1
    assert out["pairs"] == [[5, 5], [3, 6], [2, 7], [1, 8]]
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
    # planned for the slowest CPU (0.5 GHz): C1 = 10 - 4e9/0.5e9 = 2 s, C2 = 5e8/0.5e9 = 1 s
    assert "C1 = 2 s" in result.stdout and "C2 = 1 s" in result.stdout


def test_plan_infeasible_budget_exits_nonzero_with_the_numbers(tmp_path):
    p = tmp_path / "hand.toml"
    p.write_text(HAND)
    result = runner.invoke(app, ["plan", str(p), "--set", "budget.total_time_s=30",  # T/G = 3 s: C1 = -1
                                 "--set", 'run.algorithms=["dofed_spp"]'])
    assert result.exit_code == 1
    err = result.stderr
    assert err.startswith(f"error: {p}: No (B, K) pair fits the budget")
    assert "T/G gives only 3 s" in err and "4 s of local training" in err
    # a scenario without DoFed-SPP needs no (B, K) pair: nothing of it is printed, exit 0 (issue 22)
    result = runner.invoke(app, ["plan", str(p), "--set", "budget.total_time_s=30", "--set", "run.algorithms=fedavg"])
    assert result.exit_code == 0 and "(B, K)" not in result.output and "error" not in result.output


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
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--seed", "5", "-q", "--plots"])
    assert result.exit_code == 0, result.output
    for name in ("config.toml", "rounds.csv", "devices.csv", "events.csv", "summary.json", "run.json", "accuracy_vs_time.png"):
        assert (out / name).exists(), name
    assert not (tmp_path / "run.incomplete").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seed"] == 5 and set(summary["algorithms"]) == {"fedavg", "fedprox", "local"}
    assert "seed = 5" in (out / "config.toml").read_text()


def test_no_plots_leaves_the_figures_to_edgesim_plot_and_plots_beats_the_environment(tiny_scenario, tmp_path,
                                                                                      monkeypatch):
    one = ["--set", "run.rounds=1", "--set", "run.algorithms=fedavg", "-q"]
    monkeypatch.setenv("EDGESIM_PLOTS", "1")
    assert runner.invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "a"), *one, "--no-plots"]).exit_code == 0
    drawn = {"accuracy_vs_time.png", "accuracy_vs_time.csv", "accuracy_vs_energy.png", "accuracy_vs_uplink_bits.png"}
    assert not drawn & {p.name for p in (tmp_path / "a").iterdir()} and (tmp_path / "a" / "rounds.csv").is_file()
    assert runner.invoke(app, ["plot", str(tmp_path / "a")]).exit_code == 0  # later, from the tables
    assert drawn <= {p.name for p in (tmp_path / "a").iterdir()}
    monkeypatch.setenv("EDGESIM_PLOTS", "0")
    assert runner.invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "b"), *one, "--plots"]).exit_code == 0
    assert (tmp_path / "b" / "accuracy_vs_time.png").is_file()
    monkeypatch.setenv("EDGESIM_PLOTS", "yes")
    bad = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "c"), *one])
    assert bad.exit_code == 2 and bad.stderr == ("error: EDGESIM_PLOTS='yes': expected 1 (draw the figures) or 0 (do "
                                                 "not; `edgesim plot` draws them later)\n")
    assert not (tmp_path / "c").exists() and not (tmp_path / "c.incomplete").exists()


def test_run_bad_data_dir_is_a_clear_error_and_writes_nothing(tiny_scenario, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--set", "data.dataset=mnist",
                                 "--data-dir", str(tmp_path / "missing"), "-q"])
    assert result.exit_code == 2
    assert "error:" in result.stderr and "missing" in result.stderr
    assert not out.exists() and not (tmp_path / "run.incomplete").exists()


def test_config_toml_is_a_scenario_that_reproduces_the_run_byte_for_byte(tiny_scenario, tmp_path):
    first, again = tmp_path / "first", tmp_path / "again"
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(first), "--set", "run.rounds=2",
                                 "--set", 'run.algorithms=["fedavg","local"]', "-q"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["run", str(first / "config.toml"), "--out", str(again), "-q"])
    assert result.exit_code == 0, result.output
    for name in ("config.toml", "rounds.csv", "devices.csv", "events.csv", "summary.json"):
        assert (first / name).read_bytes() == (again / name).read_bytes(), name
    prov = json.loads((again / "run.json").read_text())
    assert prov["source"] == str(first / "config.toml")
    assert prov["versions"]["torch"] and prov["versions"]["torch_threads"] >= 1 and prov["cpu"]["cores"] >= 1
    assert prov["started"] <= prov["finished"] and prov["host"] and isinstance(prov["command"], list)
    assert prov["git"] is None or (len(prov["git"]["commit"]) == 40 and isinstance(prov["git"]["dirty"], bool))
    assert "versions" not in (first / "config.toml").read_text()


def test_version():
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"edgesim {version('edgesim')}"


def test_plan_prints_only_what_the_algorithms_use(tmp_path):
    p = tmp_path / "hand.toml"
    p.write_text(HAND.replace('algorithms = ["dofed_spp"]', 'algorithms = ["fedavg", "local"]'))
    result = runner.invoke(app, ["plan", str(p), "--set", "budget.total_time_s=30"])  # no (B, K) pair fits: not used
    assert result.exit_code == 0, result.output
    assert "Algorithms: fedavg, local" in result.stdout and "Train + upload within T/G: 25 of 25" in result.stdout
    assert "C1" not in result.output and "(B, K)" not in result.output and "SR s" not in result.stdout
    dofed = runner.invoke(app, ["plan", str(p), "--set", "run.algorithms=fedavg,dofed_spp"])
    assert dofed.exit_code == 0 and "C1 = 6 s" in dofed.stdout and "SR s" in dofed.stdout


def test_list_every_kind_with_options_types_and_defaults():
    result = runner.invoke(app, ["list", "algorithms"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert re.search(r"^fedadam\s+FedAdam: FedAvg with Adam as the server optimizer", out, re.M)
    block = out.split("\nfedadam ", 1)[1].split("\nfedyogi ", 1)[0]
    assert re.search(r"^    server_optimizer\s+str\s+\"adam\"\s+server_optimizer: the server step after ", block, re.M)
    assert re.search(r"^    server_lr\s+float\s+0.01\s+server_lr: the server step's η", block, re.M)
    assert re.search(r"^    lr\s+Optional\[float\]\s+\(unset\)\s+lr: the local learning rate", block, re.M)
    for kind, line in (("models", r"^resnet9\s+UM-pFSSL's ResNet-9"), ("datasets", r"^    vocab_size\s+int\s+199000\b"),
                       ("partitions", r"^dirichlet\s+.*\n    alpha\s+Number\s+0.5\s+Dirichlet concentration")):
        result = runner.invoke(app, ["list", kind])
        assert result.exit_code == 0 and re.search(line, result.stdout, re.M), (kind, result.stdout[:500])
    as_json = json.loads(runner.invoke(app, ["list", "--json"]).stdout)
    assert set(as_json) == {"algorithms", "models", "datasets", "partitions", "scenarios", "policies", "access",
                            "association"}
    assert {"name": "mu", "type": "float", "default": 0.01, "meaning": (
        "mu: μ of FedProx's proximal term (μ/2)‖w − w_global‖² (Li et al., MLSys 2020, Eq. 2), 0 is FedAvg.")} in next(
        e for e in as_json["algorithms"] if e["name"] == "fedprox")["options"]
    bad = runner.invoke(app, ["list", "algorithm"])
    assert bad.exit_code == 2 and bad.stderr.strip() == (
        "error: list 'algorithm': expected one of algorithms, models, datasets, partitions, scenarios, policies, access, "
        "association")


def test_list_association_shows_the_built_in_rules_and_a_plugins():
    """`edgesim list association` lists the registered rules (its docstring's first line), a plugin's too."""
    from edgesim.cells import ASSOCIATIONS, register_association
    from edgesim.config import ASSOCIATION_NAMES

    result = runner.invoke(app, ["list", "association"])
    assert result.exit_code == 0, result.output
    assert re.search(r"^nearest\s+The nearest base station", result.stdout, re.M)
    assert re.search(r"^max_gain\s+The largest average gain", result.stdout, re.M)
    assert re.search(r"^max_power\s+The largest average received downlink power", result.stdout, re.M)

    @register_association("listed_first")
    def listed_first(layout):
        """Every device to the first cell."""
        return [0] * layout.n_devices

    try:
        as_json = json.loads(runner.invoke(app, ["list", "association", "listed_first", "--json"]).stdout)
        assert [(e["name"], e["summary"]) for e in as_json["association"]] == [
            ("listed_first", "Every device to the first cell.")]
    finally:
        ASSOCIATIONS.pop("listed_first", None)
        ASSOCIATION_NAMES.remove("listed_first")


def test_list_values_need_no_toml_quoting(tiny_scenario):
    from edgesim.scenarios.schema import load_scenario, parse_value

    assert parse_value("fedavg,fedprox") == ["fedavg", "fedprox"]
    assert parse_value("[fedavg, local]") == ["fedavg", "local"]
    assert parse_value("0.5,0.7") == [0.5, 0.7] and parse_value('["a"]') == ["a"] and parse_value("x") == "x"
    sc = load_scenario(tiny_scenario, ["run.algorithms=fedavg,fedprox", "run.accuracy_thresholds=0.5,0.7"])
    assert sc.learning["run"].algorithms == ["fedavg", "fedprox"]
    assert sc.learning["run"].accuracy_thresholds == [0.5, 0.7]
    assert load_scenario(tiny_scenario, ["run.algorithms=local"]).learning["run"].algorithms == ["local"]


def test_shipped_scenarios_find_data_through_edgesim_data(tmp_path, monkeypatch):
    from edgesim.scenarios.schema import SCENARIO_DIR, load_scenario

    for p in SCENARIO_DIR.glob("*.toml"):
        assert "data_dir" not in p.read_text().replace("--set data.data_dir", ""), p.name
    monkeypatch.setenv("EDGESIM_DATA", str(tmp_path))
    sc = load_scenario(SCENARIO_DIR / "fmnist_fedavg.toml")
    assert sc.learning["data"].data_dir == str(tmp_path.resolve())
    assert load_scenario(SCENARIO_DIR / "default.toml").learning["data"].data_dir is None  # digits needs no files
    explicit = load_scenario(SCENARIO_DIR / "fmnist_fedavg.toml", [f"data.data_dir={json.dumps(str(tmp_path / 'x'))}"])
    assert explicit.learning["data"].data_dir == str(tmp_path / "x")
    monkeypatch.delenv("EDGESIM_DATA")
    result = runner.invoke(app, ["run", str(SCENARIO_DIR / "fmnist_fedavg.toml"), "--out", str(tmp_path / "r"), "-q"])
    assert result.exit_code == 2 and "EDGESIM_DATA" in result.stderr and "--data-dir" in result.stderr


def test_run_and_sweep_figure_formats_and_sweep_data_dir(tiny_scenario, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(out), "--set", "run.rounds=1",
                                 "--set", "run.algorithms=fedavg", "--format", "pdf,svg", "-q", "--plots"])
    assert result.exit_code == 0, result.output
    assert (out / "accuracy_vs_time.pdf").read_bytes().startswith(b"%PDF-")
    assert (out / "accuracy_vs_energy.svg").is_file() and not list(out.glob("*.png"))
    bad = runner.invoke(app, ["run", str(tiny_scenario), "--out", str(tmp_path / "b"), "--format", "png,jpg"])
    assert bad.exit_code == 2 and "--format 'jpg': expected one or more of png, pdf, svg" in bad.stderr
    result = runner.invoke(app, ["sweep", str(tiny_scenario), "--grid", "seed=1", "--set", "run.rounds=1",
                                 "--set", "run.algorithms=fedavg", "--jobs", "1",
                                 "--out", str(tmp_path / "sw"), "--format", "svg", "-q", "--plots"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "sw" / "accuracy_vs_time.svg").is_file()
    # --data-dir reaches every run's scenario: refused for the bundled digits (it reads no folder), and, for a data
    # set read from files, checked (absolute) for every grid point before any run starts
    data = tmp_path / "data"
    data.mkdir()
    digits = runner.invoke(app, ["sweep", str(tiny_scenario), "--grid", "seed=1", "--data-dir", str(data),
                                 "--out", str(tmp_path / "sw2"), "-q"])
    assert digits.exit_code == 2 and "data_dir" in digits.stderr and "bundled" in digits.stderr
    from edgesim.scenarios.schema import SCENARIO_DIR

    nowhere = tmp_path / "nowhere"
    fmnist = runner.invoke(app, ["sweep", str(SCENARIO_DIR / "fmnist_fedavg.toml"), "--grid", "seed=1,2",
                                 "--data-dir", str(nowhere), "--out", str(tmp_path / "sw3"), "-q"])
    assert fmnist.exit_code == 2 and str(nowhere.resolve()) in fmnist.stderr and "Traceback" not in fmnist.output
    assert not (tmp_path / "sw3" / "seed=1").exists()


def test_a_physics_only_config_toml_reproduces_its_run(tmp_path):
    from edgesim.scenarios.schema import SCENARIO_DIR

    small = ["--set", "budget.rounds=3", "--set", "system.n_devices=50", "--set", "run.clients_per_round=5"]
    first = runner.invoke(app, ["run", str(SCENARIO_DIR / "physics_10k.toml"), *small, "--out", str(tmp_path / "a"), "-q"])
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, ["run", str(tmp_path / "a" / "config.toml"), "--out", str(tmp_path / "b"), "-q"])
    assert again.exit_code == 0, again.output
    for name in ("config.toml", "rounds.csv", "devices.csv", "events.csv", "summary.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert json.loads((tmp_path / "a" / "run.json").read_text())["versions"].get("torch") is None


def test_plan_shows_the_local_steps_per_device(tmp_path):
    """The bundled default: I = 1, D = 72, B = 16 ⇒ ⌈72/16⌉ = 5 steps; with I = 3 and B = 24: 3·3 = 9."""
    result = runner.invoke(app, ["plan"])
    assert result.exit_code == 0, result.output
    assert "Local steps per device-round: I·⌈D/B⌉ = 1·⌈72/16⌉ = 5" in result.stdout
    result = runner.invoke(app, ["plan", "--json", "--set", "workload.local_iterations=3", "--set", "train.batch_size=24"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["local_steps"] == {"local_iterations": 3, "samples_per_device": 72,
                                                       "batch_size": 24, "local_steps_per_device": 9}
