"""How fast is the engine at scale? Rounds of the SimPy engine with the torch-free ParametricBackend.

By default every device takes part in every round (K = N) to stress the
uplink: with ``--access fdma`` up to N transfers share the band at once
(processor sharing, O(n) NumPy work per start/end), with ``tdma`` up to N
wait in the FIFO queue. Devices are placed at random in the cell (path-loss
channel), so their rates differ and their uploads end one by one.

    python benchmarks/engine_scale.py --devices 10000 --rounds 100 --access fdma

Prints the wall-clock seconds per round (host time, measured here, outside
the simulator) and the trace events emitted per second, with the versions
and the CPU it ran on. Results: benchmarks/RESULTS.md, "Engine at scale".

``--compare-bare`` (TDMA) also runs, interleaved round by round with the
engine (engine, bare, engine, bare, …, so that load on a shared machine hits
both alike), the same events in bare SimPy: one process per device that
waits its compute time, then holds a ``simpy.Resource(capacity=1)`` for its
upload time (the durations the engine's round just had), and nothing else —
no records, no checks, no backend. It reports both medians, the ratio of the
medians and the median of the per-round ratios, for the engine's whole round
and for the engine alone (the backend's ``plan_round``/``complete_round``
time subtracted).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import simpy

from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=10_000, help="N, devices in the cell")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--clients-per-round", type=int, default=None, help="K (default: N, everyone)")
    parser.add_argument("--access", choices=("tdma", "fdma"), default="tdma")
    parser.add_argument("--model-bits", type=float, default=17_440_000.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--record-events", action="store_true", help="keep every Event in memory too")
    parser.add_argument("--resources", action="append", default=[], metavar="KEY=VALUE",
                        help="a [resources] policy, e.g. bandwidth=min_max_time (repeatable; default: none)")
    parser.add_argument("--compare-bare", action="store_true",
                        help="interleave each round with the same events in bare SimPy (tdma only)")
    args = parser.parse_args(argv)
    if args.compare_bare and args.access != "tdma":
        parser.error("--compare-bare compares the TDMA uplink (a simpy.Resource): give --access tdma")

    n = args.devices
    k = n if args.clients_per_round is None else args.clients_per_round
    system = SystemConfig(n_devices=n, access=args.access)
    budget = BudgetConfig(total_time_s=1e12, rounds=args.rounds)
    workload = WorkloadConfig(model_bits=args.model_bits, samples_per_device=500)
    backend = ParametricBackend(n, k, workload, seed=args.seed)
    extra = {}
    if args.resources:
        from edgesim.resources import ResourcesConfig

        extra["resources"] = ResourcesConfig(**dict(kv.split("=", 1) for kv in args.resources))
    sim = Simulation(system, budget, backend, seed=args.seed, record_events=args.record_events, keep_records=False,
                     **extra)

    print(f"python {platform.python_version()}, simpy {simpy.__version__}, numpy {np.__version__}")
    print(f"cpu: {cpu_model()}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.machine()}")
    print(f"N={n} K={k} access={args.access} rounds={args.rounds} model_bits={args.model_bits:g}"
          + (f" resources={','.join(args.resources)}" if args.resources else ""))

    if args.compare_bare:
        compare_bare(sim, backend, args.rounds, args.model_bits)
        return
    per_round, sim_s = [], []
    start_events = sim.event_count
    t_all = time.perf_counter()
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        record = sim.run_round()
        per_round.append(time.perf_counter() - t0)
        sim_s.append(record.duration_s)
    wall = time.perf_counter() - t_all
    events = sim.event_count - start_events

    print(f"wall {wall:.2f} s for {args.rounds} rounds: "
          f"{wall / args.rounds:.4f} s/round (median {statistics.median(per_round):.4f}, "
          f"min {min(per_round):.4f}, max {max(per_round):.4f})")
    print(f"trace events {events} ({events / args.rounds:.0f}/round): {events / wall:,.0f} events/s")
    print(f"simulated {sim.now_s:.6g} s ({statistics.mean(sim_s):.6g} s/round); "
          f"final accuracy {record.metrics['accuracy']:.4f}")


def bare_round(compute_s: list[float], upload_s: list[float]) -> float:
    """The round's events in bare SimPy: per device a compute timeout, then the band for its upload."""
    env = simpy.Environment()
    band = simpy.Resource(env, capacity=1)

    def device(c: float, u: float):
        yield env.timeout(c)
        with band.request() as request:
            yield request
            yield env.timeout(u)

    for c, u in zip(compute_s, upload_s):
        env.process(device(c, u))
    env.run()
    return env.now


class TimedBackend:
    """The backend with the host seconds of its own calls summed (what the engine does not control)."""

    def __init__(self, backend):
        self.backend, self.seconds = backend, 0.0

    def plan_round(self, view):
        t0 = time.perf_counter()
        try:
            return self.backend.plan_round(view)
        finally:
            self.seconds += time.perf_counter() - t0

    def complete_round(self, outcome):
        t0 = time.perf_counter()
        try:
            return self.backend.complete_round(outcome)
        finally:
            self.seconds += time.perf_counter() - t0


def compare_bare(sim: Simulation, backend, rounds: int, model_bits: float) -> None:
    timed = TimedBackend(backend)
    sim.backend = timed
    whole, engine, bare = [], [], []
    for _ in range(rounds):
        timed.seconds = 0.0
        t0 = time.perf_counter()
        record = sim.run_round()
        whole.append(time.perf_counter() - t0)
        engine.append(whole[-1] - timed.seconds)
        compute = [row.compute_s for row in record.devices]
        upload = [model_bits / row.rate_bps for row in record.devices]
        t0 = time.perf_counter()
        bare_end = bare_round(compute, upload)
        bare.append(time.perf_counter() - t0)
        assert abs(bare_end - record.duration_s) <= 1e-9 * record.duration_s, (bare_end, record.duration_s)
    med = statistics.median
    print(f"bare SimPy     {med(bare):.4f} s/round (median of {rounds})")
    for label, xs in (("engine round ", whole), ("engine alone ", engine)):
        ratios = [x / b for x, b in zip(xs, bare)]
        print(f"{label}  {med(xs):.4f} s/round; ratio of medians {med(xs) / med(bare):.2f}x, "
              f"median per-round ratio {med(ratios):.2f}x")


if __name__ == "__main__":
    main()
