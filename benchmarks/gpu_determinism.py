"""Same seed twice on the GPU: identical rounds.csv with deterministic algorithms? What does it cost?

Runs the bundled scenario with ResNet-9 (BatchNorm and dropout, the executors' hardest case) on the GPU,
twice with ``torch.use_deterministic_algorithms(True)`` and twice without, interleaved, and reports
whether each pair's rounds.csv are byte-identical, the largest accuracy difference between the two
runs of a pair, and the host seconds of each run.

    python3 benchmarks/gpu_determinism.py --out /tmp/gpu --rounds 10
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts: needed for determinism
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from edgesim.scenarios.run import run_scenario
from edgesim.scenarios.schema import DEFAULT_SCENARIO, load_scenario


def accuracies(folder: Path) -> list[float]:
    with open(folder / "rounds.csv") as f:
        return [float(r["accuracy"]) for r in csv.DictReader(f)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("."))
    p.add_argument("--rounds", type=int, default=10)
    a = p.parse_args()
    sets = ["train.device='cuda'", "train.model='resnet9'", f"run.rounds={a.rounds}"]
    tmp = Path(tempfile.mkdtemp())
    res: dict = {"gpu": torch.cuda.get_device_name(), "rounds": a.rounds}
    times: dict = {True: [], False: []}
    folders: dict = {True: [], False: []}
    for i, det in enumerate([True, False, True, False]):
        torch.use_deterministic_algorithms(det)
        t0 = time.perf_counter()
        folders[det].append(run_scenario(load_scenario(DEFAULT_SCENARIO, sets), tmp / f"run{i}"))
        torch.cuda.synchronize()
        times[det].append(time.perf_counter() - t0)
    torch.use_deterministic_algorithms(False)
    for det, name in ((True, "deterministic"), (False, "default")):
        a0, a1 = folders[det]
        res[name] = {
            "identical_rounds_csv": (a0 / "rounds.csv").read_bytes() == (a1 / "rounds.csv").read_bytes(),
            "max_accuracy_difference": max(abs(x - y) for x, y in zip(accuracies(a0), accuracies(a1))),
            "host_s": times[det],
        }
    res["cost_ratio"] = (sum(times[True]) / sum(times[False]))
    print(json.dumps(res, indent=2))
    (a.out / "determinism.json").write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
