"""edgesim's local training step against a bare PyTorch loop, in each memory format and precision.

One device's local training of one round, as a FedAvg run does it: the scenario's context (data already on
the device, the model, ``[train]``), the registered backend's task (``--method``, default ``fedavg``: its
default supervised task, mean cross-entropy, SGD with the run's lr and momentum, ``[train] batch_size``,
``workload.local_iterations`` epochs) and ``edgesim.learning.algorithms.common.train_devices`` (generators,
the sequential executor, the divergence check) on device ``--device`` from the backend's global model.

The bare loop trains the same model (a copy of the context's template ``nn.Module``) from the same state on
the same device's tensors, already in memory in the cell's layout, on the same batches (edgesim's own
sample order, ``task_schedule``) with ``torch.optim.SGD`` (same lr, momentum, weight decay), in two flavours:
``bare`` (SGD's per-tensor loop, its CPU default) and ``bare_foreach`` (its multi-tensor ``foreach`` update):
``load_state_dict``, ``zero_grad`` / forward / ``F.cross_entropy`` / ``backward`` / ``step`` per batch, the
forward pass and the loss under ``torch.autocast(bfloat16)`` in bfloat16, and the state handed back
contiguous — what edgesim's executor hands back.

Cells: {contiguous, channels_last} x {float32, bfloat16}; the twelve variants (two bare loops and edgesim per
cell) run in rotating order (the first shifts by one each rotation, so a busy host slows them alike),
``--rotations`` times after one warm-up call each; each call's thread CPU time (one torch thread runs every op
in the calling thread, so this is the work done, whatever else the host runs) and wall-clock time. Reported
per cell: the medians (ms per call and per step), the median of the paired ratios edgesim ÷ the cell's faster
bare loop (same rotation) with its 95 % distribution-free interval (order statistics of the binomial), edgesim
÷ the best bare loop of all cells, and the max |difference| of the two trained models.

``--profile`` then runs ``cProfile`` (on thread CPU time) over ``--profile-calls`` calls of every variant, prints
each one's own time split into torch's C++ ops, torch's Python, edgesim's Python and the rest, and the functions
with the largest own time, to name where an overhead goes.

    EDGESIM_DATA=../shared/data nice -n 10 .venv/bin/python benchmarks/step_overhead.py \\
        scenarios/arena_dofed_normal.toml --rotations 40 --profile
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import math
import platform
import pstats
import statistics
import time

import torch
import torch.nn.functional as F

from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.algorithms.common import train_devices
from edgesim.learning.context import build_context
from edgesim.learning.executors import make_executor, task_schedule
from edgesim.learning.numerics import Numerics, describe
from edgesim.scenarios.schema import load_scenario

CELLS = [Numerics("float32", "contiguous"), Numerics("float32", "channels_last"),
         Numerics("bfloat16", "contiguous"), Numerics("bfloat16", "channels_last")]


def cell_name(n: Numerics) -> str:
    return f"{n.memory_format}/{n.precision}"


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval for the median: order statistics ``(j, n+1-j)`` with
    ``j`` the largest with ``P(Bin(n, 1/2) < j) ≤ (1 - level)/2`` (exact binomial); ``(min, max)`` for n ≤ 8, which
    covers less than ``level`` for n ≤ 5."""
    v = sorted(values)
    n = len(v)
    alpha = (1 - level) / 2
    j, cdf = 0, 0.0
    while True:
        p = math.comb(n, j) / 2**n
        if cdf + p > alpha:
            break
        cdf += p
        j += 1
    j = max(j, 1)  # 1-based order statistic
    return v[j - 1], v[n - j]


BARE = {"bare": False, "bare_foreach": True}  # torch.optim.SGD's per-tensor loop, and its multi-tensor (foreach) one


