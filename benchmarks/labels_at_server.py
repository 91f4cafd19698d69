"""Tables and figures of docs/labels_at_server.md from the run folders of the CPU-scale experiments.

    python benchmarks/labels_at_server.py RUNS_DIR [--figures docs/figures]

``RUNS_DIR`` holds the run folders written by ``edgesim run scenarios/las_fmnist_cpu.toml`` with the
overrides listed in the docs page (``iid_s{0,1,2}``, ``dir05_s{0,1,2}``, ``dir02_s0``, ``dir10_s0``,
``parts_dir05_s0``, ``abg_*_dir05``, ``lab{700,800}_dir05``, ``slow_server_dir05``). Prints Markdown
tables; draws PNGs with ``plots.curves``. "Final" accuracy = mean of the last 3 rounds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from plots.curves import COLUMN_WIDTH_IN, algorithm_colors, collect, draw_accuracy, plt, read_rounds, style_axes

ALGS = ("fedmix", "fedmatch")
NAMES = {"fedmix": "FedMix+FedFreq", "fedmatch": "FedMatch", "fedmix_samples": "FedMix (sample weights)",
         "fedfreq": "FedFreq (plain average)"}


NM = "not measured"


def have(run: Path, alg: str) -> bool:
    return (run / "rounds.csv").is_file() and alg in read_rounds(run)


def final(run: Path, alg: str, last: int = 3) -> float:
    acc = read_rounds(run)[alg]["accuracy"]
    return float(np.mean(acc[-last:]))


def fin(run: Path, alg: str) -> str:
    return f"{final(run, alg) * 100:.1f}" if have(run, alg) else NM


def at_round(run: Path, alg: str, r: int) -> float:
    return float(read_rounds(run)[alg]["accuracy"][r])


def wobble(run: Path, alg: str, last: int = 10) -> float:
    """Mean |round-to-round change| of the accuracy over the last ``last`` rounds (instability), in points."""
    acc = read_rounds(run)[alg]["accuracy"][-last:]
    return float(np.mean(np.abs(np.diff(acc))) * 100)


def pm(values) -> str:
    v = np.asarray(values, dtype=float) * 100
    return f"{v.mean():.1f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.1f} (n = {len(v)})" if len(v) else NM


def tta(run: Path, alg: str, threshold: float) -> str:
    s = json.loads((run / "summary.json").read_text())["algorithms"][alg]["time_to_accuracy_s"].get(str(threshold))
    return "not reached" if s is None else f"{s:.1f}"


def figure(series: dict, out: Path, x: str, xlabel: str, title: str, names=None) -> None:
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 2.5), dpi=200)
    draw_accuracy(ax, series, algorithm_colors(series), names=names or NAMES)
    style_axes(ax, xlabel, "Test accuracy (%)")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=6.5, frameon=False, loc="lower right")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("--figures", type=Path, default=None)
    a = ap.parse_args(argv)
    R = a.runs
    out = []
    seeds = {"IID": [R / f"iid_s{s}" for s in range(3)], "Dir(0.5)": [R / f"dir05_s{s}" for s in range(3)]}
    out.append("| data | algorithm | final accuracy (%) | accuracy after round 5 (%) | best (%) |")
    out.append("| --- | --- | --- | --- | --- |")
    for data, runs in seeds.items():
        runs = [r for r in runs if have(r, "fedmix")]
        seeds[data] = runs
        for alg in ALGS:
            out.append(f"| {data} | {NAMES[alg]} | {pm([final(r, alg) for r in runs])} | "
                       f"{pm([at_round(r, alg, 4) for r in runs])} | "
                       f"{pm([max(read_rounds(r)[alg]['accuracy']) for r in runs])} |")
    out.append("")
    out.append("| non-IID level | FedMix+FedFreq (%) | FedMatch (%) |")
    out.append("| --- | --- | --- |")
    for label, run in (("Dir(0.2)", R / "dir02_s0"), ("Dir(0.5)", R / "dir05_s0"), ("Dir(1.0)", R / "dir10_s0"),
                       ("IID", R / "iid_s0")):
        out.append(f"| {label} | {fin(run, 'fedmix')} | {fin(run, 'fedmatch')} |")
    out.append("")
    out.append("| (α, β, γ) | final accuracy (%) | mean round-to-round change, last 10 rounds (points) |")
    out.append("| --- | --- | --- |")
    sweep = {"(0.6, 0.2, 0.2)": R / "abg_622_dir05", "(0.5, 0.3, 0.2) default": R / "dir05_s0",
             "(0.4, 0.3, 0.3)": R / "abg_433_dir05", "(1/3, 1/3, 1/3)": R / "abg_333_dir05"}
    for label, run in sweep.items():
        out.append(f"| {label} | {fin(run, 'fedmix')} | {wobble(run, 'fedmix'):.2f} |" if have(run, "fedmix")
                   else f"| {label} | {NM} | {NM} |")
    out.append("")
    out.append("| server labelled images | FedMix+FedFreq (%) | FedMatch (%) |")
    out.append("| --- | --- | --- |")
    for n, run in ((700, R / "lab700_dir05"), (800, R / "lab800_dir05"), (1000, R / "dir05_s0")):
        out.append(f"| {n} | {fin(run, 'fedmix')} | {fin(run, 'fedmatch')} |")
    out.append("")
    out.append("| variant (Dir(0.5), seed 0) | final accuracy (%) |")
    out.append("| --- | --- |")
    out.append(f"| FedMix+FedFreq | {fin(R / 'dir05_s0', 'fedmix')} |")
    for alg in ("fedmix_samples", "fedfreq"):
        out.append(f"| {NAMES[alg]} | {fin(R / 'parts_dir05_s0', alg)} |")
    out.append("")
    out.append("| server CPU | algorithm | server s / round | round s (mean) | time to 65 % (s) | time to 70 % (s) |")
    out.append("| --- | --- | --- | --- | --- | --- |")
    for label, run in (("10 GHz", R / "dir05_s0"), ("1 GHz", R / "slow_server_dir05")):
        for alg in ALGS:
            if not have(run, alg):
                out.append(f"| {label} | {NAMES[alg]} | {NM} | {NM} | {NM} | {NM} |")
                continue
            cols = read_rounds(run)[alg]
            out.append(f"| {label} | {NAMES[alg]} | {np.mean(cols['server_s']):.2f} | {np.mean(cols['duration_s']):.2f} | "
                       f"{tta(run, alg, 0.65)} | {tta(run, alg, 0.7)} |")
    print("\n".join(out))
    if a.figures:
        f = a.figures
        f.mkdir(parents=True, exist_ok=True)
        for data, runs in seeds.items():
            if not runs:
                continue
            tag = "iid" if data == "IID" else "dir05"
            figure(collect(runs, "round"), f / f"las_accuracy_{tag}.png", "round", "Round",
                   f"Fashion-MNIST, labels at the server, {data}, 3 seeds")
        series = {}
        for label, run in sweep.items():
            if have(run, "fedmix"):
                series[label] = collect([run], "round")["fedmix"]
        figure(series, f / "las_alpha_sweep.png", "round", "Round", "FedMix (α, β, γ), Dir(0.5), seed 0",
               names={k: k for k in series})
        levels = [(lab, r) for lab, r in (("Dir(0.2)", R / "dir02_s0"), ("Dir(0.5)", R / "dir05_s0"),
                                          ("Dir(1.0)", R / "dir10_s0"), ("IID", R / "iid_s0")) if have(r, "fedmatch")]
        fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 2.3), dpi=200)
        for alg, c in zip(ALGS, ("C0", "C1")):
            ax.plot(range(len(levels)), [final(r, alg) * 100 for _, r in levels], "o-", color=c, label=NAMES[alg])
        ax.set_xticks(range(len(levels)), [lab for lab, _ in levels])
        style_axes(ax, "Non-IID level (Dirichlet α)", "Final accuracy (%)")
        ax.legend(fontsize=6.5, frameon=False)
        fig.tight_layout()
        fig.savefig(f / "las_noniid_levels.png")
        plt.close(fig)
        series = {}
        for label, run in (("10 GHz", R / "dir05_s0"), ("1 GHz", R / "slow_server_dir05")):
            for alg in ALGS:
                if have(run, alg):
                    series[f"{NAMES[alg]}, server {label}"] = collect([run], "time_s")[alg]
        figure(series, f / "las_time_to_accuracy.png", "time_s", "Simulated time (s)",
               "Dir(0.5), seed 0: the server's compute on the clock", names={k: k for k in series})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
