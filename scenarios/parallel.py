"""``edgesim run --jobs N``: a scenario's algorithms trained in N processes at once.

The algorithms of a run never share state: each has its own clock (its own
:class:`edgesim.engine.Simulation`) and its own learning backend over the
run's read-only context, and every random draw is derived from the run seed
and indices (docs/use/metrics.md). So they can run anywhere, in any order, and
the run folder is the same bytes as with ``--jobs 1``.

Each worker is a fresh process (the *spawn* start method: safe with torch's
OpenMP pool and with CUDA, where the workers share the GPU) that trains with
the scenario's ``run.threads``. The workers are started as soon as the
scenario is read (:func:`workers_for`, before this process imports torch);
each imports torch, rebuilds the scenario from its validated mapping
(:attr:`edgesim.scenarios.schema.Scenario.raw`) and builds the run's context (data,
partition, model) while this process does the same, and keeps it for every
algorithm it is given. Each
algorithm checkpoints and resumes on its own, exactly as in one process.
Per-round progress comes back through a queue, so the progress display is
the same; the records come back when the algorithm finishes. The run
folder's manifest is written by this process only: it lists every
checkpoint before the workers start.

This process trains too: with ``--jobs N`` there are N − 1 workers, and the
algorithms are assigned longest first, each to the least-loaded of this
process and the workers (:func:`assign`, greedy LPT). The estimate of an
algorithm's host work is the CPU cycles its first round's plan charges on
the clock (devices' and server's, :func:`planned_cycles`), which the cost
module makes proportional to the passes it really computes. On the default
scenario (Local trains every device, FedAvg and FedProx ten) this process
takes Local at once, on the context it has already built, while one worker
starts and trains the other two.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import queue
import threading
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Callable, Optional

from edgesim.scenarios.checkpoint import AlgorithmRun

_CONTEXTS: dict = {}  # a worker's (path, fingerprint) -> build_backend, built once per worker
_PROGRESS = None  # a worker's queue for per-round progress (None: nobody listens)


def _init_worker(threads: int, progress) -> None:
    from edgesim.learning.malloc import keep_freed_memory
    from edgesim.learning.plugins import silence_notes
    from edgesim.scenarios.signals import worker_signals
    from edgesim.scenarios.threads import set_threads

    worker_signals()  # SIGTERM ends its task; SIGINT is the parent's; it ends when the parent is gone
    if progress is not None:  # exiting never waits on a pipe the parent may have stopped reading
        progress.cancel_join_thread()
    keep_freed_memory()
    set_threads(threads)
    silence_notes()  # the parent validated the same scenario and printed its notes: --jobs says what one process says
    global _PROGRESS
    _PROGRESS = progress


def _context(raw: dict, path: str):
    """In a worker: ``(scenario, build_backend)`` of the run ``raw`` (the context is built once per worker)."""
    from edgesim.scenarios import checkpoint
    from edgesim.scenarios.algorithm_run import make_backends, resolved_config
    from edgesim.scenarios.schema import validate

    sc = validate(raw, path)
    key = (path, checkpoint.fingerprint(resolved_config(sc)))
    if key not in _CONTEXTS:
        _CONTEXTS.clear()
        _CONTEXTS[key] = make_backends(sc)[0]
    return sc, _CONTEXTS[key]


def _train_one(raw: dict, path: str, name: str, work: Optional[str], fingerprint: str, resume: bool,
               warm=None) -> AlgorithmRun:
    """In a worker: the run's context (:func:`_context`), one algorithm (from the run's warm start ``warm``,
    computed by the parent, when there is one)."""
    from edgesim.scenarios import checkpoint
    from edgesim.scenarios.algorithm_run import run_algorithm
    from edgesim.scenarios.signals import busy

    def on_round(alg: str, rec) -> None:
        if _PROGRESS is not None:
            _PROGRESS.put((alg, rec))

    with busy():
        sc, build_backend = _context(raw, path)
        saved = checkpoint.load(Path(work), name, fingerprint) if resume and work else None
        return run_algorithm(sc, build_backend, name, on_round, checkpoint_dir=Path(work) if work else None,
                             fingerprint=fingerprint, saved=saved, warm=warm)


def planned_cycles(sc, build_backend: Callable, name: str) -> float:
    """CPU cycles (devices' and server's) of ``name``'s first-round plan; 0 if it cannot be planned here."""
    from edgesim.engine import Simulation

    try:
        backend = build_backend(name)
        budget = dataclasses.replace(sc.budget, round_mode="sync")  # an async run's work per update: a round's
        sim = Simulation(sc.system, budget, backend, seed=sc.seed, resources=sc.resources, access_options=sc.access)
        plan = backend.plan_round(sim.system_view())
        return float(sum(sum(w.compute_cycles.values()) for w in plan.work) + sum(plan.server_cycles.values())
                     + sum(plan.server_cycles_after.values()))
    except Exception:  # noqa: BLE001 - only an estimate: the worker reports the real error
        return 0.0


def costs_longest_first(sc, build_backend: Callable, names: list[str]) -> list[tuple[str, float]]:
    """``(name, planned_cycles)`` by decreasing cycles (ties keep the scenario's order)."""
    cost = {n: planned_cycles(sc, build_backend, n) for n in names}
    return sorted(cost.items(), key=lambda item: -item[1])


