"""The golden scenario: 3 devices, 2 rounds, fixed gains, distinct CPUs, TDMA — its full trace is checked in.

Regenerate after an intended change with ``EDGESIM_UPDATE_GOLDEN=1 pytest tests/test_golden_trace.py``
and review the diff of ``tests/golden/trace_3dev_2rounds.csv``.
"""

import csv
import os
from pathlib import Path

import pytest

from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation

GOLDEN = Path(__file__).parent / "golden" / "trace_3dev_2rounds.csv"
COLUMNS = ("time_s", "round_index", "device", "kind", "bits")


def golden_simulation() -> Simulation:
    system = SystemConfig(
        n_devices=3,
        bandwidth_hz=1e6,
        tx_power_dbm=23.0,
        channel_gain_db=-110.0,
        cpu_freq_hz=[1e9, 1.5e9, 2e9],  # compute 0.5 s, 1/3 s, 0.25 s
        access="tdma",
    )
    budget = BudgetConfig(total_time_s=20.0, rounds=2)
    workload = WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=500, model_bits=4e6)
    return Simulation(system, budget, ParametricBackend(3, 3, workload, seed=0), seed=0)


def trace_rows() -> list[dict[str, str]]:
    sim = golden_simulation()
    sim.run()
    return [
        {"time_s": repr(e.time_s), "round_index": str(e.round_index), "device": str(e.device), "kind": e.kind,
         "bits": repr(e.bits)}
        for e in sim.events
    ]


def test_golden_trace():
    rows = trace_rows()
    if os.environ.get("EDGESIM_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        with GOLDEN.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    with GOLDEN.open(newline="") as f:
        golden = list(csv.DictReader(f))
    assert len(rows) == len(golden), f"trace has {len(rows)} events, golden file {len(golden)}"
    for i, (got, want) in enumerate(zip(rows, golden)):
        where = f"row {i + 2} of {GOLDEN.name}"
        assert (got["round_index"], got["device"], got["kind"]) == (
            want["round_index"], want["device"], want["kind"]), where
        assert float(got["time_s"]) == pytest.approx(float(want["time_s"]), abs=1e-9, rel=0), where
        assert float(got["bits"]) == pytest.approx(float(want["bits"]), rel=1e-12, abs=1e-6), where


def test_golden_round_timing_by_hand():
    # Round 0: compute ends at 0.25 (device 2), 1/3 (device 1), 0.5 (device 0): FIFO uploads in that order,
    # each of 4 Mbit at r = b·log2(1 + g·p/(N0·b)); the round lasts 0.25 + 3·m/r.
    sim = golden_simulation()
    first = sim.run_round()
    view_rate = first.devices[0].rate_bps
    assert first.arrived == (2, 1, 0)
    assert first.duration_s == pytest.approx(0.25 + 3 * 4e6 / view_rate, rel=1e-12)
