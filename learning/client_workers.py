"""A round's clients trained in parallel: on local worker processes (``[run] client_workers``) or Ray actors.

:class:`WorkerExecutor` is an executor (``run(model, task, start_params, data, generators)``, as
:mod:`edgesim.learning.executors`): it deals the call's clients out to ``n`` workers by their work
(:func:`~edgesim.learning.balance.deal`: rows to train, largest first, each to the least loaded worker), each of
which trains its share with the run's own executor, and puts the results back in the clients' order. A client's
training depends on its own start, data and generator only (each client's stream is its own: "Sampling" and "Common
random numbers" in :mod:`edgesim.learning.executors`), so the result is the same bytes as one process training every
client in turn; ``tests/test_client_workers.py`` compares run folders.

**Loaded once.** Each worker receives the run's data — every device's tensors of the run's context, the
server's sets — and the model once, when it starts (each worker holds its own copy: n workers hold n copies of
the data set), and keeps them for the whole run. A call then sends only what changes: the task (pickled with
``cloudpickle``: a loss may be a closure), the clients' start states, their generators' states, and for their
data a name (``("client", 3, "x_sup")``) wherever one of the loaded tensors appears, at any depth (a tensor an
algorithm made this round, such as DoFed-SPP's pseudo-labelled set, travels itself).

The pools: :class:`LocalPool` (fresh interpreters, ``python -m edgesim.learning.client_workers``) and
:class:`RayPool` (one actor per worker, ``num_cpus`` = the run's threads, a share of a GPU per actor where
the cluster has GPUs, as the sweep's Ray executor gives its tasks). Both are started at the first call with more
than one client and stopped by :meth:`WorkerExecutor.close` (the run's end).
"""

from __future__ import annotations

import dataclasses
import math
import pickle
import traceback
from typing import Any, Mapping, Optional

import torch

from edgesim.learning.balance import deal
from edgesim.learning.config import LOCAL_POOL
from edgesim.learning.executors import as_generator, as_streams, task_rows
from edgesim.learning.models import draw_seed
from edgesim.learning.tasks import LocalTrainResult

MODEL_KEY = ("model",)


def context_tensors(ctx) -> dict[tuple, torch.Tensor]:
    """The tensors of a run's context the workers keep: every device's (``("client", d, field)``) and the
    server's and pool's sets (``("ctx", name)``)."""
    out: dict[tuple, torch.Tensor] = {}
    for d, c in enumerate(ctx.clients):
        for f in dataclasses.fields(c):
            value = getattr(c, f.name)
            if isinstance(value, torch.Tensor):
                out[("client", d, f.name)] = value
    for name in ("server_x", "server_y", "val_x", "val_y", "pool_x", "pool_y"):
        value = getattr(ctx, name, None)
        if isinstance(value, torch.Tensor):
            out[("ctx", name)] = value
    return out


def dumps(obj, names: Mapping[int, tuple]) -> bytes:
    """``obj`` pickled with ``cloudpickle`` (a loss may be a closure), every loaded tensor or model in it — at any
    depth: in a stream, a closure's cell, an object's attribute — written as its name (``names``: ``id -> key``)."""
    import io

    import cloudpickle

    class Pickler(cloudpickle.CloudPickler):
        def persistent_id(self, o):
            return names.get(id(o)) if isinstance(o, (torch.Tensor, torch.nn.Module)) else None

    buf = io.BytesIO()
    Pickler(buf, protocol=5).dump(obj)
    return buf.getvalue()


def loads(data: bytes, loaded: Mapping[tuple, Any]):
    """The inverse of :func:`dumps` in a worker holding ``loaded``."""
    import io

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, key):
            return loaded[tuple(key)]

    return Unpickler(io.BytesIO(data)).load()


class _Worker:
    """What a worker holds and does: the loaded tensors and model, the run's executor; one call at a time."""

    def __init__(self, loaded: Mapping[tuple, Any], executor, threads: int) -> None:
        from edgesim.learning.malloc import keep_freed_memory

        keep_freed_memory()  # as the edgesim command and the sweep's workers do (docs: learning/malloc.py)
        torch.set_num_threads(threads)
        self.loaded, self.executor = dict(loaded), executor

    def run(self, payload: bytes) -> bytes:
        import cloudpickle

        try:
            model, task, starts, data, gens = loads(payload, self.loaded)
            gens = [g if isinstance(g, int) else torch.Generator().set_state(g) for g in gens]
            return pickle.dumps(("ok", self.executor.run(model, task, starts, data, gens)))
        except Exception as e:  # noqa: BLE001 - the parent raises it (or, unpicklable, its text)
            try:
                return cloudpickle.dumps(("error", e))
            except Exception:  # noqa: BLE001 - an unpicklable error goes back as its text
                return pickle.dumps(("error", RuntimeError(f"{type(e).__name__}: {e}\n{traceback.format_exc()}")))


