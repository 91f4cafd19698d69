"""Tables and a figure of the compression study (docs/compression.md, "The study") from its run folders.

Each run folder is named ``SETTING_bwBANDWIDTH_sSEED`` (e.g. ``qsgd8_bw1e5_s0``) and holds one algorithm's
run of the arena's labels-at-clients scenario (``benchmarks/compression_study.sh`` makes them). Prints one
markdown table per bandwidth: per setting the bits of one upload, the rounds that fit in the 600 s, the
accuracy at the budget, the mean of the last five rounds and of the five rounds that every run of the bandwidth
completed (rounds are 1-based), the mean paired difference of accuracy to the 32-bit run of the same seed
over those rounds (the same devices train in the same rounds on the same batches), the best accuracy,
the time to 70 % and 75 %
(mean over seeds, with a 95 % t-interval when there are several) and the mean compression error; and draws
accuracy against cumulative uplink bits and against simulated time for ``--figure-bandwidth``.

    python benchmarks/compression_study.py /tmp/compression_study/runs --figure docs/figures/compression_0.1MHz.png
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path

ORDER = ["none", "fp16", "qsgd8", "qsgd4", "qsgd2", "top10", "top10ef", "top1", "top1ef"]
LABEL = {"none": "32-bit", "fp16": "fp16", "qsgd8": "QSGD 8-bit", "qsgd4": "QSGD 4-bit", "qsgd2": "QSGD 2-bit",
         "top10": "top-10 %", "top10ef": "top-10 % + EF", "top1": "top-1 %", "top1ef": "top-1 % + EF"}
NAME = re.compile(r"^(?P<setting>\w+?)_bw(?P<bw>[0-9.e+]+)_s(?P<seed>\d+)$")


def t95(n: int) -> float:
    return {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776}.get(n, 1.96)


def mean_ci(values: list[float]) -> str:
    v = [x for x in values if x is not None and not math.isnan(x)]
    if not v:
        return "—"
    m = statistics.mean(v)
    if len(v) < 2:
        return f"{m:.3g}" + ("" if len(v) == len(values) else f" ({len(v)}/{len(values)})")
    h = t95(len(v)) * statistics.stdev(v) / math.sqrt(len(v))
    return f"{m:.3g} ± {h:.2g}" + ("" if len(v) == len(values) else f" ({len(v)}/{len(values)})")


def paired(run: dict, base: dict | None, rounds: int) -> float:
    """Mean over rounds 1..``rounds`` of this run's accuracy minus the 32-bit run's of the same seed (NaN without)."""
    if base is None:
        return float("nan")
    return statistics.mean(a - b for a, b in zip(run["acc"][:rounds], base["acc"][:rounds]))


def read(folder: Path) -> dict:
    rows = list(csv.DictReader(open(folder / "rounds.csv")))
    summary = json.loads((folder / "summary.json").read_text())
    (alg,) = summary["algorithms"].values()
    accs = [float(r["accuracy"]) for r in rows]
    k = float(rows[0]["n_selected"])
    errs = [float(r["compression_error"]) for r in rows if r.get("compression_error")]
    return {
        "bits_per_upload": float(rows[0]["bits_up"]) / k, "rounds": len(rows),
        "acc_budget": alg["accuracy_at_budget"], "acc_last5": statistics.mean(accs[-5:]), "best": alg["best_accuracy"],
        "tta70": alg["time_to_accuracy_within_budget_s"].get("0.7"),
        "tta75": alg["time_to_accuracy_within_budget_s"].get("0.75"),
        "error": statistics.mean(errs) if errs else 0.0,
        "time": [float(r["time_s"]) for r in rows], "cum_bits": [float(r["cum_bits_up"]) for r in rows], "acc": accs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("--figure", type=Path)
    ap.add_argument("--figure-bandwidth", default="1e5")
    args = ap.parse_args()
    runs = defaultdict(lambda: defaultdict(list))
    for folder in sorted(args.runs.iterdir()):
        m = NAME.match(folder.name)
        if m and (folder / "summary.json").exists():
            runs[m["bw"]][m["setting"]].append((int(m["seed"]), read(folder)))
    for bw in sorted(runs, key=float):
        common = min(r["rounds"] for s in runs[bw] for _, r in runs[bw][s])  # rounds every run of bw completed
        print(f"\n### {float(bw) / 1e6:g} MHz\n")
        print(f"| uplink | bits per upload | rounds in 600 s | accuracy at 600 s | mean of last 5 rounds | "
              f"mean of rounds {common - 4}–{common} | paired Δ to 32-bit, rounds 1–{common} | best | "
              f"time to 70 % (s) | time to 75 % (s) | compression error | seeds |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        base = {seed: r for seed, r in runs[bw].get("none", [])}
        for s in [s for s in ORDER if s in runs[bw]]:
            ordered = sorted(runs[bw][s], key=lambda x: x[0])
            rs = [r for _, r in ordered]
            seeds = ",".join(str(seed) for seed, _ in sorted(runs[bw][s], key=lambda x: x[0]))
            nan = float("nan")
            print(f"| {LABEL[s]} | {rs[0]['bits_per_upload']:.4g} | {mean_ci([r['rounds'] for r in rs])} | "
                  f"{mean_ci([r['acc_budget'] for r in rs])} | {mean_ci([r['acc_last5'] for r in rs])} | "
                  f"{mean_ci([statistics.mean(r['acc'][common - 5:common]) for r in rs])} | "
                  f"{mean_ci([paired(r, base.get(seed), common) for seed, r in ordered])} | "
                  f"{mean_ci([r['best'] for r in rs])} | "
                  f"{mean_ci([r['tta70'] if r['tta70'] is not None else nan for r in rs])} | "
                  f"{mean_ci([r['tta75'] if r['tta75'] is not None else nan for r in rs])} | "
                  f"{mean_ci([r['error'] for r in rs])} | {seeds} |")
    if args.figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
        data = runs[args.figure_bandwidth]
        for s in [s for s in ORDER if s in data]:
            seed, r = sorted(data[s], key=lambda x: x[0])[0]
            style = "--" if s.startswith("top") and not s.endswith("ef") else "-"
            a.plot([x / 1e6 for x in r["cum_bits"]], r["acc"], style, label=LABEL[s])
            b.plot(r["time"], r["acc"], style, label=LABEL[s])
        a.set_xscale("log")
        a.set_xlabel("cumulative uplink bits (Mbit)")
        b.set_xlabel("simulated time (s)")
        for ax in (a, b):
            ax.set_ylabel("mean test accuracy")
            ax.grid(alpha=0.3)
        b.legend(fontsize=8)
        fig.suptitle(f"FedAvg* on the arena's cell at {float(args.figure_bandwidth) / 1e6:g} MHz, seed "
                     f"{sorted(data[next(iter(data))], key=lambda x: x[0])[0][0]}: uplink compression")
        fig.tight_layout()
        args.figure.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(args.figure, dpi=120)


if __name__ == "__main__":
    main()
