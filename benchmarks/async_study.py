"""The asynchrony study's tables and figure (docs/model/asynchrony.md, "A measured study") from its sweep folder.

    edgesim sweep scenarios/async_study.toml --grid budget.round_mode=sync,deadline,fedasync,fedbuff \\
        --grid availability.model=always,markov --seeds 3 --jobs 2 --out sweeps/async_study
    python benchmarks/async_study.py sweeps/async_study --out docs/figures

For each algorithm, churn arm and round mode: the simulated time and the devices' energy (compute + radio,
``cum_energy_j``) at the first aggregation/round whose mean device accuracy reaches each threshold, as the
mean over seeds with a 95 % Student-t interval ("k/n" when only k of the n seeds reach it), the final
accuracy at the end of the run, and the updates applied and wasted bits. The figure: mean accuracy over the
seeds against simulated time (the last evaluated accuracy at each instant), one panel per algorithm and arm.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import warnings
from collections import defaultdict
from pathlib import Path

MODES = ("sync", "deadline", "fedasync", "fedbuff")
ARMS = {"always": "no churn", "markov": "churn (on 30 s / off 15 s)"}


def t_interval(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % Student-t interval (NaN half-width for one value)."""
    from scipy import stats

    m = statistics.fmean(values)
    if len(values) < 2:
        return m, math.nan
    return m, stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def read_runs(sweep: Path) -> dict:
    """{(algorithm, arm, mode): [rows of each seed]} from the sweep's finished run folders."""
    runs: dict = defaultdict(list)
    for folder in sorted(sweep.iterdir()):
        if not folder.is_dir() or folder.name.endswith(".incomplete") or not (folder / "rounds.csv").exists():
            continue
        keys = dict(part.split("=", 1) for part in folder.name.split(","))
        with open(folder / "rounds.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for alg in sorted({r["algorithm"] for r in rows}):
            runs[(alg, keys["availability.model"], keys["budget.round_mode"])].append(
                [r for r in rows if r["algorithm"] == alg])
    return runs


def first_reaching(rows: list[dict], threshold: float, column: str):
    for r in rows:
        a = r.get("accuracy") or ""
        if a and float(a) >= threshold:
            return float(r[column])
    return None


def cell(values: list, n: int, fmt: str) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return f"— (0/{n})"
    m, h = t_interval(got)
    text = f"{m:{fmt}}" + ("" if math.isnan(h) else f" ± {h:{fmt.lstrip('+')}}")
    return text + ("" if len(got) == n else f" ({len(got)}/{n})")


def table(runs: dict, alg: str, thresholds: list[float]) -> str:
    head = ["arm", "mode", *[f"time to {t:g} (s)" for t in thresholds], *[f"energy to {t:g} (J)" for t in thresholds],
            "final accuracy", "updates", "wasted Mbit"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for arm in ARMS:
        for mode in MODES:
            seeds = runs.get((alg, arm, mode), [])
            if not seeds:
                continue
            n = len(seeds)
            times = [cell([first_reaching(s, t, "time_s") for s in seeds], n, ".1f") for t in thresholds]
            energy = [cell([first_reaching(s, t, "cum_energy_j") for s in seeds], n, ".1f") for t in thresholds]
            finals = [float(next(r["accuracy"] for r in reversed(s) if r.get("accuracy"))) for s in seeds]
            updates = [sum(int(r["n_arrived"]) for r in s) for s in seeds]
            wasted = [float(s[-1]["cum_wasted_bits"]) / 1e6 for s in seeds]
            out.append("| " + " | ".join([ARMS[arm], mode, *times, *energy, cell(finals, n, ".3f"),
                                          cell(updates, n, ".0f"), cell(wasted, n, ".1f")]) + " |")
    return "\n".join(out)


def paired(runs: dict, alg: str, threshold: float, base: str = "sync") -> str:
    """Per arm and mode: time to ``threshold`` minus the same seed's ``base`` run's (seeds share data, channels,
    initial model and availability: the difference is the mode's), mean ± 95 % t-interval over the seeds
    where both reach it."""
    out = [f"| arm | mode | Δ time to {threshold:g} vs {base} (s) | per seed (s) | Δ energy to {threshold:g} vs "
           f"{base} (J) |", "|---|---|---|---|---|"]
    for arm in ARMS:
        ref = runs.get((alg, arm, base), [])
        for mode in MODES:
            seeds = runs.get((alg, arm, mode), [])
            if mode == base or not seeds or len(seeds) != len(ref):
                continue
            cols, per_seed = [], ""
            for column in ("time_s", "cum_energy_j"):
                diffs = [None if a is None or b is None else a - b for a, b in
                         ((first_reaching(s, threshold, column), first_reaching(r, threshold, column))
                          for s, r in zip(seeds, ref))]
                cols.append(cell(diffs, len(seeds), "+.1f"))
                if column == "time_s":
                    per_seed = ", ".join("—" if d is None else f"{d:+.1f}" for d in diffs)
            out.append(f"| {ARMS[arm]} | {mode} | {cols[0]} | {per_seed} | {cols[1]} |")
    return "\n".join(out)


def staleness(runs: dict) -> str:
    """Per algorithm and asynchronous mode, over all its runs: the mean of the aggregations' mean staleness and the
    largest staleness (model versions)."""
    out = ["| algorithm | mode | mean staleness over aggregations | max staleness | aggregations |",
           "|---|---|---|---|---|"]
    for alg in sorted({k[0] for k in runs}):
        for mode in ("fedasync", "fedbuff"):
            rows = [r for arm in ARMS for s in runs.get((alg, arm, mode), []) for r in s]
            if rows:
                out.append(f"| {alg} | {mode} | {statistics.fmean(float(r['staleness_mean']) for r in rows):.2f} | "
                           f"{max(float(r['staleness_max']) for r in rows):.0f} | {len(rows)} |")
    return "\n".join(out)


def figure(runs: dict, algs: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(len(algs), len(ARMS), figsize=(10, 3.4 * len(algs)), sharex=True, sharey=True,
                             squeeze=False)
    for i, alg in enumerate(algs):
        for j, arm in enumerate(ARMS):
            ax = axes[i][j]
            for mode, style in zip(MODES, ("-", "--", "-.", ":")):
                seeds = runs.get((alg, arm, mode), [])
                if not seeds:
                    continue
                end = max(float(s[-1]["time_s"]) for s in seeds)
                grid = np.linspace(0, end, 400)
                curves = []
                for s in seeds:
                    pts = [(float(r["time_s"]), float(r["accuracy"])) for r in s if r.get("accuracy")]
                    t, a = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
                    k = np.searchsorted(t, grid, side="right") - 1
                    curves.append(np.where(k >= 0, a[np.maximum(k, 0)], np.nan))
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # before a seed's first evaluation: NaN
                    mean = np.nanmean(np.array(curves), axis=0)
                ax.plot(grid, mean, style, label=f"{mode} ({len(seeds)} seeds)")
            ax.set_title(f"{alg}, {ARMS[arm]}", fontsize=10)
            ax.grid(alpha=0.3)
            if i == len(algs) - 1:
                ax.set_xlabel("simulated time (s)")
            if j == 0:
                ax.set_ylabel("mean device accuracy")
            ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--out", type=Path, default=Path("."))
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.5, 0.9])
    ap.add_argument("--paired", type=str, nargs="*", default=["fedavg=0.9", "fixavg=0.5"],
                    help="ALG=THRESHOLD: paired differences from sync at that threshold")
    args = ap.parse_args()
    runs = read_runs(args.sweep)
    algs = sorted({k[0] for k in runs})
    for alg in algs:
        print(f"\n### {alg}\n")
        print(table(runs, alg, args.thresholds))
    for item in args.paired:
        alg, thr = item.split("=")
        if any(k[0] == alg for k in runs):
            print(f"\n### {alg}: paired differences from sync\n")
            print(paired(runs, alg, float(thr)))
    print("\n### staleness\n")
    print(staleness(runs))
    args.out.mkdir(parents=True, exist_ok=True)
    figure(runs, algs, args.out / "asynchrony_accuracy_vs_time.png")
    print(f"\nfigure: {args.out / 'asynchrony_accuracy_vs_time.png'}")


if __name__ == "__main__":
    main()
