"""Client workers: the host time of a 20-device FixAvg round with 1 and with n worker processes.

The round: Fashion-MNIST, 20 devices all trained every round (``clients_per_round = 20``), 200 images each by
Dirichlet(0.5) with half of them labelled on average (``labeled_ratio_alpha``), the ``cnn`` model, one local
epoch of FixAvg (B = 32 labelled, 7 × 32 unlabelled rows a step), one torch thread per process. Only the last
round is evaluated (``[run] eval_every``), so the rounds timed are the training (and its transfers) alone.

Interleaved: for each repetition, every worker count once in turn (whatever else the machine does hits each
alike). A run's rounds after its first are timed (the first also starts the workers); the median round is
reported, with the ratio to 1 worker, and whether the run folders' ``rounds.csv`` are the same bytes.

    python benchmarks/client_workers.py --workers 1 2 --repeats 3 --rounds 4

Results: benchmarks/RESULTS.md, "Client workers".
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

SCENARIO = """
name = "client_workers_bench"
seed = 0
[system]
n_devices = 20
bandwidth_hz = 1e7
cpu_freq_hz = 2e9
[budget]
total_time_s = 1e7
rounds = {rounds}
[workload]
local_iterations = 1
cycles_per_sample = 1e7
samples_per_device = 200
model_bits = "auto"
[data]
dataset = "fashion_mnist"
partition = "dirichlet"
alpha = 0.5
labeled_ratio_alpha = 0.5
min_labeled = 1
train_pool_size = 4000
test_size = 20
[train]
model = "cnn"
lr = 0.05
momentum = 0.9
batch_size = 32
executor = "sequential"
[run]
algorithms = ["fixavg"]
clients_per_round = 20
eval_every = {rounds}
label_quality = false
client_workers = {workers}
"""


def one(workers: int, rounds: int, out: Path) -> list[float]:
    """Host seconds of each round of one run (the run's own process; workers started at its first round)."""
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    path = out.with_suffix(".toml")
    path.write_text(SCENARIO.format(rounds=rounds, workers=workers))
    stamps = [time.perf_counter()]
    run_scenario(load_scenario(path), out, on_round=lambda name, rec: stamps.append(time.perf_counter()))
    return [b - a for a, b in zip(stamps, stamps[1:])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="client_workers_"))
    times: dict[int, list[float]] = {n: [] for n in args.workers}
    for r in range(args.repeats):
        for n in args.workers:
            rounds = one(n, args.rounds, tmp / f"w{n}_r{r}")
            times[n] += rounds[1:]
            print(f"repeat {r} workers {n}: rounds {', '.join(f'{t:.2f}' for t in rounds)} s "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    base = statistics.median(times[args.workers[0]])
    same = {n: (tmp / f"w{n}_r0" / "rounds.csv").read_bytes() == (tmp / f"w{args.workers[0]}_r0" / "rounds.csv")
            .read_bytes() for n in args.workers}
    print("| workers | median round (s) | rounds timed | speed-up | rounds.csv same bytes |")
    print("| ---: | ---: | ---: | ---: | --- |")
    for n in args.workers:
        m = statistics.median(times[n])
        print(f"| {n} | {m:.2f} | {len(times[n])} | {base / m:.2f}× | {'yes' if same[n] else 'NO'} |")


if __name__ == "__main__":
    main()
