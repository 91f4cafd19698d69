"""The scheduling study of docs/model/resource_policies.md (issue 49.9(b)): FedAvg on the bundled digits on the arena's
cell (benchmarks/scheduling_study.toml) under seven scheduling policies with the same seeds; time and device energy
to accuracy, final and worst-device accuracy, fairness of participation, paired differences against ``random``.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/scheduling_study.py --out sweeps/scheduling_study --jobs 2
    python benchmarks/scheduling_study.py --out sweeps/scheduling_study --report      # the tables and figure only

Each run is ``edgesim run`` of the scenario with ``resources.scheduling`` set and the seed (placement, shadowing,
fading, data split, draws; the policies of one seed share them: common random numbers). Per run, from its
``rounds.csv``: the simulated time and the devices' energy (compute + radio, ``cum_energy_j``) to each threshold by
the project's one crossing rule (``edgesim.results.metrics.crossing``, the rule of ``summary.json`` and ``edgesim
report``): at the end of the first round from which the mean device accuracy stays at or above the threshold for
the run's k evaluated rounds (``[run] sustain_rounds``, default 3); the mean accuracy of the last five rounds, the
worst device's accuracy (``accuracy_min``) over the last five rounds; from ``devices.csv``: how many of the 20 devices
ever took part and Jain's index ``(Σ n_k)² / (N Σ n_k²)`` of the participation counts (1: every device equally
often; 1/N: one device only). Mean over seeds ± the 95 % Student-t half-width; Δ: the run minus ``random``'s of the
same seed, mean ± half-width over the seeds (a seed that does not reach the threshold under either policy is left
out of that difference and counted).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from edgesim.results.metrics import crossing, sustain_rounds
from edgesim.results.reading import load_run, read_csv_rows

SCENARIO = Path(__file__).resolve().parent / "scheduling_study.toml"
POLICIES = ("random", "round_robin", "best_channel", "deadline_feasible", "age", "age_channel", "oort")
SEEDS = tuple(range(10))
ROUNDS = 60
THRESHOLDS = (0.8, 0.9)
TAIL = 5  # rounds averaged for the final accuracy


def folder_of(out: Path, policy: str, seed: int) -> Path:
    return out / f"{policy},seed={seed}"


def one_run(out: Path, policy: str, seed: int) -> str:
    folder = folder_of(out, policy, seed)
    if (folder / "rounds.csv").exists():
        return f"{policy} seed {seed}: done before"
    args = [sys.executable, "-m", "edgesim.scenarios.cli", "run", str(SCENARIO), "--out", str(folder), "-q",
            "--set", f"seed={seed}", "--set", f"resources.scheduling={policy}", "--set", f"run.rounds={ROUNDS}",
            "--set", f"budget.rounds={ROUNDS}", "--set", f"budget.total_time_s={3.0 * ROUNDS}"]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    wall, cpu = time.perf_counter(), os.times()
    subprocess.run(args, check=True, env=env)
    after = os.times()
    used = (after.children_user - cpu.children_user) + (after.children_system - cpu.children_system)
    return f"{policy} seed {seed}: {time.perf_counter() - wall:.1f} s wall, {used:.1f} s CPU"


def run_all(out: Path, jobs: int) -> None:
    todo = [(p, s) for s in SEEDS for p in POLICIES]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for line in pool.map(lambda ps: one_run(out, *ps), todo):
            print(line, flush=True)
    print(f"all {len(todo)} runs: {time.perf_counter() - start:.0f} s wall", flush=True)


def participation(folder: Path, n_devices: int = 20) -> tuple[int, float]:
    """(devices that ever took part, Jain's index of the participation counts)."""
    counts = [0] * n_devices
    for r in read_csv_rows(folder / "devices.csv")[1]:
        counts[int(r["device"])] += 1
    total, squares = sum(counts), sum(c * c for c in counts)
    return sum(c > 0 for c in counts), total * total / (n_devices * squares)


def measures(folder: Path) -> dict:
    """One run's measures; time and energy to each threshold by ``crossing`` with the run's k (the rule of
    ``summary.json`` and ``edgesim report``; None if never)."""
    run = load_run(folder)
    [cols] = run.series.values()  # FedAvg alone
    distinct, jain = participation(folder)
    out = {"final_accuracy": statistics.fmean(cols["accuracy"][-TAIL:]),
           "worst_device": statistics.fmean(cols["accuracy_min"][-TAIL:]),
           "round_s": statistics.fmean(cols["duration_s"]),
           "energy_j": float(cols["cum_energy_j"][-1]), "distinct": distinct, "jain": jain}
    for t in THRESHOLDS:
        c = crossing(cols, t, sustain_rounds(run.config))
        out[f"time_{t:g}"] = None if c is None else c["time_s"]
        out[f"energy_{t:g}"] = None if c is None else c["energy_j"]
    return out


def half_width(values: list[float]) -> float:
    from scipy import stats

    if len(values) < 2:
        return math.nan
    return float(stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values)))


