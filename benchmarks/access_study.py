"""The access-scheme study of docs/studies/access_study.md, in four parts, then its tables and figures.

1. ``fedavg``: FedAvg on the bundled digits on the arena's cell with a 4.5 MHz band (``access_study.toml``), under
   FDMA, OFDMA (25 blocks of 180 kHz), NOMA (clusters of 2) and AirComp (64 sub-channels) at 23, 10, 0, -5, -10,
   -15 and -20 dBm, and at -10 dBm with a truncation threshold of -100 dB; 3 seeds each.
2. ``fixavg``: FixAvg (FedAvg with FixMatch local training, 40 rounds) on the uplink-bound cell (``access_uplink.toml``:
   the same cell and band, the model's own compute and a fast broadcast) under FDMA, OFDMA, NOMA and AirComp at 23 dBm;
   3 seeds each; ``fedavg_uplink``: FedAvg there (30 rounds), the same arms.
3. ``physics``: the uplink-bound cell with 40 devices, physics-only (the clock alone): the round latency and the
   longest airtime against the number K of devices a round, K = 2 ... 40, under the four schemes.
4. the report: per learning part a table (paired with FDMA by seed) and an energy-versus-time figure; the noise
   table of AirComp (the aggregate's noise against the final accuracy) and its figure; the latency table and figure.

    python benchmarks/access_study.py --out sweeps/access_study            # runs what is missing, then reports
    python benchmarks/access_study.py --out sweeps/access_study --report   # the tables and figures only

Per arm: time and device energy (compute + radio, ``cum_energy_j``) to each threshold by the project's one crossing
rule (``edgesim.results.metrics.crossing``, the rule of ``summary.json`` and ``edgesim report``): at the end of the
first round from which the mean device accuracy stays at or above the threshold for the run's k evaluated rounds
(``[run] sustain_rounds``, default 3) (mean over seeds ± the 95 % Student-t half-width; "(m/n)" when only m seeds
reach it), the final accuracy (the last round's), the mean round duration, and each arm's time and energy to the last
threshold and final accuracy minus FDMA's, paired by seed. The learning runs go ``--jobs`` at a time (default 2), each
an ``edgesim run`` with one torch thread under ``nice -n 10``; their wall and CPU seconds go to ``host_times.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from edgesim.results.metrics import crossing, sustain_rounds
from edgesim.results.reading import load_run, read_csv_rows

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "access_study.toml"
UPLINK = HERE / "access_uplink.toml"


def aircomp(dbm: float, *extra: str) -> list[str]:
    return ["system.access=aircomp", "access.subcarriers=64", f"system.tx_power_dbm={dbm:g}", *extra]


SCHEMES = {
    "fdma": ["system.access=fdma"],
    "ofdma": ["system.access=ofdma", "access.resource_blocks=25", "access.rb_bandwidth_hz=180e3"],
    "noma": ["system.access=noma", "access.cluster_size=2"],
}
ARMS = {**SCHEMES, **{f"aircomp_{d}dbm": aircomp(d) for d in (23, 10, 0)}}
NOISE_ARMS = {**{f"aircomp_{d}dbm".replace("-", "m"): aircomp(d) for d in (-5, -10, -15, -20)},
              "aircomp_m10dbm_thr-100db": aircomp(-10, "access.gain_threshold_db=-100")}
SSL_ARMS = {**SCHEMES, "aircomp_23dbm": aircomp(23)}
SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Part:
    """One learning part: its scenario, arms (name → ``--set`` values), extra ``--set`` values and thresholds."""

    scenario: Path
    arms: dict
    sets: tuple
    thresholds: tuple
    folder: str  # the runs' sub-folder of --out ("" : --out itself, as the first version of the study wrote them)
    figure: str


PARTS = {
    "fedavg": Part(SCENARIO, {**ARMS, **NOISE_ARMS}, (), (0.6, 0.8), "", "access_study.png"),
    "fedavg_uplink": Part(UPLINK, SSL_ARMS, ('run.algorithms=["fedavg"]', "budget.rounds=30"), (0.6, 0.8),
                          "fedavg_uplink", "access_study_fedavg_uplink.png"),
    "fixavg": Part(UPLINK, SSL_ARMS, ("budget.rounds=40",), (0.5, 0.6), "fixavg", "access_study_fixavg.png"),
}
K_SWEEP = (2, 5, 10, 15, 20, 25, 30, 40)
PHYSICS_ROUNDS = 10
PHYSICS_SCHEMES = {"fdma": ("fdma", {}), "noma": ("noma", {"cluster_size": 2}),
                   "ofdma": ("ofdma", {"resource_blocks": 25, "rb_bandwidth_hz": 180e3}),
                   "aircomp": ("aircomp", {"subcarriers": 64})}
CNN_BITS = 1696064  # the digits CNN's 53,002 float32 parameters (what model_bits = "auto" resolves to)
CNN_INIT_RMS = 0.0385  # the root mean square of its 53,002 initial parameters (build_model("cnn", (1, 8, 8), 10))


def run_folder(out: Path, part: Part, arm: str, seed: int) -> Path:
    return out / part.folder / f"{arm},seed={seed}"


def run_all(out: Path, parts: list[str], jobs: int) -> None:
    """Every missing run of ``parts``, ``jobs`` at a time; wall and CPU seconds appended to ``host_times.csv``."""
    todo = []
    for name in parts:
        part = PARTS[name]
        for arm, sets in part.arms.items():
            for seed in SEEDS:
                folder = run_folder(out, part, arm, seed)
                if (folder / "rounds.csv").exists():
                    continue
                args = ["nice", "-n", "10", sys.executable, "-m", "edgesim.scenarios.cli", "run", str(part.scenario),
                        "--out", str(folder), "-q", "--overwrite", "--set", f"seed={seed}"]
                for s in (*part.sets, *sets):
                    args += ["--set", s]
                todo.append((name, arm, seed, args))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out.mkdir(parents=True, exist_ok=True)
    times = out / "host_times.csv"
    new = not times.exists()
    with open(times, "a", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        if new:
            w.writerow(["part", "arm", "seed", "wall_s", "cpu_s"])
        running: dict[int, tuple] = {}
        while todo or running:
            while todo and len(running) < jobs:
                name, arm, seed, args = todo.pop(0)
                p = subprocess.Popen(args, env=env)
                running[p.pid] = (name, arm, seed, time.perf_counter(), p)
            pid, status, usage = os.wait4(-1, 0)
            if pid not in running:
                continue
            name, arm, seed, start, p = running.pop(pid)
            p.returncode = os.waitstatus_to_exitcode(status)
            if p.returncode and not diverged(run_folder(out, PARTS[name], arm, seed)):
                raise SystemExit(f"{name} {arm} seed {seed}: exit status {p.returncode}")
            wall, cpu = time.perf_counter() - start, usage.ru_utime + usage.ru_stime
            w.writerow([name, arm, seed, f"{wall:.1f}", f"{cpu:.1f}"])
            f.flush()
            print(f"{name} {arm} seed {seed}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)


def diverged(folder: Path) -> str:
    """The run's divergence message (``summary.json``'s ``diverged``: training stopped at a non-finite loss; its
    rounds until then are in ``rounds.csv``), or ``""``."""
    path = folder / "summary.json"
    if not path.exists():
        return ""
    return "; ".join(str(a["diverged"]) for a in json.loads(path.read_text())["algorithms"].values()
                     if a.get("diverged"))


@dataclass(frozen=True)
class Seed:
    """One finished run of an arm: its algorithm's ``rounds.csv`` columns (arrays, as ``edgesim.results.reading``
    reads them: a diverged run's rounds before it diverged) and the run's k of the crossing rule."""

    cols: dict
    sustain: int

    @classmethod
    def read(cls, folder: Path) -> "Seed":
        run = load_run(folder)
        if len(run.series) != 1:
            raise SystemExit(f"{folder / 'rounds.csv'}: algorithms {', '.join(run.series)}; expected one")
        return cls(next(iter(run.series.values())), sustain_rounds(run.config))

    def to(self, threshold: float, what: str):
        """``what`` (``"time_s"``, simulated seconds, or ``"energy_j"``, cumulative device joules) at the end of the
        first round from which the accuracy stays ``>= threshold`` for k evaluated rounds (``crossing``: the rule of
        ``summary.json`` and ``edgesim report``); None if never."""
        c = crossing(self.cols, threshold, self.sustain)
        return None if c is None else c[what]

    @property
    def final(self) -> float:
        """The last round's accuracy."""
        return float(self.cols["accuracy"][-1])


