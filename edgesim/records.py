"""What both clocks record: the trace's events, the per-device rows and the round (aggregation) records.

The synchronous engine (:mod:`edgesim.engine`) writes one :class:`RoundRecord` per round with a
:class:`DeviceRound` per participant; the asynchronous one (:mod:`edgesim.asynchrony`) one per aggregation with an
:class:`UpdateRow` per update. Both write :class:`Event` s through one :class:`EventLog` and keep their run totals
in one :class:`Totals`. The costs inside a row come from :func:`edgesim.device_job.job_costs`.
"""

from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple, Sequence

from ._checks import non_negative

EVENT_KINDS = (
    "round_start",
    "download_start",
    "download_end",
    "compute_start",
    "compute_end",
    "upload_start",
    "upload_end",
    "upload_dropped",
    "server_compute_start",
    "server_compute_end",
    "round_end",
    "battery_empty",
    "straggler_excluded",
    "backhaul_start",
    "backhaul_end",
    "cloud_aggregate",
)


class Event(NamedTuple):
    """One step of the trace (an immutable named tuple). ``device`` is -1 for round-level events.

    ``bits``: the bits to download/upload for ``*_start``, the bits delivered
    for ``*_end``, the wasted bits (sent on air before the deadline) for
    ``upload_dropped``, else 0. ``upload_dropped`` marks any device that is
    dropped at the deadline, whatever phase it was in; ``upload_start`` is the
    moment the device goes on air (after its TDMA queueing).
    """

    time_s: float
    round_index: int
    device: int
    kind: str
    bits: float = 0.0


class DeviceRound(NamedTuple):
    """One participating device in one round (seconds, bits, joules); an immutable named tuple.

    ``rate_bps`` is the device's full-band Shannon rate with this round's gain
    (Eq. (8)); under FDMA it actually gets less while it shares the band.
    ``upload_airtime_s`` is the time it was on air (queueing excluded);
    ``idle_s = duration − download_s − compute_s − upload_airtime_s``.
    ``bits_up`` counts an upload that arrived; ``wasted_bits`` what a dropped
    upload had sent. ``drop_reason``: ``""`` (not dropped), ``"deadline"`` or
    ``"offline"`` (its online period ended mid-round, :mod:`edgesim.availability`).
    The round's resources: ``bandwidth_hz`` the band its upload
    used (Hz: TDMA the whole band, FDMA its own band under a band policy, else its
    mean processor-sharing share over its airtime; 0 if it never went on air),
    ``tx_power_w`` and ``cpu_freq_hz`` (W, Hz); ``nan`` in rows of a checkpoint
    written before they were recorded. ``resource_blocks``: the resource blocks
    its upload used under a scheme that counts them (OFDMA), else 0.
    ``planned_channel_gain`` and ``planned_rate_bps``: the gain the base station
    planned the round on (``system.csi``: the true one under perfect CSI, an
    estimate or the previous round's otherwise) and ``rate_bps``'s full-band rate
    at its power on that gain — what the policies expected against what the
    device got (``channel_gain``, ``rate_bps``); ``nan`` in rows of a checkpoint
    written before they were recorded.
    """

    round_index: int
    device: int
    channel_gain: float
    rate_bps: float
    download_s: float
    compute_s: float
    upload_airtime_s: float
    idle_s: float
    bits_up: float
    bits_down: float
    wasted_bits: float
    radio_energy_j: float
    compute_energy_j: float
    arrived: bool
    dropped: bool
    drop_reason: str = ""
    bandwidth_hz: float = math.nan
    tx_power_w: float = math.nan
    cpu_freq_hz: float = math.nan
    resource_blocks: int = 0
    planned_channel_gain: float = math.nan
    planned_rate_bps: float = math.nan

UPDATE_FIELDS = ("update", "version", "staleness", "start_time_s", "end_time_s", "drop_reason")
COST_FIELDS = DeviceRound._fields[:DeviceRound._fields.index("drop_reason")]  # round_index .. dropped

RESOURCE_FIELDS = ("bandwidth_hz", "tx_power_w", "cpu_freq_hz")  # DeviceRound's last three

UpdateRow = namedtuple("UpdateRow", (*COST_FIELDS, *UPDATE_FIELDS, *RESOURCE_FIELDS),
                       defaults=(math.nan,) * len(RESOURCE_FIELDS))
