"""Asynchronous aggregation on the event clock: FedAsync, FedBuff and the other rules (docs/model/asynchrony.md).

A ``budget.round_mode`` that is an asynchronous rule (:mod:`edgesim.async_rules`: ``"fedasync"``,
``"fedbuff"``, plugins) replaces the round by
``concurrency`` device *slots* ([async] table, :class:`AsyncConfig`), each a
SimPy process that loops:

1. draw a device among those idle and online (uniformly, from the run's
   stream ``(seed, STREAM_ASYNC_DRAW)``, or the first of them in the
   ``[resources]`` scheduling policy's ranking, :class:`~edgesim.resources.Scheduler`;
   none: wait until one is);
2. the device **downloads** the current global model (version ``τ``, the
   number of aggregations so far) on the BS broadcast, **computes** its
   cycles and **uploads** on the shared uplink — the synchronous engine's own
   device job (:func:`edgesim.device_job.run_job` on the links of
   :mod:`edgesim.links`) and cost function (:func:`edgesim.device_job.job_costs`),
   with the channel gains of round ``τ`` (so a sync and an async run see the
   same channel draws);
3. on arrival at server version ``t`` its staleness is ``t − τ`` and its
   weight the rule's ``s(t − τ)`` (by default :func:`staleness_weight`); the update joins the buffer, and
   the rule's ``flush`` says whether the buffer is aggregated now. The two built-in rules:

   - **FedAsync** (Xie, Koyejo & Gupta 2019, Alg. 1 and Eq. (2)): the server
     mixes at once, ``x_t = (1 − α_t) x_{t−1} + α_t x_new`` with
     ``α_t = α · s(t − τ)`` (:func:`fedasync_mixing_weight`);
   - **FedBuff** (Nguyen et al., AISTATS 2022, Alg. 1): the update
     ``Δ = x_new − x_τ`` joins a buffer; when it holds ``K`` updates the server
     steps ``x ← x + η_g Σ_i (n_i / Σ n) s(t − τ_i) Δ_i`` and empties it;

   then the slot yields once at the same instant (``timeout(0)``), so every
   upload ending at that instant is taken in (and a buffer that fills then is
   flushed) before the slot's next download.

Staleness functions (Xie et al. 2019, Sec. 5.2): ``"constant"`` ``s = 1``;
``"polynomial"`` ``s = (t − τ + 1)^−a``; ``"hinge"`` ``s = 1`` for
``t − τ <= b``, else ``1 / (a (t − τ − b) + 1)``. FedBuff's ``1/√(1 + τ)``
(Nguyen et al., Sec. 4) is ``"polynomial"`` with ``a = 0.5``, the default.

Devices come and go (:mod:`edgesim.availability`): only online devices are
drawn; a device whose online period ends while it downloads, computes or
uploads loses the update — its energy and the bits it had sent are spent and
counted as wasted, and its row says ``drop_reason = "offline"``.

Records: one :class:`~edgesim.records.RoundRecord` per aggregation (its
``round_index`` the aggregation's index, the new model being version
``index + 1``), holding an :class:`UpdateRow` for every update that arrived
or was lost since the previous aggregation; costs are charged to the
aggregation at or after the update's end. Same scenario and seed ⇒ identical
records; :meth:`AsyncSimulation.load_state_dict` resumes by replaying the
clock alone (no learning) to the saved aggregation — the clock never depends
on what is learned.

The backend (:class:`AsyncBackend`) is told when an update starts (so it can
keep the model version the device received) and, at each aggregation, what
arrived and what was lost.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Protocol, runtime_checkable

import numpy as np
import simpy

from ._checks import count, non_negative, positive
from .access import Cell, make_banded, make_uplink
from .async_rules import AsyncRule, is_asynchronous, round_modes, rule_of
from .availability import Availability
from .backend import DeviceWork
from .channel import ChannelModel
from .clock import Clock, cyclic_gc_paused
from .config import BudgetConfig, Choice, Finite, Integer, SystemConfig, check_keys, key
from .device_job import DeviceJob, job_costs, run_job
from .links import Downlink
from .radio import shannon_rate_bps, unchecked_shannon_rate_bps
from .records import UPDATE_FIELDS as UPDATE_FIELDS  # the records live in edgesim.records; named here for readers
from .records import EventLog, RoundRecord, Totals, UpdateRow, totals_of
from .resources import Allocator, ResourcesConfig, check_round_mode, tdma_order
from .resources.formulas import oort_statistical_utility
from .resources.scheduling import Scheduler, ranked

DEFAULT_CONCURRENCY = 10  # [run] clients_per_round's default: the devices a synchronous round keeps busy
STALENESS_FUNCTIONS = ("constant", "polynomial", "hinge")
STREAM_ASYNC_DRAW = 0xA6
DROP_REASONS = ("", "offline")


def __getattr__(name: str):
    """``ASYNC_MODES``, for code written before the rules' registry: the asynchronous rules registered now
    (:mod:`edgesim.async_rules`)."""
    if name == "ASYNC_MODES":
        return tuple(m for m in round_modes() if is_asynchronous(m))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- formulas


def polynomial_staleness(staleness: float, a: float) -> float:
    """``s(t − τ) = (t − τ + 1)^−a`` (Xie et al. 2019, Sec. 5.2); staleness >= 0 updates, ``a >= 0``. In (0, 1]."""
    staleness, a = non_negative("staleness", staleness), non_negative("a", a)
    return (staleness + 1.0) ** -a


def hinge_staleness(staleness: float, a: float, b: float) -> float:
    """``s = 1`` if ``t − τ <= b`` else ``1 / (a (t − τ − b) + 1)`` (Xie et al. 2019, Sec. 5.2). In (0, 1]."""
    staleness, a, b = non_negative("staleness", staleness), non_negative("a", a), non_negative("b", b)
    return 1.0 if staleness <= b else 1.0 / (a * (staleness - b) + 1.0)


def staleness_weight(function: str, staleness: float, a: float = 0.5, b: float = 4.0) -> float:
    """The weight ``s(t − τ)`` of an update ``staleness`` versions old under ``function``."""
    if function == "constant":
        non_negative("staleness", staleness)
        return 1.0
    if function == "polynomial":
        return polynomial_staleness(staleness, a)
    if function == "hinge":
        return hinge_staleness(staleness, a, b)
    raise ValueError(f"staleness function(={function!r}) must be one of {STALENESS_FUNCTIONS}")


def fedasync_mixing_weight(alpha: float, weight: float) -> float:
    """FedAsync's ``α_t = α · s(t − τ)`` (Xie et al. 2019, Alg. 1, line 9); ``α`` in (0, 1], ``s`` in [0, 1]."""
    alpha, weight = positive("alpha", alpha), non_negative("weight", weight)
    if alpha > 1 or weight > 1:
        raise ValueError(f"alpha(={alpha}) and weight(={weight}) must be at most 1")
    return alpha * weight


