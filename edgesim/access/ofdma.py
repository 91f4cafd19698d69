"""OFDMA: the band cut into resource blocks, each round's blocks assigned to the devices by a ``[resources]
resource_blocks`` policy; a device transmits alone on its blocks for the round (docs/model/access_schemes.md).

Fading per block: each (device, block) gain is the device's round gain times an independent unit-mean exponential
draw (Rayleigh block fading) per round, blocks of ``coherence_rbs`` fading together; ``rb_fading = false`` keeps the
device's gain on every block. A device's power is split equally over its blocks, or by water-filling
(``power_split``); its rate is :func:`edgesim.access.formulas.ofdma_rate_bps`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from ..config import Choice, ConfigError, Finite, Flag, Integer, check_keys, fail, key
from ..links import Air, Transfer, on_air_at, on_air_retimed, set_air
from ..registries import claim
from ..resources.policies import POLICIES
from . import formulas
from .registry import AccessScheme, Cell, register_access

STREAM_RB_FADING = 4801  # the random stream of the blocks' fading: (seed, this, round)
POWER_SPLITS = ("equal", "water_filling")


@dataclass(frozen=True)
class OfdmaOptions:
    """OFDMA's options, one sentence each.

    ``resource_blocks``: the number N of blocks (N·b at most the band). ``rb_bandwidth_hz``: one block's band b (Hz).
    ``rb_fading``: independent Rayleigh fading per block and round (false: the device's gain on every block).
    ``coherence_rbs``: how many consecutive blocks fade together. ``power_split``: a device's power over its blocks,
    "equal" or "water_filling".
    """

    resource_blocks: int = key(25, "OFDMA's number N of resource blocks", unit="blocks", allowed=Integer(
        1, 100_000, also="N · rb_bandwidth_hz at most the band; at least the devices of a round"))
    rb_bandwidth_hz: float = key(180e3, "OFDMA: one block's band b", unit="Hz",
                                 allowed=Finite(minimum=0, strict=True))
    rb_fading: bool = key(True, "OFDMA: independent Rayleigh fading per block and round (false: the device's gain "
                          "on every block)", allowed=Flag())
    coherence_rbs: int = key(1, "OFDMA: how many consecutive blocks fade together", unit="blocks",
                             allowed=Integer(1, also="at most resource_blocks"))
    power_split: str = key("equal", "OFDMA: a device's power over its blocks",
                           allowed=Choice(choices=POWER_SPLITS, expected=" or ".join(map(repr, POWER_SPLITS))))

    def __post_init__(self):
        check_keys(self)
        if self.coherence_rbs > self.resource_blocks:
            fail("coherence_rbs", self.coherence_rbs, f"an integer in [1, resource_blocks = {self.resource_blocks}]")


@dataclass(frozen=True)
class RbRound:
    """One round's blocks as an RB policy sees them: the ``devices`` of the round that upload (ids), their
    ``gains_rb`` (K × N linear gains), ``tx_power_w`` (K, W), ``upload_bits`` (K), one block's ``rb_bandwidth_hz``,
    ``noise_psd_w_per_hz`` and the ``power_split``."""

    devices: np.ndarray
    gains_rb: np.ndarray
    tx_power_w: np.ndarray
    upload_bits: np.ndarray
    rb_bandwidth_hz: float
    noise_psd_w_per_hz: float
    power_split: str = "equal"

    @property
    def n_blocks(self) -> int:
        return int(self.gains_rb.shape[1])

    def rate_bps(self, k: int, blocks) -> float:
        """Device ``k``'s rate (bit/s) on ``blocks`` (indices) with its power split as configured."""
        blocks = np.asarray(blocks, dtype=np.intp)
        if blocks.size == 0:
            return 0.0
        g = self.gains_rb[k, blocks]
        return formulas.ofdma_rate_bps(self.rb_bandwidth_hz, g, self.powers_w(k, blocks), self.noise_psd_w_per_hz)

    def powers_w(self, k: int, blocks) -> np.ndarray:
        """Device ``k``'s power on each of ``blocks`` (W): its power split equally, or by water-filling."""
        blocks = np.asarray(blocks, dtype=np.intp)
        g = self.gains_rb[k, blocks]
        p = float(self.tx_power_w[k])
        return (formulas.water_filling_w(g, p, self.rb_bandwidth_hz, self.noise_psd_w_per_hz)
                if self.power_split == "water_filling" else np.full(blocks.size, p / blocks.size))

    def rates_bps(self, owner) -> np.ndarray:
        """Every device's rate (bit/s) under ``owner`` (per block: the index of its device in ``devices``, -1: free)."""
        owner = np.asarray(owner)
        return np.array([self.rate_bps(k, np.flatnonzero(owner == k)) for k in range(self.devices.size)])

    def times_s(self, owner) -> np.ndarray:
        """Every device's airtime (s) under ``owner``: ``bits / rate`` (inf without a block)."""
        with np.errstate(divide="ignore"):
            return self.upload_bits / self.rates_bps(owner)


# name -> policy class with allocate(self, r: RbRound) -> owner per block: the [resources] policies of this kind
RB_POLICIES: dict[str, type] = POLICIES.setdefault("resource_blocks", {})


def register_rb_policy(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register_rb_policy("mine")`` makes ``[resources] resource_blocks = "mine"`` choose it.
    ``allocate(self, r)`` gets an :class:`RbRound` and returns, per block, the index of its device in
    ``r.devices`` (-1: unused); every uploader needs at least one block. A name already taken is refused in one
    line naming both classes (:func:`edgesim.registries.claim`); ``register_policy("resource_blocks", name)`` is the
    same."""

    def add(cls: type) -> type:
        return claim(RB_POLICIES, name, cls, "policy resource_blocks")

    return add


def _one_each(r: RbRound, free: np.ndarray, owner: np.ndarray) -> None:
    """Every device its best free block, the weakest device (lowest mean gain) choosing first."""
    for k in np.argsort(r.gains_rb.mean(axis=1), kind="stable"):
        choice = np.flatnonzero(free)[np.argmax(r.gains_rb[k, free])]
        owner[choice], free[choice] = k, False


@register_rb_policy("equal")
class EqualBlocks:
    """⌊N/K⌋ consecutive blocks each, the N mod K left one each to the slowest devices (lowest rate on ⌊N/K⌋)."""

    def allocate(self, r: RbRound) -> np.ndarray:
        k, n = r.devices.size, r.n_blocks
        base = n // k
        counts = np.full(k, base)
        if n % k:
            alone = np.array([r.rate_bps(i, np.arange(i * base, (i + 1) * base)) for i in range(k)])
            counts[np.argsort(alone, kind="stable")[: n % k]] += 1
        return np.repeat(np.arange(k), counts)


@register_rb_policy("best_channel")
class BestChannelBlocks:
    """Max-rate: each block to the device with the best gain on it (every uploader first gets its best free one)."""

    def allocate(self, r: RbRound) -> np.ndarray:
        owner = np.full(r.n_blocks, -1)
        free = np.ones(r.n_blocks, dtype=bool)
        _one_each(r, free, owner)
        rest = np.flatnonzero(free)
        owner[rest] = np.argmax(r.gains_rb[:, rest], axis=0)
        return owner


@register_rb_policy("min_max_time")
class MinMaxTimeBlocks:
    """Min-max airtime, greedy: one block each, then each next block to the slowest device it speeds up."""

    def allocate(self, r: RbRound) -> np.ndarray:
        owner = np.full(r.n_blocks, -1)
        free = np.ones(r.n_blocks, dtype=bool)
        _one_each(r, free, owner)
        times = r.times_s(owner)
        while free.any():
            # The slowest device whose time its best free block shortens takes it (under an equal power split a poor
            # block can slow a device down: it then takes none); no device sped up: the blocks left stay unused.
            for k in np.argsort(-times, kind="stable"):
                choice = np.flatnonzero(free)[np.argmax(r.gains_rb[k, free])]
                t = r.upload_bits[k] / r.rate_bps(k, np.append(np.flatnonzero(owner == k), choice))
                if t < times[k]:
                    owner[choice], free[choice], times[k] = k, False, t
                    break
            else:
                break
        return owner


def relaxed_min_max_time_s(r: RbRound, tol: float = 1e-12) -> float:
    """The continuous relaxation of min-max airtime with flat blocks (every block of device k has gain ``g_k``):
    real block counts ``x_k ≥ 1`` (every uploader has a block) with ``Σ x_k ≤ N``, rate ``x b log2(1 + p g /
    (N0 x b))`` (power spread equally), minimise ``max_k s_k / r_k(x_k)``: bisection on the time T, each ``x_k(T)``
    the least count meeting it. A lower bound of every integer assignment (s); the counts ``⌊x_k⌋`` are a feasible
    integer assignment, so the integer optimum lies between the two (tests/test_ofdma.py)."""
    g = r.gains_rb[:, 0]
    b, n0 = r.rb_bandwidth_hz, r.noise_psd_w_per_hz

    def rate(k, x):
        return x * b * math.log1p(r.tx_power_w[k] * g[k] / (n0 * x * b)) / math.log(2.0)

    def blocks_for(k, t):  # the least x with rate(k, x) >= s_k / t (rate increases in x)
        need = r.upload_bits[k] / t
        lo, hi = 1.0, float(r.n_blocks)
        if rate(k, hi) < need:
            return math.inf
        if rate(k, lo) >= need:
            return lo
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if rate(k, mid) >= need:
                hi = mid
            else:
                lo = mid
        return hi

    t_lo, t_hi = 0.0, max(r.upload_bits[k] / rate(k, 1.0) for k in range(r.devices.size)) * r.n_blocks
    for _ in range(200):
        t = 0.5 * (t_lo + t_hi)
        if sum(blocks_for(k, t) for k in range(r.devices.size)) <= r.n_blocks:
            t_hi = t
        else:
            t_lo = t
        if t_hi - t_lo <= tol * t_hi:
            break
    return t_hi


@register_access("ofdma")
class Ofdma(AccessScheme):
    """OFDMA: N resource blocks of b Hz, assigned each round by a [resources] resource_blocks policy; rates summed."""

    Options = OfdmaOptions
    asynchronous = False
    async_reason = "its resource blocks are assigned per round, to the round's devices"
    rounds = True
    columns = ("resource_blocks",)
    assigns_blocks = True

    @classmethod
    def check(cls, options: OfdmaOptions, system: Any, per_round: Optional[int], round_mode: str) -> None:
        total = options.resource_blocks * options.rb_bandwidth_hz
        if total > float(system.bandwidth_hz) * (1 + 1e-12):
            fail("resource_blocks", options.resource_blocks,
                 f"N · rb_bandwidth_hz (= {total!r} Hz) at most [system] bandwidth_hz = {system.bandwidth_hz!r} Hz")
        if system.n_cells > 1:  # several cells: every cell's band (its sub-band under frequency_reuse) holds them
            from ..cells import cell_bands_hz

            widths = cell_bands_hz(system)[:, 1].tolist()
            c = widths.index(min(widths))
            if total > float(widths[c]) * (1 + 1e-12):
                fail("resource_blocks", options.resource_blocks,
                     f"N · rb_bandwidth_hz (= {total!r} Hz) at most every cell's band (cell {c}: {widths[c]!r} Hz, "
                     f"frequency_reuse = {system.frequency_reuse})")
        k = per_round if per_round is not None else None
        if k is not None and k > options.resource_blocks:
            fail("resource_blocks", options.resource_blocks,
                 f"at least [run] clients_per_round = {k} (every uploader needs one block)")

    def __init__(self, env, cell: Cell, options: Any = None):
        super().__init__(env, cell, options)
        o = self.options
        if o.resource_blocks * o.rb_bandwidth_hz > cell.bandwidth_hz * (1 + 1e-12):
            raise ConfigError(key="resource_blocks", value=o.resource_blocks,
                              expected=f"N · rb_bandwidth_hz at most the band, {cell.bandwidth_hz!r} Hz")
        self.policy = RB_POLICIES[getattr(cell.resources, "resource_blocks", "equal")]()
        self._rate: dict[int, float] = {}
        self._blocks: dict[int, int] = {}
        self._block_gp: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # several cells: each device's blocks' g and p
        self.air: Optional[Air] = None  # several cells: the noise and interference it hears (set_noise_psd)

    def set_noise_psd(self, noise_psd_w_per_hz: float) -> None:
        """Several cells: the noise plus interference PSD (W/Hz) heard from now on, on every block alike; transfers on
        air are re-timed (each block's power stays as the round split it)."""
        set_air(self, noise_psd_w_per_hz)

    def block_gains(self, round_index: int, gains) -> np.ndarray:
        """Each (device, block) gain of the round: the device's gain times its blocks' fading draws (unit mean)."""
        o = self.options
        g = np.asarray(gains, dtype=float)[:, None]
        if not o.rb_fading:
            return np.repeat(g, o.resource_blocks, axis=1)
        rng = np.random.default_rng((self.cell.seed, STREAM_RB_FADING, round_index))
        n_fades = -(-o.resource_blocks // o.coherence_rbs)
        fades = rng.exponential(1.0, size=(g.shape[0], n_fades))
        return g * np.repeat(fades, o.coherence_rbs, axis=1)[:, : o.resource_blocks]

    def begin_round(self, round_index: int, devices, gains, powers, bits) -> None:
        o = self.options
        up = [i for i, s in enumerate(bits) if s > 0]
        self._rate, self._blocks = {}, {}
        if not up:
            return
        if len(up) > o.resource_blocks:
            raise ConfigError(f"access = 'ofdma': round {round_index}: {len(up)} uploaders for resource_blocks = "
                              f"{o.resource_blocks}; expected at most one uploader per block")
        # every device's draws, so that a device's fading does not depend on who else takes part
        all_gains = self.block_gains(round_index, np.ones(self.cell.n_devices))
        ids = np.asarray([devices[i] for i in up], dtype=np.int64)
        r = RbRound(ids, np.asarray([gains[i] for i in up], dtype=float)[:, None] * all_gains[ids],
                    np.asarray([powers[i] for i in up], dtype=float), np.asarray([bits[i] for i in up], dtype=float),
                    float(o.rb_bandwidth_hz), float(self.cell.noise_psd_w_per_hz), o.power_split)
        owner = np.asarray(self.policy.allocate(r))
        name = getattr(self.cell.resources, "resource_blocks", "equal")
        if owner.shape != (o.resource_blocks,) or not np.issubdtype(owner.dtype, np.integer):
            raise ConfigError(f"[resources] resource_blocks = {name!r}: round {round_index}: returned {owner!r}; "
                              f"expected {o.resource_blocks} integers, the device index of each block or -1")
        for k, d in enumerate(ids.tolist()):
            mine = np.flatnonzero(owner == k)
            if mine.size == 0:
                raise ConfigError(f"[resources] resource_blocks = {name!r}: round {round_index}: device {d} uploads "
                                  f"on no block; expected at least one block for every uploader")
            self._blocks[d] = int(mine.size)
            self._rate[d] = r.rate_bps(k, mine)
            if self.air is not None:
                self._block_gp[d] = (r.gains_rb[k, mine], r.powers_w(k, mine))

    def transmit(self, env, device: int, bits: float, channel_gain: float, tx_power_w: float, on_air=None, *,
                 checked: bool = False):
        """On air at once, alone on its blocks for the round at their summed rate, for ``bits / rate`` seconds."""
        transfer = Transfer(device, bits, channel_gain, tx_power_w, env.now)
        rate = self._rate[device]
        transfer.start_s = env.now
        transfer.resource_blocks = self._blocks[device]
        transfer.band_hz = self._blocks[device] * float(self.options.rb_bandwidth_hz)
        if on_air is not None:
            on_air(transfer)
        if self.air is None:
            yield from on_air_at(env, transfer, rate)
        else:  # several cells: its blocks' rates at the SINR of each stretch between interference changes
            g, p, b = *self._block_gp[device], float(self.options.rb_bandwidth_hz)
            yield from on_air_retimed(env, transfer, lambda n0: formulas.ofdma_rate_bps(b, g, p, n0), self.air)
        return transfer
