"""Energy budgets: system.battery_j, the energy each device has spent, and a spent battery ending its part."""

from __future__ import annotations

import pytest

from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation

WORK = WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=100, model_bits=1e6)


def _sim(battery_j=None, rounds=6):
    system = SystemConfig(n_devices=3, bandwidth_hz=1e6, cpu_freq_hz=[1e9, 1e9, 2e9], access="fdma",
                          channel_gain_db=-100.0, battery_j=battery_j)
    return Simulation(system, BudgetConfig(total_time_s=60.0, rounds=rounds), ParametricBackend(3, 3, WORK, seed=1),
                      seed=2)


def test_a_spent_battery_ends_the_devices_part_by_hand():
    """Every device trains 1e8 cycles a round: κ C f² = 1e-28 · 1e8 · (2e9)² = 0.04 J at 2 GHz, plus its radio e_r;
    the cell is the same every round (fixed gains, all three devices). Device 2 with a battery of 1.5 (0.04 + e_r)
    is spent after its second round: it takes part in rounds 0 and 1 only, one battery_empty event (round 1),
    battery left 0; the others' batteries fall by what their rows say."""
    unlimited = _sim().run_round()
    row2 = next(row for row in unlimited.devices if row.device == 2)
    assert row2.compute_energy_j == pytest.approx(0.04, rel=1e-12)
    per_round = row2.compute_energy_j + row2.radio_energy_j
    sim = _sim(battery_j=[10.0, 10.0, 1.5 * per_round])
    view = sim.system_view()
    assert view.energy_spent_j == (0.0, 0.0, 0.0) and view.battery_left_j == (10.0, 10.0, 1.5 * per_round)
    recs = sim.run()
    assert [sorted(r.arrived) for r in recs] == [[0, 1, 2], [0, 1, 2]] + [[0, 1]] * 4
    empty = [e for e in sim.events if e.kind == "battery_empty"]
    assert [(e.round_index, e.device) for e in empty] == [(1, 2)]
    view = sim.system_view()
    spent = [sum(row.radio_energy_j + row.compute_energy_j for r in recs for row in r.devices if row.device == d)
             for d in range(3)]
    assert view.energy_spent_j == pytest.approx(spent, rel=1e-12)
    assert view.battery_left_j == pytest.approx([10.0 - spent[0], 10.0 - spent[1], 0.0], rel=1e-12)


def test_without_batteries_the_view_carries_none():
    view = _sim().system_view()
    assert view.energy_spent_j is None and view.battery_left_j is None
    assert "energy_spent_j" not in _sim().state_dict()


def test_resume_keeps_the_energy_spent():
    whole = _sim(battery_j=[10.0, 0.03, 0.05])
    full = whole.run()
    first = _sim(battery_j=[10.0, 0.03, 0.05])
    first.run(rounds=2)
    again = _sim(battery_j=[10.0, 0.03, 0.05])
    again.load_state_dict(first.state_dict())
    again.backend.load_state_dict(first.backend.state_dict())
    assert again.run() == full[2:]


@pytest.mark.parametrize("value, expected", [(-1.0, "battery_j"), (0.0, "a number > 0"), ([1.0, 2.0], "n_devices")])
def test_bad_batteries_are_one_line(value, expected):
    with pytest.raises(ValueError) as e:
        SystemConfig(n_devices=3, battery_j=value)
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_batteries_csi_and_excluded_stragglers_are_refused_in_asynchronous_runs():
    from edgesim.asynchrony import AsyncSimulation, check_async_resources
    from edgesim.resources import ResourcesConfig

    budget = BudgetConfig(rounds=4, round_mode="fedasync", deadline_s=2.0)
    for kw, key in ((dict(battery_j=1.0), "battery_j"), (dict(csi="outdated"), "csi")):
        system = SystemConfig(n_devices=3, access="fdma", **kw)
        with pytest.raises(ValueError) as e:
            AsyncSimulation(system, budget, ParametricBackend(3, 3, WORK))
        assert f"system.{key}" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="stragglers = 'exclude' with round_mode = 'fedasync'"):
        check_async_resources(ResourcesConfig(stragglers="exclude"), budget)


@pytest.mark.parametrize("section, key, value", [("system", "battery_j", 1.0), ("system", "csi", "outdated"),
                                                 ("resources", "stragglers", "exclude")])
def test_a_scenario_refuses_rounds_only_settings_in_an_asynchronous_run(section, key, value):
    """The scenario's checks ask the same declarations as the engine (SystemConfig.rounds_only,
    check_round_mode): one line naming the key, the value and the round mode."""
    from edgesim.scenarios.schema import ScenarioError, validate

    raw = {"run": {"backend": "parametric", "clients_per_round": 2},
           "system": {"n_devices": 3, "access": "fdma"}, "budget": {"round_mode": "fedbuff", "deadline_s": 2.0},
           "async": {"buffer_size": 2}, "workload": {"model_bits": 1e6, "samples_per_device": 500}}
    raw.setdefault(section, {})[key] = value  # (a physics-only run states its workload: no model, no partition)
    with pytest.raises(ScenarioError) as e:
        validate(raw, "s.toml")
    msg = str(e.value)
    assert f"{key} = {value!r}" in msg and "round_mode = 'fedbuff'" in msg and "\n" not in msg


def test_the_new_bandwidth_policies_declare_rounds_only():
    from edgesim.resources import ResourcesConfig, check_round_mode, declared

    for name in ("equal_static", "min_energy"):
        d = declared("bandwidth", name)
        assert d.access == ("fdma",) and "async" not in d.round_modes and "sync" in d.round_modes
    check_round_mode(ResourcesConfig(bandwidth="equal_static"), "sync", False, None)
    with pytest.raises(ValueError, match="bandwidth = 'equal_static' does not apply to round_mode = 'fedbuff'"):
        check_round_mode(ResourcesConfig(bandwidth="equal_static"), "fedbuff", True, 2.0)
