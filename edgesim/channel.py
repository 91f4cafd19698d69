"""Channel gains of the devices: path loss, shadowing, Rayleigh fading, mobility (docs/model/system_model.md).

The gain ``g_n`` of Eq. (8) is built as

``g_n = 10 ** (-(PL(d_n) - X_n) / 10) * h_n``

- ``PL(d) = intercept + slope * log10(d / 1 km)`` dB, the 3GPP-style path loss
  (default ``128.1 + 37.6 log10(d_km)``), with ``d`` the distance to the base
  station (BS) at the origin;
- ``X_n ~ N(0, shadowing_std_db²)`` dB, log-normal shadowing, drawn **once per
  device at placement** and kept for the whole run (also when the device
  moves: shadowing here models the device's surroundings, not its position);
- ``h_n ~ Exp(1)``, Rayleigh fading in power, drawn **per round per device**
  from ``np.random.default_rng((seed, round_index, STREAM_FADING))`` when
  ``rayleigh_fading`` is on, else 1. With ``csi_correlation`` = ρ the fading
  is correlated from round to round instead: ``h_n = |c_n(t)|²`` with the
  complex coefficient following the first-order Gauss–Markov (AR(1)) process
  ``c(t) = ρ c(t−1) + √(1 − ρ²) w(t)``, ``c(0) = w(0)``, ``w(t) ~ CN(0, 1)``
  (:func:`gauss_markov_fading`); ``w(t)`` has the power of the independent
  model's draw and a uniform phase from ``STREAM_FADING_PHASE`` (0xCA), so each
  round's fading is still Exp(1) in power and ρ = 0 is the independent model.

Devices are placed uniformly in area in the annulus ``min_distance_m <= d <=
cell_radius_m`` around the BS. With ``mobility = "random_waypoint"`` they move
between rounds at ``speed_m_per_s`` towards waypoints drawn uniformly in the
same annulus, with no pause; a straight leg may cross the inner disc, so the
path loss uses ``max(d, min_distance_m)``.

When ``system.channel_gain_db`` is set, every device has the gain
``system.fixed_gain`` in every round and none of the above is used (devices
are still placed, so ``positions_m`` is always defined, but they do not move).

Several cells (``system.cells``, :mod:`edgesim.cells`): with one cell the
above holds around its base station (placement shifted to it). With C > 1 cells
each device has a link to every cell c: ``g_{n,c} = 10 ** (-(PL(d_{n,c}) -
X_{n,c}) / 10) * h_{n,c}``, shadowing ``X_{n,c}`` drawn once per link and
fading ``h_{n,c}`` per link per round, each on a stream of its own
(``STREAM_CELL_*``); devices are placed over the cells by
:func:`place_over_cells` and associated once, at placement
(:attr:`ChannelModel.serving_cell`, :func:`edgesim.cells.associate`);
:meth:`ChannelModel.gains` is then each device's gain to its serving cell and
:meth:`ChannelModel.cell_gains` the gain to every cell.

All randomness is derived from ``seed`` and a stream tag, never global, so
``state_dict()`` (positions, waypoints, number of mobility steps) is enough to
resume a run with identical gains.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Union

import numpy as np

from ._checks import count, finite, non_negative, positive
from .cells import Layout, associate, bs_powers_w
from .config import SystemConfig

# Stream tags: the last entry of every seed tuple, so that no two uses of a seed collide.
STREAM_PLACEMENT = 0xC0
STREAM_SHADOWING = 0xC1
STREAM_FADING = 0xC2
STREAM_WAYPOINTS = 0xC3
STREAM_MOBILITY = 0xC4
STREAM_CSI = 0xC5
# Several cells: the draws of a run with C > 1 cells (a single cell keeps the streams above, byte for byte).
STREAM_CELL_PLACEMENT = 0xC6
STREAM_CELL_WAYPOINTS = 0xC7
STREAM_CELL_SHADOWING = 0xC8
STREAM_CELL_FADING = 0xC9
STREAM_FADING_PHASE = 0xCA  # csi_correlation: the phase of the correlated fading's innovation


def path_loss_db(
    distance_m: Union[float, np.ndarray], intercept_db: float = 128.1, slope_db: float = 37.6
) -> Union[float, np.ndarray]:
    """Path loss ``intercept_db + slope_db * log10(distance_m / 1000)`` in dB.

    ``distance_m`` (metres, > 0) may be a number (→ float) or an array (→ array).
    1 km gives ``intercept_db``; every decade of distance adds ``slope_db``.
    """
    intercept_db = finite("intercept_db", intercept_db)
    slope_db = non_negative("slope_db", slope_db)
    if np.ndim(distance_m) == 0:
        d = positive("distance_m", distance_m)
        return intercept_db + slope_db * math.log10(d / 1000.0)
    d = np.asarray(distance_m, dtype=float)
    bad = ~(np.isfinite(d) & (d > 0))
    if bad.any():
        raise ValueError(f"distance_m(={d[bad][0]}) must be a finite number > 0")
    return intercept_db + slope_db * np.log10(d / 1000.0)


def place_uniform_in_disc(n: int, radius_m: float, min_distance_m: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` points uniform in area in the annulus ``min_distance_m <= r <= radius_m``, shape ``(n, 2)`` (metres).

    Radius ``r = sqrt(U) * radius_m`` with ``U ~ U(0, 1)`` (uniform in the disc),
    angle uniform; points closer than ``min_distance_m`` are rejected and
    redrawn. Deterministic given ``rng``'s state.
    """
    n = count("n", n)
    radius_m = positive("radius_m", radius_m)
    min_distance_m = non_negative("min_distance_m", min_distance_m)
    if min_distance_m >= radius_m:
        raise ValueError(f"min_distance_m(={min_distance_m}) must be < radius_m(={radius_m})")
    radii: list[np.ndarray] = []
    angles: list[np.ndarray] = []
    missing = n
    while missing > 0:
        r = np.sqrt(rng.random(missing)) * radius_m
        a = rng.random(missing) * (2.0 * math.pi)
        keep = r >= min_distance_m
        radii.append(r[keep])
        angles.append(a[keep])
        missing -= int(keep.sum())
    r = np.concatenate(radii) if radii else np.empty(0)
    a = np.concatenate(angles) if angles else np.empty(0)
    return np.column_stack([r * np.cos(a), r * np.sin(a)])


