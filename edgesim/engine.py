"""The discrete-event engine: federated rounds on a SimPy clock (docs/model/system_model.md).

One round: first the base station's own compute before the broadcast
(``RoundPlan.server_cycles``, ``sum / system.server_freq_hz`` seconds; none
when empty), then, for every device of the backend's
:class:`~edgesim.backend.RoundPlan` (a SimPy process each, all started when
the server is done):

1. **download** ``download_bits`` from the BS broadcast, at
   ``system.downlink_rate_bps`` (every device in parallel; rate 0 = instantaneous,
   the paper's assumption, but the bits are still counted);
2. **compute** all phases back to back: ``sum(compute_cycles) / f_n`` seconds
   (Eqs. (7), (23));
3. **upload** ``upload_bits`` (when > 0) on the shared uplink: :class:`TdmaUplink`
   (one transfer at a time over the whole band, FIFO: Eq. (24) for identical
   devices) or :class:`FdmaUplink` (processor sharing of the band, Eq. (8) with
   ``b / n_active``). The delay lives in the link (:mod:`edgesim.links`); devices only ask it.

The round ends when every participant is done (``budget.round_mode = "sync"``,
the paper's) or at ``min(all done, start + budget.round_deadline_s)``
(``"deadline"``, measured from the round's start, server phase included): devices not done by then are *dropped*; bits they put on
air count as wasted, and the energy they spent (radio ``p * airtime``, compute
``kappa * f² * cycles`` for the cycles executed) is still counted. Work that
finishes at the deadline counts as done, up to the plan's tolerance: within
``1e-12 · max(1, deadline)`` seconds after it (float rounding of a plan that
exactly fills T/G, :data:`edgesim.budget.REL_TOL`); the round then ends when
that work ends. Then, if at least one upload arrived, the base station's
compute after the uploads (``RoundPlan.server_cycles_after``); the round
ends when it ends. Server phases are ``server_compute_start``/``_end``
events (device -1) and the record's ``server_before_s``/``server_after_s``.

Devices that come and go (``availability``, :mod:`edgesim.availability`;
none: always online): a device offline at the round's start is taken out of
the plan (never scheduled); one whose online period ends before it is done is
dropped then, in any round mode, its bits on air wasted and its energy
counted as at a deadline (``drop_reason = "offline"``, else ``"deadline"``).

Several cells (``system.cells``, :mod:`edgesim.cells`): one plan and one round over every cell's devices; each
device uploads on its serving cell's link (each cell its own link of ``system.access`` on its own band, its own
``[resources]`` allocation), the cells' transfers re-timed by the interference between them
(:class:`edgesim.interference.CellLinks`); the aggregator is reached over an ideal backhaul (no time).

Every step is recorded as an :class:`Event`; every round as a
:class:`RoundRecord` with per-device :class:`DeviceRound` rows. Same inputs
give identical records and events; :meth:`Simulation.state_dict` and
:meth:`Simulation.load_state_dict` checkpoint and resume a run.
"""

from __future__ import annotations

import dataclasses
import math
from itertools import chain
from operator import attrgetter
from typing import Any, Callable, Mapping, Optional

import numpy as np
import simpy

from ._checks import count, non_negative, positive
from .access import Cell, make_banded, make_uplink
from .availability import Availability
from .backend import DeviceLoss, LearningBackend, RoundOutcome, RoundPlan, SystemView
from .budget import REL_TOL
from .cells import cell_system, device_bands_hz
from .channel import ChannelModel, estimated_gains
from .clock import Clock, cyclic_gc_paused
from .compute import compute_time_s
from .config import BudgetConfig, ConfigError, SystemConfig
from .device_job import DeviceJob, job_costs, run_job
from .interference import CellLinks
from .links import Downlink
from .radio import shannon_rate_bps
from .records import EVENT_KINDS, DeviceRound, Event, EventLog, RoundRecord, Totals, totals_of
from .resources import Allocator, PolicyError, ResourcesConfig, tdma_order
from .resources.scheduling import Scheduler

__all__ = ["EVENT_KINDS", "DeviceRound", "Event", "RoundRecord", "Simulation", "cyclic_gc_paused",
           "deadline_with_tolerance_s"]


def deadline_with_tolerance_s(deadline_s: float) -> float:
    """The latest end (s after round start) that still meets ``deadline_s``: ``D + 1e-12 · max(1, D)``.

    The same relative tolerance as the plan's feasibility test (:func:`edgesim.budget.is_feasible`).
    """
    return deadline_s + REL_TOL * max(1.0, deadline_s)