def assign(costs: list[tuple[str, float]], n_workers: int) -> tuple[list[str], list[str]]:
    """(this process's algorithms, the workers'), each in ``costs``' order: longest first, each to the least-loaded of
    this process and the ``n_workers`` workers (ties: this process first, it needs no start-up; a cost counts at
    least 1) — :func:`edgesim.learning.balance.deal`, greedy LPT: within 4/3 of the best."""
    from edgesim.learning.balance import deal

    shares = deal([max(cost, 1.0) for _, cost in costs], n_workers + 1)  # share 0: this process
    names = [name for name, _ in costs]
    if not shares:
        return [], []
    return [names[i] for i in shares[0]], [names[i] for i in sorted(i for s in shares[1:] for i in s)]


def _warm(raw: dict, path: str) -> None:
    """A worker's first task, while the parent does the same: import torch and the algorithms, build the run's
    context. A failure here is left to the parent, whose own build reports it (or to the worker's first task)."""
    from edgesim.scenarios.signals import busy

    with busy():
        import edgesim.learning.algorithms  # noqa: F401 - imported for its cost: the worker warms up with it

        _context(raw, path)


class Workers:
    """``n`` spawned worker processes for the run ``sc``, started — and warmed: torch imported, the run's context
    built (:func:`_warm`) — as soon as this is created, while this process loads the data; a context manager (shut
    down at exit: at once, stopping every worker, when the run ends with an error or an interrupt).
    With ``--jobs N`` there are N − 1 of them: this process trains too (:meth:`run`).

    ``progress``: whether workers report each round (a queue read by a thread here, see :meth:`run`).
    """

    def __init__(self, sc, n: int, threads: int, progress: bool):
        ctx = mp.get_context("spawn")
        self.n = n
        self.queue = ctx.Queue() if progress else None
        self.pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_init_worker,
                                        initargs=(threads, self.queue))
        for _ in range(n):
            self.pool.submit(_warm, dict(sc.raw), sc.path)

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        else:  # never wait on an algorithm that is still training: stop the workers (a resumable folder)
            from edgesim.scenarios.signals import stop_pool

            stop_pool(self.pool)
        if self.queue is not None:
            self.queue.close()
            self.queue.cancel_join_thread()

    def run(self, sc, names: list[str], run_here: Callable[[str, Optional[Callable]], AlgorithmRun], *,
            work: Optional[Path], fingerprint: str, resume: bool, on_round: Optional[Callable] = None,
            build_backend: Optional[Callable] = None, warm=None) -> dict[str, AlgorithmRun]:
        """Every algorithm of ``names``, on this process (``run_here(name, on_round)``) and the workers, assigned by
        :func:`assign`; ``{name: AlgorithmRun}`` in ``names``' order. The first algorithm that fails ends the
        run: the others are cancelled and its error is raised here."""
        costs = costs_longest_first(sc, build_backend, names) if build_backend else [(n, 0.0) for n in names]
        here, there = assign(costs, self.n)
        if work is not None and sc.learning.run.checkpoint_every:
            # listed here, once, before any worker writes one: the workers' own listing is then a no-op, so no two
            # processes ever rewrite the folder's manifest at the same time
            from edgesim.results.writing import add_to_manifest
            from edgesim.scenarios.checkpoint import path_for

            add_to_manifest(work, *[path_for(work, n).relative_to(work).as_posix() for n in names])
        stop, abandon = threading.Event(), threading.Event()

        def relay() -> None:  # per-round progress from the workers, in this process
            while not abandon.is_set() and (not stop.is_set() or not self.queue.empty()):
                try:
                    alg, rec = self.queue.get(timeout=0.1)
                except queue.Empty:
                    continue
                except (EOFError, OSError):
                    return
                on_round(alg, rec)

        lock = threading.Lock()  # the relay thread and this process's own rounds report one at a time
        if on_round is not None:
            report = on_round

            def on_round(alg, rec):  # the same callback, serialised
                with lock:
                    report(alg, rec)

        relay_thread = threading.Thread(target=relay, daemon=True) if (self.queue and on_round) else None
        if relay_thread is not None:
            relay_thread.start()
        try:
            futures = {name: self.pool.submit(_train_one, dict(sc.raw), sc.path, name, str(work) if work else None,
                                              fingerprint, resume, warm) for name in there}
            runs = {name: run_here(name, on_round) for name in here}
            done, pending = wait(futures.values(), return_when=FIRST_EXCEPTION)
            for fut in done:
                if fut.exception() is not None:
                    for p in pending:
                        p.cancel()
                    raise _worker_error(fut.exception())
            runs.update({name: fut.result() for name, fut in futures.items()})
            self.pool.shutdown(wait=False)  # the workers exit while this process writes the results
            return {name: runs[name] for name in names}
        except BaseException:  # an error or an interrupt: the progress of what is being stopped is not wanted
            abandon.set()
            raise
        finally:
            stop.set()
            if relay_thread is not None:
                relay_thread.join()


def _worker_error(e: BaseException) -> BaseException:
    """A worker's own error as it is; a worker that died (killed, out of memory) as one line."""
    from concurrent.futures.process import BrokenProcessPool

    from edgesim.config import ConfigError

    if isinstance(e, BrokenProcessPool):
        return ConfigError("⟨jobs⟩: a worker process died before its algorithm finished (killed, or out of "
                           "memory?); the other workers were stopped; run with fewer ⟨jobs⟩, or ⟨jobs=⟩1")
    return e


def workers_for(sc, jobs: int, progress: bool):
    """:class:`Workers` for a run of ``sc`` with ``jobs`` > 1 and several algorithms; else a null context (``None``)."""
    import contextlib

    names = [] if sc.physics_only else list(sc.learning.run.algorithms)
    if jobs <= 1 or len(names) <= 1:
        return contextlib.nullcontext(None)
    from edgesim.scenarios.threads import resolve_threads

    return Workers(sc, min(jobs, len(names)) - 1, resolve_threads(sc.learning.run.threads), progress)
