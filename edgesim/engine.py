"""The discrete-event engine: federated rounds on a SimPy clock (docs/system_model.md).

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

Every step is recorded as an :class:`Event`; every round as a
:class:`RoundRecord` with per-device :class:`DeviceRound` rows. Same inputs
give identical records and events; :meth:`Simulation.state_dict` and
:meth:`Simulation.load_state_dict` checkpoint and resume a run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Optional

import numpy as np
import simpy

from ._checks import count, finite, non_negative, positive
from .availability import Availability
from .backend import DeviceLoss, DeviceWork, LearningBackend, RoundOutcome, RoundPlan, SystemView
from .budget import REL_TOL
from .channel import ChannelModel
from .compute import compute_time_s
from .config import BudgetConfig, SystemConfig
from .links import BandedFdmaUplink, Downlink, Transfer, make_uplink
from .radio import shannon_rate_bps
from .resources import Allocator, ResourcesConfig
from .resources.scheduling import Scheduler

EVENT_KINDS = (
    "round_start",
    "download_start",
    "download_end",
    "compute_start",
    "compute_end",
    "upload_start",
    "upload_end",
    "upload_dropped",
    "server_compute_start",
    "server_compute_end",
    "round_end",
)





@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (then as the caller had it).

    A round of N devices keeps ~N generators, events and device objects alive
    at once; the generational collector would traverse them again and again
    (about 0.5× the cost of the events themselves at N = 10,000,
    benchmarks/RESULTS.md) while reference counting frees them anyway. Only
    the engine's own work runs in the block, never a backend's.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def deadline_with_tolerance_s(deadline_s: float) -> float:
    """The latest end (s after round start) that still meets ``deadline_s``: ``D + 1e-12 · max(1, D)``.

    The same relative tolerance as the plan's feasibility test (:func:`edgesim.budget.is_feasible`).
    """
    return deadline_s + REL_TOL * max(1.0, deadline_s)


# --------------------------------------------------------------------------- records


class Event(NamedTuple):
    """One step of the trace (an immutable named tuple). ``device`` is -1 for round-level events.

    ``bits``: the bits to download/upload for ``*_start``, the bits delivered
    for ``*_end``, the wasted bits (sent on air before the deadline) for
    ``upload_dropped``, else 0. ``upload_dropped`` marks any device that is
    dropped at the deadline, whatever phase it was in; ``upload_start`` is the
    moment the device goes on air (after its TDMA queueing).
    """

    time_s: float
    round_index: int
    device: int
    kind: str
    bits: float = 0.0


class DeviceRound(NamedTuple):
    """One participating device in one round (seconds, bits, joules); an immutable named tuple.

    ``rate_bps`` is the device's full-band Shannon rate with this round's gain
    (Eq. (8)); under FDMA it actually gets less while it shares the band.
    ``upload_airtime_s`` is the time it was on air (queueing excluded);
    ``idle_s = duration − download_s − compute_s − upload_airtime_s``.
    ``bits_up`` counts an upload that arrived; ``wasted_bits`` what a dropped
    upload had sent. ``drop_reason``: ``""`` (not dropped), ``"deadline"`` or
    ``"offline"`` (its online period ended mid-round, :mod:`edgesim.availability`).
    The round's resources: ``bandwidth_hz`` the band its upload
    used (Hz: TDMA the whole band, FDMA its own band under a band policy, else its
    mean processor-sharing share over its airtime; 0 if it never went on air),
    ``tx_power_w`` and ``cpu_freq_hz`` (W, Hz); ``nan`` in rows of a checkpoint
    written before they were recorded.
    """

    round_index: int
    device: int
    channel_gain: float
    rate_bps: float
    download_s: float
    compute_s: float
    upload_airtime_s: float
    idle_s: float
    bits_up: float
    bits_down: float
    wasted_bits: float
    radio_energy_j: float
    compute_energy_j: float
    arrived: bool
    dropped: bool
    drop_reason: str = ""
    bandwidth_hz: float = math.nan
    tx_power_w: float = math.nan
    cpu_freq_hz: float = math.nan


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One round: when, who arrived (completion order) and who was dropped (by id), bits, energy, metrics.

    ``cum_*`` are totals since the start of the run, this round included;
    ``cum_energy_j`` is radio plus compute (of the devices). ``info`` is the plan's ``info``;
    ``metrics`` the backend's answer, valid at ``end_time_s``.
    ``server_before_s``/``server_after_s``: the base station's compute before
    the broadcast and after the uploads (seconds; 0 without a server phase).
    """

    round_index: int
    start_time_s: float
    end_time_s: float
    arrived: tuple[int, ...]
    dropped: tuple[int, ...]
    bits_up: float
    bits_down: float
    wasted_bits: float
    radio_energy_j: float
    compute_energy_j: float
    cum_bits_up: float
    cum_bits_down: float
    cum_wasted_bits: float
    cum_energy_j: float
    metrics: Mapping[str, float]
    info: Mapping[str, float]
    devices: tuple[DeviceRound, ...]
    server_before_s: float = 0.0
    server_after_s: float = 0.0

    @property
    def duration_s(self) -> float:
        return self.end_time_s - self.start_time_s

    @property
    def server_s(self) -> float:
        """The base station's compute time in this round (seconds)."""
        return self.server_before_s + self.server_after_s


