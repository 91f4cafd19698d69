"""F-reg steps per device per run (docs/studies/feddure.md, "How often F-reg steps"): counted, not estimated.

    python benchmarks/feddure_freg_steps.py

A device's F-reg takes one step per local step of FedDure, only in the rounds it is sampled in. Its local
steps in a round: T epochs of max(⌈n_lab/B⌉, ⌈n_unl/μB⌉) (the executor's sampling; B = 10, μ = 7). For each
scale and split, the devices actually sampled in the rounds FedDure trains (seed 0, the run's
``(seed, "sample", round)`` stream) give each device's F-reg steps; printed: mean, median, min and max over
the 100 devices, and the share of devices with none.
"""

from __future__ import annotations

import math
import statistics

from edgesim.learning.algorithms.common import sample_clients
from edgesim.learning.context import build_context
from edgesim.scenarios.schema import load_scenario

CASES = [  # (label, scenario, overrides, first FedDure round, rounds)
    ("CPU, 20 rounds", "scenarios/feddure_fmnist_cpu.toml", [], 0, 20),
    ("CPU, warm start 20 + 40 rounds", "scenarios/feddure_fmnist_warm.toml", [], 20, 60),
    ("paper, 200 rounds", "scenarios/feddure_fmnist_cpu.toml", ["data.train_pool_size=60000", "budget.rounds=200"], 0, 200),
]
SPLITS = ("feddure_iid_iid", "feddure_iid_dir", "feddure_dir_dir")


def main() -> None:
    print("| scale | split | F-reg steps per device per run: mean | median | min | max | devices with none | steps per participation (mean) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, path, overrides, first, rounds in CASES:
        for split in SPLITS:
            sc = load_scenario(path, [*overrides, f'data.partition="{split}"'])
            ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                                sc.system.n_devices)
            per_round = [sc.workload.local_iterations * max(math.ceil(c.x_lab.shape[0] / 10), math.ceil(c.x_unl.shape[0] / 70))
                         for c in ctx.clients]
            steps = [0] * ctx.n_devices
            for r in range(first, rounds):
                for d in sample_clients(ctx, r, sc.learning["run"].clients_per_round):
                    steps[d] += per_round[d]
            print(f"| {label} | {split} | {statistics.mean(steps):.1f} | {statistics.median(steps):.0f} | {min(steps)} | "
                  f"{max(steps)} | {sum(s == 0 for s in steps)} | {statistics.mean(per_round):.1f} |")


if __name__ == "__main__":
    main()