def place_over_cells(n: int, sites_m: np.ndarray, radius_m: float, min_distance_m: float, placement: str,
                     rng: np.random.Generator, first: int = 0) -> np.ndarray:
    """``n`` points over the cells whose base stations are at ``sites_m`` (shape ``(C, 2)``, metres), each cell a disc
    of ``radius_m``; shape ``(n, 2)``. Deterministic given ``rng``'s state.

    - ``"uniform_union"``: uniform in area over the union of the discs. A candidate is drawn uniformly in a cell
      drawn uniformly, and kept with probability ``1 / m`` where ``m`` is the number of discs that cover it (the
      union's density is then uniform: a point covered by m discs is proposed m times as often).
    - ``"per_cell"``: point ``k`` (the device ``first + k``) uniform in the disc of cell ``(first + k) mod C``: an
      equal share per cell.

    Either way a candidate closer than ``min_distance_m`` to any base station is rejected and redrawn.
    """
    n = count("n", n)
    sites = np.asarray(sites_m, dtype=float).reshape(-1, 2)
    c = len(sites)
    out = np.empty((n, 2))
    todo = np.arange(n)
    while todo.size:
        k = todo.size
        cell = rng.integers(0, c, k) if placement == "uniform_union" else (first + todo) % c
        r = np.sqrt(rng.random(k)) * radius_m
        a = rng.random(k) * (2.0 * math.pi)
        pts = sites[cell] + np.column_stack([r * np.cos(a), r * np.sin(a)])
        d = np.hypot(pts[:, None, 0] - sites[None, :, 0], pts[:, None, 1] - sites[None, :, 1])
        keep = (d >= min_distance_m).all(axis=1)
        if placement == "uniform_union":
            covered = (d <= radius_m).sum(axis=1)
            keep &= rng.random(k) * covered < 1.0
        out[todo[keep]] = pts[keep]
        todo = todo[~keep]
    return out


