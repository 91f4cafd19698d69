"""Host seconds per FedAvg round with and without compression (issue 34: at most +10 % for the ``cnn`` model).

Builds the context of ``scenarios/fmnist_fedavg.toml`` (Fashion-MNIST, the ``cnn`` model, K = 10 devices a
round) once, then one FedAvg backend and engine per compression setting, and runs their rounds
*interleaved* (round r of every setting, in a rotating order, before round r + 1 of any), timing each
``run_round`` (planning, training, encoding, decoding, aggregation, evaluation and the engine) on the
host. Prints per setting the median host seconds per round, its ratio to ``none`` (medians of the
per-round ratios, each against the same round of ``none``), and the compression error; then, alone, the
host seconds of the round's compression itself (K uploads encoded and decoded, one download) on the
trained model's size, best of 5 — the overhead without the noise of training.

    OMP_NUM_THREADS=1 python benchmarks/compression_round.py --rounds 2

Results: benchmarks/RESULTS.md, "Compression".
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from edgesim.compression import Codec, CompressionConfig
from edgesim.engine import Simulation
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.context import build_context
from edgesim.scenarios.schema import load_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "fmnist_fedavg.toml"
SETTINGS = {
    "none": CompressionConfig(),
    "fp16 up+down": CompressionConfig(Codec("fp16"), Codec("fp16")),
    "qsgd8": CompressionConfig(Codec("qsgd", bits=8)),
    "top1%+ef": CompressionConfig(Codec("topk", fraction=0.01, error_feedback=True)),
    "sign+ef": CompressionConfig(Codec("sign", error_feedback=True)),
}


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--executor", choices=("sequential", "vmap"), default="sequential")
    args = ap.parse_args()
    torch.set_num_threads(1)
    sc = load_scenario(args.scenario, [f"train.executor={args.executor}"])
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    sims, times, errors = {}, {k: [] for k in SETTINGS}, {k: [] for k in SETTINGS}
    for name, cfg in SETTINGS.items():
        alg = REGISTRY["fedavg"].build(dataclasses.replace(ctx, compression=cfg), REGISTRY["fedavg"].config_cls())
        sims[name] = Simulation(sc.system, sc.budget, alg, seed=sc.seed)
    names = list(SETTINGS)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]  # rotate who goes first
        for name in order:
            t0 = time.perf_counter()
            rec = sims[name].run_round()
            times[name].append(time.perf_counter() - t0)
            errors[name].append(rec.metrics.get("compression_error", 0.0))
    print(f"# {args.scenario.name}, model {sc.learning['train'].model}, K = {sc.learning['run'].clients_per_round}, "
          f"{args.rounds} rounds, executor {args.executor}, 1 torch thread, CPU: {cpu_name()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"{'setting':>14} {'median s/round':>15} {'min':>7} {'max':>7} {'ratio to none':>14} {'error':>7} "
          f"{'codec s/round':>14} {'codec share':>12}")
    base = statistics.median(times["none"])
    k = sc.learning["run"].clients_per_round
    for name in names:
        ratio = statistics.median(t / n for t, n in zip(times[name], times["none"]))
        codec_s = codec_seconds(ctx, SETTINGS[name], k)
        print(f"{name:>14} {statistics.median(times[name]):>15.3f} {min(times[name]):>7.3f} {max(times[name]):>7.3f} "
              f"{ratio:>14.3f} {statistics.mean(errors[name]):>7.3f} {codec_s:>14.4f} {codec_s / base:>12.4f}")


def codec_seconds(ctx, cfg: CompressionConfig, k: int, repeats: int = 5) -> float:
    """Best-of-``repeats`` host seconds of one round's compression: a download and ``k`` uploads of the model."""
    from edgesim.learning.compression import transfers_for

    t = transfers_for(dataclasses.replace(ctx, compression=cfg), list(ctx.template_state))
    if t is None:
        return 0.0
    g = torch.Generator().manual_seed(0)
    server = {key: v.clone() for key, v in ctx.template_state.items()}
    trained = [{key: v + 0.01 * torch.randn(v.shape, generator=g) if v.is_floating_point() else v
                for key, v in server.items()} for _ in range(k)]
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        sent, _ = t.download(0, server)
        t.upload(0, list(range(k)), [sent] * k, trained, server)
        best = min(best, time.perf_counter() - t0)
    return best


if __name__ == "__main__":
    main()
