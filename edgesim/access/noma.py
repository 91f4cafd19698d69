"""Uplink power-domain NOMA with successive interference cancellation (SIC) at the base station.

Each round the uploaders are grouped in clusters of ``cluster_size`` (the last one may be smaller); the clusters on
air share the band as FDMA's transfers do (processor sharing, ``B / n`` each for the ``n`` clusters with a member
transmitting), and within a cluster the members transmit at once on the cluster's sub-band, decoded strongest
received power first: :func:`edgesim.access.formulas.noma_rates_bps`. Whenever a transfer starts or ends, every rate
is recomputed at that instant (the processor-sharing link's events, :class:`edgesim.links.FdmaUplink`).
``cluster_size = 1`` is FDMA exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..config import Choice, Integer, check_keys, fail, key
from ..links import FdmaUplink
from ..radio import shannon_rate_bps
from .registry import AccessScheme, Cell, register_access

PAIRINGS = ("strong_weak", "adjacent")


@dataclass(frozen=True)
class NomaOptions:
    """NOMA's options, one sentence each.

    ``cluster_size``: the devices that share a sub-band (1 is FDMA). ``pairing``: how clusters form by gain,
    "strong_weak" (the strongest with the weakest) or "adjacent" (consecutive gains together).
    """

    cluster_size: int = key(2, "NOMA: the devices that share a sub-band (1 is FDMA)", unit="devices",
                            allowed=Integer(1, also="at most the devices of a round"))
    pairing: str = key("strong_weak", "NOMA: how clusters form by gain: the strongest with the weakest, or "
                       "consecutive gains together", allowed=Choice(choices=PAIRINGS,
                                                                   expected=" or ".join(map(repr, PAIRINGS))))

    def __post_init__(self):
        check_keys(self)


def clusters_of(gains, cluster_size: int, pairing: str = "strong_weak") -> np.ndarray:
    """The cluster of each device (index into ``gains``): ``⌈K / m⌉`` clusters of at most ``m = cluster_size``.

    Devices sorted by gain, strongest first; ``"adjacent"``: the first m form cluster 0, and so on;
    ``"strong_weak"``: tier t of the sorted list (its n_c devices) is dealt to clusters 0..n_c−1, forwards in even
    tiers and backwards in odd ones (m = 2: the strongest with the weakest, the second with the second weakest)."""
    g = np.asarray(gains, dtype=float)
    k = g.size
    n_c = -(-k // cluster_size)
    order = np.argsort(-g, kind="stable")
    out = np.empty(k, dtype=np.int64)
    for rank, d in enumerate(order):
        if pairing == "adjacent":
            out[d] = rank // cluster_size
        else:
            tier, pos = divmod(rank, n_c)
            out[d] = pos if tier % 2 == 0 else n_c - 1 - pos
    return out


@register_access("noma")
class Noma(AccessScheme, FdmaUplink):
    """NOMA with SIC: clusters of cluster_size share a sub-band, decoded strongest first; re-timed at every event."""

    Options = NomaOptions
    asynchronous = False
    async_reason = "its clusters are formed per round, from the round's uploaders"
    rounds = True

    @classmethod
    def check(cls, options: NomaOptions, system: Any, per_round: Optional[int], round_mode: str) -> None:
        k = per_round if per_round is not None else system.n_devices
        if options.cluster_size > k:
            fail("cluster_size", options.cluster_size,
                 f"an integer in [1, {k}] (the devices of a round, [run] clients_per_round)")

    def __init__(self, env, cell: Cell, options: Any = None):
        AccessScheme.__init__(self, env, cell, options)
        FdmaUplink.__init__(self, env, cell.bandwidth_hz, cell.noise_psd_w_per_hz)
        self._cluster_of: dict[int, int] = {}
        self._n_clusters = 0

    def begin_round(self, round_index: int, devices, gains, powers, bits) -> None:
        up = [i for i, s in enumerate(bits) if s > 0]
        clusters = clusters_of([gains[i] for i in up], self.options.cluster_size, self.options.pairing)
        self._cluster_of = {devices[i]: int(c) for i, c in zip(up, clusters)}

    def _active_clusters(self) -> np.ndarray:
        """The cluster of every slot (-1: a free slot)."""
        return np.fromiter((-1 if t is None else self._cluster_of.get(t.device, -1 - t.device) for t in self._slots),
                           np.int64, len(self._slots))

    def _share_hz(self) -> float:
        return self.bandwidth_hz / self._n_clusters

    def _rates_bps(self) -> np.ndarray:
        cluster = self._active_clusters()
        on = self._gp > 0
        # a device outside the round's clusters (none in a round-based run) transmits alone: its own cluster
        self._n_clusters = int(np.unique(cluster[on]).size)
        band = self.bandwidth_hz / self._n_clusters
        weaker = np.zeros(self._gp.size)  # Σ g p of the members decoded after each (its interference, W)
        for c in np.unique(cluster[on]):
            members = np.flatnonzero(on & (cluster == c))
            if members.size > 1:
                gp = self._gp[members]
                order = np.argsort(-gp, kind="stable")
                after = np.concatenate([np.cumsum(gp[order][::-1])[::-1][1:], [0.0]])
                weaker[members[order]] = after
        n0 = self.noise_psd_w_per_hz
        return shannon_rate_bps(band, self._gp, 1.0 / (1.0 + weaker / (n0 * band)), n0)