def _serve(read_fd: int, write_fd: int) -> None:
    """A local worker's loop (``python -m edgesim.learning.client_workers READ_FD WRITE_FD``): the parent's
    ``sys.path``, the loaded tensors, the executor and the thread count first, then a payload in and a result out
    per call, until the parent closes its end."""
    import sys
    from multiprocessing.connection import Connection

    conn_in, conn_out = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    path, loaded, executor, threads = pickle.loads(conn_in.recv_bytes())
    sys.path[:] = [*path, *[p for p in sys.path if p not in path]]
    worker = _Worker(loaded, executor, threads)
    conn_out.send_bytes(b"ready")
    while True:
        try:
            payload = conn_in.recv_bytes()
        except (EOFError, OSError):
            return
        conn_out.send_bytes(worker.run(payload))


class LocalPool:
    """``n`` worker processes on this machine (``python -m edgesim.learning.client_workers``: a fresh interpreter,
    so nothing of this process — its threads, its ``__main__`` — is inherited), each sent the loaded tensors once."""

    def __init__(self, n: int, loaded: Mapping[tuple, Any], executor, threads: int) -> None:
        import os
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        self.procs, self.ins, self.outs = [], [], []
        init = pickle.dumps((list(sys.path), dict(loaded), executor, threads), protocol=5)
        for _ in range(n):
            to_child_r, to_child_w = os.pipe()
            from_child_r, from_child_w = os.pipe()
            proc = subprocess.Popen([sys.executable, "-m", "edgesim.learning.client_workers", str(to_child_r),
                                     str(from_child_w)], pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL)
            os.close(to_child_r)
            os.close(from_child_w)
            self.procs.append(proc)
            self.outs.append(Connection(to_child_w, readable=False))
            self.ins.append(Connection(from_child_r, writable=False))
        for conn in self.outs:
            conn.send_bytes(init)
        for conn, proc in zip(self.ins, self.procs):
            self._receive(conn, proc)

    @staticmethod
    def _receive(conn, proc) -> bytes:
        try:
            return conn.recv_bytes()
        except (EOFError, OSError):
            proc.wait()
            raise RuntimeError(f"client worker process {proc.pid} ended (exit code {proc.returncode}); lower "
                               f"run.client_workers if memory is short") from None

    def map(self, payloads: list[bytes]) -> list[bytes]:
        for conn, payload in zip(self.outs, payloads):
            conn.send_bytes(payload)
        return [self._receive(conn, proc) for conn, proc, _ in zip(self.ins, self.procs, payloads)]

    def close(self) -> None:
        for conn in self.outs + self.ins:
            conn.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - a worker that does not end by itself is ended
                proc.kill()
                proc.wait()
        self.procs, self.ins, self.outs = [], [], []


class RayPool:
    """``n`` Ray actors (``address``: a cluster's; ``None``: a Ray started on this machine with ``n × threads``
    CPUs, stopped by :meth:`close`), each with ``num_cpus = threads`` and an equal share of the GPUs, if any.
    ``ray``: the imported ``ray`` module and ``join(address)`` how to join a cluster (its auth token, the one line
    of a head it cannot reach), both handed down by the application (:mod:`edgesim.scenarios`), which owns Ray's
    import and its cluster settings."""

    def __init__(self, n: int, loaded: Mapping[tuple, Any], executor, threads: int, ray,
                 address: Optional[str] = None, join: Optional[Any] = None) -> None:
        import logging

        self.ray, self.owns = ray, not ray.is_initialized()
        if self.owns:
            if address and join is not None:
                join(address)
            elif address:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            else:
                ray.init(address="local", num_cpus=n * threads, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.WARNING)
        gpus = float(ray.cluster_resources().get("GPU", 0))
        options: dict[str, Any] = {"num_cpus": threads}
        if gpus > 0:
            options["num_gpus"] = math.floor(min(1.0, gpus / n) * 1e4) / 1e4
        actor = ray.remote(_Worker).options(**options)
        ref = ray.put(dict(loaded))
        self.actors = [actor.remote(ref, executor, threads) for _ in range(n)]

    def map(self, payloads: list[bytes]) -> list[bytes]:
        return self.ray.get([a.run.remote(p) for a, p in zip(self.actors, payloads)])

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)
        self.actors = []
        if self.owns:
            self.ray.shutdown()