def sides(ctx, method: str, device: int, round_index: int, numerics: Numerics, foreach: bool = False):
    """``(edgesim, bare, steps)``: two functions training ``device`` once in ``numerics``, each returning the
    trained state (contiguous), and the number of optimiser steps; ``foreach``: the bare loop's SGD updates all
    tensors in one multi-tensor call."""
    import dataclasses

    own = dataclasses.replace(ctx, executor=make_executor("sequential", ctx.device, numerics))
    cfg = REGISTRY[method].config_cls()
    backend = REGISTRY[method].build(own, cfg)
    task = backend.task
    plain = len(task.streams) == 1 and not task.views and task.step is None and not task.prox_mu
    if not plain or type(task.optimizer).__name__ != "SGD":
        raise SystemExit(f"step_overhead: {method}'s task is not plain supervised SGD; the bare loop would differ")
    start = {k: v.detach().clone() for k, v in backend.global_state.items()}
    data = backend.data[device]
    stream = task.streams[0].name
    x, y = data[stream]["x"], data[stream]["y"]
    sizes = {stream: int(y.shape[0])}

    def edgesim():
        return train_devices(own, method, round_index, [device], [start], [data], task).params[0]

    order = task_schedule(task, sizes, own.generator("train", round_index, device))[stream]
    fmt = torch.channels_last if numerics.channels_last else torch.contiguous_format
    xf = x.to(memory_format=fmt) if x.dim() == 4 else x
    net = copy.deepcopy(ctx.model)
    opt_cfg = task.optimizer
    if task.schedule is not None and any(task.schedule.factor(s, len(order)) != 1.0 for s in range(len(order))):
        raise SystemExit(f"step_overhead: {method}'s learning rate is scheduled; the bare loop's is constant")
    lr = opt_cfg.lr

    def bare():
        net.load_state_dict(start)
        net.to(memory_format=fmt)
        net.train()
        opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=opt_cfg.momentum, weight_decay=opt_cfg.weight_decay,
                              nesterov=opt_cfg.nesterov, foreach=foreach)
        for idx in order:
            opt.zero_grad(set_to_none=True)
            with numerics.autocast(ctx.device):
                loss = F.cross_entropy(net(xf[idx]), y[idx])
            loss.backward()
            opt.step()
        return {k: v.detach().contiguous().clone() for k, v in net.state_dict().items()}

    return edgesim, bare, len(order)


