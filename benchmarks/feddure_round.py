"""Host seconds per round of FedDure and its baselines on the CPU scenario, sequential vs vectorised executor.

Builds the context of ``scenarios/feddure_fmnist_cpu.toml`` once, then runs each named algorithm for a
few rounds on the engine with the executor given, and prints the host wall-clock per round (median, min,
max over the timed rounds; round 0 is timed too — there is no warm-up to skip) with the final accuracy,
so that runs of the two executors can be checked for the same learning.

    OMP_NUM_THREADS=1 python benchmarks/feddure_round.py --executor sequential --rounds 3
    OMP_NUM_THREADS=1 python benchmarks/feddure_round.py --executor vmap --rounds 3 --algorithms feddure,fixavg

Results: benchmarks/RESULTS.md, "FedDure round".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from edgesim.engine import Simulation
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.context import build_context
from edgesim.scenarios.schema import load_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "feddure_fmnist_cpu.toml"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--executor", choices=("sequential", "vmap"), default="sequential")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--algorithms", default="feddure,feddure_no_creg,feddure_no_freg,fixavg,fedavg_labeled")
    ap.add_argument("--set", action="append", default=[], help="scenario override, as edgesim run --set")
    args = ap.parse_args()
    threads = torch.get_num_threads()
    sc = load_scenario(args.scenario, [f'train.executor="{args.executor}"', *args.set])
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    print(f"{sc.name}: executor {args.executor}, torch threads {threads}, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, load average {os.getloadavg()[0]:.2f}")
    for name in args.algorithms.split(","):
        spec = REGISTRY[name]
        alg = spec.build(ctx, sc.learning["algorithms"].get(name) or spec.config_cls())
        sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
        times, acc = [], float("nan")
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            rec = sim.run_round()
            times.append(time.perf_counter() - t0)
            acc = rec.metrics.get("accuracy", float("nan"))
        print(f"  {name:18s} s/round median {statistics.median(times):.3f} (min {min(times):.3f}, max "
              f"{max(times):.3f}); accuracy after {args.rounds} rounds {acc:.4f}", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
