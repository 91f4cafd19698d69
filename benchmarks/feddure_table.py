"""FedDure's tables and figures from the CPU-scale run folders (docs/studies/feddure.md).

Reads ``<runs>/<setting>_s<seed>/rounds.csv`` (settings iid_iid, iid_dir, dir_dir), the ablation folders
``<runs>/ablation_dir_dir_s<seed>`` and the slow-CPU folder ``<runs>/slowcpu_dir_dir_s0``, as
``benchmarks/feddure_runs.sh`` writes them, and prints Markdown tables:

- final accuracy per method and setting: per seed the mean test accuracy of the last ``--last`` rounds,
  then mean ± std (population) over the seeds found; a cell without runs says "not measured";
- the ablation on (DIR, DIR) (FedDure from the main runs, same seeds);
- time to accuracy (simulated seconds) at two CPU speeds, seed 0 of (DIR, DIR);
- mean F-reg weight and feedback d of FedDure per setting (diagnostics).

``--figures DIR`` also draws accuracy against round per setting and accuracy against simulated time at the
two CPU speeds with ``edgesim.plots.curves.plot_accuracy``.

    python benchmarks/feddure_table.py runs/feddure_cpu --figures docs/studies/figures
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edgesim.plots.curves import plot_accuracy
from edgesim.results.reading import read_rounds

SETTINGS = {"iid_iid": "(IID, IID)", "iid_dir": "(IID, DIR)", "dir_dir": "(DIR, DIR)"}
METHODS = {"fedavg_labeled": "FedAvg*", "fedavg_sl": "FedAvg-SL", "fedprox_sl": "FedProx-SL",
           "fedavg_uda": "FedAvg+UDA", "fedprox_uda": "FedProx+UDA", "fixavg": "FedAvg+FixMatch",
           "fixprox": "FedProx+FixMatch", "fedmatch_lc": "FedMatch (labels at client)", "feddure": "FedDure"}
PAPER = {  # Table 1, Fashion-MNIST columns (Bai et al., AAAI 2024)
    "fedavg_labeled": ("85.56 ± 0.09", "84.84 ± 0.09", "82.24 ± 0.07"),
    "fedavg_sl": ("89.87 ± 0.23", "88.60 ± 0.25", "86.95 ± 1.12"),
    "fedprox_sl": ("89.53 ± 0.23", "88.35 ± 0.02", "87.32 ± 0.84"),
    "fedavg_uda": ("86.20 ± 0.75", "85.35 ± 0.62", "81.07 ± 0.56"),
    "fedprox_uda": ("84.78 ± 0.43", "84.50 ± 0.34", "82.94 ± 0.39"),
    "fixavg": ("86.46 ± 0.39", "85.42 ± 0.19", "81.07 ± 0.56"),
    "fixprox": ("86.31 ± 0.28", "85.18 ± 0.79", "83.68 ± 0.78"),
    "fedmatch_lc": ("85.71 ± 0.21", "85.55 ± 0.09", "85.13 ± 0.15"),
    "feddure": ("88.69 ± 0.16", "88.21 ± 0.07", "86.96 ± 0.12"),
}
PAPER_ABLATION = {"fixavg": "81.07 ± 0.56", "feddure_no_creg": "86.18 ± 0.13", "feddure_no_freg": "86.49 ± 0.07",
                  "feddure": "86.96 ± 0.12"}


def final(cols: dict, last: int) -> float:
    acc = cols["accuracy"][~np.isnan(cols["accuracy"])]
    return float(np.mean(acc[-last:]))


def cell(values: list[float]) -> str:
    if not values:
        return "not measured"
    return f"{100 * np.mean(values):.2f} ± {100 * np.std(values):.2f} (n={len(values)})"


def gather(runs: Path, prefix: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for d in sorted(runs.glob(f"{prefix}_s*")):
        if (d / "rounds.csv").is_file():
            for alg, cols in read_rounds(d).items():
                out.setdefault(alg, []).append(cols)
    return out


def tta(cols: dict, threshold: float) -> str:
    hit = np.flatnonzero(cols["accuracy"] >= threshold)
    return f"{cols['time_s'][hit[0]]:.1f}" if hit.size else "not reached"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("--last", type=int, default=3)
    ap.add_argument("--figures", type=Path)
    args = ap.parse_args()
    data = {s: gather(args.runs, s) for s in SETTINGS}

    print(f"### Final accuracy (%), mean of the last {args.last} rounds, mean ± std over seeds\n")
    print("| method | " + " | ".join(f"ours {v} | paper {v}" for v in SETTINGS.values()) + " |")
    print("|---|" + "---|---|" * len(SETTINGS))
    for alg, label in METHODS.items():
        row = []
        for i, s in enumerate(SETTINGS):
            row += [cell([final(c, args.last) for c in data[s].get(alg, [])]), PAPER[alg][i]]
        print(f"| {label} | " + " | ".join(row) + " |")

    abl = gather(args.runs, "ablation_dir_dir")
    print(f"\n### Ablation, (DIR, DIR) (%), mean of the last {args.last} rounds\n")
    print("| variant | ours | paper (Table 2, F-MNIST) |\n|---|---|---|")
    for alg, label in (("fixavg", "Baseline (FedAvg+FixMatch)"), ("feddure_no_creg", "w/o C-reg"),
                       ("feddure_no_freg", "w/o F-reg"), ("feddure", "FedDure")):
        src = abl if alg.startswith("feddure_") else data["dir_dir"]
        print(f"| {label} | {cell([final(c, args.last) for c in src.get(alg, [])])} | {PAPER_ABLATION[alg]} |")

    print("\n### FedDure's regulators (mean over rounds and seeds)\n")
    print("| setting | mean F-reg weight m | mean feedback d |\n|---|---|---|")
    for s, label in SETTINGS.items():
        runs = data[s].get("feddure", [])
        if runs and "weight_mean" in runs[0]:
            w = np.nanmean([np.nanmean(c["weight_mean"]) for c in runs])
            d = np.nanmean([np.nanmean(c["feedback"]) for c in runs])
            print(f"| {label} | {w:.3f} | {d:+.3f} |")
        else:
            print(f"| {label} | not measured | not measured |")

    print(f"\n### FedDure's open options, (DIR, DIR), seed 0 (%), mean of the last {args.last} rounds\n")
    print("| FedDure with | final accuracy | mean F-reg weight m | mean feedback d |\n|---|---|---|---|")
    variants = [("the defaults (paper: +d, mean, η_w = 2e-3)", args.runs / "dir_dir_s0"),
                ("η_w = 2e-2 (F-reg 10× faster)", args.runs / "diag_freg_lr_dir_dir_s0"),
                ("Σm normalisation (the code's)", args.runs / "diag_sum_dir_dir_s0"),
                ("−d (the code's sign)", args.runs / "diag_code_sign_dir_dir_s0")]
    for label, d in variants:
        if (d / "rounds.csv").is_file():
            c = read_rounds(d)["feddure"]
            print(f"| {label} | {100 * final(c, args.last):.2f} | {np.nanmean(c['weight_mean']):.3f} | "
                  f"{np.nanmean(c['feedback']):+.3f} |")
        else:
            print(f"| {label} | not measured | not measured | not measured |")

    fast = {a: c[0] for a, c in data["dir_dir"].items() if c} if data["dir_dir"] else {}
    slow_dir = args.runs / "slowcpu_dir_dir_s0"
    slow = read_rounds(slow_dir) if (slow_dir / "rounds.csv").is_file() else {}
    fast0 = {}
    if (args.runs / "dir_dir_s0" / "rounds.csv").is_file():
        fast0 = read_rounds(args.runs / "dir_dir_s0")
    print("\n### Time to accuracy (simulated s), (DIR, DIR), seed 0\n")
    thresholds = (0.4, 0.5, 0.6)
    print("| method | " + " | ".join(f"{int(100 * t)} % at 1 GHz | {int(100 * t)} % at 0.1 GHz" for t in thresholds)
          + " | s/round at 1 GHz | s/round at 0.1 GHz |")
    print("|---|" + "---|---|" * len(thresholds) + "---|---|")
    for alg, label in METHODS.items():
        if alg not in fast0:
            continue
        f, sl = fast0[alg], slow.get(alg)
        row = []
        for t in thresholds:
            row += [tta(f, t), tta(sl, t) if sl is not None else "not measured"]
        per_f = f"{f['time_s'][-1] / len(f['time_s']):.2f}"
        per_s = f"{sl['time_s'][-1] / len(sl['time_s']):.2f}" if sl is not None else "not measured"
        print(f"| {label} | " + " | ".join(row) + f" | {per_f} | {per_s} |")
    long_dir = args.runs / "long_iid_iid_s0"
    if (long_dir / "rounds.csv").is_file():
        print("\n### A longer horizon, (IID, IID), seed 0 (%), mean of 3 rounds ending at round 20 / 40 / 60\n")
        print("| method | round 20 | round 40 | round 60 |\n|---|---|---|---|")
        for alg, c in read_rounds(long_dir).items():
            acc = c["accuracy"]
            cells = [f"{100 * np.mean(acc[r - 3:r]):.2f}" if len(acc) >= r else "not measured" for r in (20, 40, 60)]
            label = METHODS.get(alg, {"feddure_no_freg": "FedDure w/o F-reg"}.get(alg, alg))
            print(f"| {label} | " + " | ".join(cells) + " |")
    if slow and fast0:
        same = all(np.allclose(slow[a]["accuracy"], fast0[a]["accuracy"], equal_nan=True) for a in slow if a in fast0)
        print(f"\n(accuracy per round identical at both CPU speeds: {same})")
    del fast

    if args.figures:
        args.figures.mkdir(parents=True, exist_ok=True)
        for s, label in SETTINGS.items():
            dirs = [d for d in sorted(args.runs.glob(f"{s}_s*")) if (d / "rounds.csv").is_file()]
            if dirs:
                print(plot_accuracy(dirs, args.figures / f"feddure_{s}_rounds.png", x="round",
                                    title=f"Fashion-MNIST {label}, CPU scale, {len(dirs)} seeds"))
        dirs = [d for d in sorted(args.runs.glob("ablation_dir_dir_s*")) if (d / "rounds.csv").is_file()]
        if dirs:
            print(plot_accuracy(dirs, args.figures / "feddure_ablation_rounds.png", x="round",
                                title="Fashion-MNIST (DIR, DIR): FedDure without a regulator"))
        long_dir = args.runs / "long_iid_iid_s0"
        if (long_dir / "rounds.csv").is_file():
            print(plot_accuracy([long_dir], args.figures / "feddure_long_iid_iid.png", x="round",
                                title="(IID, IID), seed 0, 60 rounds"))
        for d, speed in ((args.runs / "dir_dir_s0", "1 GHz"), (slow_dir, "0.1 GHz")):
            if (d / "rounds.csv").is_file():
                print(plot_accuracy([d], args.figures / f"feddure_time_{speed.replace(' ', '').replace('.', 'p')}.png",
                                    x="time_s", title=f"(DIR, DIR), seed 0, device CPUs at {speed}"))


if __name__ == "__main__":
    main()
