"""DoFed-SPP's Table 1 from our run folders: mean ± std over seeds of final classification / labelling accuracy.

    python benchmarks/dofed_table.py runs/dofed/subset_s0 runs/dofed/subset_s1 runs/dofed/subset_s2

For each algorithm and run: the final accuracy by the runner's rule
(``summary.json``: the first round where the paper's plateau rule holds,
else the last round), the labelling accuracy of that same round, the last
round's two accuracies, and the simulated time to the thresholds of the
scenario. Prints a Markdown table (mean ± population std over the runs given).
"""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ORDER = ["dofed_spp", "fedfomo", "fedbe", "fedavg", "local"]


def collect(run_dirs):
    out = defaultdict(lambda: defaultdict(list))
    thresholds = None
    for d in map(Path, run_dirs):
        summary = json.loads((d / "summary.json").read_text())
        rows = list(csv.DictReader(open(d / "rounds.csv")))
        for alg, s in summary["algorithms"].items():
            mine = [r for r in rows if r["algorithm"] == alg]
            i = s["final_round"]
            o = out[alg]
            o["final"].append(s["final_accuracy"])
            o["final_lab"].append(float(mine[i]["labeling_accuracy"]))
            o["final_round"].append(i)
            o["last"].append(float(mine[-1]["accuracy"]))
            o["last_lab"].append(float(mine[-1]["labeling_accuracy"]))
            o["last_time"].append(float(mine[-1]["time_s"]))
            o["rounds"].append(len(mine))
            for extra in ("federated_accuracy", "federated_labeling_accuracy"):
                if extra in mine[-1] and mine[-1][extra] not in ("", None):
                    o[f"last_{extra}"].append(float(mine[-1][extra]))
            thresholds = list(s["time_to_accuracy_s"])
            for t, v in s["time_to_accuracy_s"].items():
                o[f"tta_{t}"].append(v)
    return out, thresholds or []


def ms(values) -> str:
    a = np.asarray(values, dtype=float)
    return f"{a.mean():.2f} ± {a.std():.2f}"


def tta(values) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return "never"
    text = f"{np.mean(got):.0f}"
    return text if len(got) == len(values) else f"{text} ({len(got)}/{len(values)})"


def main(argv=None) -> None:
    runs = (argv if argv is not None else sys.argv[1:])
    if not runs:
        raise SystemExit(__doc__)
    data, thresholds = collect(runs)
    print(f"{len(runs)} runs: {', '.join(Path(r).name for r in runs)}")
    print()
    print("| algorithm | final class. / labelling (rule) | round | last round class. / labelling | rounds | "
          + " | ".join(f"time to {t} (s)" for t in thresholds) + " |")
    print("|---" * (5 + len(thresholds)) + "|")
    for alg in [a for a in ORDER if a in data] + sorted(set(data) - set(ORDER)):
        o = data[alg]
        print(f"| {alg} | {ms(o['final'])} / {ms(o['final_lab'])} | {np.mean(o['final_round']):.1f} | "
              f"{ms(o['last'])} / {ms(o['last_lab'])} | {np.mean(o['rounds']):.0f} | "
              + " | ".join(tta(o[f'tta_{t}']) for t in thresholds) + " |")
    for alg, o in data.items():
        if o.get("last_federated_accuracy"):
            print(f"\n{alg}, models right after the federated update (last round): "
                  f"{ms(o['last_federated_accuracy'])} / {ms(o['last_federated_labeling_accuracy'])}")


if __name__ == "__main__":
    main()