class WorkerExecutor:
    """The run's ``executor`` spread over ``n`` workers (``pool``: ``"local"`` or ``"ray"``, with ``address``).

    ``ctx``: the run's context, whose tensors and model the workers load once (:func:`context_tensors`).
    A call with fewer than two clients (a server step) runs here, with ``executor`` itself (and with one local
    worker, every call: a process of its own would only add the transfers).
    """

    def __init__(self, executor, n: int, ctx, threads: int = 1, pool: str = LOCAL_POOL,
                 address: Optional[str] = None, ray=None, join=None) -> None:
        if getattr(executor, "name", None) != "sequential":
            raise ValueError(f"client workers train with the sequential executor (got {executor.name!r}): the "
                             f"vectorised one batches clients, so a worker's share would round differently")
        self.executor, self.n, self.threads, self.kind, self.address = executor, n, threads, pool, address
        self.ray, self.join = ray, join
        self.name = executor.name
        self.loaded = {**context_tensors(ctx), MODEL_KEY: ctx.model}
        self.names = {id(v): k for k, v in self.loaded.items()}
        self._pool = None

    @property
    def numerics(self):
        return self.executor.numerics

    def pool(self):
        if self._pool is None:
            make = LocalPool if self.kind == LOCAL_POOL else RayPool
            extra = {} if self.kind == LOCAL_POOL else {"ray": self.ray, "address": self.address,
                                                        "join": self.join}
            self._pool = make(self.n, self.loaded, self.executor, self.threads, **extra)
        return self._pool

    def run(self, model, task, start_params: list, data: list, generators: list) -> LocalTrainResult:
        k = len(start_params)
        if k < 2 or (self.n < 2 and self.kind == LOCAL_POOL):
            return self.executor.run(model, task, start_params, data, generators)
        if not (k == len(data) == len(generators)):
            raise ValueError(f"start_params, datasets and generators must have one entry per client "
                             f"(got {k}, {len(data)}, {len(generators)})")
        gens = [g if isinstance(g, int) and not isinstance(g, bool) else as_generator(g) for g in generators]
        shares = deal([client_rows(task, i, d) for i, d in enumerate(data)], self.n)
        payloads = []
        for share in shares:
            states = [g if isinstance(g, int) else g.get_state() for g in (gens[i] for i in share)]
            mine = task if task.client_epochs is None else dataclasses.replace(  # the share's own clients' epochs
                task, client_epochs=tuple(task.client_epochs[i] for i in share))
            payload = (model, mine, [start_params[i] for i in share], [data[i] for i in share], states)
            payloads.append(dumps(payload, self.names))
        replies = [pickle.loads(r) for r in self.pool().map(payloads)]
        for status, value in replies:
            if status == "error":
                raise value
        for g in gens:  # each client's generator gave its one seed, as the executor's own call takes it
            if not isinstance(g, int):
                draw_seed(g)
        return merge([value for _, value in replies], shares, k)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


def client_rows(task, i: int, data) -> int:
    """Rows client ``i`` trains in this call (:func:`~edgesim.learning.executors.task_rows`, its own epochs)."""
    sizes = {name: (next(iter(t.values())).shape[0] if t else 0) for name, t in as_streams(data).items()}
    mine = task if task.client_epochs is None else dataclasses.replace(
        task, epochs=task.client_epochs[i], client_epochs=None)
    return task_rows(mine, sizes)


def merge(results: list[LocalTrainResult], shares: list[list[int]], k: int) -> LocalTrainResult:
    """The workers' results as one, in the clients' order (an aux value a share's clients lack: NaN, as the
    executor writes it for a client without it)."""
    params: list = [None] * k
    means: list = [None] * k
    steps: list = [None] * k
    emas: Optional[list] = [None] * k if all(r.ema is not None for r in results) else None
    names = sorted({n for r in results for n in r.aux})
    aux = {n: [math.nan] * k for n in names}
    for r, share in zip(results, shares):
        for j, i in enumerate(share):
            params[i], means[i], steps[i] = r.params[j], r.mean_loss[j], r.n_steps[j]
            if emas is not None:
                emas[i] = r.ema[j]
            for n, values in r.aux.items():
                aux[n][i] = values[j]
    return LocalTrainResult(params, means, steps, aux, ema=emas)


if __name__ == "__main__":  # the package's own module, so a name sent by the parent is of the class checked here
    import sys

    from edgesim.learning.client_workers import _serve as serve

    serve(int(sys.argv[1]), int(sys.argv[2]))
