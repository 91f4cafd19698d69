"""How fast is the asynchronous clock? A physics-only FedAsync/FedBuff run (edgesim.asynchrony, torch-free).

    python benchmarks/async_scale.py --devices 1000 --updates 100000 --concurrency 100 --access fdma

Devices are placed at random in the cell (path-loss channel, Rayleigh fading
per model version), CPUs 0.5-2 GHz; the ParametricBackend gives each update
its work. Runs until ``--updates`` updates have been applied (FedAsync: one
aggregation each; FedBuff: K each) and prints the wall-clock seconds, the
updates per second and the events emitted, with the versions and the CPU it
ran on (benchmarks/RESULTS.md, "Asynchronous clock at scale").
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import simpy

from edgesim.asynchrony import AsyncConfig, AsyncSimulation
from edgesim.availability import Availability
from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", type=int, default=1000)
    ap.add_argument("--updates", type=int, default=100_000)
    ap.add_argument("--concurrency", type=int, default=100)
    ap.add_argument("--mode", choices=("fedasync", "fedbuff"), default="fedasync")
    ap.add_argument("--buffer", type=int, default=10)
    ap.add_argument("--access", choices=("tdma", "fdma"), default="fdma")
    ap.add_argument("--markov", type=float, nargs=2, metavar=("ON_S", "OFF_S"), default=None,
                    help="Markov availability with these mean on/off durations (default: always online)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    n = args.devices
    cpus = np.random.default_rng((args.seed, 99)).uniform(0.5e9, 2e9, n).tolist()
    system = SystemConfig(n_devices=n, bandwidth_hz=20e6, access=args.access, cpu_freq_hz=cpus, rayleigh_fading=True)
    workload = WorkloadConfig(local_iterations=1, cycles_per_sample=1e6, samples_per_device=500, model_bits=1e6)
    per_agg = 1 if args.mode == "fedasync" else args.buffer
    aggregations = args.updates // per_agg
    avail = None if args.markov is None else Availability(n, markov=(args.markov[0], args.markov[1], args.seed))
    sim = AsyncSimulation(system, BudgetConfig(rounds=aggregations, round_mode=args.mode),
                          ParametricBackend(n, n, workload, seed=args.seed),
                          AsyncConfig(concurrency=args.concurrency, buffer_size=args.buffer), seed=args.seed,
                          record_events=False, availability=avail, keep_records=False)
    t0 = time.perf_counter()
    recs = 0
    while sim.round_index < aggregations:
        if sim.run_round() is None:
            break
        recs += 1
    wall = time.perf_counter() - t0
    print(f"{args.mode} {args.access} devices={n} concurrency={args.concurrency} updates_applied={recs * per_agg} "
          f"updates_started={sim.updates_started} aggregations={recs} events={sim.event_count} "
          f"simulated={sim.now_s:.1f}s wall={wall:.2f}s ({recs * per_agg / wall:,.0f} updates/s) "
          f"markov={args.markov}")
    print(f"python {platform.python_version()}, simpy {simpy.__version__}, numpy {np.__version__}; {cpu_model()}")


if __name__ == "__main__":
    main()