def own_time(st: pstats.Stats) -> dict:
    """Own (``tottime``) seconds of a profile by where the code lives: ``ops`` (C functions: torch's kernels and
    bindings), ``torch`` (torch's Python files), ``edgesim`` (the project's ``edgesim/``, ``learning/``,
    ``scenarios/``), ``rest``."""
    import os

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = {"ops": 0.0, "torch": 0.0, "edgesim": 0.0, "rest": 0.0}
    for (filename, _, _), (_, _, tt, _, _) in st.stats.items():
        if filename == "~":
            out["ops"] += tt
        elif f"{os.sep}torch{os.sep}" in filename:
            out["torch"] += tt
        elif filename.startswith(repo) and not filename.startswith(os.path.join(repo, "benchmarks")) \
                and ".venv" not in filename:
            out["edgesim"] += tt
        else:
            out["rest"] += tt
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", nargs="?", default="scenarios/arena_dofed_normal.toml")
    ap.add_argument("--set", action="append", default=[], help="scenario override, as edgesim run --set")
    ap.add_argument("--method", default="fedavg")
    ap.add_argument("--device", type=int, default=0, help="the device whose local training is timed")
    ap.add_argument("--round", type=int, default=0, help="the round whose batches it trains on")
    ap.add_argument("--rotations", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cells", nargs="*", help="MEMORY_FORMAT/PRECISION (default: all four)")
    ap.add_argument("--profile", action="store_true", help="then cProfile both sides of each cell")
    ap.add_argument("--profile-calls", type=int, default=20)
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    sc = load_scenario(a.scenario, a.set)
    L = sc.learning
    ctx = build_context(sc.seed, L["data"], L["train"], L["run"], sc.workload, sc.system.n_devices)
    cells = [Numerics(*reversed(c.split("/"))) for c in a.cells] if a.cells else CELLS
    variants = []
    for n in cells:
        for kind, foreach in BARE.items():
            e, b, steps = sides(ctx, a.method, a.device, a.round, n, foreach)
            variants.append((kind, n, b))
        variants.append(("edgesim", n, e))
    out = {(k, cell_name(n)): f() for k, n, f in variants}  # warm-up, and the models compared
    wall = {(k, cell_name(n)): [] for k, n, _ in variants}
    cpu = {(k, cell_name(n)): [] for k, n, _ in variants}
    for r in range(a.rotations):
        for j in range(len(variants)):
            kind, n, f = variants[(j + r) % len(variants)]
            t0, c0 = time.perf_counter(), time.thread_time()
            f()
            cpu[(kind, cell_name(n))].append(time.thread_time() - c0)
            wall[(kind, cell_name(n))].append(time.perf_counter() - t0)
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    info = describe(cells[0], ctx.device)
    x_shape = tuple(ctx.input_shape)
    print(f"{a.rotations} rotations of {len(variants)} variants, {torch.get_num_threads()} torch thread(s), torch "
          f"{torch.__version__}, {platform.processor() or platform.machine()} ({info['cpu_capability']}, bfloat16: "
          f"{info['bfloat16_hardware']}), load average {load} at the end; {sc.path}: {a.method}'s task, model "
          f"{L['train'].model}, input {x_shape}, device {a.device}, round {a.round}: {steps} steps of batch "
          f"{L['train'].batch_size}")
    for clock, times in (("thread CPU time", cpu), ("wall-clock time", wall)):
        med = {k: statistics.median(v) for k, v in times.items()}
        best = min((k for k in med if k[0] != "edgesim"), key=med.__getitem__)
        print(f"\n{clock}; best bare loop of all cells: {best[0]} in {best[1]}\n")
        print("| layout/precision | bare ms per call (per step) | bare_foreach ms per call (per step) | edgesim ms per "
              "call (per step) | edgesim ÷ the cell's best bare loop, median of paired ratios (95 % interval) "
              "| edgesim ÷ best bare of all cells | max \\|diff\\| of the models (edgesim, best bare) |")
        print("|---|---|---|---|---|---|---|")
        for n in cells:
            c = cell_name(n)
            e = ("edgesim", c)
            b = min(((kind, c) for kind in BARE), key=med.__getitem__)
            ratios = [te / tb for tb, te in zip(times[b], times[e])]
            lo, hi = median_interval(ratios)
            diff = max(float((out[b][k].float() - out[e][k].float()).abs().max()) for k in out[b])
            cols = " | ".join(f"{1e3 * med[(kind, c)]:.2f} ({1e3 * med[(kind, c)] / steps:.2f})" for kind in BARE)
            print(f"| {c} | {cols} | {1e3 * med[e]:.2f} ({1e3 * med[e] / steps:.2f}) "
                  f"| **{statistics.median(ratios):.3f}** ({lo:.3f}-{hi:.3f}) vs {b[0]} "
                  f"| {med[e] / med[best]:.3f} | {diff:.1e} |", flush=True)
    if a.profile:
        print("\ncProfile on thread CPU time, own time per call in ms: torch's C++ ops (builtins and tensor "
              "methods), torch's Python (nn.Module, autograd, optim, autocast), edgesim's Python, the rest (this "
              "script, stdlib)\n")
        print("| variant | layout/precision | total | C++ ops | torch Python | edgesim Python | rest |")
        print("|---|---|---|---|---|---|---|")
        reports = []
        for kind, n, f in variants:
            prof = cProfile.Profile(time.thread_time)
            prof.enable()
            for _ in range(a.profile_calls):
                f()
            prof.disable()
            s = io.StringIO()
            st = pstats.Stats(prof, stream=s)
            share = own_time(st)
            print(f"| {kind} | {cell_name(n)} | {1e3 * st.total_tt / a.profile_calls:.2f} | "
                  + " | ".join(f"{1e3 * share[k] / a.profile_calls:.2f}" for k in ("ops", "torch", "edgesim", "rest"))
                  + " |", flush=True)
            reports.append((kind, n, st, s))
        for kind, n, st, s in reports:
            print(f"\n### cProfile: {kind}, {cell_name(n)}, {a.profile_calls} calls, "
                  f"{st.total_tt / a.profile_calls * 1e3:.2f} ms per call (thread CPU time, profiled)")
            st.sort_stats("tottime").print_stats(a.top)
            lines = s.getvalue().splitlines()
            head = next(i for i, line in enumerate(lines) if "ncalls" in line)
            print("\n".join(line for line in lines[head:] if line.strip()))


if __name__ == "__main__":
    main()
