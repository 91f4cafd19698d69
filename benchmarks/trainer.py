"""Speed of the trainer: vectorised vs sequential rounds, FixMatch's step cost, FLOP share, client scaling.

Every measurement runs the project's own executors (``edgesim.learning.executors``) on
synthetic tensors already on the compute device; times are host wall-clock
around one ``run(...)`` call (one round of local training of K clients), with
``torch.cuda.synchronize()`` around it on a GPU. Variants are interleaved
(A, B, A, B, …) and each figure is the median over ``--reps`` repetitions
after one warm-up; ratios are taken within each repetition.

    .venv/bin/python benchmarks/trainer.py rounds --model resnet9 --clients 10          # vmap ÷ sequential
    .venv/bin/python benchmarks/trainer.py fixmatch --model cnn                         # FixMatch step ÷ supervised step
    .venv/bin/python benchmarks/trainer.py scaling --model resnet9 --clients 10,20,50   # clients per vmap call
    python3 benchmarks/trainer.py rounds --device cuda --model resnet9 --clients 10 --json out.json

FLOPs: ``edgesim.learning.models.flops_per_sample`` (forward + backward of one sample)
× the rows trained (FixMatch: B + 2μB per step); the share of the peak is
against ``--peak-tflops`` (default: H100 SXM dense FP32, 67 TFLOP/s; cuDNN
convolutions may use TF32 tensor cores, whose dense peak is 495 TFLOP/s).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from edgesim.learning.executors import SequentialExecutor, VmapExecutor
from edgesim.learning.models import build_model, flops_per_sample
from edgesim.learning.objectives import cross_entropy_loss, fixmatch_loss
from edgesim.learning.optim import SGD
from edgesim.learning.tasks import LocalTask, Stream, View

SHAPES = {"cnn": (3, 32, 32), "peer_cnn": (3, 32, 32), "resnet9": (3, 32, 32)}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def clients_data(k: int, n: int, shape, device, unlabeled: int = 0, seed: int = 0) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(k):
        d = {"x": torch.randn(n, *shape, generator=g).to(device), "y": torch.randint(0, 10, (n,), generator=g).to(device)}
        if unlabeled:
            d["u"] = torch.randn(unlabeled, *shape, generator=g).to(device)
        out.append(d)
    return out


def supervised(batch: int, epochs: int = 1) -> LocalTask:
    return LocalTask(loss=cross_entropy_loss("x"), optimizer=SGD(0.01, 0.9), epochs=epochs, streams=(Stream("main", batch),))


def fixmatch(batch: int, mu: int, shape) -> LocalTask:
    from edgesim.learning.augment import make_augmentation

    weak, strong = make_augmentation("weak", shape), make_augmentation("strong", shape, (0.5,) * shape[0], (0.25,) * shape[0])
    return LocalTask(loss=fixmatch_loss(), optimizer=SGD(0.03, 0.9, nesterov=True), epochs=1,
                     streams=(Stream("lab", batch), Stream("unl", mu * batch)),
                     views=(View("x_aug", "x", weak), View("u_weak", "u", weak), View("u_strong", "u", strong)),
                     passes={"lab": 1.0, "unl": 2.0})


def timed(executor, model, task, starts, streams, device) -> float:
    gens = [torch.Generator().manual_seed(c) for c in range(len(starts))]
    _sync(device)
    t0 = time.perf_counter()
    executor.run(model, task, starts, streams, gens)
    _sync(device)
    return time.perf_counter() - t0


def cmd_rounds(a) -> dict:
    """vmap ÷ sequential for K clients of one model, one round of ``--samples`` per client."""
    device = torch.device(a.device)
    shape = SHAPES[a.model]
    model = build_model(a.model, shape, 10, seed=0).to(device)
    k = int(a.clients)
    start = {n: v.detach().clone() for n, v in model.state_dict().items()}
    data = clients_data(k, a.samples, shape, device)
    streams = [{"main": {"x": d["x"], "y": d["y"]}} for d in data]
    task = supervised(a.batch)
    flops = flops_per_sample(model.cpu(), shape) * a.samples * k
    model.to(device)
    seq, vm = [], []
    for r in range(a.reps + 1):
        order = [("seq", SequentialExecutor()), ("vmap", VmapExecutor())]
        if r % 2:
            order.reverse()
        times = {name: timed(ex, model, task, [start] * k, streams, device) for name, ex in order}
        if r:  # repetition 0 warms up
            seq.append(times["seq"])
            vm.append(times["vmap"])
    ratios = [s / v for s, v in zip(seq, vm)]
    res = {
        "model": a.model, "device": str(device), "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
        "threads": torch.get_num_threads(), "clients": k, "samples": a.samples, "batch": a.batch,
        "sequential_s": statistics.median(seq), "vmap_s": statistics.median(vm),
        "speedup_vmap": statistics.median(ratios), "speedup_range": [min(ratios), max(ratios)],
        "gflop_per_round": flops / 1e9,
        "vmap_tflops": flops / statistics.median(vm) / 1e12, "sequential_tflops": flops / statistics.median(seq) / 1e12,
    }
    res["vmap_share_of_peak"] = res["vmap_tflops"] / a.peak_tflops
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        timed(VmapExecutor(), model, task, [start] * k, streams, device)
        res["vmap_peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return res


def cmd_fixmatch(a) -> dict:
    """One FixMatch round ÷ one supervised round on the same labelled data, against the FLOP ratio."""
    device = torch.device(a.device)
    shape = SHAPES[a.model]
    model = build_model(a.model, shape, 10, seed=0).to(device)
    start = {n: v.detach().clone() for n, v in model.state_dict().items()}
    steps = 10
    n_l, n_u = steps * a.batch, steps * a.mu * a.batch
    data = clients_data(1, n_l, shape, device, unlabeled=n_u)
    sup_streams = [{"main": {"x": data[0]["x"], "y": data[0]["y"]}}]
    fix_streams = [{"lab": {"x": data[0]["x"], "y": data[0]["y"]}, "unl": {"u": data[0]["u"]}}]
    ex = SequentialExecutor() if a.executor == "sequential" else VmapExecutor()
    sup_t, fix_t, aug_t = [], [], []
    fix_task = fixmatch(a.batch, a.mu, shape)
    for r in range(a.reps + 1):
        pair = [("sup", supervised(a.batch), sup_streams), ("fix", fix_task, fix_streams)]
        if r % 2:
            pair.reverse()
        t = {name: timed(ex, model, task, [start], st, device) for name, task, st in pair}
        # the augmentations alone (drawn and applied as the executor does)
        g = torch.Generator().manual_seed(r)
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(steps):
            for v in fix_task.views:
                n = a.batch if v.src == "x" else a.mu * a.batch
                v.augmentation.apply(data[0][v.src][:n], v.augmentation.draw(n, g))
        _sync(device)
        if r:
            sup_t.append(t["sup"])
            fix_t.append(t["fix"])
            aug_t.append(time.perf_counter() - t0)
    flop_ratio = (a.batch + 2 * a.mu * a.batch) / a.batch
    ratios = [f / s for f, s in zip(fix_t, sup_t)]
    return {
        "model": a.model, "device": str(device), "threads": torch.get_num_threads(), "executor": a.executor,
        "batch": a.batch, "mu": a.mu, "steps": steps,
        "supervised_round_s": statistics.median(sup_t), "fixmatch_round_s": statistics.median(fix_t),
        "augment_s": statistics.median(aug_t),
        "measured_ratio": statistics.median(ratios), "flop_ratio": flop_ratio,
        "ratio_over_flop_share": statistics.median(ratios) / flop_ratio,
        "ratio_over_flop_share_without_augment": statistics.median(
            [(f - g) / s for f, g, s in zip(fix_t, aug_t, sup_t)]) / flop_ratio,
    }


def cmd_scaling(a) -> dict:
    """Seconds per client per round as the number of clients in one vmap call grows (and peak GPU memory)."""
    device = torch.device(a.device)
    shape = SHAPES[a.model]
    model = build_model(a.model, shape, 10, seed=0).to(device)
    start = {n: v.detach().clone() for n, v in model.state_dict().items()}
    rows = []
    for k in [int(x) for x in str(a.clients).split(",")]:
        data = clients_data(k, a.samples, shape, device)
        streams = [{"main": {"x": d["x"], "y": d["y"]}} for d in data]
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        try:
            times = [timed(VmapExecutor(), model, supervised(a.batch), [start] * k, streams, device) for _ in range(a.reps + 1)][1:]
        except torch.cuda.OutOfMemoryError:
            rows.append({"clients": k, "oom": True})
            break
        t = statistics.median(times)
        row = {"clients": k, "round_s": t, "s_per_client": t / k}
        if device.type == "cuda":
            row["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
        rows.append(row)
        del data, streams
    return {"model": a.model, "device": str(device), "samples": a.samples, "batch": a.batch, "rows": rows}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("rounds", "fixmatch", "scaling"))
    p.add_argument("--model", default="resnet9", choices=sorted(SHAPES))
    p.add_argument("--device", default="cpu")
    p.add_argument("--clients", default="10")
    p.add_argument("--samples", type=int, default=500)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--mu", type=int, default=7)
    p.add_argument("--executor", default="sequential", choices=("sequential", "vmap"))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--peak-tflops", type=float, default=67.0)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    res = {"rounds": cmd_rounds, "fixmatch": cmd_fixmatch, "scaling": cmd_scaling}[a.what](a)
    print(json.dumps(res, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
