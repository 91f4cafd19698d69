"""The compression study's clock at other bandwidths, from the learning it ran at one (docs/model/compression.md).

In ``scenarios/compression_study.toml`` every run does its 30 rounds (the 600 s budget is never reached, no
deadline): which devices a round samples (``rng(seed, "sample", round)``), their batches, augmentations and
QSGD draws do not depend on the bandwidth, so the accuracy in every round is the same at 0.1, 1 and 10 MHz —
only the clock differs. This script replays each finished run folder's rounds through the engine at other
bandwidths: the algorithm's own ``plan_round`` (the sampled devices, their cycles and encoded bits: none of it
depends on the learning), and as the round's answer the accuracy the real run recorded. No training runs.

``--check`` first replays every folder at its own bandwidth and requires the real ``time_s`` of every round,
exactly (the replay is the engine the run used); docs/model/compression.md also checks real 1 MHz runs against it.

    python benchmarks/compression_retime.py SWEEP_FOLDER --bandwidths 1e6 1e7 --out RETIMED_FOLDER --check

Writes ``RETIMED_FOLDER/<run folder name with its bandwidth replaced>/rounds.csv`` (algorithm, round, time_s,
accuracy, bits_up, cum_bits_up).
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path


class Replay:
    """A backend whose plans are the algorithm's and whose round answers are a real run's recorded accuracy."""

    def __init__(self, backend, accuracy: dict[int, float]):
        self.backend, self.accuracy = backend, accuracy

    def plan_round(self, view):
        return self.backend.plan_round(view)

    def complete_round(self, outcome):
        return {"accuracy": self.accuracy[outcome.round_index]}


def replay(folder: Path, bandwidth: float) -> list[dict]:
    from edgesim.engine import Simulation
    from edgesim.scenarios.algorithm_run import make_backends
    from edgesim.scenarios.schema import load_scenario

    sc = load_scenario(folder / "config.toml", [f"system.bandwidth_hz={bandwidth!r}"])
    build, _, _ = make_backends(sc)
    rows = list(csv.DictReader(open(folder / "rounds.csv")))
    out = []
    for name in sc.learning["run"].algorithms:
        mine = [r for r in rows if r["algorithm"] == name]
        accuracy = {int(r["round"]): float(r["accuracy"]) for r in mine}
        sim = Simulation(sc.system, sc.budget, Replay(build(name), accuracy), seed=sc.seed)
        for rec in sim.run(len(mine)):
            out.append({"algorithm": name, "round": rec.round_index, "time_s": rec.end_time_s,
                        "accuracy": rec.metrics["accuracy"], "bits_up": rec.bits_up, "cum_bits_up": rec.cum_bits_up})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--bandwidths", nargs="+", required=True, help="as in the folder names, e.g. 1e6 1e7")
    ap.add_argument("--from-bandwidth", default="1e5", help="the bandwidth (as in the folder names) to replay")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    tag = f"system.bandwidth_hz={args.from_bandwidth},"
    folders = sorted(p for p in args.sweep.iterdir() if p.is_dir() and p.name.startswith(tag)
                     and (p / "rounds.csv").exists() and not p.name.endswith(".incomplete"))
    for folder in folders:
        if args.check:
            real = list(csv.DictReader(open(folder / "rounds.csv")))
            again = replay(folder, float(args.from_bandwidth))
            bad = [(a["algorithm"], a["round"]) for a, r in zip(again, real) if repr(a["time_s"]) != r["time_s"]
                   and abs(a["time_s"] - float(r["time_s"])) > 1e-9 * abs(a["time_s"])]
            if bad or len(again) != len(real):
                raise SystemExit(f"{folder.name}: the replay's clock differs from the run's in rounds {bad[:5]}")
        for bw in args.bandwidths:
            name = re.sub(r"^system\.bandwidth_hz=[^,]+,", f"system.bandwidth_hz={bw},", folder.name)
            target = args.out / name
            target.mkdir(parents=True, exist_ok=True)
            rows = replay(folder, float(bw))
            with open(target / "rounds.csv", "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
        print(folder.name, "checked" if args.check else "", "retimed at", args.bandwidths, flush=True)


if __name__ == "__main__":
    main()
