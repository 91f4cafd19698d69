"""One device's job on the clock — download, compute, upload — and what it cost; used by both engines.

A job (:class:`DeviceJob`) is one device's part of a synchronous round (:mod:`edgesim.engine`) or one
asynchronous update (:mod:`edgesim.asynchrony`). :func:`run_job` runs it as a SimPy process step:

1. **download** ``work.download_bits`` from the BS broadcast (:class:`edgesim.links.Downlink`);
2. **compute** ``cycles`` at ``cpu_freq_hz``: ``compute_s = C / f`` seconds (Eqs. (7), (23));
3. **upload** ``work.upload_bits`` (when > 0) on the shared uplink (TDMA or FDMA, :mod:`edgesim.links`), or on
   its own band ``band_hz`` when a bandwidth policy gave it one.

An interrupt (a deadline, the device going offline) ends the job where it is: the time spent in the phase it
was in counts, a download's received bits and a computation's executed cycles up to then, an upload's bits on
air as wasted (``upload_dropped``). :func:`job_costs` turns a finished or interrupted job into its row's
seconds, bits and joules (radio ``p · t``, :func:`edgesim.radio.radio_energy_j`; compute ``κ f² C``,
:func:`edgesim.compute.compute_energy_j`).
"""

from __future__ import annotations

from typing import Any, Iterator, NamedTuple, Optional

import simpy

from .backend import DeviceWork
from .links import Downlink, Transfer
from .records import Event, EventLog


class DeviceJob:
    """Book-keeping of one device's job (inputs checked by the engine that makes it).

    Only what differs between jobs is set per object; the starting values of the progress fields are class
    attributes (immutable), so 10,000 jobs a round cost 10,000 small objects and no more. ``cpu_freq_hz``,
    ``tx_power_w`` and ``band_hz`` may be set by the ``[resources]`` policies before the job runs (then
    :meth:`set_cpu_freq`).
    """

    __slots__ = ("work", "device", "gain", "rate_bps", "cpu_freq_hz", "tx_power_w", "cycles", "compute_s",
                 "__dict__")  # what every job has; the progress fields below live in __dict__ once set

    phase = "start"
    phase_start_s = 0.0
    download_s = 0.0
    bits_down = 0.0
    compute_done_s = 0.0
    cycles_done = 0.0
    transfer: Optional[Transfer] = None
    band_hz: Optional[float] = None  # its own uplink band (a band policy's), else the link shares
    planned_gain: Optional[float] = None  # imperfect CSI: the gain the round was planned on (None: the true one)
    planned_rate_bps: Optional[float] = None  # and rate_bps on it (None: rate_bps)
    compute_end_s: Optional[float] = None
    upload_end_s: Optional[float] = None
    arrived = False  # its upload arrived
    dropped = False  # interrupted before it was done
    drop_reason = ""
    finished = False

    def __init__(self, work: DeviceWork, gain: float, rate_bps: float, cpu_freq_hz: float, tx_power_w: float,
                 cycles: float):
        self.work = work
        self.device = work.device
        self.gain = gain
        self.rate_bps = rate_bps
        self.cpu_freq_hz = cpu_freq_hz
        self.tx_power_w = tx_power_w
        self.cycles = cycles
        self.compute_s = cycles / cpu_freq_hz  # compute_time_s, its inputs checked

    def set_cpu_freq(self, cpu_freq_hz: float) -> None:
        """Compute at ``cpu_freq_hz`` (Hz): ``compute_s = C / f``."""
        self.cpu_freq_hz = cpu_freq_hz
        self.compute_s = self.cycles / cpu_freq_hz


