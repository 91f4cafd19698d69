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


class WithServer:
    """The golden backend plus ``before`` server cycles before each broadcast and ``after`` after the uploads."""

    def __init__(self, inner, before: float, after: float):
        self.inner, self.before, self.after = inner, before, after

    def plan_round(self, view):
        import dataclasses

        plan = self.inner.plan_round(view)
        return dataclasses.replace(plan, server_cycles={"train": self.before}, server_cycles_after={"agg": self.after})

    def complete_round(self, outcome):
        return self.inner.complete_round(outcome)


def test_golden_trace_with_server_phases_is_the_golden_trace_shifted():
    # Fixed gains: every round is the same, so a 1e9-cycle phase before (0.1 s at 10 GHz) and a 5e8-cycle phase
    # after (0.05 s) shift round r's device events by (r + 1)·0.1 + r·0.05 s, framed by the four server events.
    plain = golden_simulation()
    sim = Simulation(plain.system, plain.budget, WithServer(plain.backend, 1e9, 5e8), seed=0)
    sim.run()
    with GOLDEN.open(newline="") as f:
        golden = list(csv.DictReader(f))
    before_s, after_s = 0.1, 0.05
    expected = []
    for row in golden:
        r, kind, t = int(row["round_index"]), row["kind"], float(row["time_s"])
        shift = r * (before_s + after_s)
        if kind == "round_start":
            expected += [(r, -1, "round_start", t + shift), (r, -1, "server_compute_start", t + shift),
                         (r, -1, "server_compute_end", t + shift + before_s)]
        elif kind == "round_end":
            expected += [(r, -1, "server_compute_start", t + shift + before_s),
                         (r, -1, "server_compute_end", t + shift + before_s + after_s),
                         (r, -1, "round_end", t + shift + before_s + after_s)]
        else:
            expected.append((r, int(row["device"]), kind, t + shift + before_s))
    got = [(e.round_index, e.device, e.kind, e.time_s) for e in sim.events]
    assert [g[:3] for g in got] == [e[:3] for e in expected]
    assert [g[3] for g in got] == [pytest.approx(e[3], abs=1e-9) for e in expected]
    assert [r.server_s for r in sim.records] == [pytest.approx(0.15)] * 2
