"""One round's resource plan: what the policies see (:class:`RoundResources`) and what the engine runs
(:class:`ResourcePlan`), made by an :class:`Allocator` from the ``[resources]`` table."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..async_rules import HIERARCHICAL
from ..config import BudgetConfig, ConfigError, SystemConfig
from . import formulas
from .config import KINDS, ResourcesConfig
from .policies import POLICIES, declared

# A plugin's bands may exceed the band by float rounding only.
_BAND_REL_TOL = 1e-9


@dataclass(frozen=True)
class RoundResources:
    """The round as the policies see it: one entry per device of the round plan (``devices``, plan order).

    Given: the whole band ``bandwidth_hz`` B (Hz), ``noise_psd_w_per_hz`` N0,
    ``access``, the round's time budget ``deadline_s`` τ (s from the round's
    start: T/G, or ``[budget] deadline_s`` in ``"deadline"`` rounds), the
    server's compute before the broadcast ``server_before_s``, ``kappa`` κ;
    per device its ``channel_gain`` g, ``upload_bits`` s, ``cycles`` C,
    ``download_s``, the maxima ``tx_power_max_w`` and ``cpu_freq_max_hz`` (the
    configured ones) and the DVFS floor ``cpu_freq_min_hz``; the weighted
    objective's ``energy_weight`` w and ``time_price_j_per_s`` λ (J/s).
    Decided so far: ``bands_hz`` (``None``: the link's own sharing),
    ``cpu_freq_hz``, ``tx_power_w`` (the maxima until a policy decides).
    ``uplink_sharers``: how many uploads may share the FDMA band at once (0: this round's uploaders; an
    asynchronous update: the run's concurrency, its slots).
    """

    round_index: int
    access: str
    bandwidth_hz: float
    noise_psd_w_per_hz: float
    deadline_s: float
    server_before_s: float
    kappa: float
    tdma_shortest_first: bool
    devices: np.ndarray
    channel_gain: np.ndarray
    upload_bits: np.ndarray
    cycles: np.ndarray
    download_s: np.ndarray
    tx_power_max_w: np.ndarray
    cpu_freq_max_hz: np.ndarray
    cpu_freq_min_hz: np.ndarray
    bands_hz: Optional[np.ndarray]
    cpu_freq_hz: np.ndarray
    tx_power_w: np.ndarray
    uplink_sharers: int = 0
    energy_weight: float = 1.0
    time_price_j_per_s: float = 1.0

    @property
    def uploads(self) -> np.ndarray:
        """Which devices upload this round (bool per device)."""
        return self.upload_bits > 0

    def upload_band_hz(self) -> np.ndarray:
        """The band each uploader counts on (Hz): its own under a band policy; TDMA the whole band; FDMA processor
        sharing ``B / K`` (the least it gets while the K uploads share the band; more once some are done)."""
        if self.bands_hz is not None:
            return self.bands_hz
        k = self.uplink_sharers or max(int(self.uploads.sum()), 1)
        return np.where(self.uploads, self.bandwidth_hz if self.access == "tdma" else self.bandwidth_hz / k, 0.0)

    def ready_s(self) -> np.ndarray:
        """When each device is ready to upload (s from the round's start): server, download, then ``C / f``."""
        return self.server_before_s + self.download_s + self.cycles / self.cpu_freq_hz

    def airtime_s(self) -> np.ndarray:
        """Each upload's time on air at its band and power, ``s / r(b, p)`` (s; 0 without an upload)."""
        r = formulas.rate_bps(self.upload_band_hz(), self.channel_gain, self.tx_power_w, self.noise_psd_w_per_hz)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.uploads, self.upload_bits / r, 0.0)

    def time_left_s(self) -> np.ndarray:
        """The seconds each device has for compute and upload: ``τ − server − download``."""
        return self.deadline_s - self.server_before_s - self.download_s

    def upload_window_s(self) -> np.ndarray:
        """The seconds each device has for its upload once computed: ``τ − a_k``."""
        return self.deadline_s - self.ready_s()

    def compute_window_s(self) -> np.ndarray:
        """The seconds each device may compute and still have its upload end by τ.

        FDMA: ``τ − server − download − s / r(b, p)``. TDMA: the transfers in the
        order they would go on air now, packed against τ
        (:func:`~edgesim.resources.formulas.tdma_latest_starts_s`): a device may
        compute until its latest start; the band, work-conserving, then ends
        every upload by τ whatever order the slower devices arrive in.
        """
        if self.access != "tdma":
            return self.time_left_s() - self.airtime_s()
        air = self.airtime_s()
        _, order = formulas.tdma_schedule_s(self.ready_s(), air, self.tdma_shortest_first)
        starts = formulas.tdma_latest_starts_s(order, air, self.deadline_s)
        return np.where(self.uploads, starts - self.server_before_s - self.download_s, self.time_left_s())


@dataclass(frozen=True)
class ResourcePlan:
    """What the engine runs for the round's devices (plan order): ``bands_hz`` (``None``: the link shares),
    ``tx_power_w``, ``cpu_freq_hz`` (NumPy arrays)."""

    bands_hz: Optional[np.ndarray]
    tx_power_w: np.ndarray
    cpu_freq_hz: np.ndarray


class PolicyError(ConfigError):
    """A policy failed or returned what the engine cannot run; the message names it and the round."""


class Allocator:
    """The ``[resources]`` table's bandwidth, CPU-frequency and power policies, run each round (in that order).

    ``deadline_s``: the policies' τ (s; ``None``: the round's, ``[budget] deadline_s`` in ``"deadline"`` rounds,
    else T/G); ``uplink_sharers``: :attr:`RoundResources.uplink_sharers`. An asynchronous run allocates each
    update alone, with τ its ``[budget] deadline_s`` and its concurrency as the sharers.
    """

    def __init__(self, config: ResourcesConfig, system: SystemConfig, budget: BudgetConfig, *,
                 deadline_s: Optional[float] = None, uplink_sharers: int = 0):
        self.config = config
        self.system = system
        self.budget = budget
        self.policies = {kind: POLICIES[kind][getattr(config, kind)]() for kind in KINDS if kind != "scheduling"}
        if deadline_s is None:
            deadline_s = budget.round_deadline_s if budget.round_mode == "deadline" else budget.round_budget_s
        self.deadline_s = float(deadline_s)
        self.uplink_sharers = int(uplink_sharers)
        self._shortest_first = tdma_order(config) == "shortest_first"
        fmax = np.asarray(system.cpu_freqs_hz, dtype=float)
        self._fmin = (fmax / 10.0 if config.cpu_freq_min_hz is None
                      else np.full(fmax.shape, float(config.cpu_freq_min_hz)))
        self._fmax = fmax
        self._pmax = np.asarray(system.tx_power_w, dtype=float)

    def allocate(self, round_index: int, devices, gains, cycles, upload_bits, download_s,
                 server_before_s: float) -> ResourcePlan:
        """The round's plan for ``devices`` (ids, plan order) with their gains, cycles, upload bits and download
        times; each policy's answer is checked (:class:`PolicyError` naming it and the round)."""
        ids = np.asarray(devices, dtype=np.int64)
        r = RoundResources(
            round_index=round_index, access=policy_access(self.system.access),
            bandwidth_hz=float(self.system.bandwidth_hz),
            noise_psd_w_per_hz=float(self.system.noise_psd_w_per_hz), deadline_s=self.deadline_s,
            server_before_s=float(server_before_s), kappa=float(self.system.kappa),
            tdma_shortest_first=self._shortest_first, devices=ids,
            channel_gain=np.asarray(gains, dtype=float), upload_bits=np.asarray(upload_bits, dtype=float),
            cycles=np.asarray(cycles, dtype=float), download_s=np.asarray(download_s, dtype=float),
            tx_power_max_w=self._pmax[ids], cpu_freq_max_hz=self._fmax[ids], cpu_freq_min_hz=self._fmin[ids],
            bands_hz=None, cpu_freq_hz=self._fmax[ids], tx_power_w=self._pmax[ids], uplink_sharers=self.uplink_sharers,
            energy_weight=float(self.config.energy_weight), time_price_j_per_s=float(self.config.time_price_j_per_s),
        )
        if hasattr(self.policies["bandwidth"], "round_time_s"):
            target = self._run("bandwidth", r, "round_time_s")
            if not (isinstance(target, (int, float)) and math.isfinite(target) and 0 < target <= r.deadline_s):
                self._fail("bandwidth", r, f"its round time is {target!r} s", f"a time in (0, {r.deadline_s!r}] s")
            r = dataclasses.replace(r, deadline_s=float(target))
        bands = self._run("bandwidth", r)
        if bands is not None:
            bands = self._check(bands, r, "bandwidth", "bands in Hz")
            total = float(bands.sum())
            if total > r.bandwidth_hz * (1 + _BAND_REL_TOL):
                self._fail("bandwidth", r, f"its bands sum to {total!r} Hz", f"at most the band, {r.bandwidth_hz!r} Hz")
            starved = np.flatnonzero(r.uploads & ~(bands > 0))
            if starved.size:
                self._fail("bandwidth", r, f"device {int(ids[starved[0]])} uploads on a band of "
                           f"{float(bands[starved[0]])!r} Hz", "a band > 0 for every uploader")
            r = dataclasses.replace(r, bands_hz=bands)
        freqs = self._check(self._run("cpu_freq", r), r, "cpu_freq", "frequencies in Hz", positive=True,
                            cap=r.cpu_freq_max_hz)
        r = dataclasses.replace(r, cpu_freq_hz=freqs)
        powers = self._check(self._run("power", r), r, "power", "powers in W", positive=True, cap=r.tx_power_max_w)
        return ResourcePlan(bands, powers, freqs)

    def _run(self, kind: str, r: RoundResources, method: str = "allocate"):
        try:
            return getattr(self.policies[kind], method)(r)
        except PolicyError:
            raise
        except (Exception, SystemExit) as e:  # noqa: BLE001 - a plugin's failure (sys.exit too), reported in one line
            self._fail(kind, r, f"raised {type(e).__name__}: {e}", "an answer")

    def _check(self, values, r: RoundResources, kind: str, what: str, *, positive: bool = False,
               cap: Optional[np.ndarray] = None) -> np.ndarray:
        try:
            arr = np.asarray(values, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            self._fail(kind, r, f"returned {values!r}", f"{len(r.devices)} {what}")
        if arr.size != r.devices.size:
            self._fail(kind, r, f"returned {arr.size} values", f"{r.devices.size} {what}, one per device")
        bad = ~np.isfinite(arr) | ((arr <= 0) if positive else (arr < 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            self._fail(kind, r, f"device {int(r.devices[i])} got {float(arr[i])!r}",
                       f"finite {what} {'> 0' if positive else '>= 0'}")
        if cap is not None:
            over = arr > cap * (1 + 1e-12)
            if over.any():
                i = int(np.flatnonzero(over)[0])
                self._fail(kind, r, f"device {int(r.devices[i])} got {float(arr[i])!r}",
                           f"at most its configured maximum {float(cap[i])!r}")
        return arr

    def _fail(self, kind: str, r: RoundResources, problem: str, expected: str):
        raise PolicyError(f"[resources] {kind} = {getattr(self.config, kind)!r}: round {r.round_index}: {problem}; "
                          f"expected {expected}")


def tdma_order(config: ResourcesConfig) -> str:
    """The TDMA uplink's waiting line under ``config``'s bandwidth policy (its declared ``tdma_order``)."""
    return declared("bandwidth", config.bandwidth).tdma_order


def check_round_mode(config: ResourcesConfig, round_mode: str, asynchronous: bool,
                     deadline_s: Optional[float]) -> None:
    """Every policy of ``config`` against the round mode, from what it declares (``round_modes``,
    ``needs_deadline``): a ``ValueError`` of one line naming the key, its value and what was expected.
    ``asynchronous``: ``round_mode`` is an asynchronous rule (its policies apply to one free slot, ``"async"``);
    ``deadline_s``: ``[budget] deadline_s`` (an asynchronous run's latency target per update). ``stragglers``
    other than ``"keep"`` applies to rounds only (a free slot takes one device: no round's stragglers to leave
    out)."""
    family = "async" if asynchronous else "sync" if round_mode == HIERARCHICAL else round_mode  # an edge round: sync
    for kind in KINDS:
        name = getattr(config, kind)
        d = declared(kind, name)
        if family not in d.round_modes:
            fits = [n for n in POLICIES[kind] if family in declared(kind, n).round_modes]
            why = d.not_async if asynchronous else f"it declares round_modes {d.round_modes}"
            raise ValueError(f"{kind} = {name!r} does not apply to round_mode = {round_mode!r}: {why}; expected "
                             f"{' or '.join(map(repr, fits))}")
        if asynchronous and d.needs_deadline and deadline_s is None:
            default = ResourcesConfig.__dataclass_fields__[kind].default
            raise ValueError(f"{kind} = {name!r} with round_mode = {round_mode!r} needs [budget] deadline_s, each "
                             f"update's latency target τ (s; an asynchronous run has no round budget T/G): {kind} = "
                             f"{name!r} does not apply to round_mode = {round_mode!r} without it; expected "
                             f"{default!r} or deadline_s set")
    if asynchronous and config.stragglers != "keep":
        raise ValueError(f"stragglers = {config.stragglers!r} with round_mode = {round_mode!r} does not apply: a free "
                         f"slot takes one device, it excludes no round's stragglers; expected 'keep'")


def check_blocks(config: ResourcesConfig, system: SystemConfig) -> None:
    """``resource_blocks``: a registered policy, and only for an access scheme that assigns blocks."""
    from ..access import scheme_class
    from ..access.ofdma import RB_POLICIES

    name = config.resource_blocks
    if name not in RB_POLICIES:
        raise ValueError(f"resource_blocks = {name!r}: expected one of {', '.join(repr(k) for k in RB_POLICIES)} "
                         f"(`edgesim list policies`)")
    if name != "equal" and not scheme_class(system.access).assigns_blocks:
        raise ValueError(f"resource_blocks = {name!r} applies to an access scheme that assigns resource blocks "
                         f"(such as 'ofdma'); this cell has access = {system.access!r}: expected it left out")


def policy_access(access: str) -> str:
    """The access family whose policies apply to scheme ``access`` (its declared ``policy_access``: ``"tdma"`` or
    ``"fdma"``), else its own name (only the policies for every scheme apply)."""
    from ..access import scheme_class

    return scheme_class(access).policy_access or access


def check_config(config: ResourcesConfig, system: SystemConfig, algorithms=(), self_scheduling=()) -> None:
    """The ``[resources]`` table against the registry, the access scheme and the algorithms, one line each
    (``ValueError`` naming the key, the value and what was expected).

    ``self_scheduling``: the algorithms of the run that choose their own devices (they refuse a scheduling policy).
    """
    for kind in KINDS:
        name = getattr(config, kind)
        known = POLICIES[kind]
        if name not in known:
            raise ValueError(f"{kind} = {name!r}: expected one of {', '.join(repr(k) for k in known)} "
                             f"(`edgesim list policies`)")
        d = declared(kind, name)
        access = d.access
        if access is not None and policy_access(system.access) not in access:
            raise ValueError(f"{kind} = {name!r} applies to [system] access = {' or '.join(map(repr, access))}; "
                             f"this cell has access = {system.access!r}: expected a {kind} policy for it")
        for other, value in d.needs.items():
            if getattr(config, other) != value:
                raise ValueError(f"{kind} = {name!r} needs {other} = {value!r} (it decides both); got {other} = "
                                 f"{getattr(config, other)!r}")
    check_blocks(config, system)
    if config.scheduling != "random":
        for alg in self_scheduling:
            if alg in algorithms:
                raise ValueError(f"scheduling = {config.scheduling!r}: algorithm {alg!r} chooses its own devices; "
                                 f"expected scheduling = 'random' for it (or a run without it)")
    fmin = config.cpu_freq_min_hz
    if fmin is not None and config.cpu_freq != "max":
        lowest = min(float(f) for f in system.cpu_freqs_hz)
        if fmin > lowest:
            raise ValueError(f"cpu_freq_min_hz = {fmin!r}: expected at most the slowest device's cpu_freq_hz "
                             f"({lowest!r} Hz), every policy's maximum")