# --------------------------------------------------------------------------- the simulation


class _Device:
    """Mutable book-keeping of one device during a round (inputs checked by :meth:`Simulation._devices_of`).

    Only what differs between devices is set per object; the starting values
    of the progress fields are class attributes (immutable), so 10,000
    devices a round cost 10,000 small objects and no more.
    """

    __slots__ = ("work", "device", "gain", "rate_bps", "cpu_freq_hz", "tx_power_w", "cycles", "compute_s",
                 "__dict__")  # what every device has; the progress fields below live in __dict__ once set

    phase = "start"
    phase_start_s = 0.0
    download_s = 0.0
    bits_down = 0.0
    compute_done_s = 0.0
    cycles_done = 0.0
    transfer: Optional[Transfer] = None
    band_hz: Optional[float] = None  # its own uplink band for the round (a band policy's), else the link shares
    compute_end_s: Optional[float] = None
    upload_end_s: Optional[float] = None
    arrived = False
    dropped = False
    drop_reason = ""
    finished = False

    def __init__(self, work: DeviceWork, gain: float, rate_bps: float, cpu_freq_hz: float, tx_power_w: float,
                 cycles: float):
        self.work = work
        self.device = work.device
        self.gain = gain
        self.rate_bps = rate_bps
        self.cpu_freq_hz = cpu_freq_hz
        self.tx_power_w = tx_power_w
        self.cycles = cycles
        self.compute_s = cycles / cpu_freq_hz  # compute_time_s, its inputs checked


_BY_DEVICE = attrgetter("device")


