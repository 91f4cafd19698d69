"""The round budget and the (B, K) decision of DoFed-SPP for a scenario, as ``edgesim plan`` shows it; and round 0
under the ``[resources]`` policies (:func:`first_round_allocation`).

Identical devices (the paper's §4.4 case): C1, C2, C3 of Ineq. (26) follow
directly. Heterogeneous devices (different CPU, power or channel): a
synchronous round waits for its slowest participant, so the plan is made for
the slowest one, conservatively: the largest training+SR time, the largest
per-model pseudo-labelling time and the slowest full-band uplink (the
smallest rate) — every (B, K) it calls feasible is feasible whichever devices
are chosen. The per-device breakdown is reported alongside.

Under ``fdma`` the K uploads share the band at the same time; Eq. (24) (K
sequential full-band uploads) is then an upper bound on the upload phase, so
the plan stays conservative.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from ._checks import non_negative, positive
from .budget import (
    FeasibilityConstants,
    examined_pairs,
    feasibility_constants,
    feasible_count,
    infeasibility_message,
)
from .cells import cell_bands_hz, device_bands_hz
from .channel import ChannelModel
from .compute import training_cycles
from .config import BudgetConfig, SystemConfig, WorkloadConfig
from .radio import shannon_rate_bps
from .resources import ResourcesConfig


def slowest_device_constants(
    round_budget_s: float,
    training_cycles: Sequence[float],
    sr_cycles: Sequence[float],
    pseudo_label_cycles_per_model: Sequence[float],
    cpu_freq_hz: Sequence[float],
    model_bits: float,
    uplink_rate_bps: Sequence[float],
) -> FeasibilityConstants:
    """C1, C2, C3 of Ineq. (26) for the slowest device, from per-device sequences (one entry per device).

    Each device's constants come from :func:`edgesim.budget.feasibility_constants`;
    the plan takes the smallest C1 (the largest training + SR time), the
    largest C2 (per-model pseudo-labelling time) and the largest C3 (the
    slowest full-band uplink). Identical devices give their common constants.
    """
    per = [training_cycles, sr_cycles, pseudo_label_cycles_per_model, cpu_freq_hz, uplink_rate_bps]
    n = len(cpu_freq_hz)
    if n == 0 or any(len(v) != n for v in per):
        raise ValueError(f"per-device sequences must be non-empty and of equal length (got {[len(v) for v in per]})")
    consts = [
        feasibility_constants(round_budget_s, t, s, p, f, model_bits, r)
        for t, s, p, f, r in zip(*per)
    ]
    return FeasibilityConstants(
        min(c.c1_s for c in consts), max(c.c2_s for c in consts), max(c.c3_s for c in consts)
    )


@dataclass(frozen=True)
class DevicePlan:
    """One device's per-round times with the scenario's workload (seconds) and uplink rate (bit/s)."""

    device: int
    cpu_freq_hz: float
    channel_gain: float
    uplink_rate_bps: float
    train_s: float
    target_train_s: float
    sr_s: float
    pseudo_label_per_model_s: float
    upload_s: float


@dataclass(frozen=True)
class Plan:
    """What ``edgesim plan`` reports (times in seconds, rates in bit/s)."""

    round_budget_s: float
    c1_s: float
    c2_s: float
    c3_s: float
    uplink_rate_bps: float
    model_bits: float
    n_devices: int
    heterogeneous: bool
    reference: str
    pairs: list
    feasible_count: int
    devices: list

    @property
    def feasible(self) -> bool:
        return bool(self.pairs)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["pairs"] = [list(p) for p in self.pairs]
        return d

    def infeasibility_message(self) -> str:
        return infeasibility_message(FeasibilityConstants(self.c1_s, self.c2_s, self.c3_s), self.round_budget_s)


def make_plan(
    system: SystemConfig, budget: BudgetConfig, workload: WorkloadConfig, model_bits: float, seed: int = 0,
    target_cycles: float = 0.0,
) -> Plan:
    """Per-device times and the (B, K) pairs of Ineq. (26) for round 0 of the scenario.

    ``target_cycles``: cycles each device spends a round on a second model
    besides its local training (DoFed-SPP's target model, Eq. 15, cycles); C1
    subtracts its time with the training's, as a DoFed-SPP round does.

    Vectorised over the devices (NumPy), so that a cell of
    :data:`edgesim.config.MAX_DEVICES` devices is planned in well under a second.
    """
    channel = ChannelModel(system, seed)
    gains = np.asarray(channel.gains(0), dtype=float)
    freqs = np.asarray(system.cpu_freqs_hz, dtype=float)
    band = float(system.bandwidth_hz) if system.n_cells == 1 else device_bands_hz(system, channel.serving_cell)
    rates = shannon_rate_bps(band, gains, np.asarray(system.tx_power_w, dtype=float), system.noise_psd_w_per_hz)
    if not np.all(rates > 0):
        raise ValueError(f"uplink rate of device {int(np.argmin(rates))} is {rates.min()!r} bit/s; expected > 0")
    if workload.varies:  # I_k C_k D_k per device (a list or a table drawn from the seed)
        from .config import iterations_per_device, workload_per_device

        c, d = workload_per_device(workload, system.n_devices, seed)
        train_cycles = iterations_per_device(workload, system.n_devices, seed) * c * d
    else:
        train_cycles = training_cycles(workload.local_iterations, workload.cycles_per_sample,
                                       workload.samples_per_device)
    positive("model_bits", model_bits)
    target_cycles = non_negative("target_cycles", target_cycles)
    sr_cycles = non_negative("sr_cycles", workload.sr_cycles)
    pl_cycles = non_negative("pseudo_label_cycles_per_model", workload.pseudo_label_cycles_per_model)
    columns = {
        "cpu_freq_hz": freqs, "channel_gain": gains, "uplink_rate_bps": rates, "train_s": train_cycles / freqs,
        "target_train_s": target_cycles / freqs, "sr_s": sr_cycles / freqs,
        "pseudo_label_per_model_s": pl_cycles / freqs, "upload_s": model_bits / rates,
    }
    lists = {k: v.tolist() for k, v in columns.items()}
    devices = [DevicePlan(n, *(lists[k][n] for k in columns)) for n in range(system.n_devices)]
    # The slowest device of Ineq. (26): the smallest C1, the largest C2 and C3.
    consts = FeasibilityConstants(
        float(budget.round_budget_s - ((train_cycles + target_cycles + sr_cycles) / freqs).max()),
        float((pl_cycles / freqs).max()),
        float((model_bits / rates).max()),
    )
    heterogeneous = bool(np.ptp(freqs) > 0 or np.ptp(rates) > 0)
    return Plan(
        round_budget_s=budget.round_budget_s,
        c1_s=consts.c1_s,
        c2_s=consts.c2_s,
        c3_s=consts.c3_s,
        uplink_rate_bps=float(rates.min()),
        model_bits=float(model_bits),
        n_devices=system.n_devices,
        heterogeneous=heterogeneous,
        reference="slowest device (slowest CPU, slowest uplink)" if heterogeneous else "identical devices",
        pairs=examined_pairs(consts, system.n_devices),
        feasible_count=feasible_count(consts, system.n_devices),
        devices=devices,
    )


def cell_table(system: SystemConfig, seed: int = 0) -> list[dict]:
    """Several cells, round 0 (``edgesim plan``; the run folder's ``cells.csv``): per cell its base station
    (``x_m``, ``y_m``), its band (``band_low_hz``, ``band_hz``), the ``devices`` it serves, and over them the mean
    SNR and the mean SINR with one transmitter of every other cell on air, in dB (the mean of ``10 log10``;
    :func:`edgesim.interference.one_per_cell_sinr`; ``None`` for a cell without devices)."""
    from .interference import one_per_cell_sinr

    channel = ChannelModel(system, seed)
    serving = np.asarray(channel.serving_cell, dtype=np.int64)
    bands = cell_bands_hz(system)
    snr, sinr = one_per_cell_sinr(channel.cell_gains(0), serving, np.asarray(system.tx_power_w), bands,
                                  system.noise_psd_w_per_hz)
    rows = []
    for c, (site, (low, width)) in enumerate(zip(channel.sites_m.tolist(), bands.tolist())):
        mine = serving == c
        rows.append({"cell": c, "x_m": site[0], "y_m": site[1], "band_low_hz": low, "band_hz": width,
                     "devices": int(mine.sum()),
                     "mean_snr_db": float(np.mean(10 * np.log10(snr[mine]))) if mine.any() else None,
                     "mean_sinr_db": float(np.mean(10 * np.log10(sinr[mine]))) if mine.any() else None})
    return rows


def device_layout(system: SystemConfig, seed: int = 0) -> list[dict]:
    """Each device at placement: ``device``, ``cell`` (its serving cell), ``x_m``, ``y_m`` (the run folder's
    ``cells.csv``)."""
    channel = ChannelModel(system, seed)
    return [{"device": d, "cell": c, "x_m": x, "y_m": y}
            for d, (c, (x, y)) in enumerate(zip(channel.serving_cell, channel.positions_m.tolist()))]


def first_round_allocation(system: SystemConfig, budget: BudgetConfig, workload: WorkloadConfig,
                           resources: ResourcesConfig, clients_per_round: int, seed: int = 0,
                           cycles: float | None = None, access_options=None) -> list[dict]:
    """Round 0 run on the clock with the physics-only backend (:class:`edgesim.curve.ParametricBackend`: K devices,
    each ``I·C·D`` cycles, or ``cycles``, and ``model_bits`` up): per device its band (Hz), power (W), CPU frequency
    (Hz), compute and upload times (s) and energy (J), as the engine ran them (one dict per device, by id).

    Which devices take part follows the scheduling policy; under ``"random"`` they are the physics-only backend's
    draw, not a learning algorithm's (each draws from its own stream). Under an asynchronous rule, the updates
    of the first aggregation (``concurrency``: ``clients_per_round``; a device may appear twice, by update).
    """

    from .async_rules import is_asynchronous
    from .curve import ParametricBackend

    backend = ParametricBackend(system.n_devices, clients_per_round, workload, seed)
    if cycles is not None:
        backend.cycles = float(cycles)
    if is_asynchronous(budget.round_mode):
        from .asynchrony import AsyncConfig, AsyncSimulation

        sim = AsyncSimulation(system, budget, backend, AsyncConfig().resolved(clients_per_round), seed,
                              record_events=False, resources=resources, access_options=access_options)
    else:
        from .engine import Simulation

        sim = Simulation(system, budget, backend, seed, record_events=False, resources=resources,
                         access_options=access_options)
    record = sim.run_round()
    keys = ("device", "channel_gain", "bandwidth_hz", "tx_power_w", "cpu_freq_hz", "compute_s", "upload_airtime_s",
            "idle_s", "radio_energy_j", "compute_energy_j", "arrived")
    return [{k: getattr(row, k) for k in keys} for row in record.devices]
