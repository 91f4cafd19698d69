"""How long does one DoFed-SPP round take on the host? Wall-clock per round and per phase.

Runs the DoFed-SPP backend of a scenario (default: scenarios/dofed_fmnist_subset.toml,
N = 25, K = B = 10) for a few rounds on the engine and times, on the host, each
round and its pieces: warm-up / reciprocal / target training, the BS's PCA,
pseudo-labelling (the K uploaded models on every device's unlabelled set, one
stacked call), the similarity ratios (Eq. 19 for all N² pairs from one stacked
call over the distinct models), and evaluation. ``--compare-sr`` also times the
same N² losses computed pair by pair (one forward call per (device, model)), the
loop the batched version replaces.

    OMP_NUM_THREADS=1 python benchmarks/dofed_round.py --rounds 4 --vectorize off
    OMP_NUM_THREADS=1 python benchmarks/dofed_round.py --rounds 4 --vectorize on --compare-sr

``--synthetic`` replaces the data set by Gaussian blobs of the same shape (no
files needed). Results: benchmarks/RESULTS.md, "DoFed-SPP round".
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import torch.nn.functional as F

from edgesim.engine import Simulation
from edgesim.learning import similarity as similarity_module
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.dofed_spp import algorithm as dofed_module
from edgesim.learning.context import build_context
from edgesim.learning.data.synthetic import make_synthetic
from edgesim.scenarios.schema import load_scenario

REPO = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


class Timer:
    """Accumulates host seconds per label (``time.perf_counter``, outside the simulator)."""

    def __init__(self):
        self.acc = defaultdict(float)

    def wrap(self, label, fn):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.acc[label] += time.perf_counter() - t

        return timed


def naive_sr_losses(alg) -> float:
    """The N² (device, model) losses one forward call at a time; returns the seconds it took."""
    ctx, n = alg.ctx, alg.ctx.n_devices
    t = time.perf_counter()
    with torch.no_grad():
        ctx.model.eval()
        for d in range(n):
            c = ctx.clients[d]
            for i in range(n):
                state = alg.rec[d] if i == d else alg.store[int(alg.cache[d, i])]
                F.cross_entropy(torch.func.functional_call(ctx.model, state, (c.x_lab,)), c.y_lab)
        ctx.model.train()
    return time.perf_counter() - t


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default=str(REPO / "scenarios" / "dofed_fmnist_subset.toml"))
    parser.add_argument("--rounds", type=int, default=4, help="rounds to run (round 0 is Phase 0)")
    parser.add_argument("--vectorize", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--synthetic", action="store_true", help="Gaussian blobs of the data set's shape")
    parser.add_argument("--compare-sr", action="store_true", help="also time the pair-by-pair N² SR losses")
    parser.add_argument("--set", action="append", default=[], help="scenario override, as edgesim --set")
    args = parser.parse_args(argv)

    overrides = [f'algorithms.dofed_spp.vectorize="{args.vectorize}"', *args.set]
    sc = load_scenario(args.scenario, overrides)
    data = sc.learning["data"]
    dataset = None
    if args.synthetic:
        dataset = make_synthetic(n_train=60_000, n_test=10_000, shape=(1, 28, 28), n_classes=10, seed=0)
    t0 = time.perf_counter()
    ctx = build_context(sc.seed, data, sc.learning["train"], sc.learning["run"], sc.workload, sc.system.n_devices,
                        dataset=dataset)
    setup_s = time.perf_counter() - t0
    alg = REGISTRY["dofed_spp"].build(ctx, sc.learning["algorithms"]["dofed_spp"])
    timer = Timer()
    for name in ("_publish", "_similarity"):
        setattr(alg, name, timer.wrap(name.strip("_"), getattr(alg, name)))
    orig_train = alg._train
    alg._train = lambda kind, *a, **k: timer.wrap(f"train:{kind}", orig_train)(kind, *a, **k)
    dofed_module.predict_proba = timer.wrap("pseudo_label", dofed_module.predict_proba)
    for name in ("cross_entropy_losses", "paired_losses"):
        setattr(similarity_module, name, timer.wrap("sr:losses", getattr(similarity_module, name)))
    similarity_module.pairwise_distances = timer.wrap("sr:distances", similarity_module.pairwise_distances)
    dofed_module.evaluate_personal = timer.wrap("evaluate", dofed_module.evaluate_personal)
    dofed_module.labeling_accuracy = timer.wrap("evaluate", dofed_module.labeling_accuracy)

    sim = Simulation(sc.system, sc.budget, alg, seed=sc.seed, record_events=False)
    per_round, phases, info = [], [], []
    for _ in range(args.rounds):
        timer.acc.clear()
        t = time.perf_counter()
        rec = sim.run_round()
        per_round.append(time.perf_counter() - t)
        phases.append(dict(timer.acc))
        info.append((rec.info.get("B"), rec.info.get("K"), rec.duration_s, rec.metrics.get("accuracy")))
    naive = naive_sr_losses(alg) if args.compare_sr else None

    print(f"# DoFed-SPP round benchmark: {Path(args.scenario).name} {' '.join(args.set)}")
    print(f"machine: {os.cpu_count()} cores, {cpu_model()}; torch {torch.__version__} "
          f"({torch.get_num_threads()} intra-op threads, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}); "
          f"python {platform.python_version()}; device {ctx.device}; executor {ctx.executor.name}; "
          f"vectorize {args.vectorize} -> {alg.vectorize}")
    print(f"N = {ctx.n_devices}; per device {len(ctx.clients[0].y_train)} train, {len(ctx.clients[0].y_lab)} labelled, "
          f"{len(ctx.clients[0].x_unl)} unlabelled, {len(ctx.clients[0].y_test)} test; "
          f"{sum(p.numel() for p in ctx.model.parameters())} parameters; setup {setup_s:.1f} s"
          f"{' (synthetic data)' if args.synthetic else ''}")
    labels = sorted({k for p in phases for k in p}, key=lambda k: (k.startswith("sr:"), k))
    print("| round | B | K | simulated s | host s | " + " | ".join(labels) + " |")
    print("|---" * (5 + len(labels)) + "|")
    for r, (wall, ph, (b, k, dur, _acc)) in enumerate(zip(per_round, phases, info)):
        cells = " | ".join(f"{ph.get(lbl, 0.0):.2f}" for lbl in labels)
        print(f"| {r} | {b:g} | {k:g} | {dur:.2f} | {wall:.2f} | {cells} |")
    later = per_round[1:] or per_round
    print(f"rounds >= 1: host s/round mean {statistics.mean(later):.2f} (min {min(later):.2f}, max {max(later):.2f})")
    if naive is not None:
        print(f"SR losses pair by pair (N² = {ctx.n_devices ** 2} forward calls): {naive:.2f} s; batched, last round: "
              f"losses {phases[-1].get('sr:losses', 0):.2f} s (similarity in all, with distances and Eq. 19: "
              f"{phases[-1].get('similarity', 0):.2f} s)")


if __name__ == "__main__":
    main()
