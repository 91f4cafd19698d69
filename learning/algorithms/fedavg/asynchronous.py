"""The FedAvg family under asynchronous aggregation: FedAsync and FedBuff (docs/model/asynchrony.md).

:class:`AsyncFedAvg` wraps a :class:`~edgesim.learning.algorithms.fedavg.algorithm.FedAvg`
backend (any variant: FedProx, FedBN, the FixMatch/UDA objectives, the
server optimizers) as an :class:`edgesim.asynchrony.AsyncBackend`:

- ``start_update(u, d, τ)`` keeps a reference to the global model of version
  ``τ`` (global states are replaced, never changed in place, so this costs no
  copy) — the model device ``d`` downloaded;
- ``aggregate`` trains each arrival from the version it started from
  (``merge(x_τ, personal_d)``, the family's local task, generators
  ``(seed, "train", τ, d)`` — a sync round ``τ`` draws the same; a device's
  k-th update from one version, k >= 1, draws ``("train#k", τ, d)``), keeps its
  personal keys on the device, then steps the server with the rule's combine step (registered by name,
  :func:`register_async_combine`; the rule names it, :mod:`edgesim.async_rules`):

  - FedAsync (Xie et al. 2019, Alg. 1): the family's server step of
    ``[(x, 1 − α_t), (x_new, α_t)]``, i.e. ``x ← (1 − α_t) x + α_t x_new``
    followed by the server optimizer (``sgd``, ``server_lr = 1``: none);
  - FedBuff (Nguyen et al. 2022, Alg. 1): the server step of the
    ``(x + η_g s_i Δ_i, n_i)``, ``Δ_i = x_i − x_{τ_i}``: their weighted mean is
    ``x + η_g Σ (n_i/Σn) s_i Δ_i``. An update with staleness 0, ``s = 1`` and
    ``η_g = 1`` enters as ``x_i`` itself, so K fresh updates are FedAvg's round
    exactly (same floats).

Only the FedAvg family has an asynchronous mode: its server combines
independent device updates of one shared model. A backend offers the mode
through an ``asynchronous()`` method (here :meth:`FedAvg.asynchronous`); the
application refuses an algorithm without one in one line
(:func:`edgesim.scenarios.algorithm_run.make_simulation`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Callable, Mapping

import torch

from edgesim.asynchrony import Aggregation
from edgesim.backend import DeviceWork
from edgesim.learning.aggregation import merge, split_keys
from edgesim.learning.algorithms.common import to_cpu, to_device, train_devices
from edgesim.learning.tasks import LocalTrainResult

# name -> combine(inner, agg, current, shared): steps the family's server with the arrivals' trained shared keys
COMBINES: dict[str, Callable] = {}


def register_async_combine(name: str) -> Callable[[Callable], Callable]:
    """Decorator: ``@register_async_combine("my_rule")`` registers how the FedAvg family's server combines an
    aggregation of the asynchronous rule whose ``combine`` is ``name``: a function
    ``combine(backend, agg, current, shared)`` that calls ``backend.inner.server_step(...)`` with the current global
    state and each arrival's trained global keys (``shared``, in ``agg.arrivals`` order). A name already taken is
    refused in one line naming both functions."""

    def add(fn: Callable) -> Callable:
        taken = COMBINES.get(name)
        if taken is not None and taken is not fn:
            raise ValueError(f"asynchronous combine step {name!r} is registered by {taken.__module__}."
                             f"{taken.__qualname__} and again by {fn.__module__}.{fn.__qualname__}; expected one "
                             f"step per name (rename one)")
        COMBINES[name] = fn
        return fn

    return add


@register_async_combine("fedasync")
def fedasync_combine(backend: "AsyncFedAvg", agg: Aggregation, current: dict, shared: list) -> None:
    """FedAsync: ``x ← (1 − α_t) x + α_t x_new`` through the family's server step, ``α_t = α · s``."""
    (a,), (x_new,) = agg.arrivals, shared
    alpha_t = agg.alpha * a.weight
    backend.inner.server_step([(current, 1.0 - alpha_t), (x_new, alpha_t)])


@register_async_combine("fedbuff")
def fedbuff_combine(backend: "AsyncFedAvg", agg: Aggregation, current: dict, shared: list) -> None:
    """FedBuff: the server step of ``(x + η_g s_i Δ_i, n_i)``, ``Δ_i = x_i − x_{τ_i}`` (module docstring)."""
    inner = backend.inner
    updates = []
    # By device (then update), as a round sums its arrivals: the float sum does not depend on arrival order.
    for a, x_new in sorted(zip(agg.arrivals, shared), key=lambda p: (p[0].device, p[0].update)):
        n = 1.0 if inner.cfg.weighting == "uniform" else float(sum(inner.sizes[a.device].values()))
        scale = agg.server_lr * a.weight
        if a.staleness == 0 and scale == 1.0:
            updates.append((x_new, n))
            continue
        start = backend.versions[a.version]
        updates.append(({key: _moved(current[key], x_new[key], start[key], scale) for key in current}, n))
    inner.server_step(updates)


