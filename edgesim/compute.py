"""Device computation: time (DoFed-SPP Eqs. (7), (23)) and energy.

Cycles are CPU cycles, frequencies in cycles/s (Hz), times in seconds,
energy in joules. ``kappa`` is the effective switched capacitance
(J·s²/cycle³), so ``E = kappa * f**2 * cycles``.
"""

from __future__ import annotations

from ._checks import count, non_negative, positive


def compute_time_s(cycles: float, cpu_freq_hz: float) -> float:
    """Seconds to execute ``cycles`` CPU cycles at ``cpu_freq_hz`` cycles/s."""
    return non_negative("cycles", cycles) / positive("cpu_freq_hz", cpu_freq_hz)


def training_cycles(local_iterations: float, cycles_per_sample: float, samples: float) -> float:
    """Cycles of local training: ``I * C * D`` (the numerator of Eq. (7))."""
    return (
        non_negative("local_iterations", local_iterations)
        * non_negative("cycles_per_sample", cycles_per_sample)
        * non_negative("samples", samples)
    )


def training_time_s(
    local_iterations: float, cycles_per_sample: float, samples: float, cpu_freq_hz: float
) -> float:
    """Eq. (7): ``t_l = I * C * D / f`` in seconds."""
    return compute_time_s(training_cycles(local_iterations, cycles_per_sample, samples), cpu_freq_hz)


def dofed_round_cycles(
    local_iterations: float,
    cycles_per_sample: float,
    samples: float,
    sr_cycles: float,
    n_pseudo_label_models: int,
    pseudo_label_cycles_per_model: float,
) -> dict[str, float]:
    """Cycles per phase of one DoFed-SPP round on one device (the terms of Eq. (23)).

    Returns ``{"train": I*C_tra*D, "sr": C_SR, "pseudo_label": B*C_pse}``.
    """
    b = count("n_pseudo_label_models", n_pseudo_label_models)
    return {
        "train": training_cycles(local_iterations, cycles_per_sample, samples),
        "sr": non_negative("sr_cycles", sr_cycles),
        "pseudo_label": b * non_negative("pseudo_label_cycles_per_model", pseudo_label_cycles_per_model),
    }


def dofed_compute_time_s(
    local_iterations: float,
    cycles_per_sample: float,
    samples: float,
    sr_cycles: float,
    n_pseudo_label_models: int,
    pseudo_label_cycles_per_model: float,
    cpu_freq_hz: float,
) -> float:
    """Eq. (23): ``t_l = I*C_tra*D/f + C_SR/f + B*C_pse/f`` in seconds."""
    cycles = dofed_round_cycles(
        local_iterations, cycles_per_sample, samples, sr_cycles, n_pseudo_label_models, pseudo_label_cycles_per_model
    )
    return compute_time_s(sum(cycles.values()), cpu_freq_hz)


def compute_energy_j(kappa: float, cpu_freq_hz: float, cycles: float) -> float:
    """Dynamic CPU energy ``E = kappa * f**2 * cycles`` in joules."""
    return non_negative("kappa", kappa) * positive("cpu_freq_hz", cpu_freq_hz) ** 2 * non_negative("cycles", cycles)
