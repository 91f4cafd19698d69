"""The cell's links: the shared uplink (TDMA or FDMA) and the BS broadcast (docs/model/system_model.md).

The uplinks are registered as access schemes in :mod:`edgesim.access` (``tdma``, ``fdma``, ``fdma_banded``);
the engines ask the registry for them by the cell's ``access`` name (:func:`edgesim.access.make_uplink`).

The engine's devices ask a link how long their bits take; the delay lives here.

- :class:`TdmaUplink`: one transfer at a time over the whole band, first come first served
  (Eq. (24) for identical devices; DoFed-SPP, Ching et al., IEEE TSC 2023).
- :class:`FdmaUplink`: processor sharing of the band, Eq. (8) with ``b / n_active``.
- :class:`Downlink`: the broadcast, every device in parallel at one rate (0 = instantaneous).

Torch-free, like all of ``edgesim/``.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any, Callable, Iterator, Optional

import numpy as np
import simpy

from ._checks import non_negative, positive
from .radio import shannon_rate_bps, unchecked_shannon_rate_bps

# Transfers whose predicted completion is within this relative distance of the
# earliest one complete together (identical devices finish at the same instant).
_SIMULTANEOUS_REL = 1e-12
TDMA_ORDERS = ("arrival", "shortest_first")


class _ShortestFirstLine:
    """TDMA's waiting line served shortest airtime first (ties: first come), with :class:`deque`'s three calls."""

    def __init__(self):
        self._heap: list = []
        self._seq = 0
        self._gone: set = set()

    def push(self, request, airtime_s: float) -> None:
        heapq.heappush(self._heap, (airtime_s, self._seq, request))
        self._seq += 1

    def _drop_gone(self) -> None:
        while self._heap and id(self._heap[0][2]) in self._gone:
            self._gone.discard(id(heapq.heappop(self._heap)[2]))

    def __bool__(self) -> bool:
        self._drop_gone()
        return bool(self._heap)

    def popleft(self):
        self._drop_gone()
        return heapq.heappop(self._heap)[2]

    def remove(self, request) -> None:
        self._gone.add(id(request))  # left the line (interrupted while waiting): skipped when it comes up



class Transfer:
    """One upload as the uplink sees it; the uplink fills in the times and progress.

    ``start_s``: when it went on air (``None`` while queued); ``end_s``: when
    it completed (``None`` if aborted); ``sent_bits``/``airtime_s``: progress,
    final once the transfer completed or was aborted. Its inputs are checked
    by whoever creates it (:func:`checked_transfer`, or the engine once per
    round for all its devices).
    """

    __slots__ = ("device", "bits", "channel_gain", "tx_power_w", "queued_s", "start_s", "end_s",
                 "sent_bits", "airtime_s", "aborted", "slot", "done", "band_hz", "band_s0", "resource_blocks")

    def __init__(self, device: int, bits: float, channel_gain: float, tx_power_w: float, queued_s: float):
        self.device = device
        self.bits = bits
        self.channel_gain = channel_gain
        self.tx_power_w = tx_power_w
        self.queued_s = queued_s
        self.start_s: Optional[float] = None
        self.end_s: Optional[float] = None
        self.sent_bits = 0.0
        self.airtime_s = 0.0
        self.aborted = False
        self.slot: Optional[int] = None
        self.done: Optional[simpy.Event] = None
        self.band_hz = 0.0  # the band it used (Hz): the mean over its airtime under processor sharing
        self.band_s0 = 0.0
        self.resource_blocks = 0  # the resource blocks it used (an OFDMA scheme's integer count; 0: not counted)

    def __repr__(self) -> str:
        return f"Transfer(device={self.device}, bits={self.bits}, start_s={self.start_s}, end_s={self.end_s})"


OnAir = Optional[Callable[[Transfer], None]]


def checked_transfer(device: int, bits: float, channel_gain: float, tx_power_w: float, queued_s: float) -> Transfer:
    """A :class:`Transfer` whose inputs are checked: ``bits`` >= 0, gain and power > 0 (all finite)."""
    return Transfer(device, non_negative("bits", bits), positive("channel_gain", channel_gain),
                    positive("tx_power_w", tx_power_w), queued_s)


def on_air_at(env: simpy.Environment, transfer: Transfer, rate_bps: float) -> Iterator[simpy.Event]:
    """Process step: ``transfer`` on the air from now at a constant ``rate_bps`` for ``bits / rate_bps`` seconds,
    then its end, airtime and bits recorded; cut by an interrupt, the airtime so far and ``min(bits, airtime ·
    rate)`` bits sent are recorded, the transfer marked aborted and the interrupt raised again. The links whose
    transfer has its channel to itself (TDMA's turn, a banded FDMA band, OFDMA's blocks) end this way."""
    try:
        yield env.timeout(transfer.bits / rate_bps)
    except simpy.Interrupt:
        transfer.airtime_s = env.now - transfer.start_s
        transfer.sent_bits = min(transfer.bits, transfer.airtime_s * rate_bps)
        transfer.aborted = True
        raise
    transfer.end_s = env.now
    transfer.airtime_s = transfer.end_s - transfer.start_s
    transfer.sent_bits = transfer.bits


class Air:
    """What a cell's link hears besides its own transfers (several cells, :mod:`edgesim.interference`): the noise PSD
    ``N0 + I`` (W/Hz), ``I`` the inter-cell interference PSD now; ``changed`` is an event succeeded (and replaced)
    at every change, which the transfers on air wait on to re-time themselves."""

    __slots__ = ("env", "noise_psd_w_per_hz", "changed")

    def __init__(self, env: simpy.Environment, noise_psd_w_per_hz: float):
        self.env = env
        self.noise_psd_w_per_hz = noise_psd_w_per_hz
        self.changed = env.event()

    def set(self, noise_psd_w_per_hz: float) -> None:
        if noise_psd_w_per_hz != self.noise_psd_w_per_hz:
            self.noise_psd_w_per_hz = noise_psd_w_per_hz
            changed, self.changed = self.changed, self.env.event()
            changed.succeed()


def on_air_retimed(env: simpy.Environment, transfer: Transfer, rate_of: Callable[[float], float],
                   air: Air) -> Iterator[simpy.Event]:
    """Process step: ``transfer`` on the air from now at ``rate_of(N0 + I)`` bit/s, re-timed whenever ``air``'s noise
    changes (the bits left carried over at the rate of the stretch that ends), until its bits are sent; cut by an
    interrupt, the bits sent so far are recorded as :func:`on_air_at` does. With ``air`` never changing it ends at
    ``bits / rate``, as :func:`on_air_at`."""
    left, since, rate = transfer.bits, env.now, rate_of(air.noise_psd_w_per_hz)
    while True:
        timer = env.timeout(left / rate)
        try:
            yield timer | air.changed
        except simpy.Interrupt:
            left -= (env.now - since) * rate
            transfer.airtime_s = env.now - transfer.start_s
            transfer.sent_bits = min(transfer.bits, max(0.0, transfer.bits - left))
            transfer.aborted = True
            raise
        if timer.processed:
            break
        left = max(0.0, left - (env.now - since) * rate)
        since, rate = env.now, rate_of(air.noise_psd_w_per_hz)
    transfer.end_s = env.now
    transfer.airtime_s = transfer.end_s - transfer.start_s
    transfer.sent_bits = transfer.bits


class TdmaUplink:
    """Time division: one transfer at a time over the whole band ``b``, first come first served.

    A transfer runs at ``shannon_rate_bps(b, g_n, p_n, N0)`` (Eq. (8)) for
    ``bits / rate`` seconds; K identical uploads take ``K * m / r`` (Eq. (24)).

    The band is a ``simpy.Resource(capacity=1)`` in behaviour, event for
    event, with its waiting line in a deque: a request joins the line and
    the head is granted (its event scheduled) whenever the band is free; a
    release frees the band at once and hands it to the head when a release
    event, scheduled then, is processed. ``simpy.Resource`` keeps the line in a
    list and grants with ``pop(0)``, O(n) per grant: O(n²) a round when
    10,000 devices queue (benchmarks/RESULTS.md). The same events are
    scheduled in the same order, so traces are identical
    (``tests/test_engine.py`` checks this against ``simpy.Resource``).
    """

    access = "tdma"

    def __init__(self, env: simpy.Environment, bandwidth_hz: float, noise_psd_w_per_hz: float,
                 order: str = "arrival"):
        self.env = env
        self.bandwidth_hz = positive("bandwidth_hz", bandwidth_hz)
        self.noise_psd_w_per_hz = positive("noise_psd_w_per_hz", noise_psd_w_per_hz)
        if order not in TDMA_ORDERS:
            raise ValueError(f"order(={order!r}) must be one of {TDMA_ORDERS}")
        self.order = order
        self.air: Optional[Air] = None  # several cells: the noise and interference it hears (set_noise_psd)
        self._on_air: Optional[simpy.Event] = None  # the granted request (None: the band is free)
        # requests waiting: first come first served, or the shortest airtime first
        self._line = deque() if order == "arrival" else _ShortestFirstLine()

    def _grant(self, _event: Any = None) -> None:
        if self._on_air is None and self._line:
            self._on_air = self._line.popleft()
            self._on_air.succeed()

    def _request(self, env: simpy.Environment, airtime_s: float) -> simpy.Event:
        request = simpy.Event(env)
        if self.order == "arrival":
            self._line.append(request)
            self._grant()
        else:  # granted once every upload ready at this instant has joined the line, so the shortest goes first
            self._line.push(request, airtime_s)
            joined = simpy.Event(env)
            joined.callbacks.append(self._grant)
            joined.succeed()
        return request

    def _release(self, env: simpy.Environment, request: simpy.Event) -> None:
        if request is self._on_air:
            self._on_air = None
        elif not request.triggered:  # interrupted while waiting: leaves the line (O(n), at a deadline only)
            self._line.remove(request)
        released = simpy.Event(env)
        released.callbacks.append(self._grant)
        released.succeed()

    def transmit(
        self, env: simpy.Environment, device: int, bits: float, channel_gain: float, tx_power_w: float,
        on_air: OnAir = None, *, checked: bool = False,
    ) -> Iterator[simpy.Event]:
        """Process step: ``transfer = yield from uplink.transmit(env, ...)``.

        Calls ``on_air(transfer)`` when the band is granted. On
        :class:`simpy.Interrupt` the transfer is aborted (its partial progress
        recorded, the band released) and the interrupt re-raised. ``checked``:
        the caller has already checked ``bits``, ``channel_gain`` and
        ``tx_power_w`` (the engine does, for a whole round at once).
        """
        if checked:
            transfer = Transfer(device, bits, channel_gain, tx_power_w, env.now)
            rate = unchecked_shannon_rate_bps(self.bandwidth_hz, channel_gain, tx_power_w,
                                              self.noise_psd_w_per_hz)
        else:
            transfer = checked_transfer(device, bits, channel_gain, tx_power_w, env.now)
            rate = shannon_rate_bps(self.bandwidth_hz, transfer.channel_gain, transfer.tx_power_w,
                                    self.noise_psd_w_per_hz)
        if not rate > 0:
            raise ValueError(f"rate(={rate}) of device {device} must be > 0 (channel_gain={channel_gain})")
        request = self._request(env, transfer.bits / rate)
        try:
            try:
                yield request
            except simpy.Interrupt:
                transfer.aborted = True
                raise
            transfer.start_s = env.now
            transfer.band_hz = self.bandwidth_hz
            if on_air is not None:
                on_air(transfer)
            if self.air is None:
                yield from on_air_at(env, transfer, rate)
            else:  # several cells: at the SINR of each stretch between interference changes
                b, g, p = self.bandwidth_hz, transfer.channel_gain, transfer.tx_power_w
                yield from on_air_retimed(env, transfer, lambda n0: unchecked_shannon_rate_bps(b, g, p, n0), self.air)
        except GeneratorExit:  # a generator closed unfinished releases nothing (as simpy's ``with`` request)
            raise
        except BaseException:
            self._release(env, request)
            raise
        self._release(env, request)
        return transfer

    def set_noise_psd(self, noise_psd_w_per_hz: float) -> None:
        """Several cells: the noise plus interference PSD (W/Hz) heard from now on; the transfer on air is re-timed."""
        set_air(self, noise_psd_w_per_hz)


def set_air(link, noise_psd_w_per_hz: float) -> None:
    """``link.air`` (an :class:`Air`) made at the first call, its noise set at the next ones."""
    if link.air is None:
        link.air = Air(link.env, noise_psd_w_per_hz)
    else:
        link.air.set(noise_psd_w_per_hz)


class FdmaUplink:
    """Frequency division with processor sharing: the ``n`` transmitting devices share the band equally.

    Device i gets ``b / n`` Hz with noise ``N0 * b / n``, so its rate is
    ``shannon_rate_bps(b/n, g_i, p_i, N0) = (b/n) log2(1 + n * g_i p_i / (N0 b))``
    (computed for all transfers at once by the vectorised :func:`shannon_rate_bps`).
    Whenever a transfer starts or ends, all shares are recomputed and each
    transfer keeps the bits it has left. A central process wakes at the next
    completion or at a new arrival (or abort), brings every transfer's progress
    up to now, and schedules the next completion: O(n) NumPy work per event.
    """

    access = "fdma"

    def __init__(self, env: simpy.Environment, bandwidth_hz: float, noise_psd_w_per_hz: float):
        self.env = env
        self.bandwidth_hz = positive("bandwidth_hz", bandwidth_hz)
        self.noise_psd_w_per_hz = positive("noise_psd_w_per_hz", noise_psd_w_per_hz)
        # One slot per admitted transfer; a free slot has gp = rate = 0, rem = inf and no transfer.
        self._gp = np.zeros(0)  # g·p: the power each transfer delivers (W)
        self._rem = np.zeros(0)  # bits left at self._last_s
        self._rates = np.zeros(0)  # bit/s since self._last_s
        self._slots: list[Optional[Transfer]] = []
        self._n_active = 0
        self._pending: list[Transfer] = []
        self._last_s = env.now
        self._band_s = 0.0  # ∫ b / n dt while n > 0: the band-seconds each transfer on air got (Hz·s)
        self._next_s = math.inf
        self._next_slots: list[int] = []
        self._timer: Optional[simpy.Event] = None
        self._wake = env.event()
        env.process(self._serve(env))

    @property
    def n_active(self) -> int:
        """Transfers on air now (admitted or about to be)."""
        return self._n_active + len(self._pending)

    def set_noise_psd(self, noise_psd_w_per_hz: float) -> None:
        """Several cells: the noise plus interference PSD (W/Hz) heard from now on. The central process brings every
        transfer's bits up to now at the old rates and re-times them all at the new ones (as at a start or an end)."""
        if noise_psd_w_per_hz != self.noise_psd_w_per_hz:
            self.noise_psd_w_per_hz = noise_psd_w_per_hz
            self._poke()

    def transmit(
        self, env: simpy.Environment, device: int, bits: float, channel_gain: float, tx_power_w: float,
        on_air: OnAir = None, *, checked: bool = False,
    ) -> Iterator[simpy.Event]:
        """Process step: ``transfer = yield from uplink.transmit(env, ...)``; on air at once.

        ``checked``: the caller has already checked the inputs (see :meth:`TdmaUplink.transmit`)."""
        transfer = (Transfer if checked else checked_transfer)(device, bits, channel_gain, tx_power_w, env.now)
        transfer.start_s = env.now
        if on_air is not None:
            on_air(transfer)
        if transfer.bits == 0:
            transfer.end_s = env.now
            return transfer
        transfer.done = env.event()
        self._pending.append(transfer)
        self._poke()
        try:
            yield transfer.done
        except simpy.Interrupt:
            self._abort(transfer, env.now)
            raise
        return transfer

    # -- the central process
    def _poke(self, _event: Any = None) -> None:
        if not self._wake.triggered:
            self._wake.succeed()

    def _on_timer(self, event: simpy.Event) -> None:
        if event is self._timer:  # a superseded timer does nothing
            self._poke()

    def _serve(self, env: simpy.Environment):
        while True:
            yield self._wake
            self._wake = env.event()
            self._update(env.now)

    def _advance(self, now: float) -> None:
        """Every transfer's bits left and the band-seconds integral brought up to ``now`` (same shares since
        ``self._last_s``)."""
        dt = now - self._last_s
        if dt > 0 and self._n_active:
            self._rem -= self._rates * dt
            self._band_s += self._share_hz() * dt
        self._last_s = now

    def _update(self, now: float) -> None:
        self._advance(now)
        if self._next_s <= now:
            for s in self._next_slots:
                transfer = self._slots[s]
                if transfer is not None:
                    self._release(s)
                    transfer.end_s = now
                    transfer.airtime_s = now - transfer.start_s
                    transfer.sent_bits = transfer.bits
                    transfer.band_hz = self._mean_band_hz(transfer, self._band_s)
                    transfer.done.succeed(transfer)
        if self._pending:
            first = len(self._slots)
            new = self._pending
            self._pending = []
            for i, transfer in enumerate(new):
                transfer.slot = first + i
                transfer.band_s0 = self._band_s
            self._gp = np.concatenate([self._gp, [t.channel_gain * t.tx_power_w for t in new]])
            self._rem = np.concatenate([self._rem, [t.bits for t in new]])
            self._rates = np.concatenate([self._rates, np.zeros(len(new))])
            self._slots.extend(new)
            self._n_active += len(new)
        if len(self._slots) > 1.25 * self._n_active + 32:
            self._compact()
        self._next_s, self._next_slots, self._timer = math.inf, [], None
        n = self._n_active
        if n == 0:
            self._rates[:] = 0.0
            self._band_s = 0.0  # nobody on air: restart the integral (a resumed run restarts it here too)
            return
        # Eq. (8) with b/n Hz each; a free slot has g p = 0, so rate 0.
        rates = self._rates_bps()
        self._rates = rates
        with np.errstate(divide="ignore"):
            to_finish_s = self._rem / rates  # a free slot: inf / 0 = inf
        delay_s = max(float(to_finish_s.min()), 0.0)
        if not math.isfinite(delay_s):
            raise ValueError(f"FDMA uplink: no transfer can finish (rates {rates[rates > 0][:3]}...)")
        self._next_slots = np.flatnonzero(to_finish_s <= delay_s * (1.0 + _SIMULTANEOUS_REL)).tolist()
        self._next_s = now + delay_s
        self._timer = self.env.timeout(delay_s)
        self._timer.callbacks.append(self._on_timer)

    def _share_hz(self) -> float:
        """The band each transfer on air has now (Hz): ``b / n`` (a subclass shares otherwise)."""
        return self.bandwidth_hz / self._n_active

    def _rates_bps(self) -> np.ndarray:
        """Every slot's rate now (bit/s; a free slot has g p = 0, so rate 0): Eq. (8) with ``b / n`` Hz each."""
        return shannon_rate_bps(self.bandwidth_hz / self._n_active, self._gp, 1.0, self.noise_psd_w_per_hz)

    @staticmethod
    def _mean_band_hz(transfer: Transfer, band_s: float) -> float:
        """The band a transfer had on average over its airtime (Hz); the share at its start if it had none."""
        airtime_s = transfer.airtime_s
        return (band_s - transfer.band_s0) / airtime_s if airtime_s > 0 else 0.0

    def _release(self, s: int) -> None:
        self._slots[s] = None
        self._gp[s] = 0.0
        self._rem[s] = math.inf
        self._rates[s] = 0.0
        self._n_active -= 1

    def _compact(self) -> None:
        keep = [s for s, t in enumerate(self._slots) if t is not None]
        idx = np.asarray(keep, dtype=np.intp)
        self._gp, self._rem, self._rates = self._gp[idx], self._rem[idx], self._rates[idx]
        self._slots = [self._slots[s] for s in keep]
        for s, transfer in enumerate(self._slots):
            transfer.slot = s

    def _abort(self, transfer: Transfer, now: float) -> None:
        transfer.aborted = True
        transfer.airtime_s = now - transfer.start_s
        if transfer.slot is None:  # not admitted yet: sent nothing
            self._pending.remove(transfer)
            return
        s = transfer.slot
        # Progress up to now at the shares of the stretch since the last event: transfers cut at one instant (a
        # deadline) each end that stretch at the share they had, not at the share left after the earlier cuts.
        self._advance(now)
        left = float(self._rem[s])
        transfer.sent_bits = min(transfer.bits, max(0.0, transfer.bits - left))
        transfer.band_hz = self._mean_band_hz(transfer, self._band_s)
        self._release(s)
        self._poke()