def check_async_access(access: str, round_mode: str) -> None:
    """An access scheme whose transfers need the round (its devices known at its start) has no asynchronous mode:
    refused in one line naming the scheme's reason (its ``async_reason``)."""
    from .access import scheme_class

    cls = scheme_class(access)
    if not cls.asynchronous:
        raise ValueError(f"access = {access!r} has no asynchronous mode ([budget] round_mode = {round_mode!r}): "
                         f"{cls.async_reason}; expected round_mode 'sync' or 'deadline', or an access scheme such "
                         f"as 'tdma' or 'fdma'")


def check_async_resources(resources: ResourcesConfig, budget: BudgetConfig) -> None:
    """The ``[resources]`` table for an asynchronous ``budget.round_mode``: a ``ValueError`` of one line naming the
    key, its value and why when a policy has no meaning for a free slot, or needs ``[budget] deadline_s`` and it is
    unset (what each policy declares, :func:`edgesim.resources.check_round_mode`; docs/model/asynchrony.md)."""
    check_round_mode(resources, budget.round_mode, True, budget.deadline_s)


def check_async_system(system: SystemConfig, budget: BudgetConfig) -> None:
    """``[system]`` for an asynchronous ``budget.round_mode``: a ``ValueError`` of one line naming the first setting
    that applies to rounds only (what the config declares, :attr:`edgesim.config.SystemConfig.rounds_only`)."""
    given = system.rounds_only
    if given:
        key, value = next(iter(given.items()))
        raise ValueError(f"system.{key} = {value!r} with round_mode = {budget.round_mode!r} does not apply: it is "
                         f"for rounds ('sync' or 'deadline'); expected it unset (or its default)")


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class AsyncConfig:
    """The ``[async]`` table (used when ``budget.round_mode`` is an asynchronous rule, :mod:`edgesim.async_rules`).

    ``concurrency``: devices training at once (slots; at most ``system.n_devices``); unset, a scenario
    takes ``[run] clients_per_round`` (the devices a synchronous round keeps busy).
    ``alpha``: FedAsync's mixing weight α in (0, 1].
    ``staleness``: ``"constant"``, ``"polynomial"`` or ``"hinge"``; ``staleness_a`` (a >= 0) and
    ``staleness_b`` (hinge's b >= 0, in model versions).
    ``buffer_size``: FedBuff's K (updates per server step, >= 1); unset, ``concurrency``.
    ``server_lr``: FedBuff's server learning rate η_g (> 0).
    ``eval_every``: the backend evaluates the model every this many aggregations (>= 1).
    """

    concurrency: Optional[int] = key(None, "devices training at once; unset: run.clients_per_round", unit="devices",
                                     allowed=Integer(1, optional=True, also="at most system.n_devices"))
    alpha: float = key(0.6, "FedAsync's mixing weight α",
                       allowed=Finite(minimum=0, strict=True, maximum=1, noun="a mixing weight"))
    staleness: str = key("polynomial", "how an update's weight falls with its staleness",
                         allowed=Choice(choices=STALENESS_FUNCTIONS))
    staleness_a: float = key(0.5, "the staleness function's a", allowed=Finite(minimum=0))
    staleness_b: float = key(4.0, "the hinge function's b", unit="model versions", allowed=Finite(minimum=0))
    buffer_size: Optional[int] = key(None, "FedBuff's K: updates per server step; unset: concurrency",
                                     unit="updates", allowed=Integer(1, optional=True))
    server_lr: float = key(1.0, "FedBuff's server learning rate η_g", allowed=Finite(minimum=0, strict=True))
    eval_every: int = key(1, "evaluate the model every this many aggregations", unit="aggregations",
                          allowed=Integer(1))

    def __post_init__(self):
        check_keys(self)

    def resolved(self, clients_per_round: Optional[int] = None, n_devices: Optional[int] = None) -> "AsyncConfig":
        """This table with ``concurrency`` and ``buffer_size`` filled in — the one place their defaults are: unset
        ``concurrency`` is ``clients_per_round`` (a scenario's ``[run]``), else :data:`DEFAULT_CONCURRENCY` capped
        at ``n_devices`` (an engine built without a scenario); unset ``buffer_size`` is the concurrency."""
        if self.concurrency is not None:
            concurrency = self.concurrency
        elif clients_per_round is not None:
            concurrency = int(clients_per_round)
        else:
            concurrency = min(DEFAULT_CONCURRENCY, int(n_devices)) if n_devices is not None else DEFAULT_CONCURRENCY
        buffer_size = self.buffer_size if self.buffer_size is not None else concurrency
        return dataclasses.replace(self, concurrency=concurrency, buffer_size=buffer_size)

    def weight(self, staleness: int) -> float:
        """``s(staleness)`` under this table's function."""
        return staleness_weight(self.staleness, staleness, self.staleness_a, self.staleness_b)


