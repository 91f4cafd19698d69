"""The classic schemes, registered: TDMA, FDMA by processor sharing, and FDMA with a band per device for the round
(the links themselves are in :mod:`edgesim.links`)."""

from __future__ import annotations

from typing import Any

from ..links import BandedFdmaUplink, FdmaUplink, TdmaUplink
from .registry import AccessScheme, Cell, register_access


@register_access("tdma")
class Tdma(AccessScheme, TdmaUplink):
    """TDMA: one transfer at a time over the whole band, first come first served (or shortest first)."""

    policy_access = "tdma"

    def __init__(self, env, cell: Cell, options: Any = None):
        AccessScheme.__init__(self, env, cell, options)
        TdmaUplink.__init__(self, env, cell.bandwidth_hz, cell.noise_psd_w_per_hz, cell.tdma_order)


@register_access("fdma")
class Fdma(AccessScheme, FdmaUplink):
    """FDMA by processor sharing: the n transmitting devices share the band equally, re-timed at every start and end."""

    policy_access = "fdma"
    banded = "fdma_banded"

    def __init__(self, env, cell: Cell, options: Any = None):
        AccessScheme.__init__(self, env, cell, options)
        FdmaUplink.__init__(self, env, cell.bandwidth_hz, cell.noise_psd_w_per_hz)


@register_access("fdma_banded")
class FdmaBanded(AccessScheme, BandedFdmaUplink):
    """FDMA with a band per device for the round: a bandwidth policy's b_k, else B/K for each of the K uploaders."""

    policy_access = "fdma"
    banded = "fdma_banded"
    asynchronous = False
    async_reason = "its equal band B/K needs the round's K uploaders"
    rounds = True

    def __init__(self, env, cell: Cell, options: Any = None):
        AccessScheme.__init__(self, env, cell, options)
        BandedFdmaUplink.__init__(self, cell.noise_psd_w_per_hz)
        self._bands: dict[int, float] = {}

    def begin_round(self, round_index: int, devices, gains, powers, bits) -> None:
        uploads = [d for d, s in zip(devices, bits) if s > 0]
        share = self.cell.bandwidth_hz / max(len(uploads), 1)
        self._bands = dict.fromkeys(uploads, share)

    def transmit(self, env, device: int, bits: float, channel_gain: float, tx_power_w: float, on_air=None, *,
                 checked: bool = False, bandwidth_hz: float | None = None):
        """As :meth:`edgesim.links.BandedFdmaUplink.transmit`; ``bandwidth_hz`` (a policy's band) or the round's
        equal share."""
        band = self._bands.get(device, self.cell.bandwidth_hz) if bandwidth_hz is None else bandwidth_hz
        return (yield from BandedFdmaUplink.transmit(self, env, device, bits, channel_gain, tx_power_w, on_air,
                                                     bandwidth_hz=band))
