"""Scenario files: validation, overrides and the errors users see (file, key, value, what was expected)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgesim.scenarios.schema import DEFAULT_SCENARIO, SCENARIO_DIR, ScenarioError, load_scenario, parse_override


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


def test_default_scenario_loads_with_defaults_filled():
    sc = load_scenario()
    assert sc.path == str(DEFAULT_SCENARIO)
    assert sc.system.n_devices == 20 and sc.system.access == "tdma"
    assert sc.learning["data"].dataset == "digits"
    assert sc.learning["run"].algorithms == ["fedavg", "fedprox", "local"]
    assert sc.learning["algorithms"]["fedprox"].mu == 0.01


@pytest.mark.parametrize("path", sorted(SCENARIO_DIR.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_scenario_validates(path):
    load_scenario(path)


def test_set_overrides_any_key_with_toml_values():
    sc = load_scenario(None, ["system.bandwidth_hz=2e6", "system.access=fdma", "run.algorithms=['fedavg']", "seed=9"])
    assert sc.system.bandwidth_hz == 2e6
    assert sc.system.access == "fdma"  # not TOML: taken as a plain string
    assert sc.learning["run"].algorithms == ["fedavg"]
    assert sc.seed == 9


def test_parse_override():
    assert parse_override("system.tx_power_dbm = 20") == (["system", "tx_power_dbm"], 20)
    with pytest.raises(ScenarioError, match="KEY=VALUE"):
        parse_override("system.bandwidth_hz")
    with pytest.raises(ScenarioError, match="dotted key"):
        parse_override("system..x=1")


@pytest.mark.parametrize(
    "override, fragments",
    [
        ("system.bandwidth_hz=-1", ["⟨set=⟩system.bandwidth_hz=-1", "[system]", "bandwidth_hz = -1", "plausible value in [1, 1e+12] Hz"]),
        ("budget.rounds=0", ["[budget]", "rounds = 0", "integer >= 1"]),
        ("system.bandwidth_hz='wide'", ["[system]", "bandwidth_hz = 'wide'", "finite number"]),
        ("system.access=cdma", ["[system]", "access = 'cdma'", "'tdma', 'fdma'"]),
        ("system.tx_power_dbm=[20, 21]", ["tx_power_dbm", "n_devices (= 20)"]),
        ("system.bandwith_hz=1e6", ["[system]", "unknown key 'bandwith_hz'", "bandwidth_hz"]),
        ("data.dataset=imagenet", ["[data]", "dataset = 'imagenet'", "'digits'"]),
        ("train.lr=0", ["[train]", "lr = 0"]),
        ("run.clients_per_round=0", ["[run]", "clients_per_round = 0"]),
        ("algorithms.fedprox.mu=-1", ["[algorithms.fedprox]", "mu = -1"]),
        ("algorithms.fedmagic.x=1", ["[algorithms]", "unknown algorithm 'fedmagic'", "fedavg"]),
        ("seed=-2", ["seed = -2"]),
        ("colour=1", ["unknown key 'colour'"]),
    ],
)
def test_bad_values_name_file_key_value_and_expectation(override, fragments):
    with pytest.raises(ScenarioError) as e:
        load_scenario(None, [override])
    msg = str(e.value)
    assert str(DEFAULT_SCENARIO) in msg
    for frag in fragments:
        assert frag in msg, msg


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(ScenarioError, match="scenario file not found"):
        load_scenario(tmp_path / "nope.toml")
    p = write(tmp_path, "[system\nn_devices = 3")
    with pytest.raises(ScenarioError, match=f"{p}: not valid TOML"):
        load_scenario(p)


def test_plan_only_loading_skips_learning_checks(tmp_path):
    p = write(tmp_path, "[system]\nn_devices = 3\n[algorithms.fedmagic]\nx = 1\n")
    load_scenario(p, learning=False)  # `edgesim plan` does not need the learning sections
    with pytest.raises(ScenarioError, match="unknown algorithm"):
        load_scenario(p)


def test_relative_data_dir_is_relative_to_the_scenario_file(tmp_path):
    (tmp_path / "sub").mkdir()
    p = tmp_path / "sub" / "s.toml"
    p.write_text('[data]\ndataset = "mnist"\ndata_dir = "../data"\n')
    assert load_scenario(p).learning["data"].data_dir == str((tmp_path / "data").resolve())
    # On the command line a relative path stays relative to the working directory.
    assert load_scenario(p, ['data.data_dir="x"']).learning["data"].data_dir == "x"


def test_the_arenas_share_one_cell_and_each_has_a_paper_scale():
    import dataclasses

    import numpy as np

    arenas = {p.stem: load_scenario(p) for p in sorted(SCENARIO_DIR.glob("arena_*.toml"))}
    scarce = arenas.pop("arena_label_scarce")  # a step study on the cell's first 10 devices (issue 35), no twin
    cpu_arenas = [n for n in arenas if not n.endswith("_paper")]
    assert len(cpu_arenas) == 4 and {f"{n}_paper" for n in cpu_arenas} == set(arenas) - set(cpu_arenas)
    # the CPUs: numpy default_rng(2026) on U(0.5, 2.0) GHz, rounded to 0.01 GHz, the first n_devices of one draw
    draw = np.random.default_rng(2026).uniform(0.5, 2.0, 100).round(2) * 1e9  # Hz
    cells = set()
    for name, sc in arenas.items():
        n = sc.system.n_devices
        assert np.array_equal(np.asarray(sc.system.cpu_freq_hz) / 1e7, np.round(draw[:n] / 1e7)), name
        assert n == (20 if name in cpu_arenas else 25 if "dofed" in name else 100), name
        cells.add(dataclasses.replace(sc.system, n_devices=1, cpu_freq_hz=1e9))
    assert np.array_equal(np.asarray(scarce.system.cpu_freq_hz) / 1e7, np.round(draw[:10] / 1e7))
    cells.add(dataclasses.replace(scarce.system, n_devices=1, cpu_freq_hz=1e9))
    assert len(cells) == 1  # radius, path loss, shadowing, uplink, power, noise, downlink, server: one cell
    for name in cpu_arenas:  # the CPU scale: 20 rounds or 600 simulated seconds
        assert (arenas[name].budget.total_time_s, arenas[name].budget.rounds) == (600, 20), name
