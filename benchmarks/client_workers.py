"""Client workers: the host time of a 20-device FixAvg round with 1 and with n worker processes.

The round: Fashion-MNIST, 20 devices all trained every round (``clients_per_round = 20``), 200 images each by
Dirichlet(0.5) with half of them labelled on average (``labeled_ratio_alpha``), the ``cnn`` model, one local
epoch of FixAvg (B = 32 labelled, 7 × 32 unlabelled rows a step), one torch thread per process. Only the last
round is evaluated (``[run] eval_every``), so the rounds timed are the training (and its transfers) alone.

Interleaved: for each repetition, every worker count once in turn (whatever else the machine does hits each
alike). A run's rounds after its first are timed (the first also starts the workers); the median round is
reported, with the ratio to 1 worker, and whether the run folders' ``rounds.csv`` are the same bytes.

On a shared machine the host time says little (with the kernel's autogroup scheduling a session's processes
share one session's slice of the CPU, however many there are), so the CPU seconds are measured too: the run's
own process (``time.process_time``) and each worker's (``/proc/PID/stat``) per round. On idle cores a round takes
about its *critical path*: the run's own CPU plus its busiest worker's (they do not overlap: the run waits for the
workers); ``speed-up on idle cores`` is the 1-worker round's CPU over that.

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


POOLS: list = []


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (``/proc/PID/stat`` fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one(workers: int, rounds: int, out: Path) -> list[tuple[float, float, float, float]]:
    """Per round after the first: (host seconds, this process's CPU seconds, the busiest worker's CPU seconds, all
    the workers' CPU seconds)."""
    from edgesim.learning import client_workers
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    start = client_workers.LocalPool.__init__

    def remember(self, *a, **k):
        start(self, *a, **k)
        POOLS.append(self)

    client_workers.LocalPool.__init__ = remember
    POOLS.clear()
    path = out.with_suffix(".toml")
    path.write_text(SCENARIO.format(rounds=rounds, workers=workers))
    marks = []

    def mark(name, rec):
        pids = [p.pid for pool in POOLS for p in pool.procs]
        marks.append((time.perf_counter(), time.process_time(), [_cpu_s(pid) for pid in pids]))

    try:
        run_scenario(load_scenario(path), out, on_round=mark)
    finally:
        client_workers.LocalPool.__init__ = start
    out_rounds = []
    for (w0, c0, k0), (w1, c1, k1) in zip(marks, marks[1:]):
        spent = [b - a for a, b in zip(k0, k1)]
        out_rounds.append((w1 - w0, c1 - c0, max(spent, default=0.0), sum(spent)))
    return out_rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    import torch

    from edgesim.learning.malloc import keep_freed_memory

    keep_freed_memory()  # as the edgesim command does
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="client_workers_"))
    times: dict[int, list[tuple[float, float, float, float]]] = {n: [] for n in args.workers}
    loads: dict[int, list[float]] = {n: [] for n in args.workers}
    for r in range(args.repeats):
        for n in args.workers:
            loads[n].append(os.getloadavg()[0])
            rounds = one(n, args.rounds, tmp / f"w{n}_r{r}")
            loads[n].append(os.getloadavg()[0])
            times[n] += rounds
            print(f"repeat {r} workers {n}: (host s, own CPU s, busiest worker CPU s, all workers CPU s) per round "
                  f"{[tuple(round(x, 2) for x in t) for t in rounds]} (load {loads[n][-2]:.1f} -> {loads[n][-1]:.1f})",
                  flush=True)
    first = args.workers[0]
    base_host = statistics.median(t[0] for t in times[first])
    base_cpu = statistics.median(t[1] + t[2] for t in times[first])
    same = {n: (tmp / f"w{n}_r0" / "rounds.csv").read_bytes() == (tmp / f"w{first}_r0" / "rounds.csv").read_bytes()
            for n in args.workers}
    print("| workers | median round, host (s) | speed-up (host) | own CPU (s) | busiest worker CPU (s) | all workers "
          "CPU (s) | critical path CPU (s) | speed-up on idle cores (CPU) | rounds | load average (1 min) | "
          "rounds.csv same bytes |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for n in args.workers:
        host = statistics.median(t[0] for t in times[n])
        own = statistics.median(t[1] for t in times[n])
        busiest = statistics.median(t[2] for t in times[n])
        path = statistics.median(t[1] + t[2] for t in times[n])
        every = statistics.median(t[3] for t in times[n])
        print(f"| {n} | {host:.2f} | {base_host / host:.2f}× | {own:.2f} | {busiest:.2f} | {every:.2f} | {path:.2f} | "
              f"{base_cpu / path:.2f}× | {len(times[n])} | {min(loads[n]):.1f}–{max(loads[n]):.1f} | "
              f"{'yes' if same[n] else 'NO'} |")


if __name__ == "__main__":
    main()
