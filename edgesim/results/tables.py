"""The run folder's tables from the clock's records: ``rounds.csv``, ``devices.csv`` and ``events.csv``.

The row writers of a run (docs/use/run_folders.md): one ``rounds.csv`` row per algorithm × round (:func:`round_row`:
``algorithm``, :data:`ROUND_FIELDS`, then the round's metrics — accuracy first — and the algorithm's decisions), one
``devices.csv`` row per algorithm × round × device (:func:`device_row`, the columns the caller names: see
``edgesim.scenarios.run.device_fields``), one ``events.csv`` row per event. :class:`LiveTables` appends the rows of
each round as it ends; :func:`write_tables` writes the finished files. The records are read by attribute
(``edgesim.engine.RoundRecord`` and its device rows and events), so this floor imports no engine.
"""

from __future__ import annotations

import threading
from typing import Callable, Mapping, Optional, Sequence

from edgesim.results.files import DEVICES, EVENTS, ROUNDS
from edgesim.results.writing import LiveCsv, RunFolder

ROUND_FIELDS = (
    "round", "start_time_s", "time_s", "duration_s", "n_selected", "n_arrived", "n_dropped",
    "bits_up", "bits_down", "cum_bits_up", "cum_bits_down", "cum_wasted_bits", "energy_j", "cum_energy_j",
    "server_s",
)
DEVICE_FIELDS = (
    "round", "device", "channel_gain", "rate_bps", "download_s", "compute_s", "upload_airtime_s", "idle_s",
    "bits_up", "bits_down", "wasted_bits", "radio_energy_j", "compute_energy_j", "arrived", "dropped",
)
# A hierarchical run's rounds (round_mode = "hierarchical", docs/model/hierarchy.md): after ROUND_FIELDS, each row's
# level ("edge" or "cloud") and cell (the edge server's; -1 for the cloud). Written only when a record has a level.
LEVEL_FIELDS = ("level", "cell")
# Each device-round's resources (docs/model/resource_policies.md): the rounds' devices.csv columns after DEVICE_FIELDS.
RESOURCE_FIELDS = ("bandwidth_hz", "tx_power_w", "cpu_freq_hz")
# With imperfect CSI (system.csi): the gain each device-round was planned on and the full-band rate on it, the
# columns after the access scheme's (beside channel_gain and rate_bps, what the device got).
PLANNED_FIELDS = ("planned_channel_gain", "planned_rate_bps")
EVENT_FIELDS = ("algorithm", "time_s", "round", "device", "kind", "bits")


def round_row(name: str, r, metric_keys: Sequence[str], info_keys: Sequence[str], levels: bool = False) -> list:
    """One ``rounds.csv`` row: ``algorithm``, :data:`ROUND_FIELDS`, with ``levels`` :data:`LEVEL_FIELDS`, then the
    metrics and decisions named."""
    return [
        name, r.round_index, r.start_time_s, r.end_time_s, r.duration_s, len(r.devices), len(r.arrived),
        len(r.dropped), r.bits_up, r.bits_down, r.cum_bits_up, r.cum_bits_down, r.cum_wasted_bits,
        r.radio_energy_j + r.compute_energy_j, r.cum_energy_j, r.server_s, *((r.level, r.cell) if levels else ()),
        *[r.metrics.get(k) for k in metric_keys], *[r.info.get(k) for k in info_keys],
    ]


def round_columns(records) -> tuple[list[str], list[str]]:
    """(metric keys, accuracy first; decision keys) of ``records``: ``rounds.csv``'s columns after the fixed ones."""
    metric_keys = sorted({k for r in records for k in r.metrics})
    metric_keys.sort(key=lambda k: (k != "accuracy", k))
    return metric_keys, sorted({k for r in records for k in r.info})


def has_levels(records) -> bool:
    """Whether ``records`` hold a hierarchical run's rounds (a level each): ``rounds.csv`` then has
    :data:`LEVEL_FIELDS` after :data:`ROUND_FIELDS`."""
    return any(getattr(r, "level", "") for r in records)