_BY_DEVICE = attrgetter("device")


class _Round:
    __slots__ = ("index", "start_s", "devices", "remaining", "all_done", "arrived", "server_s", "server_before_s",
                 "server_after_s")

    def __init__(self, index: int, start_s: float, devices: Optional[list[DeviceJob]], all_done: simpy.Event,
                 server_s: tuple[Optional[float], Optional[float]] = (None, None)):
        self.index = index
        self.start_s = start_s
        self.devices = devices
        self.remaining = len(devices)
        self.all_done = all_done
        self.arrived: list[int] = []
        self.server_s = server_s  # planned (before, after) seconds; None: no such phase
        self.server_before_s = 0.0
        self.server_after_s = 0.0


class Simulation(Clock):
    """A federated-learning run on the simulated wireless cell: one persistent SimPy clock, round after round.

    ``seed`` drives the channel (placement, shadowing, fading, mobility); the
    backend has its own. ``record_events=False`` keeps only
    :attr:`event_count` (long benchmarks); ``keep_records=False`` does not
    keep the :class:`RoundRecord` s (they are still returned). ``resources``: the
    ``[resources]`` policies (:mod:`edgesim.resources`); ``None`` or the defaults
    run the engine exactly as without them. ``device_losses``: a callable giving the
    :class:`edgesim.backend.DeviceLoss` of each device trained since its last call, read
    after every round when a scheduling policy is set (default: the backend's own
    ``device_losses``, if it has one).
    """

    ROUND_MODES: tuple[str, ...] = ("sync", "deadline")  # the round modes this clock runs

    def __init__(
        self,
        system: SystemConfig,
        budget: BudgetConfig,
        backend: LearningBackend,
        seed: int = 0,
        record_events: bool = True,
        *,
        keep_records: bool = True,
        availability: Optional[Availability] = None,
        resources: Optional[ResourcesConfig] = None,
        device_losses: Optional[Callable[[], Mapping[int, DeviceLoss]]] = None,
        access_options: Any = None,
    ):
        if budget.round_mode not in self.ROUND_MODES:
            raise ValueError(f"budget.round_mode(={budget.round_mode!r}) is not one of {self.ROUND_MODES}: run it with "
                             f"edgesim.asynchrony.AsyncSimulation (an asynchronous rule) or "
                             f"edgesim.hierarchy.HierarchicalSimulation (hierarchical)")
        if system.cells is not None and system.n_cells == 1:
            system = cell_system(system, 0)  # one cell given: its band and edge server's CPU where it sets them
        self.system = system
        self.budget = budget
        self.backend = backend
        self.seed = count("seed", seed)
        self._log = EventLog(record_events)
        self.keep_records = bool(keep_records)
        # Devices that come and go (None: always online, today's engine exactly).
        self.availability = None if availability is None or availability.always else availability
        self.channel = ChannelModel(system, self.seed)
        self.n_cells = system.n_cells
        # Each device's serving cell (edgesim.cells; all 0 with one cell), fixed for the run.
        self.serving_cell: tuple[int, ...] = self.channel.serving_cell
        self._noise_psd_w_per_hz = system.noise_psd_w_per_hz
        self._tx_power_w = tuple(positive("tx_power_w", p) for p in system.tx_power_w)
        non_negative("kappa", system.kappa)
        self._cpu_freqs_hz = tuple(positive("cpu_freq_hz", f) for f in system.cpu_freqs_hz)
        self._tx_power_arr = np.asarray(self._tx_power_w)
        self.resources = resources if resources is not None else ResourcesConfig()
        self.access_options = access_options  # the [access] table's options (None: the scheme's defaults)
        # The defaults are the links' own behaviour: no allocation to run each round, no ranking. Several cells: each
        # cell allocates its own band to its own devices (edgesim.cells.cell_system).
        self._allocator = None if self.resources.is_default else Allocator(self.resources, system, budget)
        self._cell_allocators = None if self._allocator is None or self.n_cells == 1 else [
            Allocator(self.resources, cell_system(system, c), budget) for c in range(self.n_cells)]
        # Several cells: each device's uplink band W (its cell's, Hz), for the view's and the devices' rates.
        self._device_band_hz = None if self.n_cells == 1 else device_bands_hz(system, self.serving_cell)
        self._scheduler = None
        if Scheduler.needed(self.resources):
            expected = getattr(backend, "expected_work", None)
            self._scheduler = Scheduler(self.resources, system, budget, self.seed,
                                        expected() if callable(expected) else None,
                                        clients_per_round=getattr(backend, "clients_per_round", None))
            if self._device_band_hz is not None:  # several cells: one ranking over every cell's devices, each
                self._scheduler.bandwidth_hz = self._device_band_hz  # predicted on its own cell's band
        # Where each round's per-device loss statistics come from (Oort's utility): the run's source, else the
        # backend's own device_losses(), else none (Oort then ranks by its system half, docs/model/resource_policies.md).
        self._device_losses = device_losses if device_losses is not None else getattr(backend, "device_losses", None)
        # Energy budgets (system.battery_j; None: unlimited): what each device has spent so far, J.
        batteries = system.batteries_j
        self._battery_j = None if batteries is None else np.asarray(batteries, dtype=float)
        self._energy_spent_j = np.zeros(system.n_devices)
        # What the base station knows of the channel (system.csi; None: perfect, today's engine exactly).
        self._csi = system.csi or "perfect"
        self._last_gains: Optional[np.ndarray] = None  # "outdated": the previous round's true gains
        self._records: list[RoundRecord] = []
        self._round_index = 0
        self._totals = Totals()
        self._reset_clock(0.0)

    def _reset_clock(self, now_s: float) -> None:
        self._env = simpy.Environment(initial_time=now_s)
        self._downlink = Downlink(self.system.downlink_rate_bps)
        if self.n_cells > 1:  # each cell its own links, one interference field between them (edgesim.interference)
            self._cell_links = CellLinks(self._env, self.system, self.serving_cell, self._noise_psd_w_per_hz,
                                         self.resources, self.access_options, self.seed)
            self._uplink = self._banded = None
            return
        self._cell_links = None
        self._uplink = make_uplink(self._env, self.system.access, self.system.bandwidth_hz, self._noise_psd_w_per_hz,
                                   tdma_order(self.resources), self.access_options, self.system.n_devices, self.seed,
                                   self.resources)
        # The link that runs a bandwidth policy's per-device bands, as the access scheme declares (None: none).
        self._banded = make_banded(self._env, self.system.access, Cell(float(self.system.bandwidth_hz),
                                   self._noise_psd_w_per_hz, self.system.n_devices, self.seed))

    # -- read-only views (now_s, events, event_count, records: Clock's)
    @property
    def round_index(self) -> int:
        """The index of the next round (= rounds run so far)."""
        return self._round_index

    # -- running (run: Clock's)
    def system_view(self, gains: Optional[np.ndarray] = None) -> SystemView:
        """What the BS knows at the start of the next round."""
        if gains is None:
            gains = self._planned_gains(self.channel.gains(self._round_index))
        b, n0 = float(self.system.bandwidth_hz), self._noise_psd_w_per_hz
        rates = shannon_rate_bps(b if self._device_band_hz is None else self._device_band_hz,
                                 np.asarray(gains, dtype=float), self._tx_power_arr, n0)
        return SystemView(
            round_index=self._round_index,
            start_time_s=self.now_s,
            round_budget_s=self.budget.round_budget_s,
            n_devices=self.system.n_devices,
            bandwidth_hz=b,
            noise_psd_w_per_hz=n0,
            access=self.system.access,
            cpu_freq_hz=self._cpu_freqs_hz,
            tx_power_w=self._tx_power_w,
            channel_gain=tuple(gains.tolist()),
            uplink_rate_bps=tuple(rates.tolist()),
            schedule=None if self._scheduler is None else self._scheduler.schedule(self._round_index, gains, rates),
            **self._battery_view(),
            **({"serving_cell": self.serving_cell, "n_cells": self.n_cells} if self.n_cells > 1 else {}),
        )

    def _planned_gains(self, gains: np.ndarray) -> np.ndarray:
        """The gains the base station plans on (system.csi): the true ones; ``"estimated"``: with a relative
        Gaussian error (:func:`edgesim.channel.estimated_gains`); ``"outdated"``: the previous round's (round 0: the
        true ones)."""
        if self._csi == "estimated":
            return estimated_gains(gains, float(self.system.csi_error_std), self.seed, self._round_index)
        if self._csi == "outdated" and self._last_gains is not None:
            return self._last_gains.copy()
        return gains

    def _battery_view(self) -> dict:
        """The energy spent and the battery left of every device (SystemView's; nothing without batteries)."""
        if self._battery_j is None:
            return {}
        return {"energy_spent_j": tuple(self._energy_spent_j.tolist()),
                "battery_left_j": tuple(np.maximum(self._battery_j - self._energy_spent_j, 0.0).tolist())}

    def _charged_only(self, plan: RoundPlan) -> RoundPlan:
        """The plan without the devices whose battery is spent: they take no further part."""
        if not isinstance(plan, RoundPlan):
            return plan  # _devices_of names the problem
        left = self._battery_j - self._energy_spent_j
        return dataclasses.replace(plan, work=tuple(w for w in plan.work if left[w.device] > 0))

    def _spend(self, record: RoundRecord) -> None:
        """Charge each device the round's energy; a battery spent now is a ``battery_empty`` event (once)."""
        for row in record.devices:
            before = self._energy_spent_j[row.device]
            self._energy_spent_j[row.device] = before + row.radio_energy_j + row.compute_energy_j
            if before < self._battery_j[row.device] <= self._energy_spent_j[row.device]:
                self._log.emit(record.end_time_s, record.round_index, row.device, "battery_empty")

    def run_round(self) -> RoundRecord:
        """Plan, run on the clock, let the backend learn, record; then move the devices."""
        env = self._env
        true = None if self._csi == "perfect" else self.channel.gains(self._round_index)
        view = self.system_view(None if true is None else self._planned_gains(true))
        if self._scheduler is not None and self._scheduler.excluded:  # stragglers = "exclude": said in the events
            for d in self._scheduler.excluded:
                self._log.emit(env.now, self._round_index, d, "straggler_excluded")
        plan = self.backend.plan_round(view)
        if view.schedule is not None and isinstance(plan, RoundPlan):
            self._check_ranking(plan, view.schedule)
        if self.availability is not None:
            plan = self._online_only(plan, env.now)
        if self._battery_j is not None:
            plan = self._charged_only(plan)
        with cyclic_gc_paused():
            rnd = self._open_round(self._round_index, plan, view, true)
            env.run(until=env.process(self._round_process(env, rnd)))
            rows = self._device_rows(rnd, env.now - rnd.start_s, float(self.system.kappa))
            # The devices, their transfers and processes are freed here, by reference counting, before the
            # collector is back on: it never traverses them (one collection over them was ~5 % of a round).
            rnd.devices = None
        record = self._finish_round(rnd, plan, *rows)
        if self._battery_j is not None:
            self._spend(record)
        if self._scheduler is not None:
            losses = self._device_losses() if callable(self._device_losses) else None
            arrived = set(record.arrived)  # the server hears a device's loss with its update (Oort, §4.2)
            losses = {d: loss for d, loss in (losses or {}).items() if d in arrived}
            self._scheduler.observe(record.round_index, record.devices, {w.device: w for w in plan.work}, losses)
        if true is not None:
            self._last_gains = true
        self.channel.advance(record.duration_s)
        return record

    def _open_round(self, index: int, plan: RoundPlan, view: SystemView, true_gains=None,
                    server_freq_hz: Optional[float] = None, cell: Optional[int] = None) -> _Round:
        """Round ``index`` of ``plan``, starting now: its devices checked (:meth:`_devices_of`), the ``[resources]``
        policies' allocation made and an access scheme that decides per round told who takes part; its server
        phases at ``server_freq_hz`` (default ``system.server_freq_hz``). ``cell``: a round of that cell alone
        (a hierarchical edge round), whose links alone are told."""
        env = self._env
        rnd = _Round(index, env.now, self._devices_of(plan, view, true_gains), env.event(),
                     self._server_seconds(plan, server_freq_hz))
        if self._allocator is not None:
            self._allocate(rnd, view.channel_gain)
        if self._cell_links is not None:  # several cells: each cell's uploads to its links
            self._cell_links.begin_round(rnd.index, [d.device for d in rnd.devices], [d.gain for d in rnd.devices],
                                         [d.tx_power_w for d in rnd.devices],
                                         [float(d.work.upload_bits) for d in rnd.devices],
                                         self.channel.cell_gains(rnd.index), None if cell is None else (cell,))
        elif getattr(self._uplink, "rounds", False):  # a scheme that decides per round (edgesim.access)
            self._uplink.begin_round(rnd.index, [d.device for d in rnd.devices], [d.gain for d in rnd.devices],
                                     [d.tx_power_w for d in rnd.devices],
                                     [float(d.work.upload_bits) for d in rnd.devices])
        return rnd

    def _check_ranking(self, plan: RoundPlan, schedule: tuple[int, ...], round_index: Optional[int] = None) -> None:
        """A scheduling policy's round: the plan's participants (devices that compute or upload; listeners that
        only download are free) must be the first of its ranking, as many as there are of them; else one line
        naming the policy, the round and the devices (an algorithm that ignores the ranking would silently run
        without the policy)."""
        taken = {w.device for w in plan.work
                 if w.upload_bits > 0 or any(c > 0 for c in w.compute_cycles.values())}
        first = set(schedule[:len(taken)])
        if taken != first:
            name = self.resources.scheduling
            expected = ("an algorithm that takes its devices from SystemView.schedule (common.sample_clients with the "
                        "view), or scheduling = 'random'")
            raise ConfigError(
                f"[resources] scheduling = {name!r}: round {self._round_index if round_index is None else round_index}: "
                f"the plan takes devices "
                f"{sorted(taken - first)[:5]} outside the first {len(taken)} of the policy's ranking "
                f"{list(schedule[:len(taken)])[:10]}; expected {expected}",
                where="[resources]", key="scheduling", value=name, expected=expected)

    def _online_only(self, plan: RoundPlan, now_s: float) -> RoundPlan:
        """The plan without the devices offline at the round's start: an offline device is never scheduled."""
        if not isinstance(plan, RoundPlan):
            return plan  # _devices_of names the problem
        online = self.availability.online
        return dataclasses.replace(plan, work=tuple(w for w in plan.work if online(w.device, now_s)))

    def _watch_offline(self, env: simpy.Environment, rnd: _Round, processes: list) -> None:
        """Interrupt each device whose online period ends before it is done (its work so far is lost)."""
        for process, dev in zip(processes, rnd.devices):
            off_s = self.availability.online_until_s(dev.device, env.now)
            if off_s < math.inf:
                def go(_event, dev=dev, process=process):
                    if not dev.finished and not dev.dropped and dev.drop_reason == "":
                        dev.drop_reason = "offline"
                        process.interrupt("offline")
                env.timeout(off_s - env.now).callbacks.append(go)

    def _devices_of(self, plan: RoundPlan, view: SystemView, true_gains=None) -> list[DeviceJob]:
        """The plan's devices, every input checked for the whole round at once (one clear error otherwise).
        ``true_gains``: the channel the devices transmit on when the view's is an estimate (imperfect CSI)."""
        if not isinstance(plan, RoundPlan):
            raise ValueError(f"plan_round returned {plan!r}, expected a RoundPlan")
        work = plan.work
        ids = [w.device for w in work]
        gains, rates = view.channel_gain, view.uplink_rate_bps
        if true_gains is not None:
            gains = tuple(true_gains.tolist())
            band = float(self.system.bandwidth_hz) if self._device_band_hz is None else self._device_band_hz
            rates = tuple(shannon_rate_bps(band, true_gains, self._tx_power_arr, self._noise_psd_w_per_hz).tolist())
        try:
            n = len(work)
            phases = np.fromiter(chain.from_iterable([w.compute_cycles.values() for w in work]), float)
            up = np.fromiter([w.upload_bits for w in work], float, n)
            down = np.fromiter([w.download_bits for w in work], float, n)
            ok = (all(type(d) is int for d in ids) and len(set(ids)) == len(ids)
                  and (not ids or 0 <= min(ids) and max(ids) < self.system.n_devices)
                  and bool(np.isfinite(phases).all() and (phases >= 0).all())
                  and bool(np.isfinite(up).all() and (up >= 0).all() and np.isfinite(down).all() and (down >= 0).all()))
            if ok and n:  # an uploader needs a usable channel
                g = np.asarray(gains)[np.fromiter(ids, np.int64, n)]
                ok = bool(((up <= 0) | ((g > 0) & (g < math.inf))).all())
        except (TypeError, ValueError):
            ok = False
        if not ok:
            self._check_work(work, gains)  # names the culprit; integer-like ids (NumPy ints) pass on
        freqs, powers = self._cpu_freqs_hz, self._tx_power_w
        jobs = [
            DeviceJob(w, gains[d], rates[d], freqs[d], powers[d], sum(map(float, w.compute_cycles.values())))
            for w, d in zip(work, ids)
        ]
        if true_gains is not None:  # what the base station planned on, beside what the device transmits on
            for job in jobs:
                job.planned_gain = view.channel_gain[job.device]
                job.planned_rate_bps = view.uplink_rate_bps[job.device]
        return jobs

    def _allocate(self, rnd: _Round, planned_gains) -> None:
        """The ``[resources]`` policies' plan for the round's devices: their bands, powers and frequencies, planned on
        the gains the base station knows (``planned_gains``, by device id); the devices then transmit on their own.
        Several cells: each cell's policies plan its own devices on its own band."""
        if self._cell_allocators is None:
            self._allocate_cell(rnd, rnd.devices, planned_gains, self._allocator, float(self.system.bandwidth_hz),
                                self._banded)
            return
        links = self._cell_links
        for c, allocator in enumerate(self._cell_allocators):
            mine = [d for d in rnd.devices if self.serving_cell[d.device] == c]
            if mine:
                self._allocate_cell(rnd, mine, planned_gains, allocator, float(allocator.system.bandwidth_hz),
                                    links.banded[c])

    def _allocate_cell(self, rnd: _Round, devices: list[DeviceJob], planned_gains, allocator: Allocator, b: float,
                       banded) -> None:
        downlink = self._downlink
        plan = allocator.allocate(
            rnd.index, [d.device for d in devices], [planned_gains[d.device] for d in devices],
            [d.cycles for d in devices],
            [float(d.work.upload_bits) for d in devices],
            [downlink.duration_s(float(d.work.download_bits)) for d in devices],
            rnd.server_s[0] or 0.0,
        )
        n0 = self._noise_psd_w_per_hz
        bands = plan.bands_hz.tolist() if plan.bands_hz is not None else None
        if bands is not None and banded is None:
            raise PolicyError(f"[resources] bandwidth = {self.resources.bandwidth!r}: round {rnd.index}: returned a "
                              f"band per device; access = {self.system.access!r} runs no per-device bands: expected "
                              f"None (the scheme's own sharing), or an access scheme with bands such as 'fdma'")
        for i, (dev, f, p) in enumerate(zip(devices, plan.cpu_freq_hz.tolist(), plan.tx_power_w.tolist())):
            dev.set_cpu_freq(f)
            dev.tx_power_w = p
            dev.rate_bps = shannon_rate_bps(b, dev.gain, p, n0)  # the full-band rate at its power
            if dev.planned_gain is not None:
                dev.planned_rate_bps = shannon_rate_bps(b, dev.planned_gain, p, n0)  # as the policies expected it
            if bands is not None and dev.work.upload_bits > 0:
                dev.band_hz = bands[i]

    def _check_work(self, work, gains) -> None:
        """The per-device checks of a round plan, one device at a time (for the message of a bad plan)."""
        n = self.system.n_devices
        seen: set[int] = set()
        for w in work:
            d = w.device
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= d < n:
                raise ValueError(f"DeviceWork.device(={d!r}) must be a device id in 0..{n - 1}")
            if d in seen:
                raise ValueError(f"DeviceWork.device(={d}) appears twice in the round plan")
            seen.add(d)
            for k, v in w.compute_cycles.items():
                non_negative(f"compute_cycles[{k!r}]", v)
            non_negative("upload_bits", w.upload_bits)
            non_negative("download_bits", w.download_bits)
            if w.upload_bits > 0:
                positive(f"channel_gain of device {d}", gains[d])  # an uploader needs a usable channel

    def _server_seconds(self, plan: RoundPlan, freq_hz: Optional[float] = None) -> tuple[Optional[float],
                                                                                         Optional[float]]:
        """The plan's server phases in seconds at ``freq_hz`` (default ``system.server_freq_hz``; ``None``: no such
        phase)."""
        freq_hz = float(self.system.server_freq_hz) if freq_hz is None else float(freq_hz)
        out = []
        for label, phases in (("server_cycles", plan.server_cycles), ("server_cycles_after", plan.server_cycles_after)):
            cycles = sum(non_negative(f"{label}[{k!r}]", v) for k, v in phases.items())
            out.append(compute_time_s(cycles, freq_hz) if phases else None)
        return out[0], out[1]

    def _server_phase(self, env: simpy.Environment, rnd: _Round, seconds: float):
        self._log.emit(env.now, rnd.index, -1, "server_compute_start")
        if seconds > 0:
            yield env.timeout(seconds)
        self._log.emit(env.now, rnd.index, -1, "server_compute_end")

    def _round_process(self, env: simpy.Environment, rnd: _Round):
        self._log.emit(env.now, rnd.index, -1, "round_start")
        before_s, after_s = rnd.server_s
        if before_s is not None and self._cuts_the_server(before_s):
            yield from self._cut_at_the_deadline(env, rnd)
            return
        if before_s is not None:
            yield from self._server_phase(env, rnd, before_s)
            rnd.server_before_s = before_s
        processes = [env.process(self._device_process(env, rnd, dev)) for dev in rnd.devices]
        if self.availability is not None:
            self._watch_offline(env, rnd, processes)
        if not processes:
            rnd.all_done.succeed()
        if self.budget.round_mode == "deadline":
            left_s = max(0.0, rnd.start_s + self.budget.round_deadline_s - env.now)
            yield rnd.all_done | env.timeout(self.budget.round_deadline_s if before_s is None else left_s)
            # Let everything else due at this very instant, or within the plan's
            # tolerance after it, happen first: work that ends at the deadline is
            # done, not dropped by float rounding.
            horizon_s = rnd.start_s + deadline_with_tolerance_s(self.budget.round_deadline_s)
            while rnd.remaining > 0 and env.peek() <= horizon_s:
                yield env.timeout(max(0.0, env.peek() - env.now))
            if rnd.remaining > 0:
                for process, dev in zip(processes, rnd.devices):
                    if not dev.finished:
                        dev.drop_reason = "deadline"
                        process.interrupt("deadline")
        yield rnd.all_done
        if after_s is not None and rnd.arrived:
            yield from self._server_phase(env, rnd, after_s)
            rnd.server_after_s = after_s
        self._log.emit(env.now, rnd.index, -1, "round_end")

    def _cuts_the_server(self, before_s: float) -> bool:
        """A ``deadline`` round whose server phase before the broadcast outlasts the deadline (and its tolerance)."""
        return self.budget.round_mode == "deadline" and before_s > deadline_with_tolerance_s(self.budget.round_deadline_s)

    def _cut_at_the_deadline(self, env: simpy.Environment, rnd: _Round):
        """The server is still computing at the deadline: the round ends there. Nothing was broadcast, so every
        participant is dropped before its download (no bits received, no compute, no upload)."""
        self._log.emit(env.now, rnd.index, -1, "server_compute_start")
        yield env.timeout(self.budget.round_deadline_s)
        rnd.server_before_s = self.budget.round_deadline_s
        for dev in rnd.devices:
            dev.dropped = dev.finished = True
            dev.drop_reason = "deadline"
            self._log.emit(env.now, rnd.index, dev.device, "upload_dropped", 0.0)
        rnd.remaining = 0
        self._log.emit(env.now, rnd.index, -1, "round_end")

    def _device_process(self, env: simpy.Environment, rnd: _Round, dev: DeviceJob):
        links = self._cell_links
        if links is None:
            yield from run_job(env, dev, rnd.index, self._log, self._downlink, self._uplink, self._banded)
        else:  # several cells: its serving cell's links
            yield from run_job(env, dev, rnd.index, self._log, self._downlink, links.uplink(dev.device),
                               links.banded_link(dev.device))
        if dev.arrived:
            rnd.arrived.append(dev.device)
        dev.finished = True
        rnd.remaining -= 1
        if rnd.remaining == 0:
            rnd.all_done.succeed()

    def _finish_round(self, rnd: _Round, plan: RoundPlan, rows: list[DeviceRound], totals: dict,
                      compute_end_s: dict, upload_end_s: dict) -> RoundRecord:
        """The round's record from its :meth:`_device_rows`; the backend completes the round here."""
        outcome = self._outcome(rnd, rows, compute_end_s, upload_end_s)
        metrics = self.backend.complete_round(outcome)
        record = self._totals.record(rnd.index, rnd.start_s, outcome.end_time_s, outcome.arrived, outcome.dropped,
                                     rows, totals, metrics, plan.info, server_before_s=rnd.server_before_s,
                                     server_after_s=rnd.server_after_s)
        if self.keep_records:
            self._records.append(record)
        self._round_index += 1
        return record

    def _outcome(self, rnd: _Round, rows: list[DeviceRound], compute_end_s: dict, upload_end_s: dict) -> RoundOutcome:
        """What the round that just ended hands the backend (now is its end)."""
        arrived = tuple(rnd.arrived)
        return RoundOutcome(
            round_index=rnd.index,
            start_time_s=rnd.start_s,
            end_time_s=float(self._env.now),
            arrived=arrived,
            dropped=tuple(row.device for row in rows if row.dropped),
            compute_end_s=compute_end_s,
            upload_end_s=upload_end_s,
            server_cut=rnd.server_s[0] is not None and self._cuts_the_server(rnd.server_s[0]),
            over_the_air_noise_var=(None if not arrived else getattr(self._uplink, "noise_var", None)
                                    if self._cell_links is None else self._cell_links.noise_var(arrived)),
        )

    @staticmethod
    def _device_rows(rnd: _Round, duration_s: float, kappa: float) -> tuple[list[DeviceRound], dict, dict, dict]:
        """The round's :class:`DeviceRound` rows by device id (:func:`edgesim.device_job.job_costs`, ``idle_s``
        what is left of the round), their :func:`~edgesim.records.totals_of` (summed in that order), and each
        device's compute and upload end times (where it got there)."""
        index = rnd.index
        rows = []
        new_row = tuple.__new__  # DeviceRound's own __new__ without its Python frame (same tuple)
        compute_end_s, upload_end_s = {}, {}
        by_id = sorted(rnd.devices, key=_BY_DEVICE)
        for dev in by_id:
            download_s, compute_s, airtime_s, bits_up, bits_down, wasted, radio_j, compute_j, band_hz = \
                job_costs(dev, kappa)
            rows.append(new_row(DeviceRound, (
                index, dev.device, dev.gain, dev.rate_bps, download_s, compute_s, airtime_s,
                max(0.0, duration_s - download_s - compute_s - airtime_s),
                bits_up, bits_down, wasted, radio_j, compute_j, dev.arrived, dev.dropped, dev.drop_reason,
                band_hz, dev.transfer.tx_power_w if dev.transfer is not None else dev.tx_power_w, dev.cpu_freq_hz,
                dev.transfer.resource_blocks if dev.transfer is not None else 0,
                dev.gain if dev.planned_gain is None else dev.planned_gain,
                dev.rate_bps if dev.planned_rate_bps is None else dev.planned_rate_bps,
            )))
            if dev.compute_end_s is not None:
                compute_end_s[dev.device] = dev.compute_end_s
            if dev.upload_end_s is not None:
                upload_end_s[dev.device] = dev.upload_end_s
        if by_id != rnd.devices:  # the outcome's maps keep the plan's order of the devices
            order = [dev.device for dev in rnd.devices]
            compute_end_s = {d: compute_end_s[d] for d in order if d in compute_end_s}
            upload_end_s = {d: upload_end_s[d] for d in order if d in upload_end_s}
        return rows, totals_of(rows), compute_end_s, upload_end_s

    # -- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The engine's state between rounds as plain numbers and lists (JSON-ready).

        The backend is checkpointed by its owner; records and events are
        outputs, written elsewhere, and are not part of the state.
        """
        return {
            "version": 1,
            "seed": self.seed,
            "now_s": self.now_s,
            "round_index": self._round_index,
            "event_count": self._log.count,
            **self._totals.state_dict(),
            "channel": self.channel.state_dict(),
            **({"schedule": self._scheduler.state_dict()} if self._scheduler is not None else {}),
            **({"energy_spent_j": self._energy_spent_j.tolist()} if self._battery_j is not None else {}),
            **({"csi_last_gains": self._last_gains.tolist()}
               if self._csi == "outdated" and self._last_gains is not None else {}),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict` (same configs and seed): a fresh clock at the saved time.

        Clears :attr:`events` and :attr:`records`; the next round is the saved ``round_index``.
        """
        if state.get("version") != 1:
            raise ValueError(f"state version(={state.get('version')!r}) must be 1")
        if int(state["seed"]) != self.seed:
            raise ValueError(f"state seed(={state['seed']}) differs from this simulation's seed(={self.seed})")
        self.channel.load_state_dict(state["channel"])
        if self._scheduler is not None and "schedule" in state:
            self._scheduler.load_state_dict(state["schedule"])
        if "csi_last_gains" in state:
            self._last_gains = np.asarray(state["csi_last_gains"], dtype=float)
        if self._battery_j is not None:
            self._energy_spent_j = np.asarray(state.get("energy_spent_j", np.zeros(self.system.n_devices)),
                                              dtype=float)
        self._round_index = count("round_index", state["round_index"])
        self._totals = Totals.from_state(state)
        self._log = EventLog(self._log.record, count("event_count", state["event_count"]))
        self._records = []
        self._reset_clock(non_negative("now_s", state["now_s"]))