class ChannelModel:
    """The devices' positions and their channel gain in each round (see module docstring).

    ``seed`` (an int >= 0) derives every random stream; one BS at the origin, or the cells of ``system.cells``.
    """

    def __init__(self, system: SystemConfig, seed: int):
        self._system = system
        self._seed = count("seed", seed)
        n = system.n_devices
        self._sites_m = np.array([[c.x_m, c.y_m] for c in system.cell_configs], dtype=float)
        self._shift_m = self._sites_m[0] if len(self._sites_m) == 1 and self._sites_m[0].any() else None
        self._serving: Optional[np.ndarray] = None  # several cells: each device's serving cell, as an array
        if self.n_cells == 1:
            self._positions_m = self._shifted(place_uniform_in_disc(
                n, system.cell_radius_m, system.min_distance_m, np.random.default_rng((self._seed, STREAM_PLACEMENT))
            ))
            self._waypoints_m = self._shifted(place_uniform_in_disc(
                n, system.cell_radius_m, system.min_distance_m, np.random.default_rng((self._seed, STREAM_WAYPOINTS))
            ))
        else:
            self._positions_m, self._waypoints_m = (
                place_over_cells(n, self._sites_m, system.cell_radius_m, system.min_distance_m, system.placement,
                                 np.random.default_rng((self._seed, stream)))
                for stream in (STREAM_CELL_PLACEMENT, STREAM_CELL_WAYPOINTS))
        std = float(system.shadowing_std_db)
        shape, stream = ((n,), STREAM_SHADOWING) if self.n_cells == 1 else ((n, self.n_cells), STREAM_CELL_SHADOWING)
        self._shadowing_db = (
            np.random.default_rng((self._seed, stream)).normal(0.0, std, shape) if std > 0 else np.zeros(shape)
        )
        self._moves = 0
        self._large_scale: Optional[np.ndarray] = None  # path loss and shadowing at the current positions
        rho = system.csi_correlation
        self._rho = None if not system.rayleigh_fading or rho is None or rho == 0 else float(rho)
        self._fading: Optional[tuple[int, np.ndarray]] = None  # (round, complex coefficients) of the AR(1) fading
        self._cell_large_scale: Optional[np.ndarray] = None  # the same to every cell, (n, C) (several cells)
        self._serving_cell = (0,) * n
        if self.n_cells > 1:  # associated once, on the average gains at placement (no handover)
            self._serving_cell = associate(system, self.layout())
            self._serving = np.asarray(self._serving_cell, dtype=np.int64)

    @property
    def serving_cell(self) -> tuple[int, ...]:
        """Each device's serving cell (``0..C-1``; one cell: all 0), fixed for the run (:mod:`edgesim.cells`)."""
        return self._serving_cell

    def layout(self) -> Layout:
        """What an association rule sees now (:class:`edgesim.cells.Layout`): positions, sites, distances and average
        gains of every link, the base stations' downlink powers."""
        return Layout(self.positions_m, self.sites_m, self.cell_distances_m, self.cell_large_scale_gains(),
                      bs_powers_w(self._system))

    def _shifted(self, points_m: np.ndarray) -> np.ndarray:
        """Points drawn around the origin moved to the one cell's base station (unchanged when it is the origin)."""
        return points_m if self._shift_m is None else points_m + self._shift_m

    @property
    def n_cells(self) -> int:
        """The number of cells (base stations)."""
        return len(self._sites_m)

    @property
    def sites_m(self) -> np.ndarray:
        """The base stations' positions ``(C, 2)`` in metres (a copy)."""
        return self._sites_m.copy()

    @property
    def cell_distances_m(self) -> np.ndarray:
        """Distance of each device to each base station ``(n, C)`` in metres."""
        p, s = self._positions_m, self._sites_m
        return np.hypot(p[:, None, 0] - s[None, :, 0], p[:, None, 1] - s[None, :, 1])

    def cell_large_scale_gains(self) -> np.ndarray:
        """Path loss and shadowing of every link as a linear gain ``(n, C)`` (no fading): the average gain
        (what the ``"max_gain"`` association compares). A copy."""
        return self._cell_large_scale_gain().copy()

    def cell_gains(self, round_index: int) -> np.ndarray:
        """Linear gain of every device to every cell in round ``round_index`` ``(n, C)``: path loss, shadowing per
        link, Rayleigh fading per link per round (``default_rng((seed, round_index, STREAM_CELL_FADING))``; with one
        cell the single cell's own stream, so column 0 is :meth:`gains`). Calling it twice gives the same numbers."""
        round_index = count("round_index", round_index)
        if self.n_cells == 1:
            return self.gains(round_index)[:, None]
        gain = self._cell_large_scale_gain()
        if self._system.rayleigh_fading:
            return gain * np.random.default_rng((self._seed, round_index, STREAM_CELL_FADING)).exponential(
                1.0, gain.shape)
        return gain.copy()

    def _cell_large_scale_gain(self) -> np.ndarray:
        if self.n_cells == 1:
            return self._large_scale_gain()[:, None]
        if self._cell_large_scale is None:
            self._cell_large_scale = self._path_gain(self.cell_distances_m)
        return self._cell_large_scale

    def _path_gain(self, distances_m: np.ndarray) -> np.ndarray:
        """Large-scale power gain at ``distances_m`` (each at least the minimum distance), shadowing included:
        ``10^(−(PL(d) − X_σ)/10)``, read-only."""
        system = self._system
        d = np.maximum(distances_m, float(system.min_distance_m))
        loss_db = path_loss_db(d, system.path_loss_intercept_db, system.path_loss_slope_db)
        gain = 10.0 ** (-(loss_db - self._shadowing_db) / 10.0)
        gain.flags.writeable = False
        return gain

    @property
    def n_devices(self) -> int:
        return self._system.n_devices

    @property
    def positions_m(self) -> np.ndarray:
        """Device positions ``(n, 2)`` in metres (a copy); one cell unset: its BS at the origin."""
        return self._positions_m.copy()

    @property
    def distances_m(self) -> np.ndarray:
        """Distance of each device to its BS (its serving cell's, with several cells) in metres."""
        if self.n_cells > 1:
            return self.cell_distances_m[np.arange(self.n_devices), self._serving]
        p = self._positions_m if self._shift_m is None else self._positions_m - self._shift_m
        return np.hypot(p[:, 0], p[:, 1])

    @property
    def shadowing_db(self) -> np.ndarray:
        """Each link's log-normal shadowing in dB (fixed for the run): ``X_n`` per device, ``(n, C)`` with several
        cells."""
        return self._shadowing_db.copy()

    def gains(self, round_index: int) -> np.ndarray:
        """Linear channel gain of every device in round ``round_index`` (shape ``(n,)``).

        Depends only on the current positions, the shadowing and
        ``(seed, round_index)``: calling it twice gives the same numbers.
        """
        round_index = count("round_index", round_index)
        system = self._system
        if system.fixed_gain is not None:
            return np.full(system.n_devices, system.fixed_gain)
        if self.n_cells > 1:
            return self.cell_gains(round_index)[np.arange(self.n_devices), self._serving]
        gain = self._large_scale_gain()
        if self._rho is not None:
            return gain * np.abs(self._coefficients(round_index)) ** 2
        if system.rayleigh_fading:
            gain = gain * self._fading_power(round_index)
            return gain
        return gain.copy()

    def _fading_power(self, round_index: int) -> np.ndarray:
        """The independent model's Rayleigh fading power of every device in ``round_index``: Exp(1) draws."""
        return np.random.default_rng((self._seed, round_index, STREAM_FADING)).exponential(1.0, self._system.n_devices)

    def _innovation(self, round_index: int) -> np.ndarray:
        """``w(t) ~ CN(0, 1)``: the independent model's power with a uniform phase of its own stream."""
        phase = np.random.default_rng((self._seed, round_index, STREAM_FADING_PHASE)).uniform(
            0.0, 2.0 * math.pi, self._system.n_devices)
        return np.sqrt(self._fading_power(round_index)) * np.exp(1j * phase)

    def _coefficients(self, round_index: int) -> np.ndarray:
        """The complex fading coefficients ``c(round_index)`` of the Gauss–Markov process, stepped on from the last
        round computed (from round 0 when asked for an earlier one: a resumed run recomputes them, nothing to
        checkpoint)."""
        if self._fading is None or self._fading[0] > round_index:
            self._fading = (0, self._innovation(0))
        t, c = self._fading
        while t < round_index:
            t += 1
            c = gauss_markov_fading(c, self._innovation(t), self._rho)
        self._fading = (t, c)
        return c

    def _large_scale_gain(self) -> np.ndarray:
        """Path loss and shadowing as a linear gain at the current positions (kept until the devices move); several
        cells: to each device's serving cell."""
        if self._large_scale is None and self.n_cells > 1:
            self._large_scale = self._cell_large_scale_gain()[np.arange(self.n_devices), self._serving]
            self._large_scale.flags.writeable = False
        if self._large_scale is None:
            self._large_scale = self._path_gain(self.distances_m)
        return self._large_scale

    def advance(self, duration_s: float) -> None:
        """Move the devices for ``duration_s`` seconds of random-waypoint mobility (no-op when static).

        Each device walks in a straight line at ``speed_m_per_s`` to its
        waypoint; on arrival it draws a new waypoint uniformly in the annulus
        and goes on at once (no pause). The new waypoints of the k-th call
        come from ``default_rng((seed, k, STREAM_MOBILITY))``.
        """
        duration_s = non_negative("duration_s", duration_s)
        system = self._system
        if system.mobility != "random_waypoint" or system.fixed_gain is not None:
            return
        speed = float(system.speed_m_per_s)
        rng = np.random.default_rng((self._seed, self._moves, STREAM_MOBILITY))
        self._moves += 1
        if speed == 0 or duration_s == 0:
            return
        self._large_scale = None
        self._cell_large_scale = None
        pos, target = self._positions_m, self._waypoints_m
        left_m = np.full(len(pos), speed * duration_s)  # distance each device may still walk
        walking = np.arange(len(pos))
        while len(walking):
            delta = target[walking] - pos[walking]
            dist = np.hypot(delta[:, 0], delta[:, 1])
            arrive = dist <= left_m[walking]
            stay = walking[~arrive]
            frac = (left_m[stay] / dist[~arrive])[:, None]
            pos[stay] = pos[stay] + frac * delta[~arrive]
            left_m[stay] = 0.0
            reached = walking[arrive]
            pos[reached] = target[reached]
            left_m[reached] -= dist[arrive]
            target[reached] = self._new_waypoints(reached, rng)
            walking = reached[left_m[reached] > 0]

    def _new_waypoints(self, devices: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """New waypoints for ``devices`` (indices): in the cell's annulus, or over the cells (:func:`place_over_cells`,
        one at a time under ``"per_cell"`` so that each gets its own cell's disc)."""
        system = self._system
        if self.n_cells == 1:
            return self._shifted(place_uniform_in_disc(len(devices), system.cell_radius_m, system.min_distance_m, rng))
        if system.placement == "per_cell":
            return np.concatenate([place_over_cells(1, self._sites_m, system.cell_radius_m, system.min_distance_m,
                                                    "per_cell", rng, first=int(d)) for d in devices]).reshape(-1, 2)
        return place_over_cells(len(devices), self._sites_m, system.cell_radius_m, system.min_distance_m,
                                "uniform_union", rng)

    def state_dict(self) -> dict[str, Any]:
        """Plain lists and numbers: positions, waypoints, mobility steps so far."""
        return {
            "seed": self._seed,
            "positions_m": self._positions_m.tolist(),
            "waypoints_m": self._waypoints_m.tolist(),
            "moves": self._moves,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (the model must have the same config and seed)."""
        if int(state["seed"]) != self._seed:
            raise ValueError(f"state seed(={state['seed']}) differs from this channel's seed(={self._seed})")
        shape = (self._system.n_devices, 2)
        positions = np.asarray(state["positions_m"], dtype=float).reshape(-1, 2) if state["positions_m"] else None
        waypoints = np.asarray(state["waypoints_m"], dtype=float).reshape(-1, 2) if state["waypoints_m"] else None
        for name, arr in (("positions_m", positions), ("waypoints_m", waypoints)):
            if arr is None or arr.shape != shape:
                raise ValueError(f"{name} has shape {None if arr is None else arr.shape}, expected {shape}")
        self._positions_m = positions
        self._waypoints_m = waypoints
        self._large_scale = None
        self._cell_large_scale = None
        self._moves = count("moves", state["moves"])


def gauss_markov_fading(previous, innovation, correlation: float) -> np.ndarray:
    """One step of first-order Gauss–Markov (AR(1)) Rayleigh fading: ``c(t) = ρ c(t−1) + √(1 − ρ²) w(t)``.

    ``previous`` = ``c(t−1)`` and ``innovation`` = ``w(t)`` are complex fading coefficients (CN(0, 1): unit mean
    power, dimensionless), ``correlation`` = ρ in [0, 1] their correlation from one step to the next. A stationary
    ``c(t−1) ~ CN(0, 1)`` gives ``c(t) ~ CN(0, 1)`` (``ρ² + 1 − ρ² = 1``), so the power ``|c|²`` stays Exp(1):
    Rayleigh fading with ``E[c(t) c*(t−1)] = ρ``, and the powers correlated by ρ². ρ = 1 keeps ``c`` as it was,
    ρ = 0 draws it anew. The discrete-time model of time-correlated Rayleigh fading of Baddour and Beaulieu,
    "Autoregressive modeling for fading channel simulation", IEEE Trans. Wireless Commun. 4(4), 2005 (the AR(1)
    case); under Jakes' (Clarke's) isotropic scattering, ``ρ = J0(2π f_D T)`` for a Doppler frequency ``f_D`` and
    a step of ``T`` seconds (Jakes, *Microwave Mobile Communications*, 1974)."""
    rho = float(correlation)
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"correlation(={correlation!r}) must be a number in [0, 1]")
    previous, innovation = np.asarray(previous, dtype=complex), np.asarray(innovation, dtype=complex)
    return rho * previous + math.sqrt(1.0 - rho * rho) * innovation


def estimated_gains(gains, error_std: float, seed: int, round_index: int) -> np.ndarray:
    """The base station's estimate of the gains under imperfect CSI: ``ĝ = g · max(1 + e, 1e-3)``, ``e`` Gaussian
    with standard deviation ``error_std`` (relative), from ``default_rng((seed, round_index, STREAM_CSI))`` (a stream
    of its own: the true channel's draws are untouched). The floor keeps an estimate positive. Linear, like ``g``."""
    g = np.asarray(gains, dtype=float)
    e = np.random.default_rng((seed, round_index, STREAM_CSI)).normal(0.0, float(error_std), g.shape)
    return g * np.maximum(1.0 + e, 1e-3)
