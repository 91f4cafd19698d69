"""Host seconds of a scenario's first rounds per method, in several numerics, interleaved in one process.

For each method of the scenario (``run.algorithms``, or ``--methods``), each variant
(``MEMORY_FORMAT/PRECISION``, e.g. ``contiguous/float32`` = the code before channels-last) builds the
method's backend on that variant's context (built once per variant, so data loading is not timed) and
runs ``--rounds`` rounds of its own clock exactly as ``edgesim run`` does (``Simulation.run_round``:
local training, aggregation, evaluation, the method's server phase); the host time of each round is
recorded. Variants alternate per method, the first variant shifting every repetition, so a busy host
slows them alike. Output: a Markdown table of the per-round medians and each variant's ratio to the
first, and the sum over methods, which — times the rounds a full run takes — extrapolates a full run.

    EDGESIM_DATA=../shared/data .venv/bin/python benchmarks/numerics_round.py scenarios/arena_labels_at_clients.toml \\
        --variants contiguous/float32 channels_last/float32 channels_last/bfloat16 --rounds 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from edgesim.engine import Simulation
from edgesim.scenarios.algorithm_run import make_backends as _make_backends
from edgesim.scenarios.schema import load_scenario


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--set", action="append", default=[], help="scenario override, as edgesim run --set")
    ap.add_argument("--variants", nargs="+", default=["contiguous/float32", "channels_last/float32",
                                                      "channels_last/bfloat16"])
    ap.add_argument("--methods", nargs="*", help="default: the scenario's run.algorithms")
    ap.add_argument("--rounds", type=int, default=1, help="rounds timed per method and variant (from round 0)")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    built = {}
    for v in a.variants:
        fmt, prec = v.split("/")
        sc = load_scenario(a.scenario, a.set + [f'train.memory_format="{fmt}"', f'train.precision="{prec}"'])
        built[v] = (sc, _make_backends(sc)[0])
    methods = a.methods or list(built[a.variants[0]][0].learning["run"].algorithms)
    times = {(m, v): [] for m in methods for v in a.variants}
    for m in methods:
        for r in range(a.reps):
            for j in range(len(a.variants)):
                v = a.variants[(j + r) % len(a.variants)]
                sc, build = built[v]
                sim = Simulation(sc.system, sc.budget, build(m), seed=sc.seed)
                for _ in range(a.rounds):
                    t0 = time.perf_counter()
                    sim.run_round()
                    times[(m, v)].append(time.perf_counter() - t0)
            print(m, {v: round(statistics.median(times[(m, v)]), 2) for v in a.variants}, flush=True)
    base = a.variants[0]
    head = " | ".join(f"{v} s" + ("" if v == base else f" (÷ {base})") for v in a.variants)
    lines = [f"| method | {head} |", "|---" * (len(a.variants) + 1) + "|"]
    total = {v: 0.0 for v in a.variants}
    for m in methods:
        med = {v: statistics.median(times[(m, v)]) for v in a.variants}
        for v in a.variants:
            total[v] += med[v]
        lines.append(f"| {m} | " + " | ".join(f"{med[v]:.2f}" + ("" if v == base else f" ({med[v] / med[base]:.2f})")
                                            for v in a.variants) + " |")
    ratio = {v: "" if v == base else f" (**{total[v] / total[base]:.2f}**)" for v in a.variants}
    lines.append("| **sum** | " + " | ".join(f"**{total[v]:.1f}**" + ratio[v]
                                           for v in a.variants) + " |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
