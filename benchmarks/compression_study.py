"""Tables and a figure of the compression study (docs/model/compression.md, "The study") from its sweep folder.

Reads the run folders of ``benchmarks/compression_study.sh`` (``edgesim sweep`` over ``system.bandwidth_hz`` ×
``compression.uplink`` × 3 seeds, each folder both FedAvg and FixAvg) and, with ``--retimed``, the folders of
``benchmarks/compression_retime.py`` (the same learning on another bandwidth's clock; a real run folder of that
bandwidth is preferred where one exists, and its accuracies are checked against the replay's). Prints one
markdown table per algorithm and bandwidth: per uplink setting the bits of one upload, the accuracy in the last
round and the mean of the last five, the paired difference of that mean to the 32-bit run of the same seed, the
time and the uplink bits to the target accuracy, and the paired speed-up (32-bit time / this time, per seed);
every cell the mean over seeds ± the half-width of the 95 % Student-t interval ("k/n": only k seeds reach it).

    python benchmarks/compression_study.py SWEEP --retimed RETIMED --figure docs/figures/compression_study.png
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
from collections import defaultdict
from pathlib import Path

from edgesim.results.stats import mean_interval

ORDER = ["none", "fp16", "qsgd8", "qsgd4", "qsgd2", "top10", "top10ef", "top1", "top1ef"]
LABEL = {"none": "32-bit", "fp16": "fp16", "qsgd8": "QSGD 8-bit", "qsgd4": "QSGD 4-bit", "qsgd2": "QSGD 2-bit",
         "top10": "top-10 %", "top10ef": "top-10 % + EF", "top1": "top-1 %", "top1ef": "top-1 % + EF"}
NAME = re.compile(r"^system\.bandwidth_hz=(?P<bw>[^,]+),compression\.uplink=(?P<up>.+),seed=(?P<seed>\d+)$")
TARGET = {"fedavg": 0.8, "fixavg": 0.4}
LAST = 5


def setting(text: str) -> str:
    """The folder name's uplink text (``_method=topk,fraction=0.01,error_feedback=true_``) → ``top1ef``."""
    if text in ("none", "fp16"):
        return text
    kv = dict(p.split("=") for p in text.strip("_").split(","))
    if kv["method"] == "qsgd":
        return f"qsgd{kv['bits']}"
    return f"top{round(float(kv['fraction']) * 100)}" + ("ef" if kv.get("error_feedback") == "true" else "")


def cell(values: list, digits: int = 3) -> str:
    """Mean ± the 95 % Student-t half-width (the report's interval), with (finite/all) when some are missing."""
    return mean_interval(values).text(digits)


def read(folder: Path) -> dict[str, dict]:
    rows = list(csv.DictReader(open(folder / "rounds.csv")))
    out = {}
    for name in dict.fromkeys(r["algorithm"] for r in rows):
        mine = [r for r in rows if r["algorithm"] == name]
        errs = [float(r["compression_error"]) for r in mine if r.get("compression_error")]
        out[name] = {"acc": [float(r["accuracy"]) for r in mine], "time": [float(r["time_s"]) for r in mine],
                     "cum_bits": [float(r["cum_bits_up"]) for r in mine],
                     "bits": float(mine[0]["bits_up"]), "error": statistics.mean(errs) if errs else None}
    return out


def reach(run: dict, target: float) -> tuple[float | None, float | None]:
    """(simulated time, cumulative uplink bits) at the end of the first round whose accuracy is ≥ ``target``."""
    i = next((i for i, a in enumerate(run["acc"]) if a >= target), None)
    return (None, None) if i is None else (run["time"][i], run["cum_bits"][i])


def collect(sweep: Path, retimed: Path | None) -> tuple[dict, list[str]]:
    """runs[bw][setting][seed] = {algorithm: run}; and the notes of real-vs-replay checks."""
    runs: dict = defaultdict(lambda: defaultdict(dict))
    notes = []
    for folder in sorted(sweep.iterdir()):
        m = NAME.match(folder.name)
        if m and (folder / "rounds.csv").exists() and (folder / "summary.json").exists():
            runs[float(m["bw"])][setting(m["up"])][int(m["seed"])] = read(folder)
    for folder in sorted(retimed.iterdir()) if retimed else []:
        m = NAME.match(folder.name)
        if not m:
            continue
        bw, s, seed = float(m["bw"]), setting(m["up"]), int(m["seed"])
        replay = read(folder)
        real = runs[bw][s].get(seed)
        if real is None:
            runs[bw][s][seed] = replay
            continue
        same = all(real[a]["acc"] == replay[a]["acc"] and all(
            abs(x - y) <= 1e-9 * x for x, y in zip(real[a]["time"], replay[a]["time"])) for a in real)
        notes.append(f"{folder.name}: the real run and the replay {'agree' if same else 'DIFFER'}")
    return runs, notes


