"""The multi-cell study (docs/studies/multicell.md): flat (κ = 1) against HierFAVG (κ = 2, 5, 10), FedAvg and FixAvg.

Runs ``scenarios/multicell_study.toml`` once per (frequency reuse, κ, seed) — both algorithms in each run folder —
in ``--processes`` worker processes, then prints one markdown table per algorithm: per reuse and κ the final
accuracy (the cloud model's, at the last cloud round), the simulated time and the cloud rounds to the target
accuracy (the first cloud round whose cloud model reaches it), the devices' energy, the backhaul bits and the
device uplink bits of the run; every cell the mean over seeds ± the half-width of the 95 % Student-t interval
("k/n": only k seeds reach it). The CPU seconds of each run are printed as it ends (its process's user + system).

    python benchmarks/multicell_study.py --out runs/multicell            # run what is missing, then tabulate
    python benchmarks/multicell_study.py --out runs/multicell --table    # tabulate only
"""

from __future__ import annotations

import argparse
import csv
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from edgesim.results.stats import mean_interval

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "multicell_study.toml"
KAPPAS = (1, 2, 5, 10)
TARGET = {"fedavg": 0.8, "fixavg": 0.6}


def folder(out: Path, reuse: int, kappa: int, seed: int) -> Path:
    return out / f"reuse{reuse}_k{kappa}_seed{seed}"


def run_one(args: tuple) -> tuple[str, float, float]:
    """One run folder (skipped when it exists); (its name, CPU seconds, wall seconds)."""
    out, reuse, kappa, seed = args
    target = folder(out, reuse, kappa, seed)
    if (target / "summary.json").exists():
        return target.name, 0.0, 0.0
    import torch

    torch.set_num_threads(1)
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    overrides = [f"hierarchy.edge_rounds={kappa}", f"seed={seed}"]
    if reuse != 1:
        overrides.append(f"system.frequency_reuse={reuse}")
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    run_scenario(load_scenario(SCENARIO, overrides), target, overwrite=True)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return target.name, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), \
        time.perf_counter() - start


def cell(values: list, digits: int = 3) -> str:
    """Mean ± the 95 % Student-t half-width (the report's interval), with (finite/all) when some are missing."""
    return mean_interval(values).text(digits)


def measures(run: Path, algorithm: str) -> dict:
    """One algorithm of one run folder: final cloud accuracy, time and cloud rounds to TARGET, energy, bits."""
    rows = [r for r in csv.DictReader(open(run / "rounds.csv")) if r["algorithm"] == algorithm]
    clouds = [r for r in rows if r["level"] == "cloud"]
    target = TARGET[algorithm]
    reached = next((i for i, r in enumerate(clouds) if float(r["accuracy"]) >= target), None)
    # the network's accuracy (every device on the model it holds) reaching the target, on the clock: any row
    first = next((float(r["time_s"]) for r in rows if r["accuracy"] and float(r["accuracy"]) >= target), None)
    last = rows[-1]
    return {"final": float(clouds[-1]["accuracy"]), "time": first,
            "clouds": None if reached is None else reached + 1, "energy": float(last["cum_energy_j"]),
            "backhaul": float(clouds[-1]["cum_backhaul_bits"]), "uplink": float(last["cum_bits_up"]),
            "end": float(last["time_s"])}


def table(out: Path, reuses: list[int], seeds: int) -> str:
    """The markdown tables of the run folders in ``out`` (those missing are left out)."""
    lines = []
    for algorithm in TARGET:
        lines += [f"### {algorithm} (target accuracy {TARGET[algorithm]})", "",
                  "| reuse | κ | final accuracy (cloud) | time to target (s) | cloud rounds to target | energy (J) | "
                  "backhaul (Mbit) | device uplink (Mbit) | run's end (s) |", "|---|---|---|---|---|---|---|---|---|"]
        for reuse in reuses:
            for kappa in KAPPAS:
                runs = [folder(out, reuse, kappa, s) for s in range(seeds)]
                m = [measures(r, algorithm) for r in runs if (r / "rounds.csv").exists()]
                if not m:
                    continue
                cols = [cell([x[k] for x in m]) for k in ("final", "time", "clouds", "energy")]
                cols += [cell([x[k] / 1e6 for x in m]) for k in ("backhaul", "uplink")] + [cell([x["end"] for x in m])]
                lines.append(f"| {reuse} | {kappa} | " + " | ".join(cols) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/multicell"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--reuse", default="1", help="frequency reuse values, comma-separated (e.g. 1,3,4)")
    parser.add_argument("--kappas", default="1,2,5,10", help="edge rounds per cloud round, comma-separated")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--table", action="store_true", help="only tabulate the run folders there")
    args = parser.parse_args()
    reuses = [int(r) for r in args.reuse.split(",")]
    if not args.table:
        kappas = [int(k) for k in args.kappas.split(",")]
        jobs = [(args.out, r, k, s) for s in range(args.seeds) for r in reuses for k in kappas]
        with ProcessPoolExecutor(args.processes) as pool:
            for name, cpu_s, wall_s in pool.map(run_one, jobs):
                print(f"{name}: {cpu_s:.1f} s CPU, {wall_s:.1f} s wall", flush=True)
    print(table(args.out, sorted({int(p.name.split("_")[0][5:]) for p in args.out.glob("reuse*_k*_seed*")}),
                args.seeds))


if __name__ == "__main__":
    main()
