"""Where one round's host time goes, per method: the model's arithmetic, augmentations, evaluation, the rest.

For each method (``--methods``) of a scenario, in one numerics variant (``--variant
MEMORY_FORMAT/PRECISION``), round 0 is run once untimed (warm-up: allocations, oneDNN's kernel
choice) and round 1 under ``torch.profiler`` (CPU, one thread). Reported per method:

- **model arithmetic**: the self time of convolutions, matrix products and their backward kernels
  (``aten::*conv*``, ``mkldnn_*``, ``addmm``, ``mm``, ``bmm``, ``linear``) — what the FLOPs are;
- **augmentations**: inclusive time of the views (``edgesim.learning.augment`` ``apply``), which are
  labelled with ``record_function``;
- **evaluation**: inclusive time of :mod:`edgesim.learning.inference` (``logits``, ``evaluate``,
  ``mc_dropout_proba``);
- **other ops**: every other torch op's self time outside those two (optimizer, BatchNorm, pooling,
  losses, copies), and **Python/host**: the round's wall time minus all op time.

The FLOP/s reached: the FLOPs the clock charged this round (each device's compute seconds × its
clock rate, plus the server phase's seconds × the server's, × ``workload.flops_per_cycle``)
over the round's host seconds, beside the
core's peak
(``--peak-gflops``, float32; bfloat16 is twice that on AVX512-BF16).

    EDGESIM_DATA=../shared/data .venv/bin/python benchmarks/numerics_profile.py \\
        scenarios/arena_labels_at_clients.toml \\
        --methods fixavg um_pfssl feddure --variant channels_last/float32
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


def _label(module, name: str, label: str) -> None:
    fn = getattr(module, name)

    @functools.wraps(fn)
    def wrapped(*a, **k):
        with record_function(label):
            return fn(*a, **k)

    setattr(module, name, wrapped)


def _instrument() -> None:
    """Label the views' ``apply`` and the inference functions, also where a module imported them by name."""
    import sys

    import edgesim.learning.algorithms  # noqa: F401 - every algorithm module loaded, so their imports are seen
    from edgesim.learning import augment, inference

    for cls in vars(augment).values():
        if isinstance(cls, type) and callable(getattr(cls, "apply", None)) and cls.__module__ == augment.__name__:
            _label(cls, "apply", "edgesim::augment")
    from edgesim.learning.algorithms import common

    for name in ("evaluate_shared", "evaluate_personal"):  # the rounds' accuracy metrics
        if hasattr(common, name):
            _label(common, name, "edgesim::evaluate")
    for name in ("logits", "evaluate", "mc_dropout_proba", "predict_proba"):
        original = getattr(inference, name, None)
        if original is None:
            continue
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("edgesim") and getattr(mod, name, None) is original:
                _label(mod, name, "edgesim::evaluate")


def _shares(prof, wall_s: float) -> dict:
    events = prof.events()
    regions = {"edgesim::augment": [], "edgesim::evaluate": []}
    for e in events:
        if e.name in regions:
            regions[e.name].append((e.time_range.start, e.time_range.end))

    def inside(e, label) -> bool:
        return any(a <= e.time_range.start and e.time_range.end <= b for a, b in regions[label])

    out = {"model": 0.0, "augment": 0.0, "evaluate": 0.0, "other_ops": 0.0}
    for label, key in (("edgesim::augment", "augment"), ("edgesim::evaluate", "evaluate")):
        out[key] = sum((b - a) for a, b in _merge(regions[label])) / 1e6
    for e in events:
        if e.name.startswith("edgesim::") or e.cpu_parent is not None:
            continue  # top-level ops only (children are inside their parent's time)
        dt = e.cpu_time_total / 1e6
        if inside(e, "edgesim::augment") or inside(e, "edgesim::evaluate"):
            continue
        if any(k in e.name for k in MODEL_OPS) or _has_model_child(e):
            out["model"] += dt
        else:
            out["other_ops"] += dt
    out["python_host"] = max(0.0, wall_s - sum(out.values()))
    return out


def _has_model_child(e) -> bool:
    return e.name in ("autograd::engine::evaluate_function: ConvolutionBackward0",
                      "autograd::engine::evaluate_function: AddmmBackward0",
                      "autograd::engine::evaluate_function: MmBackward0")


def _merge(spans):
    spans = sorted(spans)
    out = []
    for a, b in spans:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--methods", nargs="+", required=True)
    ap.add_argument("--variant", default="channels_last/float32")
    ap.add_argument("--peak-gflops", type=float, default=83.1,
                    help="one core's float32 peak (default: 2.6 GHz x 32 FLOP/cycle, AVX-512 with two FMA pipes)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    _instrument()
    fmt, prec = a.variant.split("/")
    sc = load_scenario(a.scenario, a.set + [f'train.memory_format="{fmt}"', f'train.precision="{prec}"'])
    build = _make_backends(sc)[0]
    peak = a.peak_gflops * (2 if prec == "bfloat16" else 1)
    print(f"| method ({a.variant}) | round 1 host s | model arithmetic | augmentations | evaluation | other ops "
          f"| Python/host | GFLOP/s charged ÷ host s | share of peak ({peak:.0f} GFLOP/s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for m in a.methods:
        sim = Simulation(sc.system, sc.budget, build(m), seed=sc.seed)
        sim.run_round()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            rec = sim.run_round()
            wall = time.perf_counter() - t0
        sh = _shares(prof, wall)
        freq = sc.system.cpu_freq_hz
        cycles = sum(d.compute_s * (freq[d.device] if isinstance(freq, (list, tuple)) else freq) for d in rec.devices)
        cycles += (rec.server_before_s + rec.server_after_s) * sc.system.server_freq_hz
        gflops = cycles * sc.workload.flops_per_cycle / wall / 1e9
        pct = {k: f"{100 * v / wall:.0f} %" for k, v in sh.items()}.__getitem__
        print(f"| {m} | {wall:.2f} | {pct('model')} | {pct('augment')} | {pct('evaluate')} | {pct('other_ops')} "
              f"| {pct('python_host')} | {gflops:.1f} | {100 * gflops / peak:.1f} % |", flush=True)
        with contextlib.suppress(Exception):
            del sim


if __name__ == "__main__":
    main()