def mean_ci(values: list[float]) -> str:
    from scipy import stats

    m = statistics.fmean(values)
    if len(values) < 2:
        return f"{m:.3g}"
    h = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return f"{m:.3g} ± {h:.2g}"


def cell(values: list, n: int) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return f"— (0/{n})"
    return mean_ci(got) + ("" if len(got) == n else f" ({len(got)}/{n})")


def load(out: Path, part: Part) -> dict:
    """{arm: {seed: Seed}} of the finished runs."""
    runs = {}
    for arm in part.arms:
        seeds = {s: Seed.read(run_folder(out, part, arm, s)) for s in SEEDS
                 if (run_folder(out, part, arm, s) / "rounds.csv").exists()}
        if seeds:
            runs[arm] = seeds
    return runs


def paired(mine: dict, base: dict, value) -> list:
    """``value(seed)`` of each seed minus FDMA's of the same seed (None where either is None)."""
    out = []
    for s, r in mine.items():
        a, b = value(r), value(base[s]) if s in base else None
        out.append(None if a is None or b is None else a - b)
    return out


def table(runs: dict, thresholds: tuple) -> str:
    last = thresholds[-1]
    head = ["arm", *[f"time to {t:g} (s)" for t in thresholds], *[f"energy to {t:g} (J)" for t in thresholds],
            "final accuracy", "round (s)", f"Δ time to {last:g} (s)", f"Δ energy to {last:g} (J)", "Δ final accuracy"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = runs.get("fdma", {})
    for arm, seeds in runs.items():
        n = len(seeds)
        times = [cell([r.to(t, "time_s") for r in seeds.values()], n) for t in thresholds]
        energy = [cell([r.to(t, "energy_j") for r in seeds.values()], n) for t in thresholds]
        dur = cell([statistics.fmean(r.cols["duration_s"]) for r in seeds.values()], n)
        deltas = ["—"] * 3 if arm == "fdma" else [
            cell(paired(seeds, base, lambda r: r.to(last, "time_s")), n),
            cell(paired(seeds, base, lambda r: r.to(last, "energy_j")), n),
            cell(paired(seeds, base, lambda r: r.final), n)]
        lines.append("| " + " | ".join([arm, *times, *energy, cell([r.final for r in seeds.values()], n), dur,
                                        *deltas]) + " |")
    return "\n".join(lines)


def plt_():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def energy_time_figure(runs: dict, threshold: float, path: Path, title: str) -> None:
    """One point per arm and seed that reached ``threshold``: its time and device energy to it."""
    plt = plt_()
    fig, ax = plt.subplots(figsize=(6, 4))
    markers = "osD^v<>pPX*h"
    for i, (arm, seeds) in enumerate(runs.items()):
        pts = [(r.to(threshold, "time_s"), r.to(threshold, "energy_j")) for r in seeds.values()]
        pts = [p for p in pts if None not in p]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=arm, marker=markers[i % len(markers)])
    ax.set_xlabel(f"simulated time to accuracy {threshold:g} (s)")
    ax.set_ylabel(f"device energy to accuracy {threshold:g} (J)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def noise_sigma(folder: Path) -> list[float]:
    """Per round of an AirComp run: the standard deviation of the channel noise on each averaged parameter,
    ``σ = √(N0 b / η) / K`` (b = B / S the sub-channel, η = min over the K devices that transmitted of p_k g_k,
    read back from ``devices.csv``'s ``tx_power_w`` × ``channel_gain``)."""
    with open(folder / "config.toml", "rb") as f:
        config = tomllib.load(f)
    n0_w_per_hz = 10 ** (config["system"]["noise_psd_dbm_per_hz"] / 10) / 1000
    band_hz = config["system"]["bandwidth_hz"] / config["access"]["subcarriers"]
    eta: dict[int, list[float]] = {}
    for r in read_csv_rows(folder / "devices.csv")[1]:
        if r["arrived"] == "True":
            eta.setdefault(int(r["round"]), []).append(float(r["tx_power_w"]) * float(r["channel_gain"]))
    return [math.sqrt(n0_w_per_hz * band_hz / min(v)) / len(v) for _, v in sorted(eta.items())]


def noise_report(out: Path, runs: dict, figures: Path) -> str:
    """AirComp's arms: the noise σ on an averaged parameter (median over rounds and seeds), the aggregate's SNR
    against the CNN's initial parameters (``CNN_INIT_RMS² / σ²``), the devices a round that transmitted, the final
    accuracy and its paired difference with FDMA."""
    part = PARTS["fedavg"]
    head = ["arm", "power (dBm)", "σ per averaged parameter (median)", "aggregate SNR (dB)", "devices a round",
            "final accuracy", "Δ final accuracy vs FDMA (paired)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    points = []
    base = runs.get("fdma", {})
    for arm, seeds in runs.items():
        if not arm.startswith("aircomp"):
            continue
        sigmas = [x for s in seeds for x in noise_sigma(run_folder(out, part, arm, s))]
        sigma = statistics.median(sigmas)
        k = statistics.fmean(x for r in seeds.values() for x in r.cols["n_arrived"])
        dbm = next(v.split("=")[1] for v in part.arms[arm] if v.startswith("system.tx_power_dbm"))
        finals = [r.final for r in seeds.values()]
        d = paired(seeds, base, lambda r: r.final)
        lines.append(f"| {arm} | {dbm} | {sigma:.3g} | {20 * math.log10(CNN_INIT_RMS / sigma):.1f} | {k:.1f} | "
                     f"{cell(finals, len(finals))} | {cell(d, len(d))} |")
        points.append((arm, sigma, finals))
    if points:
        plt = plt_()
        fig, ax = plt.subplots(figsize=(6, 4))
        for arm, sigma, finals in points:
            ax.scatter([sigma] * len(finals), finals, marker="D" if "thr" in arm else "o",
                       label=arm if "thr" in arm else None, color="C1" if "thr" in arm else "C0")
        if base:
            fd = [r.final for r in base.values()]
            ax.axhspan(min(fd), max(fd), color="0.85", label="FDMA (noiseless), min–max over seeds")
        ax.set_xscale("log")
        ax.set_xlabel("noise σ on each averaged parameter (median over rounds)")
        ax.set_ylabel("final accuracy (15 rounds)")
        ax.axvline(CNN_INIT_RMS, color="0.5", ls=":", label="RMS of the CNN's initial parameters")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(figures / "access_study_aircomp_noise.png", dpi=120)
        plt.close(fig)
    return "\n".join(lines)


def physics_rounds(scheme: tuple, k: int, seed: int) -> list[tuple]:
    """``PHYSICS_ROUNDS`` rounds of the uplink-bound cell with 40 devices, K = ``k`` a round, physics-only:
    (round duration, longest upload airtime, longest compute) of each, seconds."""
    import edgesim
    from edgesim.curve import ParametricBackend
    from edgesim.engine import Simulation

    with open(UPLINK, "rb") as f:
        raw = tomllib.load(f)
    for table_name in ("data", "train"):
        raw.pop(table_name)
    raw["seed"] = seed
    raw["system"].update(n_devices=40, cpu_freq_hz=raw["system"]["cpu_freq_hz"] * 2, access=scheme[0])
    raw["access"] = scheme[1]
    raw["run"] = {"backend": "parametric", "clients_per_round": k}
    raw["workload"]["model_bits"] = CNN_BITS
    raw["parametric"] = {"download_bits": CNN_BITS}
    sc = edgesim.load_scenario(raw)
    p = sc.parametric
    backend = ParametricBackend(sc.system.n_devices, k, sc.workload, sc.seed, a0=p.a0, a_max=p.a_max, rate=p.rate,
                                download_bits=p.download_bits)
    sim = Simulation(sc.system, sc.budget, backend, seed=sc.seed, record_events=False, resources=sc.resources,
                     access_options=sc.access)
    out = []
    for _ in range(PHYSICS_ROUNDS):
        r = sim.run_round()
        out.append((r.duration_s, max(d.upload_airtime_s for d in r.devices), max(d.compute_s for d in r.devices)))
    return out


def physics(out: Path) -> None:
    """The K sweep: ``latency_vs_k.csv`` (one row per scheme and K: the mean over seeds and rounds, or the reason
    it is refused)."""
    from edgesim import ConfigError

    start = time.perf_counter()
    rows = []
    for name, scheme in PHYSICS_SCHEMES.items():
        for k in K_SWEEP:
            try:
                rs = [x for s in SEEDS for x in physics_rounds(scheme, k, s)]
            except ConfigError as e:
                rows.append({"scheme": name, "k": k, "round_s": "", "airtime_s": "", "compute_s": "",
                             "refused": str(e).split(": ", 1)[-1]})
                continue
            dur, air, comp = (statistics.fmean(c) for c in zip(*rs))
            rows.append({"scheme": name, "k": k, "round_s": f"{dur:.6g}", "airtime_s": f"{air:.6g}",
                         "compute_s": f"{comp:.6g}", "refused": ""})
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "latency_vs_k.csv", "w", newline="") as f:
        w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"physics: {len(rows)} (scheme, K) points, {time.perf_counter() - start:.1f} s host time", flush=True)