# --------------------------------------------------------------------------- protocol


@dataclass(frozen=True)
class Arrival:
    """One update applied by the server: started from model ``version``, ``staleness = t − version``."""

    update: int
    device: int
    version: int
    staleness: int
    weight: float
    arrival_s: float


@dataclass(frozen=True)
class Aggregation:
    """One server step: ``index`` (the new model is version ``index + 1``), at ``time_s``.

    ``mode``: the rule (:mod:`edgesim.async_rules`), ``"fedasync"`` (one arrival; mix with
    ``alpha · weight``) or ``"fedbuff"`` (``buffer_size`` arrivals; step ``server_lr`` times their
    weighted mean delta) or a plugin; ``combine``: the learning side's step it aggregates with (its
    ``combine_name()``). ``lost``: indices of updates lost since the last
    aggregation (their snapshots may be freed). ``evaluate``: whether the
    backend should evaluate after the step.
    """

    index: int
    time_s: float
    mode: str
    arrivals: tuple[Arrival, ...]
    lost: tuple[int, ...]
    alpha: float
    server_lr: float
    evaluate: bool
    combine: str = ""


@runtime_checkable
class AsyncBackend(Protocol):
    """What :class:`AsyncSimulation` calls (plain Python types only)."""

    def update_work(self, device: int) -> DeviceWork:
        """One update's work for ``device`` (cycles, upload and download bits); the same at every call."""
        ...

    def start_update(self, update: int, device: int, version: int) -> None:
        """Update ``update`` of ``device`` starts from the current global model, version ``version``."""
        ...

    def aggregate(self, aggregation: Aggregation) -> Mapping[str, float]:
        """Apply the arrivals (train them from the versions they started from); return metrics."""
        ...


