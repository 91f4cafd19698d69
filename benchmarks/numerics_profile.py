"""Where one round's host time goes, per method: model passes, augmentations, evaluation, data movement, the rest.

For each method (``--methods``) of a scenario, in one numerics variant (``--variant
MEMORY_FORMAT/PRECISION``), round 0 is run once untimed (warm-up: allocations, oneDNN's kernel
choice) and round 1 under ``torch.profiler`` (CPU, one thread). The round's wall time is split into
disjoint parts, each span counted once (the first part that claims it, in this order):

- **evaluation**: inclusive time of the accuracy and inference functions (``evaluate_shared``,
  ``evaluate_personal``, ``labeling_accuracy``, ``device_losses`` and
  :mod:`edgesim.learning.inference`'s ``logits``/``evaluate``/``mc_dropout_proba``/``predict_proba``),
  wherever they run (metrics, UM-pFSSL's pseudo-labels and helper search);
- **augmentations**: inclusive time of the views (``edgesim.learning.augment``'s ``apply``);
- **optimizer**: inclusive time of the functional optimizers' ``update_`` (``edgesim.learning.optim``);
- **forward**: inclusive time of the model's ``forward`` (training passes; Python inside it included);
- **backward**: the autograd engine's top-level ops (``autograd::engine::evaluate_function: ...``);
- **data movement/indexing**: the other top-level copy, index, gather, cat and conversion ops
  (batches gathered from the clients' tensors, masks, states copied and re-formatted);
- **other ops**: every other top-level torch op (losses, EMA, aggregation, the server phase's arithmetic);
- **Python/host**: the round's wall time minus all of the above.

Beside them: **conv+matmul kernels**, the self time of convolutions and matrix products and their
backward kernels in every phase (``aten::*conv*``, ``mkldnn_*``, ``addmm``, ``mm``, ``bmm``) — the
model's own arithmetic, the ceiling of any cut of the rest; and the FLOP/s reached: the FLOPs the clock
charged this round (each device's compute seconds × its clock rate, plus the server phase's seconds ×
the server's, × ``workload.flops_per_cycle``; training only) over the round's thread CPU seconds (one torch
thread: the work done, whatever else a shared host runs; the parts above are shares of wall time), as a share
of the core's peak (``--peak-gflops`` for float32 and ``--peak-gflops-bf16``; ``--measure-peak`` times
a 2048×2048 matrix product on one thread, the best of 5, in float32 and in bfloat16).

    EDGESIM_DATA=../shared/data .venv/bin/python benchmarks/numerics_profile.py \\
        scenarios/arena_labels_at_clients.toml \\
        --methods fixavg um_pfssl feddure --variant channels_last/float32 --measure-peak
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from edgesim.engine import Simulation
from edgesim.scenarios.algorithm_run import make_backends as _make_backends
from edgesim.scenarios.schema import load_scenario

MODEL_OPS = ("conv", "mkldnn", "addmm", "aten::mm", "aten::bmm", "aten::linear", "aten::matmul")
DATA_OPS = ("copy", "index", "gather", "scatter", "aten::cat", "aten::stack", "aten::to", "aten::_to_copy",
            "aten::clone", "aten::contiguous", "aten::split", "aten::select", "aten::slice", "aten::narrow",
            "aten::view", "aten::reshape", "aten::flatten", "aten::permute", "aten::expand", "aten::empty",
            "aten::ones", "aten::zeros", "aten::fill_", "aten::arange", "aten::detach", "aten::lift")
PARTS = ("evaluate", "augment", "optimizer", "forward")  # labelled regions, in the order they claim time


def _label(owner, name: str, label: str) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def wrapped(*a, **k):
        with record_function(label):
            return fn(*a, **k)

    setattr(owner, name, wrapped)


def _instrument() -> None:
    """Label evaluation, the views, the optimizers and the models' forward, also where a module imported a
    function by name."""
    import sys

    import edgesim.learning.algorithms  # noqa: F401 - every algorithm module loaded, so their imports are seen
    from edgesim.learning import augment, inference, models, optim
    from edgesim.learning.algorithms import common

    for cls in vars(augment).values():
        if isinstance(cls, type) and callable(getattr(cls, "apply", None)) and cls.__module__ == augment.__name__:
            _label(cls, "apply", "edgesim::augment")
    for cls in vars(optim).values():
        if isinstance(cls, type) and callable(getattr(cls, "update_", None)) and cls.__module__ == optim.__name__:
            _label(cls, "update_", "edgesim::optimizer")
    for cls in vars(models).values():
        if (isinstance(cls, type) and issubclass(cls, torch.nn.Module) and cls.__module__ == models.__name__
                and "forward" in vars(cls)):
            _label(cls, "forward", "edgesim::forward")
    targets = [(common, n) for n in ("evaluate_shared", "evaluate_personal", "labeling_accuracy", "device_losses")]
    targets += [(inference, n) for n in ("logits", "evaluate", "mc_dropout_proba", "predict_proba")]
    for owner, name in targets:
        original = getattr(owner, name, None)
        if original is None:
            continue
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("edgesim") and getattr(mod, name, None) is original:
                _label(mod, name, "edgesim::evaluate")


def _merge(spans):
    spans = sorted(spans)
    out = []
    for a, b in spans:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _minus(spans, taken):
    """``spans`` less the ``taken`` spans (both merged and sorted): one pass over both."""
    out, k = [], 0
    for a, b in spans:
        while k < len(taken) and taken[k][1] <= a:
            k += 1
        cur, j = a, k
        while j < len(taken) and taken[j][0] < b:
            c, d = taken[j]
            if c > cur:
                out.append((cur, c))
            cur = max(cur, d)
            j += 1
        if cur < b:
            out.append((cur, b))
    return out


def _length(spans) -> float:
    return sum(b - a for a, b in spans)


def shares(prof, wall_s: float) -> dict:
    """Seconds of the round per part (module docstring): disjoint, summing to ``wall_s``; plus ``kernels``."""
    events = prof.events()
    regions = {p: [] for p in PARTS}
    for e in events:
        if e.name.startswith("edgesim::") and e.name[9:] in regions:
            regions[e.name[9:]].append((e.time_range.start, e.time_range.end))
    out, taken = {}, []
    for p in PARTS:
        own = _minus(_merge(regions[p]), taken)
        out[p] = _length(own) / 1e6
        taken = _merge(taken + own)
    rest = {"backward": [], "data": [], "other_ops": []}
    kernels = 0.0
    for e in events:
        if e.name.startswith("edgesim::"):
            continue
        if any(k in e.name for k in MODEL_OPS):
            kernels += e.self_cpu_time_total / 1e6
        if e.cpu_parent is not None and not e.cpu_parent.name.startswith("edgesim::"):
            continue  # top-level ops only (children are inside their parent's time)
        span = (e.time_range.start, e.time_range.end)
        if e.name.startswith("autograd::engine::evaluate_function"):
            rest["backward"].append(span)
        elif any(k in e.name for k in DATA_OPS):
            rest["data"].append(span)
        else:
            rest["other_ops"].append(span)
    for p in ("backward", "data", "other_ops"):
        own = _minus(_merge(rest[p]), taken)
        out[p] = _length(own) / 1e6
        taken = _merge(taken + own)
    out["python_host"] = max(0.0, wall_s - sum(out.values()))
    out["kernels"] = kernels
    return out


def measure_peak(dtype: torch.dtype, n: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of an ``n``×``n`` matrix product on this thread's CPU time, the best of ``repeats`` (after one
    warm-up): what the core's kernels reach, whatever else the host runs."""
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time()
        torch.mm(a, b)
        best = min(best, time.thread_time() - t0)
    return 2 * n ** 3 / best / 1e9