def same_latency_k(curve: list[tuple[int, float]], latency_s: float):
    """The K at which a latency curve (K ascending, latency ascending) reaches ``latency_s``, linearly between
    its points (None outside)."""
    for (k0, l0), (k1, l1) in zip(curve, curve[1:]):
        if l0 <= latency_s <= l1:
            return k0 + (k1 - k0) * (latency_s - l0) / (l1 - l0) if l1 > l0 else k0
    return None


def physics_report(out: Path, figures: Path) -> str:
    path = out / "latency_vs_k.csv"
    if not path.exists():
        return ""
    rows = read_csv_rows(path)[1]
    schemes = list(dict.fromkeys(r["scheme"] for r in rows))
    ks = sorted({int(r["k"]) for r in rows})

    def value(scheme, k, column):
        r = next(r for r in rows if r["scheme"] == scheme and int(r["k"]) == k)
        return float(r[column]) if r[column] else None

    head = ["K", *[f"{s} round (s)" for s in schemes], *[f"{s} airtime (s)" for s in schemes]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in ks:
        cells = [value(s, k, c) for c in ("round_s", "airtime_s") for s in schemes]
        lines.append("| " + " | ".join([str(k), *("refused" if v is None else f"{v:.4g}" for v in cells)]) + " |")
    fdma = [(k, value("fdma", k, "round_s")) for k in ks]
    noma = [(k, value("noma", k, "round_s")) for k in ks]
    lines += ["", "| FDMA's K | FDMA's round (s) | NOMA's K at that round time | NOMA's gain |", "|---|---|---|---|"]
    for k, lat in fdma:
        nk = same_latency_k(noma, lat)
        if nk is not None and k > 2:
            lines.append(f"| {k} | {lat:.4g} | {nk:.1f} | {100 * (nk / k - 1):+.0f} % |")
    refused: dict[str, list[dict]] = {}
    for r in rows:
        if r["refused"]:
            refused.setdefault(r["scheme"], []).append(r)
    for s, mine in refused.items():
        lines.append(f"\n{s} refused at K = {', '.join(r['k'] for r in mine)} (at K = {mine[0]['k']}: "
                     f"{mine[0]['refused']})")
    plt = plt_()
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for i, s in enumerate(schemes):
        pts = [(k, value(s, k, "round_s"), value(s, k, "airtime_s")) for k in ks if value(s, k, "round_s")]
        a.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=s, color=f"C{i}")
        b.plot([p[0] for p in pts], [p[2] for p in pts], "o-", label=s, color=f"C{i}")
    a.set_ylabel("round latency (s, mean over 3 seeds x 10 rounds)")
    b.set_ylabel("longest upload airtime of a round (s)")
    for ax in (a, b):
        ax.set_xlabel("devices a round K (40 in the cell)")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(figures / "access_study_latency_vs_k.png", dpi=120)
    plt.close(fig)
    return "\n".join(lines)


