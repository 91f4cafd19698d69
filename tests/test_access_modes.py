"""Every access scheme under the round modes it serves (issue 48.5): deterministic, resumed byte for byte from a
checkpoint's state, and refused in one line under the asynchronous modes where it declares no asynchronous mode."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgesim.access import SCHEMES
from edgesim.access.aircomp import AircompOptions
from edgesim.access.noma import NomaOptions
from edgesim.access.ofdma import OfdmaOptions
from edgesim.asynchrony import check_async_access
from edgesim.backend import DeviceWork, RoundPlan
from edgesim.config import BudgetConfig, SystemConfig
from edgesim.engine import Simulation
from edgesim.resources import ResourcesConfig

OPTIONS = {"tdma": None, "fdma": None, "fdma_banded": None, "ofdma": OfdmaOptions(resource_blocks=20),
           "noma": NomaOptions(cluster_size=2), "aircomp": AircompOptions(subcarriers=8, gain_threshold_db=-125)}
BUILT_IN = tuple(OPTIONS)


class _Plans:
    def __init__(self, seed):
        self.seed = seed
        self.done = 0

    def plan_round(self, view):
        rng = np.random.default_rng((self.seed, view.round_index))
        chosen = np.sort(rng.choice(12, size=6, replace=False))
        cycles = rng.choice([1e8, 2e8, 5e8], size=6)
        return RoundPlan(tuple(DeviceWork(int(d), {"train": float(c)}, 3.2e6, 1e5) for d, c in zip(chosen, cycles)))

    def complete_round(self, outcome):
        self.done += 1
        return {"arrived": float(len(outcome.arrived))}

    def state_dict(self):
        return {"done": self.done}

    def load_state_dict(self, state):
        self.done = state["done"]


def _sim(access, mode, seed=4):
    system = SystemConfig(n_devices=12, access=access, bandwidth_hz=5e6, rayleigh_fading=True, downlink_rate_bps=1e8,
                          cpu_freq_hz=[1e9, 2e9, 0.5e9] * 4)
    budget = BudgetConfig(total_time_s=60, rounds=5, round_mode=mode, deadline_s=0.6 if mode == "deadline" else None)
    resources = ResourcesConfig(resource_blocks="min_max_time") if access == "ofdma" else None
    backend = _Plans(seed)
    return Simulation(system, budget, backend, seed=seed, access_options=OPTIONS[access], resources=resources), backend


def test_every_built_in_scheme_is_covered():
    assert set(BUILT_IN) <= set(SCHEMES)


@pytest.mark.parametrize("mode", ["sync", "deadline"])
@pytest.mark.parametrize("access", BUILT_IN)
def test_each_scheme_is_deterministic_and_resumes_identically(access, mode):
    full, _ = _sim(access, mode)
    expected = full.run()
    assert [r for r in expected if r.arrived], "no upload arrived: the case tests nothing"
    again, _ = _sim(access, mode)
    assert again.run() == expected and again.events == full.events
    first, first_backend = _sim(access, mode)
    first.run(rounds=2)
    state = json.loads(json.dumps(first.state_dict()))
    resumed, resumed_backend = _sim(access, mode)
    resumed.load_state_dict(state)
    resumed_backend.load_state_dict(first_backend.state_dict())
    assert resumed.run() == expected[2:]
    assert resumed.events == [e for e in full.events if e.round_index >= 2]


def test_the_deadline_cuts_uploads_under_every_scheme():
    for access in BUILT_IN:
        sim, _ = _sim(access, "deadline")
        rows = [row for r in sim.run() for row in r.devices]
        assert any(row.dropped for row in rows), access
        for row in rows:
            if row.dropped and row.drop_reason == "deadline":
                assert row.bits_up == 0.0 and row.wasted_bits <= 3.2e6


@pytest.mark.parametrize("access", BUILT_IN)
def test_the_asynchronous_modes_take_the_schemes_that_declare_them(access):
    for mode in ("fedasync", "fedbuff"):
        if SCHEMES[access].asynchronous:
            check_async_access(access, mode)
        else:
            with pytest.raises(ValueError, match=rf"^access = '{access}' has no asynchronous mode \(\[budget\] "
                                                 rf"round_mode = '{mode}'\): [^\n]+; expected round_mode 'sync' or "
                                                 rf"'deadline'"):
                check_async_access(access, mode)
