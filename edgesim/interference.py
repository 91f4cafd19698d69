"""Inter-cell interference: the cells' bands under frequency reuse, the interference each cell hears, and the links of
several cells on one clock (docs/model/system_model.md, "Inter-cell interference").

**Bands.** Cell c's band is ``B_c`` Hz (its ``bandwidth_hz``, else the system's). With ``frequency_reuse = n`` it is
split into n equal sub-bands and cell c transmits on sub-band ``c mod n``: the interval ``[k W_c, (k + 1) W_c)`` Hz
with ``k = c mod n`` and ``W_c = B_c / n`` (:func:`edgesim.cells.cell_bands_hz`). Reuse 1: every cell on ``[0, B_c)``.

**Interference.** A transmission of device j (cell a, power ``p_j``) reaches base station b with the gain
``g_{j,b}`` of that link. Where within its cell's band an allocation lies is not modelled (processor sharing
re-divides the band at every event), so a transmission's power is taken as spread evenly over its cell's band and a
victim's allocation as lying anywhere in its own: the fraction of j's power that falls into an allocation of ``b_i``
Hz of cell b is ``b_i |W_a ∩ W_b| / (W_a W_b)`` (the expected overlap of two allocations placed independently and
uniformly in their bands; exact for TDMA, whose allocation is the whole band). The interference is then a PSD
spread over cell b's band,

    I_b = Σ_{a ≠ b} Σ_{j of cell a on air} p_j g_{j,b} |W_a ∩ W_b| / (W_a W_b)      (W/Hz),

and a transmission of cell b on ``b_i`` Hz with received power ``p_i g_i`` has

    SINR_i = p_i g_i / (N0 b_i + Σ_j ρ_ij p_j g_{j,b}) = p_i g_i / ((N0 + I_b) b_i),
    ρ_ij = b_i |W_a ∩ W_b| / (W_a W_b),

the standard SINR of a cellular uplink with the co-channel interference of the other cells treated as noise
(Goldsmith, *Wireless Communications*, Cambridge 2005, Ch. 15, cellular systems; in federated learning over
wireless networks: Chen, Yang, Saad, Yin, Poor and Cui, IEEE TWC 20(1), 2021, §II-B, whose uplink rate carries the
interference of the users of other service areas on the same resource block in its denominator beside ``B N0``; and
Wang, Zhou, Shi and Zhuang, IEEE JSAC 40(8), 2022, the inter-cell interference of multi-cell federated learning).
Every link's rate is its own formula with ``N0`` replaced by ``N0 + I_b`` (:class:`edgesim.links.Air`), re-timed
whenever ``I_b`` changes: at every start and end of a transmission of another cell on an overlapping band
(:class:`InterferenceField`). Cells on disjoint bands (reuse n = number of cells) never change each other's ``I``:
each runs as an independent cell.

Torch-free, like all of ``edgesim/``.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .access import Cell, make_banded, make_link
from .cells import cell_bands_hz
from .config import ConfigError, SystemConfig
from .resources import tdma_order

__all__ = ["CellLinks", "InterferenceField", "band_overlap_hz", "coupling_per_hz2", "interference_psd_w_per_hz",
           "one_per_cell_sinr"]


def band_overlap_hz(low_a_hz: float, width_a_hz: float, low_b_hz: float, width_b_hz: float) -> float:
    """The width (Hz) of the intersection of the bands ``[low_a, low_a + width_a)`` and ``[low_b, low_b + width_b)``
    (0 when they are disjoint or only touch)."""
    return max(0.0, min(low_a_hz + width_a_hz, low_b_hz + width_b_hz) - max(low_a_hz, low_b_hz))


def coupling_per_hz2(bands_hz: np.ndarray) -> np.ndarray:
    """``K[a, b] = |W_a ∩ W_b| / (W_a W_b)`` (1/Hz) for a ≠ b, 0 on the diagonal: the interference PSD at cell b per
    watt received from a transmission of cell a (:func:`interference_psd_w_per_hz`)."""
    c = len(bands_hz)
    k = np.zeros((c, c))
    for a in range(c):
        for b in range(c):
            if a != b:
                k[a, b] = (band_overlap_hz(*bands_hz[a], *bands_hz[b]) / (bands_hz[a, 1] * bands_hz[b, 1]))
    return k


def interference_psd_w_per_hz(received_w: np.ndarray, coupling: np.ndarray) -> np.ndarray:
    """Each cell's interference PSD ``I_b = Σ_a R[a, b] K[a, b]`` (W/Hz) from ``R[a, b]``, the power (W) the
    transmissions of cell a on air deliver to base station b (``Σ_j p_j g_{j,b}``), and the coupling ``K``
    (:func:`coupling_per_hz2`)."""
    return (np.asarray(received_w, dtype=float) * coupling).sum(axis=0)


def one_per_cell_sinr(cell_gains: np.ndarray, serving_cell, tx_power_w, bands_hz: np.ndarray,
                      noise_psd_w_per_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """Each device's SNR and its SINR with one transmitter of every other cell on air (``edgesim plan``'s figure):
    ``SINR_i = p_i g_{i,b} / ((N0 + I_b) W_b)``, ``I_b = Σ_{a ≠ b} K[a, b] · mean_{j of a} p_j g_{j,b}`` (the mean
    power a device of cell a delivers to base station b; :func:`coupling_per_hz2`), ``SNR_i`` the same without
    ``I_b``. Linear, one per device; a cell without devices adds no interference."""
    g = np.asarray(cell_gains, dtype=float)
    cell = np.asarray(serving_cell, dtype=np.int64)
    p = np.broadcast_to(np.asarray(tx_power_w, dtype=float), cell.shape)
    c = len(bands_hz)
    mean_received = np.zeros((c, c))
    for a in range(c):
        mine = cell == a
        if mine.any():
            mean_received[a] = (p[mine, None] * g[mine]).mean(axis=0)
    psd = interference_psd_w_per_hz(mean_received, coupling_per_hz2(bands_hz))
    signal = p * g[np.arange(cell.size), cell]
    width = bands_hz[cell, 1]
    return signal / (noise_psd_w_per_hz * width), signal / ((noise_psd_w_per_hz + psd[cell]) * width)


class InterferenceField:
    """Who of each cell is on air now, and the interference every cell hears: at each start and end of a transmission
    it recomputes the row of the transmitter's cell in ``R`` (from scratch, in the order the transmissions started)
    and hands every cell whose ``I_b`` changed its new ``N0 + I_b`` (``set_noise_psd`` of each of the cell's
    ``links``: its shared link and its banded one)."""

    def __init__(self, bands_hz: np.ndarray, noise_psd_w_per_hz: float, links: list[list]):
        self._coupling = coupling_per_hz2(bands_hz)
        self._n0 = float(noise_psd_w_per_hz)
        self._links = links
        c = len(links)
        self._received = np.zeros((c, c))
        self._psd = np.zeros(c)
        self._on_air: list[dict[int, float]] = [{} for _ in range(c)]  # per cell: device -> its power (W)
        self._cell_of: dict[int, int] = {}
        self._gains: Optional[np.ndarray] = None
        self.changes = 0  # interference changes handed to the cells (a count, for the tests)
        for cell_links in links:
            for link in cell_links:
                link.set_noise_psd(self._n0)

    @property
    def psd_w_per_hz(self) -> np.ndarray:
        """Each cell's interference PSD now (W/Hz), a copy."""
        return self._psd.copy()

    def begin_round(self, cell_gains: np.ndarray) -> None:
        """The round's gain of every device to every cell ``(n, C)`` (the true channel)."""
        self._gains = np.asarray(cell_gains, dtype=float)

    def start(self, device: int, cell: int, tx_power_w: float) -> None:
        self._on_air[cell][device] = float(tx_power_w)
        self._cell_of[device] = cell
        self._update(cell)

    def end(self, device: int) -> None:
        cell = self._cell_of.pop(device, None)
        if cell is not None:
            del self._on_air[cell][device]
            self._update(cell)

    def _update(self, cell: int) -> None:
        if not self._coupling[cell].any():
            return  # its band overlaps no other cell's: nobody hears it
        on_air = self._on_air[cell]
        k = len(on_air)
        ids = np.fromiter(on_air, np.int64, k)
        powers_w = np.fromiter(on_air.values(), float, k)
        self._received[cell] = (powers_w[:, None] * self._gains[ids]).sum(axis=0)  # NumPy's pairwise sum: no BLAS
        psd = interference_psd_w_per_hz(self._received, self._coupling)
        for b in np.flatnonzero(psd != self._psd).tolist():
            self.changes += 1
            for link in self._links[b]:
                link.set_noise_psd(self._n0 + float(psd[b]))
        self._psd = psd


