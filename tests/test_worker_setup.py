"""Sweep workers take the visible GPUs round-robin and the sweep's figure style (scenarios/worker_setup.py)."""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor

from edgesim.plots.style import use_style
from edgesim.scenarios.sweep import _worker_init
from edgesim.scenarios.worker_setup import gpu_for, visible_gpus, worker_setup


def test_visible_gpus_from_the_environment_or_the_driver(tmp_path):
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "3, 5"}) == ("3", "5")
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == ()
    for i in range(3):
        (tmp_path / f"0000:0{i}:00.0").mkdir()
    assert visible_gpus({}, tmp_path) == ("0", "1", "2")
    assert visible_gpus({}, tmp_path / "absent") == ()


def test_round_robin():
    assert [gpu_for(k, ("3", "5")) for k in range(5)] == ["3", "5", "3", "5", "3"]
    assert gpu_for(4, ()) is None


def _seen() -> tuple:
    import time

    from edgesim.plots.style import current_style

    time.sleep(0.3)  # every worker gets a task
    return os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES"), current_style().name


def test_each_spawned_worker_gets_its_own_gpu_and_the_sweeps_style(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    ctx = mp.get_context("spawn")
    with use_style("slides"):
        setup = worker_setup(ctx)
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx, initializer=_worker_init, initargs=(1, setup)) as pool:
        seen = set(pool.map(lambda_free, range(4)))
    by_worker = {pid: (gpu, style) for pid, gpu, style in seen}
    assert setup.counter.value == 2  # both workers started and took a GPU each, in turn
    gpus = [gpu for gpu, _ in by_worker.values()]
    assert set(gpus) <= {"3", "5"} and len(set(gpus)) == len(gpus)  # no two workers on one GPU
    assert {style for _, style in by_worker.values()} == {"slides"}


def lambda_free(_):
    return _seen()