def table(runs: dict, bw: float, name: str) -> list[str]:
    target = TARGET[name]
    base = {seed: r[name] for seed, r in runs[bw].get("none", {}).items()}
    n = min(len(r[name]["acc"]) for s in runs[bw].values() for r in s.values())
    lines = [f"| uplink | bits per upload | accuracy, round {n} | mean of rounds {n - LAST + 1}–{n} | "
             f"paired Δ to 32-bit | time to {target:.0%} (s) | paired speed-up | uplink Mbit to {target:.0%} | "
             f"compression error | seeds |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for s in [s for s in ORDER if s in runs[bw]]:
        seeds = sorted(runs[bw][s])
        rs = [runs[bw][s][seed][name] for seed in seeds]
        last = [statistics.mean(r["acc"][n - LAST:n]) for r in rs]
        delta = [statistics.mean(r["acc"][n - LAST:n]) - statistics.mean(base[seed]["acc"][n - LAST:n])
                 if seed in base else float("nan") for seed, r in zip(seeds, rs)]
        reached = [reach(r, target) for r in rs]
        speed = []
        for seed, (t, _) in zip(seeds, reached):
            t0 = reach(base[seed], target)[0] if seed in base else None
            speed.append(t0 / t if t and t0 else float("nan"))
        nan = float("nan")
        lines.append(
            f"| {LABEL[s]} | {rs[0]['bits'] / 5:.4g} | {cell([r['acc'][n - 1] for r in rs])} | {cell(last)} | "
            f"{cell(delta, 2)} | {cell([t if t is not None else nan for t, _ in reached])} | {cell(speed)} | "
            f"{cell([b / 1e6 if b is not None else nan for _, b in reached])} | "
            f"{cell([r['error'] if r['error'] is not None else 0.0 for r in rs], 2)} | {','.join(map(str, seeds))} |")
    return lines


def figure(runs: dict, bw: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for row, name in zip(axes, ("fedavg", "fixavg")):
        for s in [s for s in ORDER if s in runs[bw]]:
            rs = [r[name] for r in runs[bw][s].values()]
            n = min(len(r["acc"]) for r in rs)
            acc = [statistics.mean(r["acc"][i] for r in rs) for i in range(n)]
            style = "--" if s.startswith("top") and not s.endswith("ef") else "-"
            bits = [statistics.mean(r["cum_bits"][i] for r in rs) / 1e6 for i in range(n)]
            row[0].plot(bits, acc, style, label=LABEL[s])
            row[1].plot([statistics.mean(r["time"][i] for r in rs) for i in range(n)], acc, style, label=LABEL[s])
        row[0].set_xscale("log")
        row[0].set_xlabel("cumulative uplink bits (Mbit)")
        row[1].set_xlabel("simulated time (s)")
        for ax in row:
            ax.set_ylabel(f"{'FedAvg' if name == 'fedavg' else 'FixAvg'}: mean test accuracy")
            ax.grid(alpha=0.3)
    axes[0][1].legend(fontsize=8)
    fig.suptitle(f"Uplink compression at {bw / 1e6:g} MHz (digits, arena cell): mean over seeds, per round")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--retimed", type=Path)
    ap.add_argument("--figure", type=Path)
    ap.add_argument("--figure-bandwidth", type=float, default=1e5)
    args = ap.parse_args()
    runs, notes = collect(args.sweep, args.retimed)
    for note in notes:
        print(note)
    for name in ("fedavg", "fixavg"):
        for bw in sorted(runs):
            print(f"\n#### {'FedAvg' if name == 'fedavg' else 'FixAvg'}, {bw / 1e6:g} MHz\n")
            print("\n".join(table(runs, bw, name)))
    if args.figure:
        figure(runs, args.figure_bandwidth, args.figure)


if __name__ == "__main__":
    main()