UpdateRow.__doc__ = """One asynchronous update (seconds, bits, joules), recorded in the aggregation at or after its end.

The :class:`DeviceRound` columns up to ``dropped`` (:data:`COST_FIELDS`; ``round_index`` is the aggregation's
index, ``idle_s`` the time queued for the uplink), then :data:`UPDATE_FIELDS`: ``update`` (its index in start
order), ``version`` (the model it started from), ``staleness`` (``t − version`` when applied; -1 if lost),
``start_time_s``/``end_time_s`` (s) and ``drop_reason`` (``""`` or ``"offline"``); then the update's resources
as a :class:`DeviceRound`'s (:data:`RESOURCE_FIELDS`: its own band or 0 Hz, power W, CPU frequency Hz, as the
``[resources]`` policies planned it; ``nan`` in rows of a checkpoint written before they were recorded).
"""


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """One round: when, who arrived (completion order) and who was dropped (by id), bits, energy, metrics.

    ``cum_*`` are totals since the start of the run, this round included;
    ``cum_energy_j`` is radio plus compute (of the devices). ``info`` is the plan's ``info``;
    ``metrics`` the backend's answer, valid at ``end_time_s``.
    ``server_before_s``/``server_after_s``: the base station's compute before
    the broadcast and after the uploads (seconds; 0 without a server phase).
    ``level`` and ``cell``: under ``round_mode = "hierarchical"`` (:mod:`edgesim.hierarchy`) ``"edge"`` and the
    cell whose edge server aggregated, or ``"cloud"`` and -1; every other round ``""`` and -1.
    """

    round_index: int
    start_time_s: float
    end_time_s: float
    arrived: tuple[int, ...]
    dropped: tuple[int, ...]
    bits_up: float
    bits_down: float
    wasted_bits: float
    radio_energy_j: float
    compute_energy_j: float
    cum_bits_up: float
    cum_bits_down: float
    cum_wasted_bits: float
    cum_energy_j: float
    metrics: Mapping[str, float]
    info: Mapping[str, float]
    devices: tuple[Any, ...]
    server_before_s: float = 0.0
    server_after_s: float = 0.0
    level: str = ""
    cell: int = -1

    @property
    def duration_s(self) -> float:
        return self.end_time_s - self.start_time_s

    @property
    def server_s(self) -> float:
        """The base station's compute time in this round (seconds)."""
        return self.server_before_s + self.server_after_s


class EventLog:
    """The trace of a clock: every event counted in ``count``; kept in ``events`` while ``record`` is true.

    ``events`` is one list for the log's life (jobs in flight append to it): :meth:`clear` empties it in place.
    """

    __slots__ = ("events", "count", "record")

    def __init__(self, record: bool = True, count: int = 0):
        self.events: list[Event] = []
        self.count = count
        self.record = bool(record)

    def emit(self, time_s: float, index: int, device: int, kind: str, bits: float = 0.0) -> None:
        self.count += 1
        if self.record:
            self.events.append(Event(time_s, index, device, kind, float(bits)))

    def clear(self) -> None:
        """Forget the kept events (not their count)."""
        self.events.clear()


TOTAL_FIELDS = ("bits_up", "bits_down", "wasted_bits", "radio_energy_j", "compute_energy_j")


def totals_of(rows: Sequence[Any]) -> dict[str, float]:
    """The rows' sums of :data:`TOTAL_FIELDS` (bits, joules), added in the rows' order from 0."""
    bits_up = bits_down = wasted = radio = compute = 0
    for row in rows:
        bits_up += row.bits_up
        bits_down += row.bits_down
        wasted += row.wasted_bits
        radio += row.radio_energy_j
        compute += row.compute_energy_j
    return {"bits_up": bits_up, "bits_down": bits_down, "wasted_bits": wasted, "radio_energy_j": radio,
            "compute_energy_j": compute}


class Totals:
    """A run's running totals since its start: bits up, down and wasted, energy (radio + compute, J)."""

    __slots__ = ("bits_up", "bits_down", "wasted_bits", "energy_j")

    def __init__(self, bits_up: float = 0.0, bits_down: float = 0.0, wasted_bits: float = 0.0, energy_j: float = 0.0):
        self.bits_up, self.bits_down, self.wasted_bits, self.energy_j = bits_up, bits_down, wasted_bits, energy_j

    def record(self, round_index: int, start_s: float, end_s: float, arrived: tuple[int, ...],
               dropped: tuple[int, ...], rows: Sequence[Any], totals: Mapping[str, float],
               metrics: Mapping[str, Any], info: Mapping[str, Any], **fields: Any) -> RoundRecord:
        """Add ``totals`` (:func:`totals_of` the rows) to the run's and return the round's :class:`RoundRecord`
        (``fields``: its other fields, the server's seconds, a hierarchical round's level and cell)."""
        self.bits_up += totals["bits_up"]
        self.bits_down += totals["bits_down"]
        self.wasted_bits += totals["wasted_bits"]
        self.energy_j += totals["radio_energy_j"] + totals["compute_energy_j"]
        return RoundRecord(
            round_index=round_index, start_time_s=start_s, end_time_s=end_s, arrived=arrived, dropped=dropped,
            **totals, cum_bits_up=self.bits_up, cum_bits_down=self.bits_down, cum_wasted_bits=self.wasted_bits,
            cum_energy_j=self.energy_j, metrics={str(k): float(v) for k, v in metrics.items()},
            info={str(k): float(v) for k, v in info.items()}, devices=tuple(rows), **fields)

    def state_dict(self) -> dict[str, float]:
        return {"cum_bits_up": self.bits_up, "cum_bits_down": self.bits_down, "cum_wasted_bits": self.wasted_bits,
                "cum_energy_j": self.energy_j}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "Totals":
        return cls(non_negative("cum_bits_up", state["cum_bits_up"]),
                   non_negative("cum_bits_down", state["cum_bits_down"]),
                   non_negative("cum_wasted_bits", state["cum_wasted_bits"]),
                   non_negative("cum_energy_j", state["cum_energy_j"]))
