"""Hierarchical federated learning on the event clock: edge rounds per cell, cloud aggregations over the backhaul.

``budget.round_mode = "hierarchical"`` with the ``[hierarchy]`` table (:class:`HierarchyConfig`) runs the
client–edge–cloud scheme of HierFAVG (Liu, Zhang, Song and Letaief, "Client-Edge-Cloud Hierarchical Federated
Learning", IEEE ICC 2020, Algorithm 1; docs/model/hierarchy.md):

1. **Edge round** (in every cell c, its own sequence): the cell's scheduled devices download the edge model from
   their edge server, compute and upload — the synchronous engine's round (:class:`edgesim.engine.Simulation`:
   the same device job, links, resource policies, server phases and records) over the cell's devices only; the
   edge server then aggregates (the backend's edge step; its compute charged as the plan's server phases).
2. Between cloud aggregations the cells run their edge rounds **independently**: cell c's edge round r+1 starts
   when its edge round r ends, whatever the other cells do (HierFAVG's edge servers never wait for one another
   between cloud rounds).
3. **Cloud aggregation**: after every κ-th edge round (``edge_rounds``) each edge server sends its model over
   its backhaul, taking :func:`backhaul_time_s` = bits / ``backhaul_bps`` + ``backhaul_latency_s``; the cloud
   aggregates when the last edge model has arrived (HierFAVG's weighting: the edge models weighted by their
   cells' data) and sends the cloud model back over each backhaul; cell c starts its next edge round when the
   broadcast reaches it, again bits / bps + latency after the aggregation.

Records, in time order: one per edge aggregation (``level = "edge"``, ``cell = c``, ``round_index`` the cell's
edge round r from 0, the devices' rows) and one per cloud aggregation (``level = "cloud"``, ``cell = -1``,
``round_index`` the last edge round it closes; no device rows; the backhaul bits in ``info``). The clock runs a
whole cloud period (κ edge rounds in every cell and the cloud's aggregation) at once and hands its records out
one at a time; :attr:`HierarchicalSimulation.round_index` counts the edge rounds that every cell has finished
with their cloud aggregation included, so ``budget.rounds`` (or ``run.rounds``) counts edge rounds, a multiple
of κ (the run ends with the cloud's model). A checkpoint holds the clock at the period's end and the records not
handed out yet; resume is byte-identical.

Which cell a device is in comes from :func:`cell_of_devices` (the association of :mod:`edgesim.cells`); each edge
server computes at its cell's ``cpu_hz`` (``system.cells``; unset: ``system.server_freq_hz``).
The channel of edge round r is ``channel.gains(r)`` for every cell; the devices move (mobility) at each cloud
aggregation by the period's duration. A ``[resources]`` scheduling policy ranks each cell's devices on its own (one
:class:`~edgesim.resources.scheduling.Scheduler` per cell: its devices, its band, its history, its K), and the
cell's edge round takes the first K of that ranking (``SystemView.schedule``). Not in this mode (refused before the
run, one line each): ``system.csi`` other than ``"perfect"`` (the outdated and estimated channels follow a single
round sequence), ``"deadline"`` edge rounds.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Protocol, Sequence, Union, runtime_checkable

import numpy as np
import simpy

from ._checks import non_negative
from .async_rules import HIERARCHICAL
from .backend import RoundOutcome, RoundPlan, SystemView  # noqa: F401 - RoundOutcome: the protocol's
from .cells import cell_bands_hz
from .cells import n_cells as n_cells  # the cells of a [system]: what check_hierarchy's lists are checked against
from .clock import cyclic_gc_paused
from .config import ConfigError, Described, Integer, check_keys, fail, key
from .engine import Simulation
from .records import RoundRecord, totals_of
from .resources.scheduling import Scheduler

Number = Union[int, float]
LEVELS = ("edge", "cloud")


# --------------------------------------------------------------------------- formulas


def backhaul_time_s(bits: float, rate_bps: float, latency_s: float) -> float:
    """Seconds to send ``bits`` over a backhaul of ``rate_bps`` (bit/s, > 0; ``inf``: no transfer time) and
    one-way ``latency_s`` (s): ``bits / rate_bps + latency_s`` (a store-and-forward link; docs/model/hierarchy.md)."""
    bits, latency_s = non_negative("bits", bits), non_negative("latency_s", latency_s)
    if not (isinstance(rate_bps, (int, float)) and rate_bps > 0):
        raise ValueError(f"rate_bps(={rate_bps!r}) must be > 0")
    return bits / rate_bps + latency_s


def cloud_weights(cell_samples: Sequence[float]) -> list[float]:
    """HierFAVG's cloud weights ``|D^ℓ| / Σ_ℓ' |D^ℓ'|``: each edge model weighted by its cell's data (samples)."""
    total = float(sum(cell_samples))
    if total <= 0 or any(s < 0 for s in cell_samples):
        raise ValueError(f"cell_samples(={list(cell_samples)}) must be >= 0 and not all zero")
    return [float(s) / total for s in cell_samples]


def edge_cloud_schedule(hierarchy: "HierarchyConfig", n_cells: int, rounds: int,
                        backhaul_bits: Mapping[str, float], devices_per_cell: Sequence[int]) -> dict:
    """What ``edgesim plan`` shows of a hierarchical run: κ edge rounds per cloud round, the cloud rounds of the
    run's ``rounds`` edge rounds (the edge rounds after which the cloud aggregates), and per cell its devices and
    the seconds one model takes up and down its backhaul (:func:`backhaul_time_s`); per algorithm the bits of one
    model over one backhaul (``backhaul_bits``), of one cloud round (every edge model up, the cloud model down to
    every cell: ``2·C·bits``) and of the run."""
    k = hierarchy.edge_rounds
    bps, lat = hierarchy.per_cell("backhaul_bps", n_cells), hierarchy.per_cell("backhaul_latency_s", n_cells)
    clouds = rounds // k
    first = next(iter(backhaul_bits.values()), 0.0)
    return {
        "edge_rounds": k, "rounds": rounds, "cloud_rounds": clouds,
        "cloud_after_edge_rounds": [(i + 1) * k - 1 for i in range(clouds)],
        "cells": [{"cell": c, "devices": int(devices_per_cell[c]), "backhaul_bps": bps[c],
                   "backhaul_latency_s": lat[c], "model_one_way_s": backhaul_time_s(first, bps[c], lat[c])}
                  for c in range(n_cells)],
        "backhaul_bits": {name: {"model": float(b), "cloud_round": 2.0 * n_cells * float(b),
                                 "run": 2.0 * n_cells * float(b) * clouds} for name, b in backhaul_bits.items()},
    }


# --------------------------------------------------------------------------- the [hierarchy] table


def _per_cell_text(unit_rule: str) -> str:
    return f"{unit_rule}; or a list of one per cell"


@dataclass(frozen=True)
class HierarchyConfig:
    """``[hierarchy]``: the client–edge–cloud rounds of ``round_mode = "hierarchical"`` (module docstring).

    ``backhaul_bps`` and ``backhaul_latency_s`` are one value for every cell or a list of one per cell (its length
    checked against the cells by :meth:`per_cell`). ``backhaul_bps = inf`` is a backhaul without transfer time.
    """

    edge_rounds: int = key(1, "edge aggregations κ per cloud aggregation (HierFAVG's κ2); 1: every edge round goes "
                           "to the cloud", unit="edge rounds", allowed=Integer(1))
    backhaul_bps: Union[Number, list] = key(
        1e8, "each edge server's backhaul rate to the cloud, both ways (one value, or a list with one per cell); "
        "inf: no transfer time", unit="bit/s", allowed=Described(words=_per_cell_text("> 0, inf allowed")))
    backhaul_latency_s: Union[Number, list] = key(
        0.01, "each backhaul's one-way latency, added to every transfer over it (one value, or a list with one "
        "per cell)", unit="s", allowed=Described(words=_per_cell_text("finite >= 0")))

    def __post_init__(self):
        check_keys(self)
        for name, infinite in (("backhaul_bps", True), ("backhaul_latency_s", False)):
            value = getattr(self, name)
            values = value if isinstance(value, (list, tuple)) else [value]
            if isinstance(value, (list, tuple)) and not value:
                fail(name, value, "a number or a non-empty list of one number per cell")
            for i, v in enumerate(values):
                label = f"{name}[{i}]" if isinstance(value, (list, tuple)) else name
                if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
                    fail(label, v, "a number")
                if infinite and not v > 0:
                    fail(label, v, "a rate > 0 bit/s (inf: no transfer time)")
                if not infinite and not (math.isfinite(v) and v >= 0):
                    fail(label, v, "a finite latency >= 0 s")

    def per_cell(self, name: str, n_cells: int) -> tuple[float, ...]:
        """``backhaul_bps`` or ``backhaul_latency_s`` as one float per cell (a list must have ``n_cells``)."""
        value = getattr(self, name)
        if isinstance(value, (list, tuple)):
            if len(value) != n_cells:
                fail(name, list(value), f"a number or a list of one per cell (= {n_cells} values), got {len(value)}")
            return tuple(float(v) for v in value)
        return (float(value),) * n_cells


def check_hierarchy(hierarchy: HierarchyConfig, n_cells: int, rounds: int, resources: Any, system: Any) -> None:
    """The ``[hierarchy]`` table against the rest of the scenario, one :class:`ConfigError` line each: per-cell lists
    of ``n_cells`` values, ``rounds`` (the run's edge rounds) a multiple of ``edge_rounds``, and what this mode does
    not run (imperfect CSI)."""
    for name in ("backhaul_bps", "backhaul_latency_s"):
        hierarchy.per_cell(name, n_cells)
    if rounds % hierarchy.edge_rounds:
        fail("edge_rounds", hierarchy.edge_rounds, f"a divisor of the run's rounds (= {rounds}): the run ends with a "
             f"cloud aggregation, every edge_rounds-th edge round")
    csi = getattr(system, "csi", None) or "perfect"
    if csi != "perfect":
        raise ConfigError(f"csi = {csi!r} with round_mode = {HIERARCHICAL!r}: imperfect channel knowledge "
                          f"follows one round sequence, and each cell runs its own; expected 'perfect'",
                          key="csi", value=csi, expected="'perfect'")


# --------------------------------------------------------------------------- the cells


def cell_of_devices(sim: Simulation) -> tuple[int, ...]:
    """The serving cell of every device (cells numbered from 0): the association of :mod:`edgesim.cells`."""
    return tuple(int(c) for c in sim.serving_cell)


# --------------------------------------------------------------------------- the protocol


@runtime_checkable
class HierarchicalBackend(Protocol):
    """What the hierarchical clock calls: a learning backend's ``hierarchical()`` mode (the FedAvg family's is
    HierFAVG, docs/model/hierarchy.md)."""

    def assign_cells(self, cell_of: Sequence[int], n_cells: int) -> None:
        """The serving cell of every device, of ``n_cells`` cells (once, before any round)."""
        ...

    def backhaul_bits(self) -> tuple[float, float]:
        """(bits of one edge model sent to the cloud, bits of the cloud model sent to one edge server)."""
        ...

    def plan_edge(self, cell: int, devices: tuple[int, ...], view: SystemView) -> RoundPlan:
        """Edge round ``view.round_index`` of ``cell`` (whose devices are ``devices``): its plan."""
        ...

    def complete_edge(self, cell: int, outcome: RoundOutcome) -> Mapping[str, float]:
        """The edge server of ``cell`` aggregates what arrived; the metrics with every device on the model it
        holds."""
        ...

    def aggregate_cloud(self, index: int) -> Mapping[str, float]:
        """Cloud aggregation ``index`` (from 0) of every edge model; the metrics of the cloud model."""
        ...


# --------------------------------------------------------------------------- the clock


class HierarchicalSimulation(Simulation):
    """A hierarchical run (module docstring): the synchronous engine's rounds run per cell, between cloud
    aggregations over the backhauls. Arguments as :class:`~edgesim.engine.Simulation`'s, with ``hierarchy`` the
    ``[hierarchy]`` table and ``backend`` a :class:`HierarchicalBackend`."""

    ROUND_MODES = (HIERARCHICAL,)

    def __init__(self, system, budget, backend: HierarchicalBackend, hierarchy: Optional[HierarchyConfig] = None,
                 seed: int = 0, record_events: bool = True, **options: Any):
        if not isinstance(backend, HierarchicalBackend):
            raise ValueError(f"backend {type(backend).__name__} has no hierarchical mode: expected the methods of "
                             f"edgesim.hierarchy.HierarchicalBackend")
        super().__init__(system, budget, backend, seed, record_events, **options)
        self.hierarchy = HierarchyConfig() if hierarchy is None else hierarchy
        self.cell_of = cell_of_devices(self)  # self.n_cells: the system's cells (edgesim.cells)
        self.members = tuple(tuple(d for d, c in enumerate(self.cell_of) if c == cell) for cell in range(self.n_cells))
        self.backhaul_bps = self.hierarchy.per_cell("backhaul_bps", self.n_cells)
        self.backhaul_latency_s = self.hierarchy.per_cell("backhaul_latency_s", self.n_cells)
        self.edge_cpu_hz = tuple(float(system.server_freq_hz) if c.cpu_hz is None else float(c.cpu_hz)
                                 for c in system.cell_configs)  # each edge server's CPU (cycles/s)
        backend.assign_cells(self.cell_of, self.n_cells)
        # A scheduling policy (or stragglers = "exclude") ranks each cell's devices on its own: one scheduler per
        # cell, with that cell's history (round robin's pointer, ages, Oort's utilities), its band and its K.
        self._cell_schedulers = None
        if self._scheduler is not None:
            self._cell_schedulers = [self._cell_scheduler(system, budget, backend, c) for c in range(self.n_cells)]
            self._scheduler = None  # the flat ranking over every device is not used
        self._start_period_state()

    def _cell_scheduler(self, system, budget, backend, cell: int) -> Scheduler:
        """Cell ``cell``'s scheduler: its devices, predicted on its band; K = ``clients_per_round`` of them (all
        when it has fewer), as the uniform draw takes."""
        expected = getattr(backend, "expected_work", None)
        k = getattr(backend, "clients_per_round", None)
        members = self.members[cell]
        scheduler = Scheduler(self.resources, system, budget, self.seed, expected() if callable(expected) else None,
                              clients_per_round=None if k is None else min(int(k), len(members)), devices=members)
        if self._device_band_hz is not None:
            scheduler.bandwidth_hz = float(cell_bands_hz(system)[cell, 1])
        return scheduler

    def _start_period_state(self) -> None:
        self._periods = 0  # cloud aggregations run on the clock
        self._wait_s = (0.0,) * self.n_cells  # the cloud model's broadcast still to reach each cell
        self._pending: deque[RoundRecord] = deque()
        self._handed_edges = [0] * self.n_cells  # edge records handed out, per cell
        self._handed_clouds = 0
        self._shown_s = float(self._env.now)
        self._backhaul_bits = 0.0

    # -- views
    @property
    def round_index(self) -> int:
        """Edge rounds that every cell has finished and handed out, their cloud aggregation included."""
        k = self.hierarchy.edge_rounds
        done = self._handed_clouds * k
        within = min(e - done for e in self._handed_edges)
        return done + max(0, min(within, k - 1))

    @property
    def now_s(self) -> float:
        """The simulated time of the last record handed out (the clock itself may have run to its period's end)."""
        return self._shown_s if hasattr(self, "_shown_s") else float(self._env.now)  # the clock's, while set up

    # -- running
    def run(self, rounds: Optional[int] = None, max_time_s: Optional[float] = None, on_round=None):
        """Records until ``rounds`` more edge rounds (default: to ``budget.rounds``) are done in every cell, their
        cloud aggregation included; ``max_time_s`` and ``on_round`` as :meth:`Clock.run`."""
        target = self.budget.rounds if rounds is None else self.round_index + rounds
        out = []
        while self.round_index < target and (max_time_s is None or self.now_s < max_time_s):
            record = self.run_round()
            out.append(record)
            if on_round is not None and on_round(record):
                break
        return out

    def run_round(self) -> RoundRecord:
        """The next record (an edge or a cloud aggregation), running the clock one cloud period on when none is
        left."""
        if not self._pending:
            self._run_period()
        record = self._pending.popleft()
        if record.level == "cloud":
            self._handed_clouds += 1
        else:
            self._handed_edges[record.cell] += 1
        self._shown_s = record.end_time_s
        return record

    def _run_period(self) -> None:
        env = self._env
        start_s = env.now
        first = self._periods * self.hierarchy.edge_rounds
        with cyclic_gc_paused():
            cells = [env.process(self._cell(env, c, first)) for c in range(self.n_cells)]
            env.run(until=env.all_of(cells))
        up_bits, down_bits = (float(b) for b in self.backend.backhaul_bits())
        metrics = self.backend.aggregate_cloud(self._periods)
        self._log.emit(env.now, first + self.hierarchy.edge_rounds - 1, -1, "cloud_aggregate")
        bits = self.n_cells * (up_bits + down_bits)
        self._backhaul_bits += bits
        info = {"edge_rounds": float(self.hierarchy.edge_rounds), "backhaul_bits": bits,
                "cum_backhaul_bits": self._backhaul_bits}
        rows: list = []
        record = self._totals.record(first + self.hierarchy.edge_rounds - 1, start_s, env.now, (), (), rows,
                                     totals_of(rows), metrics, info, level="cloud", cell=-1)
        self._keep(record)
        self._wait_s = tuple(backhaul_time_s(down_bits, bps, lat)
                             for bps, lat in zip(self.backhaul_bps, self.backhaul_latency_s))
        self._periods += 1
        self._round_index = self._periods * self.hierarchy.edge_rounds
        self.channel.advance(env.now - start_s)

    def _keep(self, record: RoundRecord) -> None:
        self._pending.append(record)
        if self.keep_records:
            self._records.append(record)

    def _cell(self, env: simpy.Environment, cell: int, first: int):
        """Cell ``cell``'s part of a period: the cloud model's arrival, κ edge rounds, its edge model to the cloud."""
        if self._wait_s[cell] > 0:
            yield env.timeout(self._wait_s[cell])
        for r in range(first, first + self.hierarchy.edge_rounds):
            yield from self._edge_round(env, cell, r)
        up_bits = float(self.backend.backhaul_bits()[0])
        self._log.emit(env.now, first + self.hierarchy.edge_rounds - 1, -1, "backhaul_start", up_bits)
        seconds = backhaul_time_s(up_bits, self.backhaul_bps[cell], self.backhaul_latency_s[cell])
        if seconds > 0:
            yield env.timeout(seconds)
        self._log.emit(env.now, first + self.hierarchy.edge_rounds - 1, -1, "backhaul_end", up_bits)

    def _edge_round(self, env: simpy.Environment, cell: int, r: int):
        """Edge round ``r`` of ``cell``: the synchronous round over the cell's devices, then its edge aggregation."""
        gains = self.channel.gains(r)
        view = dataclasses.replace(self.system_view(gains), round_index=r, start_time_s=float(env.now))
        scheduler = None if self._cell_schedulers is None else self._cell_schedulers[cell]
        if scheduler is not None:  # the cell's ranking of its own devices (their ids), on its own history
            mine = list(self.members[cell])
            view = dataclasses.replace(view, schedule=scheduler.schedule(
                r, np.asarray(gains, dtype=float)[mine], np.asarray(view.uplink_rate_bps)[mine]))
            for d in scheduler.excluded:
                self._log.emit(env.now, r, d, "straggler_excluded")
        plan = self.backend.plan_edge(cell, self.members[cell], view)
        if view.schedule is not None:
            self._check_ranking(plan, view.schedule, r)
        if self.availability is not None:
            plan = self._online_only(plan, env.now)
        if self._battery_j is not None:
            plan = self._charged_only(plan)
        rnd = self._open_round(r, plan, view, server_freq_hz=self.edge_cpu_hz[cell], cell=cell)
        strangers = sorted(d.device for d in rnd.devices if self.cell_of[d.device] != cell)
        if strangers:
            raise ValueError(f"plan_edge of cell {cell}, edge round {r}: devices {strangers[:5]} are in other cells; "
                             f"expected devices of {list(self.members[cell])[:10]}")
        yield env.process(self._round_process(env, rnd))
        rows, totals, compute_end_s, upload_end_s = self._device_rows(rnd, env.now - rnd.start_s,
                                                                      float(self.system.kappa))
        outcome = self._outcome(rnd, rows, compute_end_s, upload_end_s)
        rnd.devices = None
        metrics = self.backend.complete_edge(cell, outcome)
        record = self._totals.record(r, rnd.start_s, outcome.end_time_s, outcome.arrived, outcome.dropped, rows,
                                     totals, metrics,
                                     plan.info, server_before_s=rnd.server_before_s,
                                     server_after_s=rnd.server_after_s, level="edge", cell=cell)
        self._keep(record)
        if self._battery_j is not None:
            self._spend(record)
        if scheduler is not None:
            losses = self._device_losses() if callable(self._device_losses) else None
            arrived = set(record.arrived)
            losses = {d: loss for d, loss in (losses or {}).items() if d in arrived and self.cell_of[d] == cell}
            scheduler.observe(r, record.devices, {w.device: w for w in plan.work}, losses)

    # -- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """:meth:`Simulation.state_dict` at the end of the clock's last period, with the period's records not
        handed out yet (their fields as plain values) and what is handed out."""
        state = super().state_dict()
        state.update({
            "kind": HIERARCHICAL,
            "clock_s": float(self._env.now),
            "now_s": float(self._env.now),
            "shown_s": self._shown_s,
            "periods": self._periods,
            "wait_s": list(self._wait_s),
            "handed_edges": list(self._handed_edges),
            "handed_clouds": self._handed_clouds,
            "backhaul_bits": self._backhaul_bits,
            "pending": [record_state(r) for r in self._pending],
            **({"cell_schedules": [s.state_dict() for s in self._cell_schedulers]}
               if self._cell_schedulers is not None else {}),
        })
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume after :meth:`state_dict` (same scenario and seed)."""
        if state.get("kind") != HIERARCHICAL:
            raise ValueError(f"state of kind {state.get('kind', 'rounds')!r} is not a hierarchical run's; expected "
                             f"the state of a run with round_mode = {HIERARCHICAL!r}")
        super().load_state_dict(state)
        self._start_period_state()
        self._periods = int(state["periods"])
        self._round_index = self._periods * self.hierarchy.edge_rounds
        self._wait_s = tuple(float(s) for s in state["wait_s"])
        self._handed_edges = [int(e) for e in state["handed_edges"]]
        self._handed_clouds = int(state["handed_clouds"])
        self._backhaul_bits = float(state["backhaul_bits"])
        self._shown_s = float(state["shown_s"])
        self._pending = deque(record_from_state(d) for d in state["pending"])
        if self._cell_schedulers is not None:
            for scheduler, saved in zip(self._cell_schedulers, state["cell_schedules"]):
                scheduler.load_state_dict(saved)


def record_state(record: RoundRecord) -> dict:
    """A :class:`RoundRecord` as plain values (its device rows as tuples)."""
    out = {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name != "devices"}
    out["metrics"], out["info"] = dict(record.metrics), dict(record.info)
    out["devices"] = [tuple(row) for row in record.devices]
    return out


def record_from_state(state: Mapping[str, Any]) -> RoundRecord:
    """The :class:`RoundRecord` of :func:`record_state` (an edge round's rows are :class:`DeviceRound` s)."""
    from .records import DeviceRound

    return RoundRecord(**{**state, "devices": tuple(DeviceRound(*values) for values in state["devices"])})


def cell_samples(cell_of: Sequence[int], samples: Sequence[float], n_cells: int) -> list[float]:
    """Each cell's data ``|D^ℓ| = Σ_{i in ℓ} |D_i|`` (samples) from each device's."""
    out = np.zeros(n_cells)
    for c, s in zip(cell_of, samples):
        out[c] += float(s)
    return out.tolist()
