"""The warm-start table of docs/studies/feddure.md: last-10-round mean accuracy per algorithm over run folders (seeds).

    python benchmarks/feddure_warm_table.py runs/warm_s0 runs/warm_s1 runs/warm_s2 [--last 10] [--versus fixavg]

Per algorithm: the mean over seeds of each run's mean test accuracy over its last ``--last`` rounds, the
95 % t-interval over seeds (n ≥ 2), the per-seed values, and the paired difference to ``--versus`` (the same
seeds; mean and 95 % t-interval). Also the accuracy at the warm start's end (the same for every algorithm).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from pathlib import Path

T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}  # two-sided 95 % t quantiles by degrees of freedom


def interval(values: list[float]) -> str:
    m = statistics.mean(values)
    if len(values) < 2:
        return f"{100 * m:.2f}"
    half = T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))
    return f"{100 * m:.2f} ± {100 * half:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--last", type=int, default=10)
    ap.add_argument("--versus", default="fixavg")
    args = ap.parse_args()
    per_alg: dict[str, list[float]] = {}
    warm_end = []
    for run in args.runs:
        rows = list(csv.DictReader(open(run / "rounds.csv")))
        algs = list(dict.fromkeys(r["algorithm"] for r in rows))
        for alg in algs:
            own = [r for r in rows if r["algorithm"] == alg]
            accs = [float(r["accuracy"]) for r in own[-args.last:]]
            per_alg.setdefault(alg, []).append(sum(accs) / len(accs))
        warm = [r for r in rows if r["algorithm"] == algs[0] and r.get("warm_start") == "1.0"]
        if warm:
            warm_end.append(float(warm[-1]["accuracy"]))
    n = len(args.runs)
    print(f"runs: {', '.join(str(r) for r in args.runs)}; last {args.last} rounds' mean test accuracy (%)")
    if warm_end:
        print(f"accuracy at the warm start's end: {interval(warm_end)} "
              f"(per seed: {', '.join(f'{100 * v:.2f}' for v in warm_end)})")
    print(f"| algorithm | mean ± 95 % interval (n={n}) | per seed | paired difference to {args.versus} |")
    print("| --- | --- | --- | --- |")
    for alg, vals in per_alg.items():
        ref = per_alg.get(args.versus)
        diff = interval([a - b for a, b in zip(vals, ref)]) if ref and alg != args.versus else "–"
        print(f"| {alg} | {interval(vals)} | {', '.join(f'{100 * v:.2f}' for v in vals)} | {diff} |")


if __name__ == "__main__":
    main()
