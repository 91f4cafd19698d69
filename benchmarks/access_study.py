"""The access-scheme study of docs/model/access_schemes.md (small): FedAvg on the bundled digits on the arena's
cell with a 4.5 MHz band, under FDMA, OFDMA (25 blocks of 180 kHz), NOMA (clusters of 2) and AirComp at three
transmit powers (64 sub-channels), 3 seeds each; then its table and energy-versus-time figure.

    python benchmarks/access_study.py --out sweeps/access_study            # runs what is missing, then reports
    python benchmarks/access_study.py --out sweeps/access_study --report   # the table and figure only

Per arm: time and device energy (compute + radio, ``cum_energy_j``) at the first round whose mean device accuracy
reaches each threshold (mean over seeds ± the 95 % Student-t half-width; "k/n" when only k seeds reach it), the
final accuracy (the last round's), the mean round duration, and each arm's time to the last threshold minus
FDMA's, paired by seed.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCENARIO = Path(__file__).resolve().parent / "access_study.toml"
ARMS = {
    "fdma": ["system.access=fdma"],
    "ofdma": ["system.access=ofdma", "access.resource_blocks=25", "access.rb_bandwidth_hz=180e3"],
    "noma": ["system.access=noma", "access.cluster_size=2"],
    "aircomp_23dbm": ["system.access=aircomp", "access.subcarriers=64", "system.tx_power_dbm=23"],
    "aircomp_10dbm": ["system.access=aircomp", "access.subcarriers=64", "system.tx_power_dbm=10"],
    "aircomp_0dbm": ["system.access=aircomp", "access.subcarriers=64", "system.tx_power_dbm=0"],
}
SEEDS = (0, 1, 2)
THRESHOLDS = (0.6, 0.8)


def run_all(out: Path) -> None:
    for arm, sets in ARMS.items():
        for seed in SEEDS:
            folder = out / f"{arm},seed={seed}"
            if (folder / "rounds.csv").exists():
                continue
            args = [sys.executable, "-m", "edgesim.scenarios.cli", "run", str(SCENARIO), "--out", str(folder), "-q",
                    "--set", f"seed={seed}"]
            for s in sets:
                args += ["--set", s]
            start = time.perf_counter()
            subprocess.run(args, check=True)
            print(f"{arm} seed {seed}: {time.perf_counter() - start:.1f} s host time", flush=True)


def rows_of(folder: Path) -> list[dict]:
    with open(folder / "rounds.csv", newline="") as f:
        return list(csv.DictReader(f))


def first(rows: list[dict], threshold: float, column: str):
    for r in rows:
        if r.get("accuracy") and float(r["accuracy"]) >= threshold:
            return float(r[column])
    return None


def mean_ci(values: list[float]) -> str:
    from scipy import stats

    m = statistics.fmean(values)
    if len(values) < 2:
        return f"{m:.3g}"
    h = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return f"{m:.3g} ± {h:.2g}"


def cell(values: list, n: int) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return f"— (0/{n})"
    return mean_ci(got) + ("" if len(got) == n else f" ({len(got)}/{n})")


def report(out: Path, figures: Path) -> str:
    done = {(arm, s) for arm in ARMS for s in SEEDS if (out / f"{arm},seed={s}" / "rounds.csv").exists()}
    runs = {arm: {s: rows_of(out / f"{arm},seed={s}") for s in SEEDS if (arm, s) in done} for arm in ARMS}
    head = ["arm", *[f"time to {t:g} (s)" for t in THRESHOLDS], *[f"energy to {t:g} (J)" for t in THRESHOLDS],
            "final accuracy", "round (s)", f"Δ time to {THRESHOLDS[-1]:g} vs FDMA (s, paired)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    last = THRESHOLDS[-1]
    for arm, seeds in runs.items():
        if not seeds:
            continue
        n = len(seeds)
        times = [cell([first(r, t, "time_s") for r in seeds.values()], n) for t in THRESHOLDS]
        energy = [cell([first(r, t, "cum_energy_j") for r in seeds.values()], n) for t in THRESHOLDS]
        final = cell([float(r[-1]["accuracy"]) for r in seeds.values()], n)
        dur = cell([statistics.fmean(float(x["duration_s"]) for x in r) for r in seeds.values()], n)
        paired = []
        for s, r in seeds.items():
            mine, base = first(r, last, "time_s"), first(runs["fdma"].get(s, []), last, "time_s")
            paired.append(None if mine is None or base is None else mine - base)
        lines.append("| " + " | ".join([arm, *times, *energy, final, dur, cell(paired, n) if arm != "fdma" else "—"])
                     + " |")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for arm, seeds in runs.items():
        pts = [(first(r, last, "time_s"), first(r, last, "cum_energy_j")) for r in seeds.values()]
        pts = [p for p in pts if None not in p]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=arm)
    ax.set_xlabel(f"simulated time to accuracy {last:g} (s)")
    ax.set_ylabel(f"device energy to accuracy {last:g} (J)")
    ax.legend(fontsize=8)
    figures.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(figures / "access_study.png", dpi=120)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--figures", type=Path, default=Path("docs/figures"))
    parser.add_argument("--report", action="store_true", help="only the table and the figure")
    args = parser.parse_args()
    if not args.report:
        run_all(args.out)
    print(report(args.out, args.figures))


if __name__ == "__main__":
    main()
