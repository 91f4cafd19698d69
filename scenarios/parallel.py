"""``edgesim run --jobs N``: a scenario's algorithms trained in N worker processes at once.

The algorithms of a run never share state: each has its own clock (its own
:class:`edgesim.engine.Simulation`) and its own learning backend over the
run's read-only context, and every random draw is derived from the run seed
and indices (docs/metrics.md). So they can run anywhere, in any order, and
the run folder is the same bytes as with ``--jobs 1``.

Each worker is a fresh process (the *spawn* start method: safe with torch's
OpenMP pool and with CUDA, where the workers share the GPU) that trains with
the scenario's ``run.threads``. It rebuilds the scenario from its validated
mapping (:attr:`scenarios.schema.Scenario.raw`), builds the run's context once
(data, partition, model) and keeps it for every algorithm it is given. Each
algorithm checkpoints and resumes on its own, exactly as in one process.
Per-round progress comes back through a queue, so the progress display is
the same; the records come back when the algorithm finishes. The run
folder's manifest is written by this process only: it lists every
checkpoint before the workers start.

Algorithms go to the workers longest first (:func:`longest_first`): the
estimate of an algorithm's host work is the CPU cycles its first round's
plan charges on the clock (devices' and server's), which the cost module
makes proportional to the passes it really computes. With three algorithms on
two workers this is the difference between 1.4× and 1.9× (Local trains every
device, FedAvg ten).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import threading
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Callable, Optional

from scenarios.checkpoint import AlgorithmRun

_CONTEXTS: dict = {}  # a worker's (path, fingerprint) -> build_backend, built once per worker
_PROGRESS = None  # a worker's queue for per-round progress (None: nobody listens)


def _init_worker(threads: int, progress) -> None:
    from learning.malloc import keep_freed_memory
    from scenarios.threads import set_threads

    keep_freed_memory()
    set_threads(threads)
    global _PROGRESS
    _PROGRESS = progress


def _train_one(raw: dict, path: str, name: str, work: Optional[str], fingerprint: str, resume: bool) -> AlgorithmRun:
    """In a worker: the scenario from its mapping, the run's context (once per worker), one algorithm."""
    from scenarios import checkpoint
    from scenarios.run import _make_backends, run_algorithm
    from scenarios.schema import validate

    sc = validate(raw, path)
    key = (path, fingerprint)
    if key not in _CONTEXTS:
        _CONTEXTS.clear()
        _CONTEXTS[key] = _make_backends(sc)[0]
    saved = checkpoint.load(Path(work), name, fingerprint) if resume and work else None

    def on_round(alg: str, rec) -> None:
        if _PROGRESS is not None:
            _PROGRESS.put((alg, rec))

    return run_algorithm(sc, _CONTEXTS[key], name, on_round,
                         checkpoint_dir=Path(work) if work else None, fingerprint=fingerprint, saved=saved)


def planned_cycles(sc, build_backend: Callable, name: str) -> float:
    """CPU cycles (devices' and server's) of ``name``'s first-round plan; 0 if it cannot be planned here."""
    from edgesim.engine import Simulation

    try:
        backend = build_backend(name)
        plan = backend.plan_round(Simulation(sc.system, sc.budget, backend, seed=sc.seed).system_view())
        return float(sum(sum(w.compute_cycles.values()) for w in plan.work) + sum(plan.server_cycles.values())
                     + sum(plan.server_cycles_after.values()))
    except Exception:  # noqa: BLE001 - only an estimate: the worker reports the real error
        return 0.0


def longest_first(sc, build_backend: Callable, names: list[str]) -> list[str]:
    """``names`` by decreasing :func:`planned_cycles` (ties keep the scenario's order)."""
    cost = {n: planned_cycles(sc, build_backend, n) for n in names}
    return sorted(names, key=lambda n: -cost[n])


def run_algorithms(sc, names: list[str], jobs: int, threads: int, *, work: Optional[Path], fingerprint: str,
                   resume: bool, on_round: Optional[Callable] = None,
                   build_backend: Optional[Callable] = None) -> dict[str, AlgorithmRun]:
    """Every algorithm of ``names`` in a pool of ``jobs`` spawned workers; ``{name: AlgorithmRun}`` in ``names``'
    order. ``build_backend`` (this process's) orders them longest first. The first algorithm that fails ends the
    run: the others are cancelled and its error is raised here."""
    order = longest_first(sc, build_backend, names) if build_backend is not None else list(names)
    if work is not None and sc.learning["run"].checkpoint_every:
        # listed here, once, before any worker writes one: the workers' own listing is then a no-op, so no two
        # processes ever rewrite the folder's manifest at the same time
        from scenarios.checkpoint import path_for
        from scenarios.runfolder import add_to_manifest

        add_to_manifest(work, *[path_for(work, n).relative_to(work).as_posix() for n in names])
    ctx = mp.get_context("spawn")
    manager = ctx.Manager()
    progress = manager.Queue() if on_round is not None else None
    stop = threading.Event()

    def relay() -> None:  # per-round progress from the workers, in this process
        while not stop.is_set() or not progress.empty():
            try:
                alg, rec = progress.get(timeout=0.1)
            except queue.Empty:
                continue
            except (EOFError, OSError):  # the manager has gone
                return
            on_round(alg, rec)

    relay_thread = threading.Thread(target=relay, daemon=True) if progress is not None else None
    if relay_thread is not None:
        relay_thread.start()
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(names)), mp_context=ctx, initializer=_init_worker,
                               initargs=(threads, progress))
    try:
        futures = {name: pool.submit(_train_one, dict(sc.raw), sc.path, name, str(work) if work else None,
                                     fingerprint, resume) for name in order}
        done, pending = wait(futures.values(), return_when=FIRST_EXCEPTION)
        for fut in done:
            if fut.exception() is not None:
                for p in pending:
                    p.cancel()
                raise fut.exception()
        return {name: futures[name].result() for name in names}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        stop.set()
        if relay_thread is not None:
            relay_thread.join()
        manager.shutdown()