class _Round:
    __slots__ = ("index", "start_s", "devices", "remaining", "all_done", "arrived", "server_s", "server_before_s",
                 "server_after_s")

    def __init__(self, index: int, start_s: float, devices: Optional[list[_Device]], all_done: simpy.Event,
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


class Simulation:
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
    ):
        if budget.round_mode not in ("sync", "deadline"):
            raise ValueError(f"budget.round_mode(={budget.round_mode!r}) has no rounds: run it with "
                             f"edgesim.asynchrony.AsyncSimulation")
        self.system = system
        self.budget = budget
        self.backend = backend
        self.seed = count("seed", seed)
        self.record_events = bool(record_events)
        self.keep_records = bool(keep_records)
        # Devices that come and go (None: always online, today's engine exactly).
        self.availability = None if availability is None or availability.always else availability
        self.channel = ChannelModel(system, self.seed)
        self._noise_psd_w_per_hz = system.noise_psd_w_per_hz
        self._tx_power_w = tuple(positive("tx_power_w", p) for p in system.tx_power_w)
        non_negative("kappa", system.kappa)
        self._cpu_freqs_hz = tuple(positive("cpu_freq_hz", f) for f in system.cpu_freqs_hz)
        self._tx_power_arr = np.asarray(self._tx_power_w)
        self.resources = resources if resources is not None else ResourcesConfig()
        # The defaults are the links' own behaviour: no allocation to run each round, no ranking.
        self._allocator = None if self.resources.is_default else Allocator(self.resources, system, budget)
        self._scheduler = None
        if self.resources.scheduling != "random":
            expected = getattr(backend, "expected_work", None)
            self._scheduler = Scheduler(self.resources, system, budget, self.seed,
                                        expected() if callable(expected) else None)
        # Where each round's per-device loss statistics come from (Oort's utility): the run's source, else the
        # backend's own device_losses(), else none (Oort then ranks by its system half, docs/resource_policies.md).
        self._device_losses = device_losses if device_losses is not None else getattr(backend, "device_losses", None)
        self._events: list[Event] = []
        self._records: list[RoundRecord] = []
        self._event_count = 0
        self._round_index = 0
        self._cum = {"bits_up": 0.0, "bits_down": 0.0, "wasted_bits": 0.0, "energy_j": 0.0}
        self._reset_clock(0.0)

    def _reset_clock(self, now_s: float) -> None:
        self._env = simpy.Environment(initial_time=now_s)
        order = "shortest_first" if self.resources.bandwidth == "shortest_first" else "arrival"
        self._uplink = make_uplink(self._env, self.system.access, self.system.bandwidth_hz, self._noise_psd_w_per_hz,
                                   order)
        self._banded = BandedFdmaUplink(self._noise_psd_w_per_hz)
        self._downlink = Downlink(self.system.downlink_rate_bps)

    # -- read-only views
    @property
    def now_s(self) -> float:
        """The simulated clock in seconds."""
        return float(self._env.now)

    @property
    def round_index(self) -> int:
        """The index of the next round (= rounds run so far)."""
        return self._round_index

    @property
    def events(self) -> list[Event]:
        """The trace since construction or the last :meth:`load_state_dict`, in processing (= time) order."""
        return list(self._events)

    @property
    def event_count(self) -> int:
        """Events emitted so far, recorded or not."""
        return self._event_count

    @property
    def records(self) -> list[RoundRecord]:
        """The round records since construction or the last :meth:`load_state_dict`."""
        return list(self._records)

    # -- running
    def run(
        self,
        rounds: Optional[int] = None,
        max_time_s: Optional[float] = None,
        on_round: Optional[Callable[[RoundRecord], Any]] = None,
    ) -> list[RoundRecord]:
        """Run ``rounds`` rounds (default: those left to reach ``budget.rounds``); return their records.

        No round starts at or after the simulated time ``max_time_s``.
        ``on_round(record)`` is called after each round; a truthy return stops the run.
        """
        rounds = max(0, self.budget.rounds - self._round_index) if rounds is None else count("rounds", rounds)
        if max_time_s is not None:
            max_time_s = finite("max_time_s", max_time_s)
        out = []
        for _ in range(rounds):
            if max_time_s is not None and self.now_s >= max_time_s:
                break
            record = self.run_round()
            out.append(record)
            if on_round is not None and on_round(record):
                break
        return out

    def system_view(self, gains: Optional[np.ndarray] = None) -> SystemView:
        """What the BS knows at the start of the next round."""
        if gains is None:
            gains = self.channel.gains(self._round_index)
        b, n0 = float(self.system.bandwidth_hz), self._noise_psd_w_per_hz
        rates = shannon_rate_bps(b, np.asarray(gains, dtype=float), self._tx_power_arr, n0)
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
        )

    def run_round(self) -> RoundRecord:
        """Plan, run on the clock, let the backend learn, record; then move the devices."""
        env = self._env
        view = self.system_view()
        plan = self.backend.plan_round(view)
        if self.availability is not None:
            plan = self._online_only(plan, env.now)
        with cyclic_gc_paused():
            rnd = _Round(self._round_index, env.now, self._devices_of(plan, view), env.event(),
                         self._server_seconds(plan))
            if self._allocator is not None:
                self._allocate(rnd)
            env.run(until=env.process(self._round_process(env, rnd)))
            rows = self._device_rows(rnd, env.now - rnd.start_s, float(self.system.kappa))
            # The devices, their transfers and processes are freed here, by reference counting, before the
            # collector is back on: it never traverses them (one collection over them was ~5 % of a round).
            rnd.devices = None
        record = self._finish_round(rnd, plan, *rows)
        if self._scheduler is not None:
            losses = self._device_losses() if callable(self._device_losses) else None
            arrived = set(record.arrived)  # the server hears a device's loss with its update (Oort, §4.2)
            losses = {d: loss for d, loss in (losses or {}).items() if d in arrived}
            self._scheduler.observe(record.round_index, record.devices, {w.device: w for w in plan.work}, losses)
        self.channel.advance(record.duration_s)
        return record

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

    def _devices_of(self, plan: RoundPlan, view: SystemView) -> list[_Device]:
        """The plan's devices, every input checked for the whole round at once (one clear error otherwise)."""
        if not isinstance(plan, RoundPlan):
            raise ValueError(f"plan_round returned {plan!r}, expected a RoundPlan")
        work = plan.work
        ids = [w.device for w in work]
        gains, rates = view.channel_gain, view.uplink_rate_bps
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
        return [
            _Device(w, gains[d], rates[d], freqs[d], powers[d], sum(map(float, w.compute_cycles.values())))
            for w, d in zip(work, ids)
        ]

    def _allocate(self, rnd: _Round) -> None:
        """The ``[resources]`` policies' plan for the round's devices: their bands, powers and frequencies."""
        devices = rnd.devices
        downlink = self._downlink
        plan = self._allocator.allocate(
            rnd.index, [d.device for d in devices], [d.gain for d in devices], [d.cycles for d in devices],
            [float(d.work.upload_bits) for d in devices],
            [downlink.duration_s(float(d.work.download_bits)) for d in devices],
            rnd.server_s[0] or 0.0,
        )
        b, n0 = float(self.system.bandwidth_hz), self._noise_psd_w_per_hz
        bands = plan.bands_hz.tolist() if plan.bands_hz is not None else None
        for i, (dev, f, p) in enumerate(zip(devices, plan.cpu_freq_hz.tolist(), plan.tx_power_w.tolist())):
            dev.cpu_freq_hz, dev.tx_power_w = f, p
            dev.compute_s = dev.cycles / f
            dev.rate_bps = shannon_rate_bps(b, dev.gain, p, n0)  # the full-band rate at its power
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

    def _server_seconds(self, plan: RoundPlan) -> tuple[Optional[float], Optional[float]]:
        """The plan's server phases in seconds at ``system.server_freq_hz`` (``None``: no such phase)."""
        out = []
        for label, phases in (("server_cycles", plan.server_cycles), ("server_cycles_after", plan.server_cycles_after)):
            cycles = sum(non_negative(f"{label}[{k!r}]", v) for k, v in phases.items())
            out.append(compute_time_s(cycles, float(self.system.server_freq_hz)) if phases else None)
        return out[0], out[1]

    def _server_phase(self, env: simpy.Environment, rnd: _Round, seconds: float):
        self._emit(env.now, rnd.index, -1, "server_compute_start")
        if seconds > 0:
            yield env.timeout(seconds)
        self._emit(env.now, rnd.index, -1, "server_compute_end")

    def _emit(self, time_s: float, round_index: int, device: int, kind: str, bits: float = 0.0) -> None:
        self._event_count += 1
        if self.record_events:
            self._events.append(Event(time_s, round_index, device, kind, bits))

    def _round_process(self, env: simpy.Environment, rnd: _Round):
        self._emit(env.now, rnd.index, -1, "round_start")
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
        self._emit(env.now, rnd.index, -1, "round_end")

    def _cuts_the_server(self, before_s: float) -> bool:
        """A ``deadline`` round whose server phase before the broadcast outlasts the deadline (and its tolerance)."""
        return self.budget.round_mode == "deadline" and before_s > deadline_with_tolerance_s(self.budget.round_deadline_s)

    def _cut_at_the_deadline(self, env: simpy.Environment, rnd: _Round):
        """The server is still computing at the deadline: the round ends there. Nothing was broadcast, so every
        participant is dropped before its download (no bits received, no compute, no upload)."""
        self._emit(env.now, rnd.index, -1, "server_compute_start")
        yield env.timeout(self.budget.round_deadline_s)
        rnd.server_before_s = self.budget.round_deadline_s
        for dev in rnd.devices:
            dev.dropped = dev.finished = True
            dev.drop_reason = "deadline"
            self._emit(env.now, rnd.index, dev.device, "upload_dropped", 0.0)
        rnd.remaining = 0
        self._emit(env.now, rnd.index, -1, "round_end")

    def _device_process(self, env: simpy.Environment, rnd: _Round, dev: _Device):
        work, r, d = dev.work, rnd.index, dev.device
        # Its events are appended to the trace when it is recorded, and counted here either way, then added to
        # the count once: a method call per event was ~4 % of an unrecorded 10,000-device round.
        trace = self._events.append if self.record_events else None
        n = 0
        try:
            if work.download_bits > 0:
                dev.phase, dev.phase_start_s = "download", env.now
                n += 1
                if trace:
                    trace(Event(env.now, r, d, "download_start", float(work.download_bits)))
                yield from self._downlink.receive(env, d, work.download_bits)
                dev.download_s = env.now - dev.phase_start_s
                dev.bits_down = float(work.download_bits)
                n += 1
                if trace:
                    trace(Event(env.now, r, d, "download_end", dev.bits_down))
            now = env.now
            dev.phase, dev.phase_start_s = "compute", now
            n += 1
            if trace:
                trace(Event(now, r, d, "compute_start", 0.0))
            yield env.timeout(dev.compute_s)
            now = env.now
            dev.compute_done_s, dev.cycles_done, dev.compute_end_s = dev.compute_s, dev.cycles, now
            n += 1
            if trace:
                trace(Event(now, r, d, "compute_end", 0.0))
            if work.upload_bits > 0:
                dev.phase = "upload"

                def on_air(transfer: Transfer) -> None:
                    nonlocal n
                    dev.transfer = transfer
                    n += 1
                    if trace:
                        trace(Event(env.now, r, d, "upload_start", transfer.bits))

                if dev.band_hz is None:
                    transfer = yield from self._uplink.transmit(env, d, float(work.upload_bits), dev.gain,
                                                                dev.tx_power_w, on_air, checked=True)
                else:
                    transfer = yield from self._banded.transmit(env, d, float(work.upload_bits), dev.gain,
                                                                dev.tx_power_w, on_air, bandwidth_hz=dev.band_hz)
                now = env.now
                dev.upload_end_s, dev.arrived = now, True
                rnd.arrived.append(d)
                n += 1
                if trace:
                    trace(Event(now, r, d, "upload_end", transfer.bits))
            dev.phase = "done"
        except simpy.Interrupt:
            elapsed_s = env.now - dev.phase_start_s
            if dev.phase == "download":
                dev.download_s = elapsed_s
                dev.bits_down = self._downlink.received_bits(float(work.download_bits), elapsed_s)
            elif dev.phase == "compute":
                dev.compute_done_s = elapsed_s
                dev.cycles_done = min(dev.cycles, elapsed_s * dev.cpu_freq_hz)
            dev.dropped = True
            wasted = dev.transfer.sent_bits if dev.transfer is not None else 0.0
            self._emit(env.now, r, d, "upload_dropped", wasted)
        self._event_count += n
        dev.finished = True
        rnd.remaining -= 1
        if rnd.remaining == 0:
            rnd.all_done.succeed()

    def _finish_round(self, rnd: _Round, plan: RoundPlan, rows: list[DeviceRound], totals: dict,
                      compute_end_s: dict, upload_end_s: dict) -> RoundRecord:
        """The round's record from its :meth:`_device_rows`; the backend completes the round here."""
        end_s = self.now_s
        arrived = tuple(rnd.arrived)
        dropped = tuple(row.device for row in rows if row.dropped)
        outcome = RoundOutcome(
            round_index=rnd.index,
            start_time_s=rnd.start_s,
            end_time_s=end_s,
            arrived=arrived,
            dropped=dropped,
            compute_end_s=compute_end_s,
            upload_end_s=upload_end_s,
            server_cut=rnd.server_s[0] is not None and self._cuts_the_server(rnd.server_s[0]),
        )
        metrics = {str(k): float(v) for k, v in self.backend.complete_round(outcome).items()}
        cum = self._cum
        cum["bits_up"] += totals["bits_up"]
        cum["bits_down"] += totals["bits_down"]
        cum["wasted_bits"] += totals["wasted_bits"]
        cum["energy_j"] += totals["radio_energy_j"] + totals["compute_energy_j"]
        record = RoundRecord(
            round_index=rnd.index,
            start_time_s=rnd.start_s,
            end_time_s=end_s,
            arrived=arrived,
            dropped=dropped,
            **totals,
            cum_bits_up=cum["bits_up"],
            cum_bits_down=cum["bits_down"],
            cum_wasted_bits=cum["wasted_bits"],
            cum_energy_j=cum["energy_j"],
            metrics=metrics,
            info={str(k): float(v) for k, v in plan.info.items()},
            devices=tuple(rows),
            server_before_s=rnd.server_before_s,
            server_after_s=rnd.server_after_s,
        )
        if self.keep_records:
            self._records.append(record)
        self._round_index += 1
        return record

    @staticmethod
    def _device_rows(rnd: _Round, duration_s: float, kappa: float) -> tuple[list[DeviceRound], dict, dict, dict]:
        """The round's :class:`DeviceRound` rows by device id, their totals (summed in that order), and each
        device's compute and upload end times (where it got there), in one pass.

        Energies are :func:`edgesim.radio.radio_energy_j` (``p * t``) and
        :func:`edgesim.compute.compute_energy_j` (``kappa * f**2 * cycles``),
        the same float operations, their inputs checked once by the engine.
        """
        index = rnd.index
        rows = []
        new_row = tuple.__new__  # DeviceRound's own __new__ without its Python frame (same tuple)
        bits_up_t = bits_down_t = wasted_t = radio_t = compute_t = 0
        compute_end_s, upload_end_s = {}, {}
        by_id = sorted(rnd.devices, key=_BY_DEVICE)
        for dev in by_id:
            transfer, arrived, dropped = dev.transfer, dev.arrived, dev.dropped
            download_s, compute_s, bits_down = dev.download_s, dev.compute_done_s, dev.bits_down
            airtime_s = transfer.airtime_s if transfer is not None else 0.0
            bits_up = float(dev.work.upload_bits) if arrived else 0.0
            wasted = transfer.sent_bits if (dropped and transfer is not None) else 0.0
            radio_j = dev.tx_power_w * airtime_s
            compute_j = kappa * dev.cpu_freq_hz ** 2 * dev.cycles_done
            bits_up_t += bits_up
            bits_down_t += bits_down
            wasted_t += wasted
            radio_t += radio_j
            compute_t += compute_j
            rows.append(new_row(DeviceRound, (
                index, dev.device, dev.gain, dev.rate_bps, download_s, compute_s, airtime_s,
                max(0.0, duration_s - download_s - compute_s - airtime_s),
                bits_up, bits_down, wasted, radio_j, compute_j, arrived, dropped, dev.drop_reason,
                transfer.band_hz if transfer is not None else 0.0, dev.tx_power_w, dev.cpu_freq_hz,
            )))
            if dev.compute_end_s is not None:
                compute_end_s[dev.device] = dev.compute_end_s
            if dev.upload_end_s is not None:
                upload_end_s[dev.device] = dev.upload_end_s
        totals = {"bits_up": bits_up_t, "bits_down": bits_down_t, "wasted_bits": wasted_t,
                  "radio_energy_j": radio_t, "compute_energy_j": compute_t}
        if by_id != rnd.devices:  # the outcome's maps keep the plan's order of the devices
            order = [dev.device for dev in rnd.devices]
            compute_end_s = {d: compute_end_s[d] for d in order if d in compute_end_s}
            upload_end_s = {d: upload_end_s[d] for d in order if d in upload_end_s}
        return rows, totals, compute_end_s, upload_end_s

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
            "event_count": self._event_count,
            "cum_bits_up": self._cum["bits_up"],
            "cum_bits_down": self._cum["bits_down"],
            "cum_wasted_bits": self._cum["wasted_bits"],
            "cum_energy_j": self._cum["energy_j"],
            "channel": self.channel.state_dict(),
            **({"schedule": self._scheduler.state_dict()} if self._scheduler is not None else {}),
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
        self._round_index = count("round_index", state["round_index"])
        self._event_count = count("event_count", state["event_count"])
        self._cum = {
            "bits_up": non_negative("cum_bits_up", state["cum_bits_up"]),
            "bits_down": non_negative("cum_bits_down", state["cum_bits_down"]),
            "wasted_bits": non_negative("cum_wasted_bits", state["cum_wasted_bits"]),
            "energy_j": non_negative("cum_energy_j", state["cum_energy_j"]),
        }
        self._events = []
        self._records = []
        self._reset_clock(non_negative("now_s", state["now_s"]))