def cell(values: list, n: int, digits: int = 3) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return f"— (0/{n})"
    m, h = statistics.fmean(got), half_width(got)
    text = f"{m:.{digits}g}" if math.isnan(h) else f"{m:.{digits}g} ± {h:.2g}"
    return text + ("" if len(got) == n else f" ({len(got)}/{n})")


def paired(mine: dict, base: dict, key: str, n: int, digits: int = 3) -> str:
    diffs = [mine[s][key] - base[s][key] for s in mine if s in base
             and mine[s][key] is not None and base[s][key] is not None]
    return cell(diffs, n, digits) if diffs else f"— (0/{n})"


def report(out: Path, figures: Path) -> str:
    runs = {p: {s: measures(folder_of(out, p, s)) for s in SEEDS if (folder_of(out, p, s) / "rounds.csv").exists()}
            for p in POLICIES}
    last = THRESHOLDS[-1]
    head = ["policy", *[f"time to {t:g} (s)" for t in THRESHOLDS], *[f"energy to {t:g} (J)" for t in THRESHOLDS],
            "final accuracy", "worst device", "round (s)", "devices taking part", "Jain's index"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p, seeds in runs.items():
        if not seeds:
            continue
        def col(key: str, seeds: dict = seeds) -> str:
            return cell([m[key] for m in seeds.values()], len(seeds))

        lines.append("| " + " | ".join([p, *[col(f"time_{t:g}") for t in THRESHOLDS],
                                        *[col(f"energy_{t:g}") for t in THRESHOLDS],
                                        col("final_accuracy"), col("worst_device"), col("round_s"),
                                        col("distinct"), col("jain")]) + " |")
    head = ["policy", f"Δ time to {THRESHOLDS[0]:g} (s)", f"Δ time to {last:g} (s)", f"Δ energy to {last:g} (J)",
            "Δ final accuracy", "Δ worst device", "Δ Jain's index"]
    lines += ["", "Paired against random (same seed), mean ± 95 % half-width over the seeds:", "",
              "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = runs["random"]
    for p, seeds in runs.items():
        if p == "random" or not seeds:
            continue
        n = len(seeds)
        lines.append("| " + " | ".join([p, paired(seeds, base, f"time_{THRESHOLDS[0]:g}", n),
                                        paired(seeds, base, f"time_{last:g}", n),
                                        paired(seeds, base, f"energy_{last:g}", n),
                                        paired(seeds, base, "final_accuracy", n, 2),
                                        paired(seeds, base, "worst_device", n, 2),
                                        paired(seeds, base, "jain", n, 2)]) + " |")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for p, seeds in runs.items():
        pts = [(m[f"time_{last:g}"], m[f"energy_{last:g}"]) for m in seeds.values()]
        pts = [q for q in pts if None not in q]
        if len(pts) >= 2:
            xs, ys = [q[0] for q in pts], [q[1] for q in pts]
            ax.errorbar(statistics.fmean(xs), statistics.fmean(ys), xerr=half_width(xs), yerr=half_width(ys),
                        fmt="o", capsize=3, label=f"{p} ({len(pts)}/{len(seeds)})")
    ax.set_xlabel(f"simulated time to mean accuracy {last:g} (s)")
    ax.set_ylabel(f"device energy to accuracy {last:g} (J)")
    ax.set_title("FedAvg, digits, arena cell (FDMA 1 MHz, Rayleigh): mean ± 95 % CI")
    ax.legend(fontsize=7)
    figures.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(figures / "scheduling_study.png", dpi=120)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--figures", type=Path, default=Path("docs/studies/figures"))
    parser.add_argument("--jobs", type=int, default=1, choices=(1, 2), help="runs at once (at most 2)")
    parser.add_argument("--report", action="store_true", help="only the tables and the figure")
    args = parser.parse_args()
    if not args.report:
        run_all(args.out, args.jobs)
    print(report(args.out, args.figures))


if __name__ == "__main__":
    main()