# --------------------------------------------------------------------------- updates


class _Update(DeviceJob):
    """A device job that is one update: its index in start order, the model version it started from, its start and
    end (s)."""

    __slots__ = ("update", "version", "start_s", "end_s")


# --------------------------------------------------------------------------- the simulation


class AsyncSimulation(Clock):
    """An asynchronous federated run on the simulated cell (module docstring); the API of
    :class:`edgesim.engine.Simulation` with an aggregation where that has a round.

    ``availability`` (default: every device always online) says when devices
    may be drawn and when they drop out. ``resources``: the ``[resources]``
    table (:func:`check_async_resources`); its scheduling policy picks each free
    slot's device (``"random"``, the default: the uniform draw), its bandwidth
    policy ``"shortest_first"`` orders the TDMA queue. ``device_losses``: as
    :class:`~edgesim.engine.Simulation`'s (the devices' loss statistics, Oort's
    utility), read after every aggregation when a scheduling policy is set.
    """

    def __init__(
        self,
        system: SystemConfig,
        budget: BudgetConfig,
        backend: AsyncBackend,
        async_cfg: Optional[AsyncConfig] = None,
        seed: int = 0,
        record_events: bool = True,
        *,
        availability: Optional[Availability] = None,
        keep_records: bool = True,
        resources: Optional[ResourcesConfig] = None,
        device_losses: Optional[Callable[[], Mapping[int, Any]]] = None,
        access_options: Any = None,
    ):
        if not is_asynchronous(budget.round_mode):
            rule_of(budget.round_mode)  # names the rules
        self.system, self.budget, self.backend = system, budget, backend
        self.mode = budget.round_mode
        self.cfg = (AsyncConfig() if async_cfg is None else async_cfg).resolved(n_devices=system.n_devices)
        self.rule: AsyncRule = rule_of(self.mode)(self.cfg)
        if self.cfg.concurrency > system.n_devices:
            raise ValueError(f"async.concurrency(={self.cfg.concurrency}) must be <= system.n_devices"
                             f"(={system.n_devices}): a device trains one update at a time")
        self.seed = count("seed", seed)
        self._log = EventLog(record_events)
        self.keep_records = bool(keep_records)
        self.availability = Availability(system.n_devices) if availability is None else availability
        if self.availability.n_devices != system.n_devices:
            raise ValueError(f"availability has {self.availability.n_devices} devices, the system "
                             f"{system.n_devices}")
        self._kappa = non_negative("kappa", system.kappa)
        self._cpu_freqs_hz = tuple(positive("cpu_freq_hz", f) for f in system.cpu_freqs_hz)
        self._tx_power_w = tuple(positive("tx_power_w", p) for p in system.tx_power_w)
        self._work_cache: dict[int, tuple[DeviceWork, float]] = {}
        self.resources = ResourcesConfig() if resources is None else resources
        check_async_resources(self.resources, budget)
        check_async_system(system, budget)
        # The bandwidth, power and CPU-frequency policies plan each update alone (none at their defaults: the
        # links' sharing at full power and frequency, no plan to make): τ = [budget] deadline_s from its start.
        planned = any(getattr(self.resources, k) != getattr(ResourcesConfig, k) for k in ("bandwidth", "power",
                                                                                         "cpu_freq"))
        self._allocator = Allocator(self.resources, system, budget,
                                    deadline_s=math.inf if budget.deadline_s is None else budget.deadline_s,
                                    uplink_sharers=self.cfg.concurrency) if planned else None
        check_async_access(system.access, budget.round_mode)
        self.access_options = access_options  # the [access] table's options (None: the scheme's defaults)
        self._device_losses = device_losses if device_losses is not None else getattr(backend, "device_losses", None)
        self._utility_log: list[tuple[int, int, float]] = []  # (aggregation, device, Oort's utility) as reported
        self._start(0.0)

    def _start(self, now_s: float) -> None:
        """A fresh clock from ``now_s`` with every device idle and the model at version 0."""
        n = self.system.n_devices
        self.channel = ChannelModel(self.system, self.seed)
        self._env = env = simpy.Environment(initial_time=now_s)
        self._uplink = make_uplink(env, self.system.access, self.system.bandwidth_hz, self.system.noise_psd_w_per_hz,
                                   tdma_order(self.resources), self.access_options, n, self.seed)
        self._banded = make_banded(env, self.system.access, Cell(float(self.system.bandwidth_hz),
                                   self.system.noise_psd_w_per_hz, n, self.seed))
        self._downlink = Downlink(self.system.downlink_rate_bps)
        self._rng = np.random.default_rng((self.seed, STREAM_ASYNC_DRAW))
        self._busy = np.zeros(n, dtype=bool)
        # Each device's online state and when it next changes (refreshed lazily, only where it is due).
        self._online = np.zeros(n, dtype=bool)
        self._state_until = np.full(n, -math.inf)
        self._version = 0  # aggregations so far = the global model's version
        self._n_started = 0
        self._finished: list[_Update] = []  # updates ended since the last aggregation (arrived or lost)
        self._buffer: list[_Update] = []
        self._last_agg_s = now_s
        self._last_advance_s = now_s
        self._gains_version, self._gains = -1, np.zeros(0)
        self._rates_version, self._rates = -1, np.zeros(0)
        self._scheduler: Optional[Scheduler] = None  # a policy that never ranks: the uniform draw
        if Scheduler.needed(self.resources):
            work = [self._work_of(d) for d in range(n)]
            deadline = self.budget.deadline_s
            self._scheduler = Scheduler(self.resources, self.system, self.budget, self.seed,
                                        ([c for _, c in work], [w.upload_bits for w, _ in work]),
                                        deadline_s=math.inf if deadline is None else deadline)
        self._log = EventLog(self._log.record)
        self._records: list[RoundRecord] = []
        self._totals = Totals()
        self._replay = False
        self._agg_done: Optional[simpy.Event] = None
        self._last_record: Optional[RoundRecord] = None
        self._released = env.event()  # succeeds when a device becomes idle (then replaced)
        self._procs = [env.process(self._slot(env)) for _ in range(self.cfg.concurrency)]

    # -- read-only views (now_s, events, event_count, records: Clock's)
    @property
    def round_index(self) -> int:
        """Aggregations so far (= the global model's version)."""
        return self._version

    @property
    def updates_started(self) -> int:
        return self._n_started

    # -- running
    def run_round(self) -> Optional[RoundRecord]:
        """Run the clock to the next aggregation; its record (``None``: no device can ever update again)."""
        env = self._env
        self._agg_done = env.event()
        with cyclic_gc_paused():
            try:
                env.run(until=self._agg_done)
            except RuntimeError as e:  # no events left: every device offline for good
                if "until" not in str(e) and "No scheduled events" not in str(e):
                    raise
                return None
        return self._last_record

    # -- the slots
    def _work_of(self, d: int) -> tuple[DeviceWork, float]:
        cached = self._work_cache.get(d)
        if cached is None:
            w = self.backend.update_work(d)
            if not isinstance(w, DeviceWork) or w.device != d:
                raise ValueError(f"update_work({d}) returned {w!r}, expected a DeviceWork of device {d}")
            cycles = sum(non_negative(f"compute_cycles[{k!r}]", v) for k, v in w.compute_cycles.items())
            non_negative("upload_bits", w.upload_bits)
            non_negative("download_bits", w.download_bits)
            cached = self._work_cache[d] = (w, float(cycles))
        return cached

    def _gains_of(self, version: int) -> np.ndarray:
        """The channel gains of round ``version`` (a synchronous run's round ``version``), kept while it lasts."""
        if self._gains_version != version:
            self._gains, self._gains_version = self.channel.gains(version), version
        return self._gains

    def _gain(self, d: int, version: int) -> float:
        return float(self._gains_of(version)[d])

    def _draw(self, env: simpy.Environment):
        """Process step: ``d = yield from self._draw(env)``: an idle online device (``None``: never again)."""
        avail = self.availability
        while True:
            free = ~self._busy
            if avail.always:
                candidates = np.flatnonzero(free)
            else:
                self._refresh_online(env.now)
                candidates = np.flatnonzero(free & self._online)
            if len(candidates):
                if self._scheduler is None:
                    return int(candidates[self._rng.integers(len(candidates))])
                d = self._pick(candidates)
                if d is not None:
                    return d
            # Nobody can start now (or the policy ranks none of those who can): wait for an idle device to come
            # online or a busy one to be freed (an arrival also moves the model version, the policy's view).
            now = env.now
            waiting = self._state_until[free & ~self._online]
            soonest = float(waiting.min()) if len(waiting) else math.inf
            if not math.isfinite(soonest) and not self._busy.any():
                return None
            wait = [self._released]
            if math.isfinite(soonest):
                wait.append(env.timeout(soonest - now))
            yield env.any_of(wait)

    def _pick(self, candidates: np.ndarray) -> Optional[int]:
        """The scheduling policy's device for a free slot: the first of ``candidates`` (idle, online) in its ranking
        for update ``updates_started`` (ties by that update's common random numbers); ``None`` if it ranks none
        of them. A policy handing over no ranking gets the uniform draw."""
        version = self._version
        gains = self._gains_of(version)  # the channel of the version the update would download
        if self._rates_version != version:
            self._rates = shannon_rate_bps(float(self.system.bandwidth_hz), gains, np.asarray(self._tx_power_w),
                                           self.system.noise_psd_w_per_hz)
            self._rates_version = version
        answer = self._scheduler.scores(self._n_started, gains, self._rates)
        if answer is None:
            return int(candidates[self._rng.integers(len(candidates))])
        scores, uniform = answer
        order = ranked(scores[candidates], uniform[candidates])
        return int(candidates[order[0]]) if order else None

    def _refresh_online(self, now: float) -> None:
        """Bring the online states up to ``now`` for the devices whose state has changed since (O(changes))."""
        avail = self.availability
        for d in np.flatnonzero(self._state_until <= now).tolist():
            on = avail.online(d, now)
            self._online[d] = on
            self._state_until[d] = avail.online_until_s(d, now) if on else avail.next_online_s(d, now)

    def _release(self, d: int) -> None:
        self._busy[d] = False
        if not self._released.triggered:
            self._released.succeed()
            self._released = self._env.event()

    def _slot(self, env: simpy.Environment):
        proc = None
        while True:
            d = yield from self._draw(env)
            if d is None:
                return
            if proc is None:
                proc = env.active_process
            work, cycles = self._work_of(d)
            version = self._version
            gain = self._gain(d, version)
            u = _Update(work, gain, self._full_band_rate(gain, self._tx_power_w[d]), self._cpu_freqs_hz[d],
                        self._tx_power_w[d], cycles)
            u.update, u.version, u.start_s = self._n_started, version, env.now
            if self._allocator is not None:
                self._allocate(u)
            self._n_started += 1
            self._busy[d] = True
            if self._scheduler is not None:
                self._scheduler.started(u.update, d)
            if not self._replay:
                self.backend.start_update(u.update, d, version)
            off_s = self.availability.online_until_s(d, env.now)
            if off_s < math.inf:
                timer = env.timeout(off_s - env.now)
                timer.callbacks.append(lambda _e, u=u, proc=proc: self._go_offline(u, proc))
            yield from run_job(env, u, version, self._log, self._downlink, self._uplink, self._banded)
            u.finished = True
            u.end_s = env.now
            self._release(d)
            self._finished.append(u)
            if not u.dropped:
                if self._scheduler is not None:
                    self._scheduler.finished(d, cycles, float(work.upload_bits), u.download_s + u.compute_s
                                             + (u.transfer.airtime_s if u.transfer is not None else 0.0))
                self._arrive(env, u)
            yield env.timeout(0)  # same-instant arrivals are taken in before the next download

    def _full_band_rate(self, gain: float, tx_power_w: float) -> float:
        """Eq. (8) over the whole band (the row's ``rate_bps``); its inputs checked by the configs."""
        if not gain > 0:
            return 0.0
        return unchecked_shannon_rate_bps(float(self.system.bandwidth_hz), gain, tx_power_w,
                                          self.system.noise_psd_w_per_hz)

    def _allocate(self, u: _Update) -> None:
        """The ``[resources]`` policies' plan for update ``u`` alone (:class:`~edgesim.resources.Allocator`): its
        CPU frequency, power and band, so that it ends within ``[budget] deadline_s`` of its start where the
        policies aim at that (``min_energy``: the least frequency and power that do)."""
        work = u.work
        plan = self._allocator.allocate(u.update, [u.device], [u.gain], [u.cycles], [float(work.upload_bits)],
                                        [self._downlink.duration_s(float(work.download_bits))], 0.0)
        u.set_cpu_freq(float(plan.cpu_freq_hz[0]))
        u.tx_power_w = float(plan.tx_power_w[0])
        u.rate_bps = self._full_band_rate(u.gain, u.tx_power_w)
        if plan.bands_hz is not None and work.upload_bits > 0:
            u.band_hz = float(plan.bands_hz[0])

    def _go_offline(self, u: _Update, proc: simpy.Process) -> None:
        if not u.finished and u.drop_reason == "":
            u.drop_reason = "offline"
            proc.interrupt("offline")

    # -- the server
    def _arrive(self, env: simpy.Environment, u: _Update) -> None:
        self._buffer.append(u)
        if self.rule.flush(len(self._buffer)):  # the rule says when (FedAsync: always; FedBuff: at K)
            arrivals, self._buffer = self._buffer, []
            self._aggregate(env, arrivals)

    def _aggregate(self, env: simpy.Environment, updates: list[_Update]) -> None:
        t, now = self._version, env.now
        arrivals = tuple(Arrival(u.update, u.device, u.version, t - u.version, self.rule.weight(t - u.version),
                                 u.end_s) for u in updates)
        staleness = {u.update: a.staleness for u, a in zip(updates, arrivals)}
        finished, self._finished = self._finished, []
        lost = tuple(u.update for u in finished if u.dropped)
        metrics: Mapping[str, float] = {}
        if not self._replay:
            metrics = self.backend.aggregate(Aggregation(
                index=t, time_s=now, mode=self.mode, arrivals=arrivals, lost=lost, alpha=float(self.cfg.alpha),
                server_lr=float(self.cfg.server_lr), evaluate=(t + 1) % self.cfg.eval_every == 0,
                combine=self.rule.combine_name()))
        self._log.emit(now, t, -1, "aggregate")
        if self._scheduler is not None:
            self._observe_utility(t)
        rows = self._rows(t, finished, staleness)
        stal = [a.staleness for a in arrivals]
        info = {"version": float(t + 1), "staleness_mean": sum(stal) / len(stal), "staleness_max": float(max(stal)),
                "updates_started": float(self._n_started)}
        record = self._totals.record(t, self._last_agg_s, now, tuple(a.device for a in arrivals),
                                     tuple(r.device for r in rows if r.dropped), rows, totals_of(rows), metrics, info)
        self._version = t + 1
        self._last_agg_s = now
        self.channel.advance(now - self._last_advance_s)
        self._last_advance_s = now
        self._last_record = record
        if self.keep_records and not self._replay:
            self._records.append(record)
        if self._agg_done is not None and not self._agg_done.triggered:
            self._agg_done.succeed()

    def _observe_utility(self, t: int) -> None:
        """Oort's statistical utility of each device whose loss statistic (:class:`edgesim.backend.DeviceLoss`) was
        reported since the last aggregation (:func:`~edgesim.resources.formulas.oort_statistical_utility`), kept in
        a log: the clock's replay (no training) hands the scheduler the same values at the same aggregations."""
        if self._replay:
            log, i = self._utility_log, self._utility_at
            while i < len(log) and log[i][0] == t:
                self._scheduler.utility[log[i][1]] = log[i][2]
                i += 1
            self._utility_at = i
            return
        losses = self._device_losses() if callable(self._device_losses) else None
        known = self._scheduler.utility
        for d, loss in sorted((int(d), loss) for d, loss in (losses or {}).items()):
            u = oort_statistical_utility(loss.sum_sq_loss, loss.n_samples)
            if not (known[d] == u):  # new, or changed since (nan never equals)
                known[d] = u
                self._utility_log.append((t, d, u))

    def _rows(self, index: int, finished: list[_Update], staleness: Mapping[int, int]) -> list[UpdateRow]:
        """The aggregation's :class:`UpdateRow` s (:func:`edgesim.device_job.job_costs`; ``idle_s`` the time queued
        for the uplink), in the order the updates ended."""
        rows = []
        kappa = self._kappa
        for u in finished:
            download_s, compute_s, airtime_s, bits_up, bits_down, wasted, radio_j, compute_j, band_hz = \
                job_costs(u, kappa)
            transfer = u.transfer
            queued_s = (transfer.start_s - transfer.queued_s) if transfer is not None and transfer.start_s is not None \
                else 0.0
            rows.append(UpdateRow(
                index, u.device, u.gain, u.rate_bps, download_s, compute_s, airtime_s, queued_s,
                bits_up, bits_down, wasted, radio_j, compute_j, not u.dropped, u.dropped,
                u.update, u.version, staleness.get(u.update, -1), u.start_s, u.end_s, u.drop_reason,
                band_hz, u.tx_power_w, u.cpu_freq_hz))
        return rows

    # -- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The run's position as plain numbers: resumed by replaying the clock (:meth:`load_state_dict`)."""
        return {
            "version": 1,
            "kind": "async",
            "seed": self.seed,
            "mode": self.mode,
            "now_s": self.now_s,
            "round_index": self._version,
            "event_count": self._log.count,
            "updates_started": self._n_started,
            **self._totals.state_dict(),
            **({"utility_log": [list(x) for x in self._utility_log]} if self._utility_log else {}),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume after :meth:`state_dict`: the clock alone is run again from 0 to the saved aggregation
        (the backend is not called; it restores its own state), then checked against the saved position.

        Clears :attr:`events` and :attr:`records`.
        """
        if state.get("version") != 1 or state.get("kind") != "async":
            raise ValueError(f"state (version {state.get('version')!r}, kind {state.get('kind')!r}) is not an "
                             f"asynchronous run's (version 1, kind 'async')")
        if int(state["seed"]) != self.seed or state.get("mode") != self.mode:
            raise ValueError(f"state of seed {state['seed']} and mode {state.get('mode')!r} differs from this "
                             f"simulation's (seed {self.seed}, mode {self.mode!r})")
        target = count("round_index", state["round_index"])
        record_events = self.record_events
        self._start(0.0)
        self._utility_log = [(int(t), int(d), float(u)) for t, d, u in state.get("utility_log", ())]
        self._utility_at = 0
        self._replay, self.record_events = True, False
        try:
            while self._version < target:
                if self.run_round() is None:
                    break
        finally:
            self._replay, self.record_events = False, record_events
        got = (self._version, self._log.count, self._n_started, self.now_s)
        want = (target, int(state["event_count"]), int(state["updates_started"]), float(state["now_s"]))
        if got != want:
            raise ValueError(f"replaying the clock reached (aggregations, events, updates, time) = {got}, the "
                             f"checkpoint says {want}: the scenario or the code changed since it was saved")
        self._log.clear()
        self._records = []
