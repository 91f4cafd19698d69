"""Where a round's host time goes, per family: training, evaluation, labelling accuracy, augmentation,
aggregation, the engine and the rest — for FedAvg on the moonshot at CPU scale.

The moonshot (``scenarios/moonshot_fmnist_1000.toml``) cut to 100 devices, 10 a round, with the same data per
device (``train_pool_size = 6000``: 60 images a device, 20 test images each), FedAvg only, one torch thread.
Each family is timed by wrapping the functions that do it, in CPU seconds of the run's process
(``time.process_time``, one torch thread: robust to a loaded machine; no profiler overhead):

- training: the executor's ``run`` (the local SGD of the round's devices, their batches gathered);
- augmentation: the views' ``apply`` inside training (FedAvg has none; counted apart from training);
- evaluation: ``evaluate_shared``/``evaluate_personal`` (every device's test set);
- labelling accuracy: ``labeling_accuracy`` (every device's unlabelled images against their hidden labels);
- aggregation: the algorithm's ``server_step`` (weighted average and server optimizer);
- engine: ``Simulation.run_round`` less the backend's ``plan_round`` and ``complete_round``;
- rest: the round's host CPU time (between two rounds' ends, the CSV rows included) less all of the above.

Variants (``--variant``, any of): ``default`` (every round and device evaluated: today's default, the "before"),
``eval10`` (``eval_every = 10``, ``label_quality = false``: the "after" a user at scale chooses) and
``sample10`` (``eval_devices = 0.1``, ``label_quality = false``: every round evaluated on 10 of the 100 devices).
The first round (it loads the data and builds the model) is left out.

    python benchmarks/round_profile.py --rounds 20 --variant default eval10

Results: benchmarks/RESULTS.md, "Where a round's host time goes".
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE = ["system.n_devices=100", "run.clients_per_round=10", "data.train_pool_size=6000", 'run.algorithms=["fedavg"]']
VARIANTS = {"default": [], "eval10": ["run.eval_every=10", "run.label_quality=false"],
            "sample10": ["run.eval_devices=0.1", "run.label_quality=false"]}
FAMILIES = ("training", "augmentation", "evaluation", "labelling accuracy", "aggregation", "engine", "rest")


class Clock:
    def __init__(self) -> None:
        self.spent = collections.defaultdict(float)
        self.depth = collections.defaultdict(int)

    def wrap(self, owner, attr: str, family: str) -> None:
        inner = getattr(owner, attr)
        clock = self

        def timed(*a, **k):
            if clock.depth[family]:  # a nested call of the same family counts once
                return inner(*a, **k)
            clock.depth[family] += 1
            t = time.process_time()
            try:
                return inner(*a, **k)
            finally:
                clock.spent[family] += time.process_time() - t
                clock.depth[family] -= 1

        setattr(owner, attr, timed)


def profile(variant: str, rounds: int, out: Path) -> dict:
    from edgesim.engine import Simulation
    from edgesim.learning import augment
    from edgesim.learning.algorithms import common
    from edgesim.learning.algorithms.fedavg.algorithm import FedAvg
    from edgesim.learning.executors import SequentialExecutor
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    clock = Clock()
    clock.wrap(SequentialExecutor, "run", "training")
    for owner, attr in ((common, "evaluate_shared"), (common, "evaluate_personal")):
        clock.wrap(owner, attr, "evaluation")
    clock.wrap(common, "labeling_accuracy", "labelling accuracy")
    clock.wrap(FedAvg, "server_step", "aggregation")
    for name in dir(augment):  # every augmentation's apply
        cls = getattr(augment, name)
        if isinstance(cls, type) and "apply" in vars(cls):
            clock.wrap(cls, "apply", "augmentation")
    clock.wrap(FedAvg, "plan_round", "backend")
    clock.wrap(FedAvg, "complete_round", "backend")
    clock.wrap(Simulation, "run_round", "round")
    sc = load_scenario(REPO / "scenarios" / "moonshot_fmnist_1000.toml",
                       [*BASE, *VARIANTS[variant], f"budget.rounds={rounds}"])
    stamps, snaps = [], []

    def on_round(name, rec):
        stamps.append(time.process_time())
        snaps.append(dict(clock.spent))

    run_scenario(sc, out, on_round=on_round)
    first, last = snaps[0], snaps[-1]
    n = len(stamps) - 1
    spent = {k: (last.get(k, 0.0) - first.get(k, 0.0)) / n for k in set(first) | set(last)}
    host = (stamps[-1] - stamps[0]) / n
    fam = {f: spent.get(f, 0.0) for f in ("augmentation", "evaluation", "labelling accuracy", "aggregation")}
    fam["training"] = spent.get("training", 0.0) - fam["augmentation"]
    fam["engine"] = spent.get("round", 0.0) - spent.get("backend", 0.0)
    fam["rest"] = host - sum(fam.values())
    return {"host": host, "rounds": n, **fam}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--variant", nargs="+", default=["default", "eval10"], choices=sorted(VARIANTS))
    ap.add_argument("--one", help=argparse.SUPPRESS)  # in a child process: one variant, its result as JSON
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="round_profile_"))
    if args.one:
        import torch

        torch.set_num_threads(1)
        print(json.dumps(profile(args.one, args.rounds, tmp / args.one)))
        return
    results = {}
    for v in args.variant:  # each variant in a process of its own (the wraps are on classes)
        done = subprocess.run([sys.executable, __file__, "--rounds", str(args.rounds), "--one", v],
                              capture_output=True, text=True, check=True)
        results[v] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{v}: {results[v]} (load {os.getloadavg()[0]:.1f})", flush=True)
    print("| family | " + " | ".join(f"{v} (ms CPU/round)" for v in results) + " |")
    print("| --- | " + " | ".join("---:" for _ in results) + " |")
    for f in FAMILIES:
        print(f"| {f} | " + " | ".join(f"{1e3 * r[f]:.0f}" for r in results.values()) + " |")
    print("| **round (host CPU)** | " + " | ".join(f"**{1e3 * r['host']:.0f}**" for r in results.values()) + " |")
    print("| host / training | " + " | ".join(f"{r['host'] / r['training']:.2f}×" for r in results.values()) + " |")


if __name__ == "__main__":
    main()
