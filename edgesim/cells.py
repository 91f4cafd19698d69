"""Several cells: which base station serves each device (``system.association``), torch-free.

The one place that gives the device → cell mapping (docs/model/system_model.md, "Several cells"):
``serving_cell``, a tuple of one cell index per device (``0..C-1``, in the order of ``system.cells``), fixed for the
run, decided by :func:`associate` when the channel places the devices; it is
:attr:`edgesim.channel.ChannelModel.serving_cell`, ``Simulation.serving_cell`` and ``SystemView.serving_cell``, and
:func:`n_cells` the number of cells. A cell is a :class:`CellConfig` (its base
station's position and what it overrides of ``[system]``; :attr:`edgesim.config.SystemConfig.cell_configs`).

Association is decided once, at placement, on the average gains (no fading), and kept when devices move (no
handover). An association rule is a function of a :class:`Layout` returning one cell index per device, registered
by name with :func:`register_association` (a plugin: from a module of ``[run] plugins`` or the entry-point group
``edgesim.association``). The built-in rules:

- ``"nearest"``: the base station at the smallest distance ``d_{n,c}`` (the lowest index on a tie);
- ``"max_gain"``: the largest average gain ``ḡ_{n,c} = 10^(-(PL(d_{n,c}) - X_{n,c}) / 10)``, path loss and the link's
  shadowing (no fading): with shadowing a device may be served by a farther cell;
- ``"max_power"``: the largest average received downlink power ``P_c · ḡ_{n,c}``, ``P_c`` the cell's
  ``tx_power_dbm`` (:data:`BS_TX_POWER_DBM` where a cell gives none): the reference-signal received power (RSRP)
  association of cellular networks (3GPP TS 36.304 §5.2.4, cell reselection on the strongest received reference
  signal; Andrews, Baccelli and Ganti, IEEE Trans. Commun. 2011, "A tractable approach to coverage and rate in
  cellular networks", §II: each user served by the strongest base station on average).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .config import ASSOCIATION_NAMES, CellConfig, ConfigError, SystemConfig, check_association_name
from .registries import claim
from .units import dbm_to_w

__all__ = ["ASSOCIATIONS", "BS_TX_POWER_DBM", "CellConfig", "Layout", "associate", "bs_powers_w", "cell_bands_hz",
           "cell_system", "device_bands_hz", "devices_per_cell", "n_cells", "register_association"]

# A macro base station's transmit power where a cell gives no tx_power_dbm (3GPP TR 36.814, Table A.2.1.1-2: 46 dBm
# over 10 MHz).
BS_TX_POWER_DBM = 46.0


@dataclass(frozen=True)
class Layout:
    """What an association rule sees (NumPy arrays, SI units): ``positions_m`` of the ``n`` devices ``(n, 2)``,
    ``sites_m`` of the ``C`` base stations ``(C, 2)``, ``distance_m`` of every link ``(n, C)``, ``gain`` the average
    linear gain of every link ``(n, C)`` (path loss and shadowing, no fading) and ``bs_power_w`` each base station's
    downlink transmit power ``(C,)``."""

    positions_m: np.ndarray
    sites_m: np.ndarray
    distance_m: np.ndarray
    gain: np.ndarray
    bs_power_w: np.ndarray

    @property
    def n_devices(self) -> int:
        return int(self.positions_m.shape[0])

    @property
    def n_cells(self) -> int:
        return int(self.sites_m.shape[0])


# name -> rule: a function (Layout) -> a sequence of one cell index per device
ASSOCIATIONS: dict[str, Callable[[Layout], Sequence[int]]] = {}


def register_association(name: str) -> Callable[[Callable], Callable]:
    """Decorator: ``@register_association("mine")`` makes ``[system] association = "mine"`` choose the function
    ``rule(layout: Layout) -> Sequence[int]`` (one cell index per device). A name already taken is refused in one
    line naming both sources (:func:`edgesim.registries.claim`)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"association rule name {name!r}: expected a name of letters, digits and underscores")

    def add(rule: Callable) -> Callable:
        if not callable(rule):
            raise ConfigError(f"association rule {name!r} ({rule!r}): expected a function of a Layout")
        claim(ASSOCIATIONS, name, rule, "association rule")
        if name not in ASSOCIATION_NAMES:
            ASSOCIATION_NAMES.append(name)
        return rule

    return add