COLUMNS = (("forward", "forward"), ("backward", "backward"), ("optimizer", "optimizer"),
           ("augment", "augmentations"), ("evaluate", "evaluation"), ("data", "data movement"),
           ("other_ops", "other ops"), ("python_host", "Python/host"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--methods", nargs="+", required=True)
    ap.add_argument("--variant", default="channels_last/float32")
    ap.add_argument("--peak-gflops", type=float, default=83.1,
                    help="one core's float32 peak (default: 2.6 GHz x 32 FLOP/cycle, two 256-bit FMA pipes)")
    ap.add_argument("--peak-gflops-bf16", type=float, default=None, help="default: twice the float32 peak")
    ap.add_argument("--measure-peak", action="store_true",
                    help="use the measured 2048x2048 matrix product's GFLOP/s as the peak (float32, bfloat16)")
    ap.add_argument("--top", type=int, default=0, help="also list each method's N ops of most self time")
    a = ap.parse_args()
    torch.set_num_threads(1)
    from edgesim.learning.malloc import keep_freed_memory

    keep_freed_memory()  # as the edgesim command does at start-up
    fmt, prec = a.variant.split("/")
    if a.measure_peak:
        f32, bf16 = measure_peak(torch.float32), measure_peak(torch.bfloat16)
        print(f"measured peak (2048x2048 mm, one thread, best of 5): float32 {f32:.1f} GFLOP/s, "
              f"bfloat16 {bf16:.1f} GFLOP/s", flush=True)
        peak = bf16 if prec == "bfloat16" else f32
    else:
        peak = (a.peak_gflops_bf16 or 2 * a.peak_gflops) if prec == "bfloat16" else a.peak_gflops
    _instrument()
    sc = load_scenario(a.scenario, a.set + [f'train.memory_format="{fmt}"', f'train.precision="{prec}"'])
    build = _make_backends(sc)[0]
    head = " | ".join(name for _, name in COLUMNS)
    print(f"| method ({a.variant}) | round 1 wall / thread CPU s | {head} | conv+matmul kernels "
          f"| GFLOP/s charged ÷ thread CPU s "
          f"| share of peak ({peak:.0f} GFLOP/s) |")
    print("|---" * (len(COLUMNS) + 5) + "|")
    for m in a.methods:
        sim = Simulation(sc.system, sc.budget, build(m), seed=sc.seed)
        sim.run_round()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0, c0 = time.perf_counter(), time.thread_time()
            rec = sim.run_round()
            wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
        sh = shares(prof, wall)
        freq = sc.system.cpu_freq_hz
        cycles = sum(d.compute_s * (freq[d.device] if isinstance(freq, (list, tuple)) else freq) for d in rec.devices)
        cycles += (rec.server_before_s + rec.server_after_s) * sc.system.server_freq_hz
        gflops = cycles * sc.workload.flops_per_cycle / cpu / 1e9
        cells = " | ".join(f"{1e3 * sh[k]:.0f} ms ({100 * sh[k] / wall:.0f} %)" for k, _ in COLUMNS)
        kern = f"{1e3 * sh['kernels']:.0f} ms ({100 * sh['kernels'] / wall:.0f} %)"
        print(f"| {m} | {wall:.2f} / {cpu:.2f} | {cells} | {kern} "
              f"| {gflops:.1f} | {100 * gflops / peak:.1f} % |", flush=True)
        if a.top:
            ops = sorted((e for e in prof.key_averages() if not e.key.startswith("edgesim::")),
                         key=lambda e: -e.self_cpu_time_total)[:a.top]
            print(f"    {m}: " + ", ".join(f"{e.key} {e.self_cpu_time_total / 1e3:.0f} ms ({e.count})" for e in ops),
                  flush=True)
        with contextlib.suppress(Exception):
            del sim


if __name__ == "__main__":
    main()
