"""How long does a resource policy take per round? Each FDMA band/power/frequency formula for N devices.

    python benchmarks/policy_speed.py --devices 1000 --repeat 50

Random devices (gains 1e-12..1e-9, 1e5..1e6 bits, ready at 0..1 s, 1e8..1e9 cycles at 1..2 GHz), 10 MHz, 23 dBm,
τ = 30 s. Prints the median and min host time per call of each formula (ms), with the CPU. Results:
benchmarks/RESULTS.md, "Resource policies".
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from edgesim.resources import formulas as F


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args(argv)
    n, rng = args.devices, np.random.default_rng(0)
    b, n0, pmax, tau, kappa = 1e7, 10 ** (-17.4) / 1e3, 0.2, 30.0, 1e-28
    gain, bits = rng.uniform(1e-12, 1e-9, n), rng.uniform(1e5, 1e6, n)
    ready, cycles, fmax = rng.uniform(0, 1, n), rng.uniform(1e8, 1e9, n), rng.uniform(1e9, 2e9, n)
    share = np.full(n, b / n)
    cases = {
        "min_max_time bands": lambda: F.min_max_time_bands_hz(b, ready, bits, gain, pmax, n0),
        "proportional bands": lambda: F.proportional_bands_hz(b, bits),
        "min_energy power": lambda: F.min_energy_power_w(bits, share, tau - ready, gain, pmax, n0),
        "min_energy frequency": lambda: F.min_energy_freq_hz(cycles, tau - 1.0, fmax / 10, fmax),
        "joint (frequency and power)": lambda: F.joint_split(cycles, bits, share, tau, gain, n0, kappa, fmax / 10,
                                                             fmax, pmax),
    }
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown")
    print(f"python {platform.python_version()}, numpy {np.__version__}; cpu: {cpu}; "
          f"N = {n}, {args.repeat} calls each, interleaved")
    times = {k: [] for k in cases}
    for f in cases.values():
        f()  # warm up (imports)
    for _ in range(args.repeat):
        for k, f in cases.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    for k, t in times.items():
        print(f"{k:<30} median {statistics.median(t) * 1e3:8.3f} ms   min {min(t) * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