class _Relay:
    """A cell's link as its devices see it: transmits on the cell's link and tells the interference field when the
    transfer goes on air and when it leaves (done or cut)."""

    __slots__ = ("link", "cell", "field")

    def __init__(self, link, cell: int, field: InterferenceField):
        self.link, self.cell, self.field = link, cell, field

    def transmit(self, env, device: int, bits: float, channel_gain: float, tx_power_w: float, on_air=None, **kw):
        field, cell = self.field, self.cell

        def started(transfer) -> None:
            field.start(device, cell, transfer.tx_power_w)
            if on_air is not None:
                on_air(transfer)

        try:
            transfer = yield from self.link.transmit(env, device, bits, channel_gain, tx_power_w, started, **kw)
        finally:
            field.end(device)
        return transfer


class CellLinks:
    """The uplinks of several cells on one clock: each cell its own link of ``[system] access`` on its own band (its
    own TDMA line, processor sharing, resource blocks...), its banded link for a bandwidth policy's bands, and one
    :class:`InterferenceField` between them. ``serving_cell``: each device's cell."""

    def __init__(self, env, system: SystemConfig, serving_cell, noise_psd_w_per_hz: float, resources: Any,
                 access_options: Any, seed: int):
        self.bands_hz = cell_bands_hz(system)
        self.serving_cell = tuple(serving_cell)
        order = tdma_order(resources)
        self.links = [make_link(env, system.access, Cell(float(w), noise_psd_w_per_hz, system.n_devices, seed, order,
                                                         resources), access_options)
                      for _, w in self.bands_hz]
        self.banded = [make_banded(env, system.access, Cell(float(w), noise_psd_w_per_hz, system.n_devices, seed))
                       for _, w in self.bands_hz]
        for link in self.links + [b for b in self.banded if b is not None]:
            if not callable(getattr(link, "set_noise_psd", None)):
                raise ConfigError(key="access", value=system.access,
                                  expected="an access scheme that models inter-cell interference (set_noise_psd) "
                                           "with several cells, as every built-in one")
        self.field = InterferenceField(self.bands_hz, noise_psd_w_per_hz,
                                       [[link] + ([b] if b is not None else []) for link, b in
                                        zip(self.links, self.banded)])
        self._relays = [_Relay(link, c, self.field) for c, link in enumerate(self.links)]
        self._banded_relays = [None if b is None else _Relay(b, c, self.field) for c, b in enumerate(self.banded)]

    def uplink(self, device: int) -> _Relay:
        """The link ``device`` transmits on (its serving cell's)."""
        return self._relays[self.serving_cell[device]]

    def banded_link(self, device: int) -> Optional[_Relay]:
        """The link of a bandwidth policy's band for ``device`` (its serving cell's; ``None``: bands do not apply)."""
        return self._banded_relays[self.serving_cell[device]]

    def noise_var(self, arrived) -> Optional[float]:
        """Over-the-air aggregation in every cell (AirComp): the noise variance on each parameter of the sum of the
        cells' sums, ``Σ_c σ_c²`` over the cells with an ``arrived`` device (each base station relays its noisy sum
        to the aggregator, which adds them); ``None`` when no link has one (digital uploads)."""
        cells = {self.serving_cell[d] for d in arrived}
        out = [self.links[c].noise_var for c in sorted(cells) if getattr(self.links[c], "noise_var", None) is not None]
        return float(sum(out)) if out else None

    def begin_round(self, round_index: int, devices, gains, powers, bits, cell_gains, cells=None) -> None:
        """The round's uploads split by cell, to each cell's link that decides per round; the round's gains of every
        link to the interference field. ``cells``: only these cells' links are told (a hierarchical edge round is one
        cell's, while the others' go on; ``None``: every cell)."""
        self.field.begin_round(cell_gains)
        for c, link in enumerate(self.links):
            if getattr(link, "rounds", False) and (cells is None or c in cells):
                mine = [i for i, d in enumerate(devices) if self.serving_cell[d] == c]
                link.begin_round(round_index, [devices[i] for i in mine], [gains[i] for i in mine],
                                 [powers[i] for i in mine], [bits[i] for i in mine])
