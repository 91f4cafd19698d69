"""Round 0 of a scenario under its ``[resources]`` policies, as ``edgesim plan`` prints it."""

from __future__ import annotations

from ..config import BudgetConfig, SystemConfig, WorkloadConfig
from .config import ResourcesConfig


def first_round_allocation(system: SystemConfig, budget: BudgetConfig, workload: WorkloadConfig,
                           resources: ResourcesConfig, clients_per_round: int, seed: int = 0,
                           cycles: float | None = None) -> list[dict]:
    """Round 0 run on the clock with the physics-only backend (:class:`edgesim.curve.ParametricBackend`: K devices,
    each ``I·C·D`` cycles, or ``cycles``, and ``model_bits`` up): per device its band (Hz), power (W), CPU frequency
    (Hz), compute and upload times (s) and energy (J), as the engine ran them (one dict per device, by id).

    Which devices take part follows the scheduling policy; under ``"random"`` they are the physics-only backend's
    draw, not a learning algorithm's (each draws from its own stream).
    """

    from ..curve import ParametricBackend
    from ..engine import Simulation

    backend = ParametricBackend(system.n_devices, clients_per_round, workload, seed)
    if cycles is not None:
        backend.cycles = float(cycles)
    record = Simulation(system, budget, backend, seed, record_events=False, resources=resources).run_round()
    keys = ("device", "channel_gain", "bandwidth_hz", "tx_power_w", "cpu_freq_hz", "compute_s", "upload_airtime_s",
            "idle_s", "radio_energy_j", "compute_energy_j", "arrived")
    return [{k: getattr(row, k) for k in keys} for row in record.devices]
