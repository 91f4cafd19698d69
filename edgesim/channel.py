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
  ``rayleigh_fading`` is on, else 1.

Devices are placed uniformly in area in the annulus ``min_distance_m <= d <=
cell_radius_m`` around the BS. With ``mobility = "random_waypoint"`` they move
between rounds at ``speed_m_per_s`` towards waypoints drawn uniformly in the
same annulus, with no pause; a straight leg may cross the inner disc, so the
path loss uses ``max(d, min_distance_m)``.

When ``system.channel_gain_db`` is set, every device has the gain
``system.fixed_gain`` in every round and none of the above is used (devices
are still placed, so ``positions_m`` is always defined, but they do not move).

All randomness is derived from ``seed`` and a stream tag, never global, so
``state_dict()`` (positions, waypoints, number of mobility steps) is enough to
resume a run with identical gains.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Union

import numpy as np

from ._checks import count, finite, non_negative, positive
from .config import SystemConfig

# Stream tags: the last entry of every seed tuple, so that no two uses of a seed collide.
STREAM_PLACEMENT = 0xC0
STREAM_SHADOWING = 0xC1
STREAM_FADING = 0xC2
STREAM_WAYPOINTS = 0xC3
STREAM_MOBILITY = 0xC4
STREAM_CSI = 0xC5


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


class ChannelModel:
    """The devices' positions and their channel gain in each round (see module docstring).

    ``seed`` (an int >= 0) derives every random stream; the BS is at the origin.
    """

    def __init__(self, system: SystemConfig, seed: int):
        self._system = system
        self._seed = count("seed", seed)
        n = system.n_devices
        self._positions_m = place_uniform_in_disc(
            n, system.cell_radius_m, system.min_distance_m, np.random.default_rng((self._seed, STREAM_PLACEMENT))
        )
        self._waypoints_m = place_uniform_in_disc(
            n, system.cell_radius_m, system.min_distance_m, np.random.default_rng((self._seed, STREAM_WAYPOINTS))
        )
        std = float(system.shadowing_std_db)
        self._shadowing_db = (
            np.random.default_rng((self._seed, STREAM_SHADOWING)).normal(0.0, std, n) if std > 0 else np.zeros(n)
        )
        self._moves = 0
        self._large_scale: Optional[np.ndarray] = None  # path loss and shadowing at the current positions

    @property
    def n_devices(self) -> int:
        return self._system.n_devices

    @property
    def positions_m(self) -> np.ndarray:
        """Device positions ``(n, 2)`` in metres, BS at the origin (a copy)."""
        return self._positions_m.copy()

    @property
    def distances_m(self) -> np.ndarray:
        """Distance of each device to the BS in metres."""
        return np.hypot(self._positions_m[:, 0], self._positions_m[:, 1])

    @property
    def shadowing_db(self) -> np.ndarray:
        """Each device's log-normal shadowing ``X_n`` in dB (fixed for the run)."""
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
        gain = self._large_scale_gain()
        if system.rayleigh_fading:
            gain = gain * np.random.default_rng((self._seed, round_index, STREAM_FADING)).exponential(
                1.0, system.n_devices
            )
            return gain
        return gain.copy()

    def _large_scale_gain(self) -> np.ndarray:
        """Path loss and shadowing as a linear gain at the current positions (kept until the devices move)."""
        if self._large_scale is None:
            system = self._system
            d = np.maximum(self.distances_m, float(system.min_distance_m))
            loss_db = path_loss_db(d, system.path_loss_intercept_db, system.path_loss_slope_db)
            self._large_scale = 10.0 ** (-(loss_db - self._shadowing_db) / 10.0)
            self._large_scale.flags.writeable = False
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
            target[reached] = place_uniform_in_disc(
                len(reached), system.cell_radius_m, system.min_distance_m, rng
            )
            walking = reached[left_m[reached] > 0]

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
        self._moves = count("moves", state["moves"])


def estimated_gains(gains, error_std: float, seed: int, round_index: int) -> np.ndarray:
    """The base station's estimate of the gains under imperfect CSI: ``ĝ = g · max(1 + e, 1e-3)``, ``e`` Gaussian
    with standard deviation ``error_std`` (relative), from ``default_rng((seed, round_index, STREAM_CSI))`` (a stream
    of its own: the true channel's draws are untouched). The floor keeps an estimate positive. Linear, like ``g``."""
    g = np.asarray(gains, dtype=float)
    e = np.random.default_rng((seed, round_index, STREAM_CSI)).normal(0.0, float(error_std), g.shape)
    return g * np.maximum(1.0 + e, 1e-3)