def run_job(env: simpy.Environment, job: DeviceJob, index: int, log: EventLog, downlink: Downlink, uplink,
            banded: Any = None) -> Iterator[simpy.Event]:
    """Process step: ``yield from run_job(env, job, index, log, downlink, uplink, banded)``.

    Runs the job's phases (module docstring), its events tagged ``index`` (the round, or the model version an
    update started from) in ``log``; on :class:`simpy.Interrupt` records what was done by then, emits
    ``upload_dropped`` and sets ``job.dropped`` (the interrupt is answered, not re-raised). ``uplink``: the
    shared link (:func:`edgesim.links.make_uplink`, a registered access scheme); ``banded``: the link of jobs with
    their own ``band_hz`` (the scheme's declared ``banded`` one, :func:`edgesim.access.make_banded`).
    """
    work, d = job.work, job.device
    events = log.events
    try:
        if work.download_bits > 0:
            job.phase, job.phase_start_s = "download", env.now
            log.count += 1
            if log.record:
                events.append(Event(env.now, index, d, "download_start", float(work.download_bits)))
            yield from downlink.receive(env, d, work.download_bits)
            job.download_s = env.now - job.phase_start_s
            job.bits_down = float(work.download_bits)
            log.count += 1
            if log.record:
                events.append(Event(env.now, index, d, "download_end", job.bits_down))
        now = env.now
        job.phase, job.phase_start_s = "compute", now
        log.count += 1
        if log.record:
            events.append(Event(now, index, d, "compute_start", 0.0))
        yield env.timeout(job.compute_s)
        now = env.now
        job.compute_done_s, job.cycles_done, job.compute_end_s = job.compute_s, job.cycles, now
        log.count += 1
        if log.record:
            events.append(Event(now, index, d, "compute_end", 0.0))
        if work.upload_bits > 0:
            job.phase = "upload"
            if not job.gain > 0:
                raise ValueError(f"channel_gain of device {d}(={job.gain}) must be > 0 to upload")

            def on_air(transfer: Transfer) -> None:
                job.transfer = transfer
                log.count += 1
                if log.record:
                    events.append(Event(env.now, index, d, "upload_start", transfer.bits))

            if job.band_hz is None:
                transfer = yield from uplink.transmit(env, d, float(work.upload_bits), job.gain, job.tx_power_w,
                                                      on_air, checked=True)
            else:
                transfer = yield from banded.transmit(env, d, float(work.upload_bits), job.gain, job.tx_power_w,
                                                      on_air, bandwidth_hz=job.band_hz)
            now = env.now
            job.upload_end_s, job.arrived = now, True
            log.count += 1
            if log.record:
                events.append(Event(now, index, d, "upload_end", transfer.bits))
        job.phase = "done"
    except simpy.Interrupt as interrupt:
        if not job.drop_reason and getattr(interrupt, "reason", None):  # the link refused it (AirComp's threshold)
            job.drop_reason = interrupt.reason
        elapsed_s = env.now - job.phase_start_s
        if job.phase == "download":
            job.download_s = elapsed_s
            job.bits_down = downlink.received_bits(float(work.download_bits), elapsed_s)
        elif job.phase == "compute":
            job.compute_done_s = elapsed_s
            job.cycles_done = min(job.cycles, elapsed_s * job.cpu_freq_hz)
        job.dropped = True
        log.emit(env.now, index, d, "upload_dropped", job.transfer.sent_bits if job.transfer is not None else 0.0)


class JobCosts(NamedTuple):
    """What a job did and spent: seconds, bits and joules (the columns every row has)."""

    download_s: float
    compute_s: float
    upload_airtime_s: float
    bits_up: float
    bits_down: float
    wasted_bits: float
    radio_energy_j: float
    compute_energy_j: float
    bandwidth_hz: float


def job_costs(job: DeviceJob, kappa: float) -> JobCosts:
    """The job's :class:`JobCosts`: ``bits_up`` counts an upload that arrived, ``wasted_bits`` what an interrupted
    upload had sent; radio energy ``p · t_air`` (J, :func:`edgesim.radio.radio_energy_j`) and compute energy
    ``κ · f² · C_done`` (J, :func:`edgesim.compute.compute_energy_j`, Eq. (7)) — the same float operations, their
    inputs checked once by the engine. ``bandwidth_hz``: the band its upload used (0 if it never went on air)."""
    transfer = job.transfer
    airtime_s = transfer.airtime_s if transfer is not None else 0.0
    return JobCosts(
        job.download_s, job.compute_done_s, airtime_s,
        float(job.work.upload_bits) if job.arrived else 0.0,
        job.bits_down,
        transfer.sent_bits if (job.dropped and transfer is not None) else 0.0,
        (transfer.tx_power_w if transfer is not None else job.tx_power_w) * airtime_s,  # the power it transmitted at
        kappa * job.cpu_freq_hz ** 2 * job.cycles_done,
        transfer.band_hz if transfer is not None else 0.0,
    )
