"""benchmarks/step_overhead.py: its median interval, and that its bare loop trains what edgesim's step trains."""

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "step_overhead", Path(__file__).resolve().parents[1] / "benchmarks" / "step_overhead.py")
step_overhead = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(step_overhead)


def test_median_interval_is_the_binomial_order_statistics():
    # n = 20: P(Bin(20, 1/2) <= 5) = 0.0207 <= 0.025 < P(<= 6) = 0.0577, so the 6th and 15th smallest (by hand)
    assert step_overhead.median_interval([float(v) for v in range(20, 0, -1)]) == (6.0, 15.0)
    # limiting case: too few values for 95 %, the range
    assert step_overhead.median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)


def test_bare_loop_trains_the_same_model_as_edgesim():
    """Same model, data, batches and SGD: the bare loop is edgesim's step without edgesim (float32, both layouts)."""
    torch = pytest.importorskip("torch")
    from edgesim.learning.context import build_context
    from edgesim.learning.numerics import Numerics
    from edgesim.scenarios.schema import load_scenario

    root = Path(__file__).resolve().parents[1]
    sc = load_scenario(root / "scenarios" / "default.toml", ["data.dataset=\"synthetic\""])
    L = sc.learning
    ctx = build_context(sc.seed, L["data"], L["train"], L["run"], sc.workload, sc.system.n_devices)
    device = max(range(ctx.n_devices), key=lambda d: ctx.clients[d].y_sup.shape[0])
    for layout in ("contiguous", "channels_last"):
        edgesim, bare, steps = step_overhead.sides(ctx, "fedavg", device, 0, Numerics("float32", layout))
        assert steps > 1
        a, b = edgesim(), bare()
        assert a.keys() == b.keys()
        for k in a:
            torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-6)