class BandedFdmaUplink:
    """Frequency division with a band per device for the round (a resource policy's ``b_k``, Σ b_k ≤ B).

    Each transfer runs alone on its own ``b_k`` Hz at ``r = b_k log2(1 + g p / (N0 b_k))``
    (Eq. (8)) for ``bits / r`` seconds, on air as soon as the device is ready;
    bands are not handed on when a transfer ends (the allocation is the round's).
    """

    access = "fdma"

    def __init__(self, noise_psd_w_per_hz: float):
        self.noise_psd_w_per_hz = positive("noise_psd_w_per_hz", noise_psd_w_per_hz)
        self.air: Optional[Air] = None  # several cells: the noise and interference it hears (set_noise_psd)

    def set_noise_psd(self, noise_psd_w_per_hz: float) -> None:
        """Several cells: the noise plus interference PSD (W/Hz) heard from now on; transfers on air are re-timed."""
        set_air(self, noise_psd_w_per_hz)

    def transmit(
        self, env: simpy.Environment, device: int, bits: float, channel_gain: float, tx_power_w: float,
        on_air: OnAir = None, *, bandwidth_hz: float,
    ) -> Iterator[simpy.Event]:
        """Process step: ``transfer = yield from uplink.transmit(env, ..., bandwidth_hz=b)``; on air at once."""
        transfer = checked_transfer(device, bits, channel_gain, tx_power_w, env.now)
        transfer.band_hz = positive(f"bandwidth_hz of device {device}", bandwidth_hz)
        rate = unchecked_shannon_rate_bps(transfer.band_hz, transfer.channel_gain, transfer.tx_power_w,
                                          self.noise_psd_w_per_hz)
        transfer.start_s = env.now
        if on_air is not None:
            on_air(transfer)
        if self.air is None:
            yield from on_air_at(env, transfer, rate)
        else:  # several cells: at the SINR of each stretch between interference changes
            b, g, p = transfer.band_hz, transfer.channel_gain, transfer.tx_power_w
            yield from on_air_retimed(env, transfer, lambda n0: unchecked_shannon_rate_bps(b, g, p, n0), self.air)
        return transfer


class Downlink:
    """The BS broadcast: every device receives its bits in parallel at ``rate_bps`` (0 = instantaneous)."""

    def __init__(self, rate_bps: float):
        self.rate_bps = non_negative("rate_bps", rate_bps)

    def duration_s(self, bits: float) -> float:
        bits = non_negative("bits", bits)
        return 0.0 if self.rate_bps == 0 else bits / self.rate_bps

    def received_bits(self, bits: float, elapsed_s: float) -> float:
        """Bits of a ``bits`` download received after ``elapsed_s`` seconds."""
        return bits if self.rate_bps == 0 else min(bits, self.rate_bps * elapsed_s)

    def receive(self, env: simpy.Environment, device: int, bits: float) -> Iterator[simpy.Event]:
        """Process step: ``yield from downlink.receive(env, device, bits)``."""
        duration_s = self.duration_s(bits)
        if duration_s > 0:
            yield env.timeout(duration_s)
        return bits