class AsyncFedAvg:
    """A FedAvg-family backend driven by :class:`edgesim.asynchrony.AsyncSimulation` (module docstring)."""

    def __init__(self, inner):
        self.inner = inner
        self.version = 0
        self.versions: dict[int, dict] = {0: inner.global_state}  # models some update in flight started from
        self.in_flight: dict[int, tuple[int, int]] = {}  # update -> (device, version)

    @property
    def name(self) -> str:
        return self.inner.name

    def update_work(self, device: int) -> DeviceWork:
        """The device's round work in the family's plan: its task's cycles, the global keys' bits up and down."""
        inner = self.inner
        cycles = inner.cycles_of(device)
        return DeviceWork(int(device), {"train": float(cycles)}, float(inner.bits), float(inner.bits))

    def start_update(self, update: int, device: int, version: int) -> None:
        if version != self.version:
            raise ValueError(f"update {update} starts from version {version}, the server is at {self.version}")
        self.versions[version] = self.inner.global_state
        self.in_flight[update] = (device, version)

    def aggregate(self, agg: Aggregation) -> Mapping[str, float]:
        inner, ctx = self.inner, self.inner.ctx
        if agg.index != self.version:
            raise ValueError(f"aggregation {agg.index} but the server is at version {self.version}")
        name = agg.combine or agg.mode
        combine = COMBINES.get(name)
        if combine is None:
            raise ValueError(f"round_mode = {agg.mode!r}: the FedAvg family has no combine step {name!r}; expected "
                             f"one of {', '.join(map(repr, COMBINES))}, or a rule that registers its own "
                             f"(register_async_combine, docs/extend/writing_an_async_rule.md)")
        # Train every arrival from its own start, grouped by (version, k-th update of the device from it).
        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        seen: dict[tuple[int, int], int] = defaultdict(int)
        for i, a in enumerate(agg.arrivals):
            k = seen[(a.version, a.device)]
            seen[(a.version, a.device)] += 1
            groups[(a.version, k)].append(i)
        trained: list = [None] * len(agg.arrivals)
        results: list[LocalTrainResult] = []
        for (version, k), idx in sorted(groups.items()):
            idx.sort(key=lambda i: agg.arrivals[i].device)
            devs = [agg.arrivals[i].device for i in idx]
            starts = [merge(self.versions[version], inner.personal[d]) for d in devs]
            data = [inner.data[d] for d in devs]
            result = train_devices(ctx, inner.name, version, devs, starts, data, inner.task_for(devs),
                                   stream="train" if k == 0 else f"train#{k}")
            results.append(result)
            for i, state in zip(idx, result.params):
                trained[i] = state
        shared = []
        for a, state in zip(agg.arrivals, trained):
            g, personal = split_keys(state, inner.is_personal)
            inner.personal[a.device] = personal  # personal keys never leave the device
            shared.append(g)
        combine(self, agg, inner.global_state, shared)
        self.version += 1
        for a in agg.arrivals:
            self.in_flight.pop(a.update, None)
        for u in agg.lost:
            self.in_flight.pop(u, None)
        live = {v for _, v in self.in_flight.values()}
        self.versions = {v: s for v, s in self.versions.items() if v in live}
        self.versions[self.version] = inner.global_state
        inner.advance_ema()  # the evaluation model's step, once per aggregation (ema_decay)
        if not agg.evaluate:
            return {}
        return inner.metrics(_joined(results))

    # -- checkpoints: the family's state, the versions in flight
    def state_dict(self) -> dict:
        return {"inner": self.inner.state_dict(), "version": self.version,
                "in_flight": {int(u): list(dv) for u, dv in self.in_flight.items()},
                "versions": {int(v): to_cpu(s) for v, s in self.versions.items() if v != self.version}}

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state["inner"])
        self.version = int(state["version"])
        self.in_flight = {int(u): (int(dv[0]), int(dv[1])) for u, dv in state["in_flight"].items()}
        self.versions = {int(v): to_device(self.inner.ctx, s) for v, s in state["versions"].items()}
        self.versions[self.version] = self.inner.global_state


def _moved(current: torch.Tensor, new: torch.Tensor, start: torch.Tensor, scale: float) -> torch.Tensor:
    """``current + scale · (new − start)`` for a float tensor; an integer buffer (BatchNorm's count) takes ``new``."""
    if not current.is_floating_point():
        return new
    return current + scale * (new - start)


def _joined(results: list[LocalTrainResult]) -> LocalTrainResult:
    """The per-device results of several training calls as one (for the metrics)."""
    if len(results) == 1:
        return results[0]
    aux: dict = defaultdict(list)
    for r in results:
        for k, v in r.aux.items():
            aux[k].extend(v)
    return LocalTrainResult([p for r in results for p in r.params], [x for r in results for x in r.mean_loss],
                            [x for r in results for x in r.n_steps], dict(aux))