def device_row(name: str, d, fields: Sequence[str]) -> list:
    """One ``devices.csv`` row: ``algorithm``, then ``fields`` of the device row ``d`` (``round``: its round)."""
    return [name, *[getattr(d, f if f != "round" else "round_index") for f in fields]]


class LiveTables:
    """``rounds.csv`` and ``devices.csv`` growing as the rounds end (:class:`edgesim.results.writing.LiveCsv`), in
    the working folder, listed in its manifest before they are written. ``rounds.csv``'s columns while the run goes
    are the first round's (the finished file has every algorithm's metrics and decisions); ``device_fields``:
    ``devices.csv``'s columns after ``algorithm``."""

    def __init__(self, folder: RunFolder, device_fields: Sequence[str]):
        self.rounds, self.devices = LiveCsv(folder.path(ROUNDS)), LiveCsv(folder.path(DEVICES))
        self.device_header = ("algorithm", *device_fields)
        self.lock = threading.Lock()  # with --jobs, this process's rounds and the workers' (a relay thread) meet here

    def on_round(self, name: str, rec) -> None:
        with self.lock:
            self._append(name, rec)

    def _append(self, name: str, rec) -> None:
        metric_keys, info_keys = round_columns([rec])
        levels = has_levels([rec])
        header = ("algorithm", *ROUND_FIELDS, *(LEVEL_FIELDS if levels else ()), *metric_keys, *info_keys)
        self.rounds.append(header, [dict(zip(header, round_row(name, rec, metric_keys, info_keys, levels)))])
        fields = self.device_header[1:]
        self.devices.append(self.device_header, [dict(zip(self.device_header, device_row(name, d, fields)))
                                                 for d in rec.devices])

    def feeding(self, on_round: Optional[Callable]) -> Callable:
        """A round callback that appends the round's rows, then calls ``on_round`` (the caller's, if any)."""
        def both(name: str, rec) -> None:
            self.on_round(name, rec)
            if on_round is not None:
                on_round(name, rec)
        return both

    def close(self) -> None:
        self.rounds.close()
        self.devices.close()


def write_tables(folder: RunFolder, runs: Mapping, device_fields: Sequence[str]) -> None:
    """The finished ``rounds.csv``, ``devices.csv`` and ``events.csv`` of ``runs`` (per algorithm, an object with
    ``records`` and ``events``), in the algorithms' order."""
    records = [r for s in runs.values() for r in s.records]
    metric_keys, info_keys = round_columns(records)
    levels = has_levels(records)
    folder.write_csv(
        ROUNDS,
        ("algorithm", *ROUND_FIELDS, *(LEVEL_FIELDS if levels else ()), *metric_keys, *info_keys),
        (round_row(name, r, metric_keys, info_keys, levels) for name, sim in runs.items() for r in sim.records),
    )
    folder.write_csv(
        DEVICES,
        ("algorithm", *device_fields),
        (device_row(name, d, device_fields) for name, sim in runs.items() for r in sim.records for d in r.devices),
    )
    folder.write_csv(
        EVENTS,
        EVENT_FIELDS,
        ([name, e.time_s, e.round_index, e.device, e.kind, e.bits] for name, sim in runs.items() for e in sim.events),
    )


# cells.csv (several cells): one row per base station ("bs", its index = the cell), then one per device ("device").
CELL_FIELDS = ("kind", "index", "cell", "x_m", "y_m", "band_low_hz", "band_hz", "devices", "mean_snr_db",
               "mean_sinr_db")


def cell_rows(cells: Sequence[Mapping], devices: Sequence[Mapping]) -> list[list]:
    """The ``cells.csv`` rows: each cell of :func:`edgesim.planning.cell_table` (``kind = "bs"``), then each device
    of :func:`edgesim.planning.device_layout` (``kind = "device"``, the cell columns empty)."""
    rows = [["bs", c["cell"], c["cell"], c["x_m"], c["y_m"], c["band_low_hz"], c["band_hz"], c["devices"],
             c["mean_snr_db"], c["mean_sinr_db"]] for c in cells]
    rows += [["device", d["device"], d["cell"], d["x_m"], d["y_m"], None, None, None, None, None] for d in devices]
    return rows
