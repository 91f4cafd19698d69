"""The resource-policy study of docs/model/resource_policies.md: scenarios/resource_policies.toml (the arena's cell,
physics-only) under each policy, at 0.1, 1 and 10 MHz, 3 seeds; device energy against time to accuracy.

    python benchmarks/resource_study.py --out benchmarks/resource_study

Each run is the scenario's 20 rounds on the clock (the same engine and backend as ``edgesim run`` builds for
``backend = "parametric"``); per run it measures the simulated time at which the accuracy first reaches
``--threshold`` and the devices' energy (radio + compute) spent until then, and the run's totals. Seeds share the
devices, channels and draws across policies (common random numbers), so the paired differences against the
default policy are per seed. Writes ``runs.csv``, ``summary.csv`` (with the paired differences), ``tables.md``
and the figure ``energy_vs_time.png`` (one point per policy and band, 95 % t-intervals over seeds on both axes).
"""

from __future__ import annotations

import argparse
import csv
import math
import platform
import statistics
import time
from pathlib import Path

from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation
from edgesim.scenarios.schema import load_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "resource_policies.toml"
DEFAULT = ("equal", "fixed", "max")
# (label, access, bandwidth, power, cpu_freq)
POLICIES = [
    ("FDMA equal (default)", "fdma", "equal", "fixed", "max"),
    ("FDMA proportional", "fdma", "proportional", "fixed", "max"),
    ("FDMA min_max_time", "fdma", "min_max_time", "fixed", "max"),
    ("FDMA power min_energy", "fdma", "equal", "min_energy", "max"),
    ("FDMA cpu min_energy", "fdma", "equal", "fixed", "min_energy"),
    ("FDMA min_max_time + cpu min_energy", "fdma", "min_max_time", "fixed", "min_energy"),
    ("FDMA min_max_time + joint", "fdma", "min_max_time", "min_energy", "joint"),
    ("TDMA arrival (default)", "tdma", "equal", "fixed", "max"),
    ("TDMA shortest_first", "tdma", "shortest_first", "fixed", "max"),
    ("TDMA cpu min_energy", "tdma", "equal", "fixed", "min_energy"),
]
BANDS_HZ = (1e5, 1e6, 1e7)
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776}


def one_run(access, bandwidth, power, cpu, band_hz, seed, threshold):
    sc = load_scenario(SCENARIO, [f"system.access={access}", f"system.bandwidth_hz={band_hz}", f"seed={seed}",
                                  f"resources.bandwidth={bandwidth}", f"resources.power={power}",
                                  f"resources.cpu_freq={cpu}"])
    p, run_cfg = sc.parametric, sc.learning["run"]
    backend = ParametricBackend(sc.system.n_devices, run_cfg.clients_per_round, sc.workload, sc.seed, a0=p.a0,
                                a_max=p.a_max, rate=p.rate, download_bits=p.download_bits)
    sim = Simulation(sc.system, sc.budget, backend, seed=sc.seed, record_events=False, resources=sc.resources)
    tta = energy = math.nan
    for _ in range(run_cfg.rounds):
        rec = sim.run_round()
        if math.isnan(tta) and rec.metrics["accuracy"] >= threshold:
            tta, energy = rec.end_time_s, rec.cum_energy_j
    return {"time_to_accuracy_s": tta, "energy_to_accuracy_j": energy, "total_time_s": sim.now_s,
            "total_energy_j": rec.cum_energy_j}


def interval(values):
    """Mean and the half-width of its 95 % t-interval."""
    n = len(values)
    m = statistics.fmean(values)
    return m, (T_975[n - 1] * statistics.stdev(values) / math.sqrt(n) if n > 1 else math.nan)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/resource_study"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threshold", type=float, default=0.7)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows = []
    for label, access, bw, power, cpu in POLICIES:
        for band in BANDS_HZ:
            for seed in range(args.seeds):
                rows.append({"policy": label, "access": access, "bandwidth": bw, "power": power, "cpu_freq": cpu,
                             "bandwidth_hz": band, "seed": seed,
                             **one_run(access, bw, power, cpu, band, seed, args.threshold)})
    host_s = time.perf_counter() - t0
    keys = list(rows[0])
    with (args.out / "runs.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, keys, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    summary = []
    for label, access, *_ in POLICIES:
        base_label = "FDMA equal (default)" if access == "fdma" else "TDMA arrival (default)"
        for band in BANDS_HZ:
            mine = [r for r in rows if r["policy"] == label and r["bandwidth_hz"] == band]
            base = [r for r in rows if r["policy"] == base_label and r["bandwidth_hz"] == band]
            s = {"policy": label, "bandwidth_hz": band}
            for q in ("time_to_accuracy_s", "energy_to_accuracy_j", "total_time_s", "total_energy_j"):
                s[q], s[q + "_ci"] = interval([r[q] for r in mine])
                d = [a[q] - b[q] for a, b in zip(mine, base)]
                s["paired_" + q], s["paired_" + q + "_ci"] = interval(d)
            summary.append(s)
    with (args.out / "summary.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, list(summary[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(summary)
    lines = [f"Threshold accuracy {args.threshold}; {args.seeds} seeds; mean ± 95 % t-interval half-width. "
             f"Host {host_s:.0f} s for {len(rows)} runs on {platform.processor() or platform.machine()} "
             f"(python {platform.python_version()}).", ""]
    for band in BANDS_HZ:
        lines += [f"### {band / 1e6:g} MHz", "",
                  "| policy | time to accuracy (s) | device energy to accuracy (J) | Δ time vs default (s) | "
                  "Δ energy vs default (J) |", "|---|---|---|---|---|"]
        for s in summary:
            if s["bandwidth_hz"] != band:
                continue
            lines.append(f"| {s['policy']} | {s['time_to_accuracy_s']:.4g} ± {s['time_to_accuracy_s_ci']:.2g} | "
                         f"{s['energy_to_accuracy_j']:.4g} ± {s['energy_to_accuracy_j_ci']:.2g} | "
                         f"{s['paired_time_to_accuracy_s']:+.4g} ± {s['paired_time_to_accuracy_s_ci']:.2g} | "
                         f"{s['paired_energy_to_accuracy_j']:+.4g} ± {s['paired_energy_to_accuracy_j_ci']:.2g} |")
        lines.append("")
    (args.out / "tables.md").write_text("\n".join(lines))
    figure(summary, args.out / "energy_vs_time.png", args.threshold)
    print("\n".join(lines))


def figure(summary, path: Path, threshold: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(BANDS_HZ), figsize=(12, 4.2), constrained_layout=True)
    labels = [p[0] for p in POLICIES]
    markers = "osD^v<>pPX"
    for ax, band in zip(axes, BANDS_HZ):
        for i, label in enumerate(labels):
            s = next(x for x in summary if x["policy"] == label and x["bandwidth_hz"] == band)
            ax.errorbar(s["time_to_accuracy_s"], s["energy_to_accuracy_j"], xerr=s["time_to_accuracy_s_ci"],
                        yerr=s["energy_to_accuracy_j_ci"], fmt=markers[i], color=f"C{i}", capsize=3,
                        mfc="none" if label.startswith("TDMA") else f"C{i}", label=label)
        ax.set_title(f"{band / 1e6:g} MHz")
        ax.set_xlabel(f"simulated time to accuracy {threshold} (s)")
        ax.set_yscale("log")
    axes[0].set_ylabel("device energy until then (J)")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.savefig(path, dpi=130)


if __name__ == "__main__":
    main()