@register_association("nearest")
def nearest(layout: Layout) -> np.ndarray:
    """The nearest base station (the lowest index on a tie)."""
    return np.argmin(layout.distance_m, axis=1)


@register_association("max_gain")
def max_gain(layout: Layout) -> np.ndarray:
    """The largest average gain: path loss and shadowing, no fading (the lowest index on a tie)."""
    return np.argmax(layout.gain, axis=1)


@register_association("max_power")
def max_power(layout: Layout) -> np.ndarray:
    """The largest average received downlink power ``P_c · ḡ_{n,c}`` (RSRP; the lowest index on a tie)."""
    return np.argmax(layout.gain * layout.bs_power_w[None, :], axis=1)


def n_cells(system: SystemConfig) -> int:
    """The number of cells of ``system`` (1 when ``system.cells`` is unset)."""
    return system.n_cells


def bs_powers_w(system: SystemConfig) -> np.ndarray:
    """Each base station's downlink transmit power (W): its ``tx_power_dbm``, else :data:`BS_TX_POWER_DBM`."""
    return np.array([dbm_to_w(BS_TX_POWER_DBM if c.tx_power_dbm is None else c.tx_power_dbm)
                     for c in system.cell_configs])


def associate(system: SystemConfig, layout: Layout) -> tuple[int, ...]:
    """Each device's serving cell under ``system.association``: a tuple of ``n`` ints in ``0..C-1``. The channel
    calls it once, at placement (:attr:`edgesim.channel.ChannelModel.serving_cell`). A rule's answer of the wrong
    length or with an index out of range is refused in one line naming the rule."""
    n = layout.n_devices
    check_association_name(system.association)
    cells = np.asarray(ASSOCIATIONS[system.association](layout))
    if (cells.shape != (n,) or not np.issubdtype(cells.dtype, np.integer) or (cells < 0).any()
            or (cells >= layout.n_cells).any()):
        raise ConfigError(f"[system] association = {system.association!r}: returned {cells!r}; expected {n} "
                          f"integers, the serving cell of each device in 0..{layout.n_cells - 1}")
    return tuple(int(c) for c in cells)


def devices_per_cell(serving_cell: Sequence[int], n: int) -> tuple[int, ...]:
    """How many devices each of the ``n`` cells serves (``edgesim plan``'s association line)."""
    counts = np.bincount(np.asarray(serving_cell, dtype=np.int64), minlength=n)
    return tuple(int(c) for c in counts)


def cell_bands_hz(system: SystemConfig) -> np.ndarray:
    """Each cell's uplink band ``(C, 2)``: its lowest frequency and its width ``W_c = B_c / n`` (Hz), ``B_c`` the
    cell's ``bandwidth_hz`` (else the system's), cell c on sub-band ``c mod n`` of it under ``frequency_reuse = n``:
    ``[(c mod n) W_c, (c mod n + 1) W_c)`` (docs/model/system_model.md, "Inter-cell interference")."""
    n = int(system.frequency_reuse)
    out = []
    for c, cell in enumerate(system.cell_configs):
        width = float(cell.bandwidth_hz if cell.bandwidth_hz is not None else system.bandwidth_hz) / n
        out.append(((c % n) * width, width))
    return np.array(out, dtype=float)


def cell_system(system: SystemConfig, cell: int) -> SystemConfig:
    """``system`` as cell ``cell`` runs it: its uplink band ``bandwidth_hz`` the cell's ``W_c``
    (:func:`cell_bands_hz`) and ``server_freq_hz`` its edge server's ``cpu_hz`` where the cell gives one; the other
    keys unchanged. With one cell and no override: ``system`` itself."""
    config = system.cell_configs[cell]
    changes = {}
    width_hz = float(cell_bands_hz(system)[cell, 1])
    if config.bandwidth_hz is not None or system.frequency_reuse != 1:
        changes["bandwidth_hz"] = width_hz
    if config.cpu_hz is not None:
        changes["server_freq_hz"] = config.cpu_hz
    return dataclasses.replace(system, **changes) if changes else system


def device_bands_hz(system: SystemConfig, serving_cell: Sequence[int]) -> np.ndarray:
    """Each device's uplink band (Hz): its serving cell's ``W_c`` (:func:`cell_bands_hz`), the band its full-band
    rate is counted on."""
    return cell_bands_hz(system)[:, 1][np.asarray(serving_cell, dtype=np.int64)]
