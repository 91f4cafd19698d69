"""On a CUDA GPU: executors equal the CPU, every algorithm runs, checkpoints cross devices, no per-step syncs.

Marked ``gpu`` and skipped where torch sees no CUDA device (CI has none); run
them with ``python -m pytest -m gpu tests/test_gpu.py`` on a GPU machine.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest
import torch

from edgesim.learning.executors import SequentialExecutor, VmapExecutor
from edgesim.learning.models import build_model
from edgesim.learning.objectives import cross_entropy_loss, fixmatch_loss
from edgesim.learning.optim import SGD
from edgesim.learning.tasks import LocalTask, Stream, View

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

CUDA = torch.device("cuda")


@pytest.fixture
def no_tf32():
    """Full float32 convolutions and matmuls (cuDNN's default TF32 rounds to 10 mantissa bits)."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved

TINY = """
name = "gpu_tiny"
seed = 4
[system]
n_devices = 6
bandwidth_hz = 1e6
cpu_freq_hz = 1e9
[budget]
total_time_s = 40
rounds = 3
[workload]
cycles_per_sample = 1e7
model_bits = "auto"
[data]
dataset = "digits"
partition = "{partition}"
[train]
model = "{model}"
lr = 0.05
batch_size = 16
device = "{device}"
[run]
algorithms = {algorithms}
clients_per_round = 3
checkpoint_every = {every}
"""


def scenario(tmp_path: Path, algorithms, *, partition="dirichlet", model="cnn", device="cuda", every=0, name="s"):
    p = tmp_path / f"{name}.toml"
    p.write_text(TINY.format(partition=partition, model=model, device=device, every=every,
                             algorithms="[" + ", ".join(f'"{a}"' for a in algorithms) + "]"))
    return p


def rows(folder: Path) -> list[dict]:
    with open(folder / "rounds.csv") as f:
        return list(csv.DictReader(f))


def state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def to(states, device):
    return [{k: v.to(device) for k, v in s.items()} for s in states]


def max_diff(a, b):
    return max(float((x[k].double().cpu() - y[k].double().cpu()).abs().max()) for x, y in zip(a, b) for k in x)


@pytest.mark.parametrize("model_name", ["cnn", "resnet9"])
@pytest.mark.parametrize("objective", ["supervised", "fixmatch"])
def test_executors_on_gpu_equal_the_cpu(model_name, objective, no_tf32):
    if objective == "fixmatch":
        pytest.importorskip("edgesim.learning.augment")
    shape = (1, 16, 16)
    # FixMatch in float64: its confidence mask and argmax pseudo-labels are discontinuous, so float32 rounding
    # differences between kernels can flip one and the runs part (a ResNet-9 on 2×2 maps amplifies that)
    dtype = torch.float64 if objective == "fixmatch" else torch.float32
    model = build_model(model_name, shape, 10, seed=0).to(dtype)
    g = torch.Generator().manual_seed(0)
    data = [{"x": torch.randn(n, *shape, generator=g, dtype=dtype), "y": torch.randint(0, 10, (n,), generator=g),
             "u": torch.randn(3 * n, *shape, generator=g, dtype=dtype)} for n in (24, 10, 17)]
    if objective == "supervised":
        task = LocalTask(loss=cross_entropy_loss(), optimizer=SGD(0.05, 0.9), streams=(Stream("main", 8),))
        streams = [{"main": {"x": d["x"], "y": d["y"]}} for d in data]
    else:
        from edgesim.learning.augment import make_augmentation

        weak, strong = make_augmentation("weak", shape), make_augmentation("strong", shape, (0.5,) * shape[0], (0.25,) * shape[0])
        task = LocalTask(loss=fixmatch_loss(threshold=0.5), optimizer=SGD(0.01, 0.9, nesterov=True),
                         streams=(Stream("lab", 8), Stream("unl", 16)),
                         views=(View("x_aug", "x", weak), View("u_weak", "u", weak), View("u_strong", "u", strong)))
        streams = [{"lab": {"x": d["x"], "y": d["y"]}, "unl": {"u": d["u"]}} for d in data]
    starts = [state(model)] * 3
    def gens():
        return [torch.Generator().manual_seed(c) for c in range(3)]

    cpu = SequentialExecutor().run(model, task, starts, streams, gens())
    gpu_model = build_model(model_name, shape, 10, seed=0).to(CUDA, dtype)
    gstreams = [{s: {k: v.to(CUDA) for k, v in t.items()} for s, t in st.items()} for st in streams]
    on_gpu = {}
    for ex in (SequentialExecutor(), VmapExecutor()):
        got = ex.run(gpu_model, task, to(starts, CUDA), gstreams, gens())
        assert all(v.device.type == "cuda" for s in got.params for v in s.values())
        assert got.n_steps == cpu.n_steps
        on_gpu[ex.name] = got.params
        diff = max_diff(got.params, cpu.params)
        print(f"{model_name} {objective} {ex.name}: max |GPU - CPU| = {diff:.2e}")
        if objective == "supervised":
            assert diff < (2e-3 if model_name == "resnet9" else 2e-4), ex.name
    # across devices only the supervised task is compared (augmentations' nearest-pixel ties may round apart
    # on the two devices); on one device the two executors must agree
    diff = max_diff(on_gpu["sequential"], on_gpu["vmap"])
    print(f"{model_name} {objective}: max |GPU sequential - GPU vmap| = {diff:.2e}")
    assert diff < (1e-7 if dtype == torch.float64 else 2e-3 if model_name == "resnet9" else 2e-4)


def test_no_per_step_host_syncs():
    """Synchronising operations of a vectorised call (torch's sync debug mode) do not grow with its steps."""
    import warnings

    shape = (1, 16, 16)
    model = build_model("resnet9", shape, 10, seed=0).to(CUDA)
    task = LocalTask(loss=cross_entropy_loss(), optimizer=SGD(0.05, 0.9), streams=(Stream("main", 8),))

    def syncs(n):
        g = torch.Generator().manual_seed(0)
        data = [{"main": {"x": torch.randn(n, *shape, generator=g).to(CUDA),
                          "y": torch.randint(0, 10, (n,), generator=g).to(CUDA)}} for _ in range(4)]
        starts = [state(model)] * 4
        VmapExecutor().run(model, task, starts, data, [0, 1, 2, 3])  # warm-up
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                VmapExecutor().run(model, task, starts, data, [0, 1, 2, 3])
            finally:
                torch.cuda.set_sync_debug_mode("default")
        return [str(w.message) for w in caught if "synchroniz" in str(w.message).lower()]

    few, many = syncs(8 * 5), syncs(8 * 20)  # 5 vs 20 steps
    print(f"synchronising operations: {len(few)} for 5 steps, {len(many)} for 20 steps")
    assert len(many) - len(few) <= 2, many[:5]


@pytest.mark.parametrize("executor", ["sequential", "vmap"])
def test_every_registered_algorithm_runs_on_the_gpu(tmp_path, executor):
    pytest.importorskip("edgesim.learning.augment")
    from edgesim.learning.algorithms import REGISTRY
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    dofed = {"dofed_spp", "fedfomo", "fedbe"}
    names = sorted(REGISTRY)
    for group, partition in ((sorted(set(names) - dofed), "dirichlet"), (sorted(dofed & set(names)), "subset")):
        sc = load_scenario(scenario(tmp_path, group, partition=partition, name=f"{partition}_{executor}"),
                           [f"train.executor='{executor}'", "data.size_scale=0.1"] if partition == "subset" else
                           [f"train.executor='{executor}'"])
        out = run_scenario(sc, tmp_path / f"run_{partition}_{executor}")
        got = {r["algorithm"] for r in rows(out)}
        assert got == set(group)
        assert all(0.0 <= float(r["accuracy"]) <= 1.0 for r in rows(out) if r["accuracy"])


def _killed_run(tmp_path, name, algs):
    """A run (device "auto": the GPU here) stopped by Ctrl-C after fedbn's second round, checkpoints every round."""
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    path = scenario(tmp_path, algs, model="resnet9", every=1, name=name, device="auto")
    out = tmp_path / name

    def stop(alg, rec):
        if alg == "fedbn" and rec.round_index == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_scenario(load_scenario(path), out, on_round=stop)
    return path, out


@pytest.fixture
def deterministic():
    """torch's deterministic algorithms (without them two GPU runs of one seed differ: docs/use/gpu.md)."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)


def test_gpu_checkpoint_resumes_on_gpu_and_on_cpu(tmp_path, deterministic):
    import subprocess
    import sys

    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    algs = ["fedavg", "fedbn"]
    full = run_scenario(load_scenario(scenario(tmp_path, algs, model="resnet9", every=1, name="full", device="auto")),
                        tmp_path / "full")
    path, out = _killed_run(tmp_path, "on_gpu", algs)
    resumed = run_scenario(load_scenario(path), out, resume=True)
    assert (resumed / "rounds.csv").read_bytes() == (full / "rounds.csv").read_bytes()
    # the same GPU checkpoints, resumed by a process that sees no GPU
    path, out = _killed_run(tmp_path, "on_cpu", algs)
    code = ("import sys; from pathlib import Path; from edgesim.scenarios.run import run_scenario; "
            "from edgesim.scenarios.schema import load_scenario; import torch; assert not torch.cuda.is_available(); "
            "run_scenario(load_scenario(Path(sys.argv[1])), Path(sys.argv[2]), resume=True)")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    subprocess.run([sys.executable, "-c", code, str(path), str(out)], check=True, env=env,
                   cwd=Path(__file__).resolve().parents[1])
    got, ref = rows(out), rows(full)
    assert [(r["algorithm"], r["round"]) for r in got] == [(r["algorithm"], r["round"]) for r in ref]
    # rounds run before the kill are the GPU's own, byte for byte; later ones agree to float tolerance
    assert got[:2] == ref[:2]
    assert all(abs(float(g["accuracy"]) - float(r["accuracy"])) < 0.1 for g, r in zip(got, ref))


def test_same_seed_twice_on_the_gpu_is_identical_with_deterministic_algorithms(tmp_path, deterministic):
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import load_scenario

    a = run_scenario(load_scenario(scenario(tmp_path, ["fedavg", "fedbn"], model="resnet9", name="a")), tmp_path / "a")
    b = run_scenario(load_scenario(scenario(tmp_path, ["fedavg", "fedbn"], model="resnet9", name="b")), tmp_path / "b")
    assert (a / "rounds.csv").read_bytes() == (b / "rounds.csv").read_bytes()


def test_default_scenario_on_the_gpu(tmp_path):
    """The bundled scenario's run folder on the GPU: complete, and each round's accuracy that of the CPU run ± 0.05."""
    from edgesim.scenarios.run import run_scenario
    from edgesim.scenarios.schema import DEFAULT_SCENARIO, load_scenario

    runs = {d: rows(run_scenario(load_scenario(DEFAULT_SCENARIO, [f"train.device='{d}'", "run.rounds=10"]),
                                 tmp_path / d)) for d in ("cuda", "cpu")}
    assert [(r["algorithm"], r["round"]) for r in runs["cuda"]] == [(r["algorithm"], r["round"]) for r in runs["cpu"]]
    gaps = [abs(float(g["accuracy"]) - float(c["accuracy"])) for g, c in zip(runs["cuda"], runs["cpu"])]
    print(f"default scenario, 10 rounds: max |accuracy GPU - CPU| = {max(gaps):.4f}")
    assert max(gaps) < 0.05
    assert all(g["time_s"] == c["time_s"] for g, c in zip(runs["cuda"], runs["cpu"]))  # the clock does not care
