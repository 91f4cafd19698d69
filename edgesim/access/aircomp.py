"""Over-the-air computation (AirComp): every included device of a round transmits its update's P parameters at once
as analog symbols; the base station receives their sum plus noise (docs/model/access_schemes.md).

Truncated channel inversion (Zhu, Wang and Huang, IEEE TWC 2020, "Broadband analog aggregation"; Yang, Jiang, Shi
and Ding, IEEE TWC 2020): a device whose gain is below ``gain_threshold_db`` does not transmit that round (it is
dropped, reason ``"excluded"``); the others transmit at power ``η / g_k`` with ``η = min_k P_k g_k``
(:func:`edgesim.access.formulas.aircomp_eta`), together, once the last of them is ready, for
:func:`edgesim.access.formulas.aircomp_airtime_s`. The learning side aggregates the sum plus Gaussian noise of
variance ``N0 b / η`` per parameter (:attr:`Aircomp.noise_var`, handed to the backend in the round's outcome).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import simpy

from ..config import Finite, Integer, check_keys, fail, key
from ..links import Transfer
from . import formulas
from .registry import AccessScheme, Cell, register_access


class Excluded(simpy.Interrupt):
    """A device the scheme does not let transmit this round; ``reason`` is its drop reason (``"excluded"``)."""

    @property
    def reason(self) -> str:
        return str(self.cause)


MAX_SUBCARRIERS = 1_000_000_000  # far beyond any band's sub-channels: a larger count is a typo


@dataclass(frozen=True)
class AircompOptions:
    """AirComp's options, one sentence each.

    ``subcarriers``: S orthogonal sub-channels of B/S Hz each. ``symbol_rate_hz``: symbols per second on each
    sub-channel (unset: its bandwidth B/S). ``gain_threshold_db``: a device whose gain is below it does not transmit
    that round (unset: none is excluded). ``bits_per_parameter``: how the upload's bits count parameters (32: float32).
    """

    subcarriers: int = key(1, "AirComp's S orthogonal sub-channels of B/S Hz each", unit="sub-channels",
                           allowed=Integer(1, MAX_SUBCARRIERS))
    symbol_rate_hz: Optional[float] = key(None, "AirComp's symbols per second on each sub-channel; unset: its "
                                          "bandwidth B/S", unit="symbols/s",
                                          allowed=Finite(minimum=0, strict=True, optional=True))
    gain_threshold_db: Optional[float] = key(
        None, "AirComp: a device whose gain is below it does not transmit that round; unset: none is excluded",
        unit="dB", allowed=Finite(optional=True, also="at most the best device's gain"))
    bits_per_parameter: int = key(32, "AirComp: how the upload's bits count parameters (32: float32)",
                                  unit="bit/parameter", allowed=Integer(1))

    def __post_init__(self):
        check_keys(self)


@register_access("aircomp")
class Aircomp(AccessScheme):
    """AirComp: the included devices send their parameters at once as analog symbols; the BS gets the sum + noise."""

    Options = AircompOptions
    asynchronous = False
    async_reason = "over-the-air aggregation needs every device of a round to transmit at once"
    digital = False
    rounds = True
    over_the_air = True
    columns = ("drop_reason",)

    @classmethod
    def check(cls, options: AircompOptions, system: Any, per_round: Optional[int], round_mode: str) -> None:
        threshold = options.gain_threshold_db
        if threshold is not None and system.channel_gain_db is not None and system.channel_gain_db < threshold:
            fail("gain_threshold_db", threshold, f"at most [system] channel_gain_db = {system.channel_gain_db!r} "
                 f"(every device's gain: a higher threshold excludes every device)")
        if threshold is not None and system.channel_gain_db is None:
            from ..channel import ChannelModel
            from ..units import db_to_linear

            gains = ChannelModel(system, 0).gains(0)
            if not (gains >= db_to_linear(threshold)).any():
                fail("gain_threshold_db", threshold, f"at most the best device's gain in round 0 "
                     f"({10 * math.log10(float(gains.max()))!r} dB): a higher threshold excludes every device")

    def __init__(self, env, cell: Cell, options: Any = None):
        super().__init__(env, cell, options)
        o = self.options
        self.band_hz = cell.bandwidth_hz / o.subcarriers  # one sub-channel (Hz)
        self.symbol_rate_hz = o.symbol_rate_hz if o.symbol_rate_hz is not None else self.band_hz
        self.noise_var: Optional[float] = None  # the round's N0 b / η per parameter (None: no aggregation)
        self._excluded: set[int] = set()
        self._power_w: dict[int, float] = {}
        self._waiting: set[int] = set()
        self._go: Optional[simpy.Event] = None
        # Several cells (set_noise_psd): the noise plus interference PSD heard now and its integral over the round's
        # airtime (W/Hz · s), from which noise_var is set when the transmission ends.
        self._noise_psd_w_per_hz: Optional[float] = None
        self._noise_since_s = 0.0
        self._noise_integral = 0.0
        self._eta = 0.0

    def set_noise_psd(self, noise_psd_w_per_hz: float) -> None:
        """Several cells: the noise plus the other cells' interference PSD (W/Hz) heard from now on. The analog
        symbols' airtime does not change; the aggregate's noise variance is ``(N0 + Ī) b / η`` with ``Ī`` the
        interference PSD averaged over the airtime (each symbol hears the interference of its instant)."""
        now = self.env.now
        if self._noise_psd_w_per_hz is not None:
            self._noise_integral += self._noise_psd_w_per_hz * (now - self._noise_since_s)
        self._noise_psd_w_per_hz, self._noise_since_s = float(noise_psd_w_per_hz), now

    def begin_round(self, round_index: int, devices, gains, powers, bits) -> None:
        threshold = self.options.gain_threshold_db
        floor = -math.inf if threshold is None else 10 ** (threshold / 10)
        up = [i for i, s in enumerate(bits) if s > 0]
        included = [i for i in up if gains[i] >= floor]
        self._excluded = {devices[i] for i in up if gains[i] < floor}
        self._waiting = {devices[i] for i in included}
        self._go = self.env.event()
        self._power_w, self.noise_var = {}, None
        if included:
            eta = formulas.aircomp_eta([powers[i] for i in included], [gains[i] for i in included])
            self._power_w = {devices[i]: eta / gains[i] for i in included}
            self.noise_var = formulas.aircomp_noise_var(self.cell.noise_psd_w_per_hz, self.band_hz, eta)
            self._eta = eta

    def transmit(self, env, device: int, bits: float, channel_gain: float, tx_power_w: float, on_air=None, *,
                 checked: bool = False):
        """Excluded: dropped at once. Included: waits until every included device of the round is ready, then all
        are on air together for the airtime of ``⌈bits / bits_per_parameter⌉`` parameters."""
        if device in self._excluded:
            raise Excluded("excluded")
        transfer = Transfer(device, bits, channel_gain, self._power_w[device], env.now)
        self._waiting.discard(device)
        if not self._waiting and not self._go.triggered:
            self._go.succeed()
        yield self._go  # an interrupt here (a deadline) finds it never on air: nothing sent
        n_parameters = math.ceil(bits / self.options.bits_per_parameter)
        airtime_s = formulas.aircomp_airtime_s(n_parameters, self.options.subcarriers, self.symbol_rate_hz)
        transfer.start_s = env.now
        transfer.band_hz = float(self.cell.bandwidth_hz)
        if self._noise_psd_w_per_hz is not None:  # several cells: the noise's average over the airtime starts now
            self._noise_since_s, self._noise_integral = env.now, 0.0
        if on_air is not None:
            on_air(transfer)
        try:
            yield env.timeout(airtime_s)
        except simpy.Interrupt:
            transfer.airtime_s = env.now - transfer.start_s
            transfer.sent_bits = min(bits, bits * transfer.airtime_s / airtime_s) if airtime_s > 0 else 0.0
            transfer.aborted = True
            raise
        transfer.end_s = env.now
        transfer.airtime_s = transfer.end_s - transfer.start_s
        transfer.sent_bits = bits
        if self._noise_psd_w_per_hz is not None and transfer.airtime_s > 0:  # several cells: the airtime's mean noise
            self.set_noise_psd(self._noise_psd_w_per_hz)
            self.noise_var = formulas.aircomp_noise_var(self._noise_integral / transfer.airtime_s, self.band_hz,
                                                        self._eta)
        return transfer