def host_report(out: Path) -> str:
    path = out / "host_times.csv"
    if not path.exists():
        return ""
    rows = read_csv_rows(path)[1]
    lines = []
    for name in dict.fromkeys(r["part"] for r in rows):
        mine = [r for r in rows if r["part"] == name]
        wall = [float(r["wall_s"]) for r in mine]
        cpu = [float(r["cpu_s"]) for r in mine]
        lines.append(f"{name}: {len(mine)} runs, {min(wall):.0f}-{max(wall):.0f} s wall and {min(cpu):.1f}-"
                     f"{max(cpu):.1f} s CPU each, {sum(cpu) / 60:.1f} CPU-minutes in all")
    return "\n".join(lines)


def report(out: Path, figures: Path) -> str:
    figures.mkdir(parents=True, exist_ok=True)
    sections = []
    for name, part in PARTS.items():
        runs = load(out, part)
        if not runs:
            continue
        sections += [f"## {name} ({part.scenario.name})", "", table(runs, part.thresholds), ""]
        for arm, seeds in runs.items():
            for seed in seeds:
                why = diverged(run_folder(out, part, arm, seed))
                if why:  # its final accuracy above is its last round's before the divergence
                    sections.append(f"- {arm} seed {seed} diverged: {why.split(': ', 1)[-1].split(';')[0]}")
        sections.append("")
        shown = {a: r for a, r in runs.items() if a in ARMS or a in SSL_ARMS}
        energy_time_figure(shown, part.thresholds[-1], figures / part.figure, f"{name}, {part.scenario.name}")
        if name == "fedavg":
            sections += ["## AirComp's noise (fedavg)", "", noise_report(out, runs, figures), ""]
    sections += ["## latency against K (physics-only)", "", physics_report(out, figures), "",
                 "## host times", "", host_report(out)]
    return "\n".join(sections)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--figures", type=Path, default=Path("docs/studies/figures"))
    parser.add_argument("--parts", default="physics," + ",".join(PARTS), help="comma-separated: physics, "
                        + ", ".join(PARTS))
    parser.add_argument("--jobs", type=int, default=2, help="learning runs at once")
    parser.add_argument("--report", action="store_true", help="only the tables and the figures")
    args = parser.parse_args()
    parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in parts if p != "physics" and p not in PARTS]
    if unknown:
        parser.error(f"--parts: {unknown[0]!r}: expected physics, {', '.join(PARTS)}")
    if not args.report:
        if "physics" in parts:
            physics(args.out)
        run_all(args.out, [p for p in parts if p in PARTS], args.jobs)
    print(report(args.out, args.figures))


if __name__ == "__main__":
    main()
