"""Issue 49.9(a): device energy against the round's completion time τ on Yang et al.'s cell, physics-only.

Yang, Chen, Saad, Hong, Shikh-Bahaei, "Energy efficient federated learning over wireless communication networks",
IEEE TWC 2021, Sec. VI, as recalled (the paper is not on this machine; these values are assumed): N = 50 devices in
a 500 m cell (path loss 128.1 + 37.6 log10 d[km] dB, no fading), B = 20 MHz, N0 = −174 dBm/Hz, p_max = 10 dBm,
f_max = 2 GHz (no DVFS floor: cpu_freq_min_hz = 1 kHz), κ = 1e-28, C_k ~ U[1, 3]·1e4 cycles/sample,
D_k = 500 samples, one local iteration, s = 28.1 kbit.
Every device takes part (K = N). One round per point, τ from 1.05 T* to 20 T* (T*: the least last finish at full
power and frequency, the min-max bands); the five configurations of the issue. Prints a Markdown table and writes
the figure.

    python benchmarks/yang_cell_energy.py [--out docs/figures/yang_cell_energy_vs_tau.png] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from edgesim.backend import DeviceWork, RoundPlan
from edgesim.config import BudgetConfig, SystemConfig, WorkloadConfig
from edgesim.curve import ParametricBackend
from edgesim.engine import Simulation
from edgesim.resources import ResourcesConfig

N, B_HZ, BITS = 50, 20e6, 28.1e3
FACTORS = (1.05, 1.2, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0)
CONFIGS = {
    "min_energy": dict(bandwidth="min_energy", power="min_energy", cpu_freq="joint"),
    "equal_static + joint": dict(bandwidth="equal_static", power="min_energy", cpu_freq="joint"),
    "equal (PS) + joint": dict(bandwidth="equal", power="min_energy", cpu_freq="joint"),
    "min_max_time + joint": dict(bandwidth="min_max_time", power="min_energy", cpu_freq="joint"),
    "max / fixed": dict(bandwidth="equal", power="fixed", cpu_freq="max"),
}


class YangBackend(ParametricBackend):
    """The physics-only backend with per-device cycles C_k D_k (every device each round)."""

    def __init__(self, cycles):
        super().__init__(N, N, WorkloadConfig(local_iterations=1, cycles_per_sample=2e4, samples_per_device=500,
                                              model_bits=BITS), seed=0)
        self.per_device = np.asarray(cycles, dtype=float)

    def plan_round(self, view):
        work = tuple(DeviceWork(d, {"train": float(self.per_device[d])}, BITS, 0.0) for d in range(N))
        return RoundPlan(work, {"K": float(N)})

    def expected_work(self):
        return tuple(self.per_device.tolist()), (BITS,) * N


def run(cycles, resources: dict, tau_s: float, seed: int):
    system = SystemConfig(n_devices=N, bandwidth_hz=B_HZ, tx_power_dbm=10.0, cpu_freq_hz=2e9, kappa=1e-28,
                          access="fdma", cell_radius_m=500.0, min_distance_m=10.0)
    budget = BudgetConfig(total_time_s=tau_s, rounds=1)
    # no DVFS floor (the paper's f ≥ 0; edgesim's least allowed floor, 1 kHz)
    sim = Simulation(system, budget, YangBackend(cycles), seed=seed,
                     resources=ResourcesConfig(cpu_freq_min_hz=1e3, **resources))
    rec = sim.run_round()
    return rec.radio_energy_j + rec.compute_energy_j, rec.duration_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/figures/yang_cell_energy_vs_tau.png")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cycles = np.random.default_rng(args.seed).uniform(1e4, 3e4, N) * 500
    start = time.time()
    _, t_star = run(cycles, dict(bandwidth="min_max_time"), 1e6, args.seed)
    energy = {name: [] for name in CONFIGS}
    late = {name: [] for name in CONFIGS}
    for f in FACTORS:
        for name, res in CONFIGS.items():
            e, d = run(cycles, res, f * t_star, args.seed)
            energy[name].append(e)
            late[name].append(d > f * t_star * (1 + 1e-9))
    host = time.time() - start
    print(f"T* = {t_star * 1e3:.3f} ms; host time {host:.0f} s\n")
    print("| τ / T* | " + " | ".join(CONFIGS) + " | min_energy vs equal_static |")
    print("|---" * (len(CONFIGS) + 2) + "|")
    for i, f in enumerate(FACTORS):
        cells = [f"{energy[n][i] * 1e3:.4g}{' (late)' if late[n][i] else ''}" for n in CONFIGS]
        saving = 1 - energy["min_energy"][i] / energy["equal_static + joint"][i]
        note = "n/a (equal_static misses τ)" if late["equal_static + joint"][i] else f"−{saving * 100:.1f} %"
        print(f"| {f:g} | " + " | ".join(cells) + f" | {note} |")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name in CONFIGS:
        ax.plot(FACTORS, np.asarray(energy[name]) * 1e3, marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("round completion time τ / T*")
    ax.set_ylabel("device energy of the round (mJ)")
    ax.set_title(f"Yang et al.'s cell (assumed values), N = {N}, T* = {t_star * 1e3:.2f} ms")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)


if __name__ == "__main__":
    main()
