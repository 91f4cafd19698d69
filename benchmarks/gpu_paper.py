"""The papers' scale in one GPU window: paper-scale runs packed on one GPU under a total time guard.

``benchmarks/gpu_paper.sh`` calls this after printing the device and running ``pytest -m gpu``. Each job is
one ``edgesim run`` (the command line a user types) of one scenario and seed, its algorithms trained in
parallel processes (``--jobs``); jobs share the GPU and start in this priority order whenever their processes
fit into ``--slots`` (default: 1.25 × the CPU cores) and their GPU memory (the peaks an earlier window
measured, ``Job.gpu_gib``) into 90 % of the GPU's:

  b0    FixAvg at FedDure's paper layout first and alone (the window of 2026-11-27 saw it make no round in 359 s
        beside b's other methods), under ``--round-timeout-s``: a round past the limit stops it with one line
        naming the round's phase (training, evaluation, labelling, aggregation), which the summary shows; it
        evaluates as b did then (every round, every device, the labelling diagnostic on), and stops after 4
        rounds (its host time per round known);
  a     DoFed-SPP SUBSET and NORMAL at size_scale = 1 (the arena twins ``arena_dofed_*_paper.toml``), its five
        methods, seeds 0–2 — each run must finish: one is skipped when the longest finished run of its part
        would not fit before the guard;
  b     FedDure's Fashion-MNIST (IID, IID) at the paper's layout: FedAvg*, FixAvg, FedMatch, FedDure, seed 0;
  c     UM-pFSSL's Table 1 at alpha = 0.5 (100 devices, 10 a round, ResNet-9, E = 5): UM-pFSSL, then FixAvg,
        in one process (one at a time fits the GPU's memory), seed 0;
  d     labels at the server at the paper's scale (1,000 server labels, 100 × 550, 200 rounds, T/G = 20 s as
        at 60 rounds): supervised only, FedMatch, FedMix+FedFreq, seed 0;
  moon  1,000 devices, 100 a round, ``cnn``, Fashion-MNIST: FedAvg and FixAvg for at most 2 minutes, evaluated
        on a fixed 10 % of the devices without the labelling diagnostic (``eval_devices``, ``label_quality``: the
        exhaustive evaluation was most of a round's host time); ``moon_workers``: FedAvg the same way with its
        round's clients on 8 worker processes (``--client-workers 8``, the sequential executor) for at most 90 s;
  e     the labels-at-clients arena twin (12 methods) for at most 90 s: its host time per round.

b, c and e evaluate every 5th round and the last, without the labelling diagnostic (their tables report the
final accuracy); a and d evaluate every round (DoFed-SPP's plateau rule reads every round). c and e train five
clients a vectorised pass (``train.vmap_max_clients = 5``: the window's out-of-memory failures were ten
ResNet-9 clients a pass in each of several processes).

b–e run as many of their rounds as fit: the guard stops them (SIGTERM, which edgesim answers by keeping the rounds
so far in ``<run>.incomplete/``; its whole process group is killed 20 s later if it has not ended). A job with an
algorithm that has no row yet first gets SIGUSR1, so that its log shows every process's Python stacks. While the
jobs run, each ``rounds.csv`` row is time-stamped as it appears (host seconds per round, printed once three rounds
are in, with the extrapolation to all rounds), and ``nvidia-smi`` is sampled for each job's GPU memory and the
GPU's utilisation. ResNet-9 jobs (b, c, e) train in bfloat16 autocast (``train.precision``), the small-CNN ones in
float32 (they are host-bound). The summary: ``summary.json`` and ``summary.md`` in ``--out``.

``--dry-run`` shrinks every job to 2 rounds, a few devices and little data, one process per run, on whatever
device torch has (the CI test runs it on a CPU).

    python3 benchmarks/gpu_paper.py --out /tmp/gpu_paper --data-dir DIR --total-s 480 [--dry-run]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios"
BF16 = "train.precision='bfloat16'"
DOFED_ALGORITHMS = ("dofed_spp", "fedfomo", "fedbe", "fedavg", "local")
ARENA_CLIENTS = ("um_pfssl", "feddure", "fedmatch_lc", "fixavg", "fixprox", "fixbn", "fedavg_uda", "fedper",
                 "lg_fedavg", "pfedme", "fedavg_labeled", "fedavg_sl")
SPARSE_EVAL = ("run.eval_every=5", "run.label_quality=false")  # every 5th round and the last; no labelling diagnostic
SAMPLED_EVAL = ("run.eval_devices=0.1", "run.label_quality=false")  # a fixed 10 % of the devices, every round
STOP_GRACE_S = 20.0  # a stopped job's time to write its unfinished folder before it is killed
MIN_PARTIAL_S = 45.0  # a job that runs to the guard starts only with at least this much time left


@dataclass(frozen=True)
class Job:
    """One ``edgesim run``: ``scenario`` (a file of scenarios/) with ``algorithms``, ``seed`` and ``sets``."""

    name: str
    part: str
    scenario: str
    algorithms: tuple
    rounds: int
    seed: int = 0
    sets: tuple = ()
    must_finish: bool = False
    limit_s: Optional[float] = None
    procs: int = 0  # processes: one per algorithm (0), or 1 (the algorithms one after another)
    gpu_gib: float = 0.0  # the job's peak GPU memory as measured in an earlier window (0: small)
    workers: int = 0  # client workers per algorithm (--client-workers; 0: none)
    round_timeout_s: Optional[float] = None  # --round-timeout-s
    alone: bool = False  # starts on an idle machine, and nothing starts beside it
    enough_rounds: int = 0  # stopped once each algorithm has this many rounds (0: runs to its limit or the guard)

    @property
    def n_procs(self) -> int:
        """edgesim processes: one per algorithm, or ``procs``."""
        return self.procs or len(self.algorithms)

    @property
    def n_slots(self) -> int:
        """Process slots: each edgesim process with its client workers."""
        return self.n_procs * (1 + self.workers)


def paper_jobs() -> list[Job]:
    """The window's jobs in priority order (module docstring). ``gpu_gib``: the peaks of the H200 window of
    2026-11-27 (docs/use/gpu.md), where packing by processes alone filled the GPU's 140 GiB and four jobs failed:
    UM-pFSSL's layout held 77 GiB in one process, so c trains its two algorithms one after another (UM-pFSSL,
    the paper's method, first), five clients a vectorised pass (about half that memory, an 80 GB card too;
    c's figure is that estimate, not a measurement)."""
    jobs = [Job("b0_fixavg_feddure", "b", "feddure_fmnist_iid_iid.toml", ("fixavg",), 200, sets=(BF16,),
                limit_s=100.0, gpu_gib=15.0, round_timeout_s=60.0, alone=True, enough_rounds=4)]  # as b ran then
    jobs += [Job(f"a_{setting}_s{seed}", "a", f"arena_dofed_{setting}_paper.toml", DOFED_ALGORITHMS, 20, seed,
                 must_finish=True, gpu_gib=27.0)
             for setting in ("subset", "normal") for seed in (0, 1, 2)]
    jobs += [
        Job("b_feddure_iid_iid", "b", "feddure_fmnist_iid_iid.toml",
            ("fedavg_labeled", "fixavg", "fedmatch_lc", "feddure"), 200, sets=(BF16, *SPARSE_EVAL), gpu_gib=60.0),
        Job("c_um_pfssl_a0.5", "c", "um_pfssl_fmnist_paper.toml", ("um_pfssl", "fixavg"), 201,
            sets=(BF16, "data.alpha=0.5", "train.vmap_max_clients=5", *SPARSE_EVAL), procs=1, gpu_gib=45.0),
        Job("d_las_1000", "d", "las_fmnist_550.toml", ("server_only", "fedmatch", "fedmix"), 200,
            sets=("budget.rounds=200", "budget.total_time_s=4000"), gpu_gib=6.0),
        Job("moon_1000", "moon", "moonshot_fmnist_1000.toml", ("fedavg", "fixavg"), 200, sets=SAMPLED_EVAL,
            limit_s=120.0, gpu_gib=38.0),
        Job("moon_workers", "moon", "moonshot_fmnist_1000.toml", ("fedavg",), 200,
            sets=(*SAMPLED_EVAL, "train.executor='sequential'"), limit_s=90.0, gpu_gib=20.0, workers=8),
        Job("e_arena_clients", "e", "arena_labels_at_clients_paper.toml", ARENA_CLIENTS, 201,
            sets=(BF16, "train.vmap_max_clients=5", *SPARSE_EVAL), limit_s=90.0, gpu_gib=100.0),
    ]
    return jobs


# Dry run: 2 rounds, a few devices and little data, one process per run, one seed; the same code path otherwise.
_DRY_COMMON = ("budget.rounds=2", "system.cpu_freq_hz=1e9", "train.eval_batch_size=256")
_DRY = {
    "a": ("system.n_devices=5", "run.clients_per_round=2", "data.size_scale=0.025", "data.test_size=20",
          "algorithms.dofed_spp.max_b=2", "algorithms.dofed_spp.max_k=2", "algorithms.dofed_spp.warmup_rounds=1",
          "algorithms.fedfomo.n_download=2", "algorithms.fedbe.server_samples=50"),
    "b": ("system.n_devices=4", "run.clients_per_round=2", "train.model='cnn'", "data.train_pool_size=400",
          "data.test_size=50"),
    "c": ("system.n_devices=4", "run.clients_per_round=2", "train.model='cnn'", "data.train_pool_size=600",
          "workload.local_iterations=1", "algorithms.um_pfssl.helpers=2", "algorithms.um_pfssl.replace=1",
          "algorithms.um_pfssl.mc_passes=2", "algorithms.um_pfssl.warmup_epochs=1", "data.test_size=50"),
    "d": ("system.n_devices=4", "run.clients_per_round=2", "data.server_labeled=100", "data.train_pool_size=600",
          "data.test_size=50"),
    "moon": ("system.n_devices=8", "run.clients_per_round=4", "data.train_pool_size=600"),
    "e": ("system.n_devices=6", "run.clients_per_round=2", "train.model='cnn'", "data.train_pool_size=600",
          "data.test_size=20"),
}


# A dry job's algorithms where not all of the window's: e's twelve would take minutes here; DoFed-SPP's arena leaves
# out FedAvg and Local (every other part runs FedAvg's code; Local is a plain loop), b leaves out FixAvg (b0 runs it
# at the same layout).
_DRY_ALGORITHMS = {"e_arena_clients": ("fixavg", "fedavg_sl"), "a_subset_s0": ("dofed_spp", "fedfomo", "fedbe"),
                   "a_normal_s0": ("dofed_spp", "fedfomo", "fedbe"),
                   "b_feddure_iid_iid": ("fedavg_labeled", "fedmatch_lc", "feddure")}


def dry_jobs() -> list[Job]:
    """``paper_jobs`` shrunk for a CPU: seed 0 only, 2 rounds, one process a run (two client workers where the
    job has any), a 60 s limit each, some jobs' algorithms only (:data:`_DRY_ALGORITHMS`); bfloat16
    only where this CPU has bfloat16 arithmetic (elsewhere edgesim refuses it)."""
    from edgesim.learning.numerics import bfloat16_unsupported

    keep_bf16 = bfloat16_unsupported("cpu") is None
    out = []
    for j in paper_jobs():
        if j.seed != 0:
            continue
        sets = tuple("run.eval_every=2" if s.startswith("run.eval_every=") else s  # at most the run's 2 rounds
                     for s in j.sets if keep_bf16 or s != BF16) + _DRY_COMMON + _DRY[j.part]
        algorithms = _DRY_ALGORITHMS.get(j.name, j.algorithms)
        out.append(Job(j.name, j.part, j.scenario, algorithms, 2, 0, sets, j.must_finish,
                       60.0 if j.limit_s else None, procs=1, workers=min(j.workers, 2),
                       round_timeout_s=j.round_timeout_s, alone=j.alone, enough_rounds=min(j.enough_rounds, 2)))
    return out


def command(job: Job, out: Path, data_dir: Path) -> list[str]:
    """The ``edgesim run`` command line of ``job`` (written to the job's log, so it can be rerun by hand)."""
    cmd = [sys.executable, "-m", "edgesim.scenarios.cli", "run", str(SCENARIOS / job.scenario), "--out", str(out),
           "--seed", str(job.seed), "--data-dir", str(data_dir), "--jobs", str(job.n_procs), "--quiet",
           "--set", "run.algorithms=[" + ",".join(f'"{a}"' for a in job.algorithms) + "]",
           "--set", f"run.rounds={job.rounds}"]
    for s in job.sets:
        cmd += ["--set", s]
    if job.workers:
        cmd += ["--client-workers", str(job.workers)]
    if job.round_timeout_s:
        cmd += ["--round-timeout-s", f"{job.round_timeout_s:g}"]
    return cmd


def rounds_file(out: Path) -> Optional[Path]:
    """The run's ``rounds.csv``: the finished folder's, else the unfinished one's (``<out>.incomplete``)."""
    for p in (out / "rounds.csv", out.with_name(out.name + ".incomplete") / "rounds.csv"):
        if p.exists():
            return p
    return None


def read_rows(path: Optional[Path]) -> list[dict]:
    """Whole rows of a (possibly growing) ``rounds.csv``: up to its last newline."""
    if path is None:
        return []
    try:
        text = path.read_text()
    except OSError:
        return []
    text = text[: text.rfind("\n") + 1]
    return list(csv.DictReader(io.StringIO(text)))


def descendants(root: int) -> set[int]:
    """``root`` and every process below it (from /proc; empty where there is none)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    seen, stack = set(), [root]
    while stack:
        pid = stack.pop()
        if pid not in seen:
            seen.add(pid)
            stack += children.get(pid, [])
    return seen


def dump_stacks(root: int) -> None:
    """SIGUSR1 to ``root`` and its ``--jobs`` workers: each prints its threads' Python stacks into the job's log
    (edgesim.scenarios.signals.stack_dumps) and goes on. Not to multiprocessing's resource tracker, which has no
    such handler."""
    for pid in sorted(descendants(root)):
        try:
            if pid == root or b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGUSR1)
        except OSError:
            pass


def gpu_total_gib() -> Optional[float]:
    """The GPU's memory (GiB) by ``nvidia-smi``; None without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return float(out.splitlines()[0]) / 1024
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def gpu_sample() -> tuple[dict[int, float], Optional[float], Optional[float]]:
    """``nvidia-smi``: MiB per compute process, and the GPU's used MiB and utilisation (%); empty without it."""
    if shutil.which("nvidia-smi") is None:
        return {}, None, None
    try:
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=10).stdout
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,utilization.gpu", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}, None, None
    per_pid = {}
    for line in apps.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            try:
                per_pid[int(parts[0])] = float(parts[1])
            except ValueError:
                pass
    try:
        used, util = (float(x) for x in gpu.splitlines()[0].split(","))
    except (ValueError, IndexError):
        used, util = None, None
    return per_pid, used, util


@dataclass
class Running:
    """A started job: its process, when it started and must stop, and what was seen of it."""

    job: Job
    out: Path
    proc: subprocess.Popen
    log: object
    started: float
    stop_at: float
    stopping: float = 0.0
    why: str = ""  # what stopped it: "its limit" or "the guard"
    seen: dict = field(default_factory=dict)  # (algorithm, round) -> host seconds since the start
    peak_gpu_mib: Optional[float] = None  # None: no nvidia-smi
    announced: set = field(default_factory=set)
    sharing: list = field(default_factory=list)  # processes running (all jobs) at each poll


def fits(job: Job, free_procs: int, free_gib: float, busy: bool) -> bool:
    """Whether ``job`` may start now: on an idle machine (``busy`` False) any job; beside others, one that is not
    ``alone`` whose processes fit the free slots and whose known GPU peak fits the free memory (so a job larger
    than the slots or the memory budget starts only on an idle machine)."""
    if not busy:
        return True
    return not job.alone and job.n_slots <= free_procs and job.gpu_gib <= free_gib


def round_timeout_line(log: Path) -> Optional[str]:
    """The line edgesim printed when ``--round-timeout-s`` stopped the job (its round and phase), else None."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    return next((x.removeprefix("error: ") for x in lines if x.startswith("error: --round-timeout-s")), None)


def _note(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def watch(r: Running, now: float) -> None:
    """Time-stamp the job's new ``rounds.csv`` rows; print host s/round once an algorithm has three."""
    for row in read_rows(rounds_file(r.out)):
        key = (row["algorithm"], int(row["round"]))
        r.seen.setdefault(key, now - r.started)
    for alg in r.job.algorithms:
        times = sorted(t for (a, _), t in r.seen.items() if a == alg)
        if len(times) >= 3 and alg not in r.announced:
            r.announced.add(alg)
            per = per_round_s(times)
            _note(f"{r.job.name} {alg}: first row after {times[0]:.1f} s, then {per:.2f} host s/round → "
                  f"{r.job.rounds} rounds ≈ "
                  f"{times[0] + per * (r.job.rounds - 1):.0f} s")


def per_round_s(times: list[float]) -> float:
    """Mean host seconds a round from the first round's row to the last one's (the set-up before the first
    row excluded; the polling's granularity divided by the rounds between)."""
    return (times[-1] - times[0]) / (len(times) - 1) if len(times) >= 2 else math.nan


def summarise(r: Optional[Running], job: Job, status: str) -> list[dict]:
    """One line per algorithm: rounds reached, host s/round, accuracy, simulated time, GPU memory."""
    rows = read_rows(rounds_file(r.out)) if r else []
    lines = []
    for alg in job.algorithms:
        mine = [x for x in rows if x["algorithm"] == alg]
        acc = [float(x["accuracy"]) for x in mine if x.get("accuracy") not in (None, "")]
        times = sorted(t for (a, _), t in (r.seen.items() if r else ()) if a == alg)
        per = per_round_s(times)
        lines.append({
            "part": job.part, "job": job.name, "scenario": job.scenario, "seed": job.seed, "algorithm": alg,
            "status": status, "rounds": len(mine), "rounds_planned": job.rounds,
            "host_s_per_round": None if math.isnan(per) else round(per, 4),
            "host_s_first_row": round(times[0], 2) if times else None,
            "host_s_all_rounds_est": (None if math.isnan(per) or not times
                                      else round(times[0] + per * (job.rounds - 1), 1)),
            "accuracy_last": acc[-1] if acc else None,
            "accuracy_max": max(acc) if acc else None,
            "accuracy_last3": statistics.mean(acc[-3:]) if acc else None,
            "sim_time_s": float(mine[-1]["time_s"]) if mine else None,
            "job_peak_gpu_mib": r.peak_gpu_mib if r else None,
            "precision": "bfloat16" if BF16 in job.sets else "float32",
            "procs_sharing_mean": round(statistics.mean(r.sharing), 1) if r and r.sharing else None,
        })
    return lines


def schedule(jobs: list[Job], out: Path, data_dir: Path, total_s: float, slots: int, poll_s: float = 0.5,
             gpu_every_s: float = 2.0) -> dict:
    """Run ``jobs`` into ``out/runs`` under a guard of ``total_s`` seconds; the summary (also written to ``out``)."""
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    guard = t0 + total_s - STOP_GRACE_S  # every job is told to stop by then
    pending, running, results = list(jobs), [], []
    finished_s: dict[str, float] = {}  # part -> longest finished must-finish job (s)
    util: list[tuple[float, float, int]] = []  # (host s, GPU utilisation %, processes running)
    used_peak, last_gpu = 0.0, -math.inf
    gib = gpu_total_gib()
    budget_gib = 0.9 * gib if gib else math.inf  # the jobs' known peaks must fit in 90 % of the GPU
    while pending or running:
        now = time.monotonic()
        free = slots - sum(r.job.n_slots for r in running)
        free_gib = budget_gib - sum(r.job.gpu_gib for r in running)
        for job in list(pending):
            left = guard - now
            if job.must_finish and job.part in finished_s and finished_s[job.part] > left:
                pending.remove(job)
                why = f"skipped: its part's runs took {finished_s[job.part]:.0f} s, {left:.0f} s left"
                results.append((None, job, why))
                _note(f"{job.name}: skipped ({results[-1][2]})")
                continue
            if not job.must_finish and left < MIN_PARTIAL_S:
                pending.remove(job)
                results.append((None, job, f"skipped: {left:.0f} s left"))
                _note(f"{job.name}: skipped ({results[-1][2]})")
                continue
            if any(r.job.alone for r in running):
                break  # nothing starts beside a job that runs alone
            if not fits(job, free, free_gib, bool(running)):
                if job.must_finish or job.alone:
                    break  # it waits for room: nothing behind it jumps the queue
                continue
            run_out = runs / job.name
            log = open(runs / f"{job.name}.log", "w")
            cmd = command(job, run_out, data_dir)
            log.write(" ".join(cmd) + "\n")
            log.flush()
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
            stop_at = min(guard, now + job.limit_s) if job.limit_s else guard
            running.append(Running(job, run_out, proc, log, now, stop_at))
            pending.remove(job)
            free -= job.n_slots
            free_gib -= job.gpu_gib
            _note(f"{job.name}: started ({job.n_slots} processes, {len(running)} jobs running, "
                  f"{guard - now:.0f} s to the guard)")
        per_pid, used, u = gpu_sample() if now - last_gpu >= gpu_every_s else ({}, None, None)
        if used is not None:
            last_gpu = now
            used_peak = max(used_peak, used)
            util.append((now - t0, u, sum(r.job.n_slots for r in running)))
        n_procs = sum(r.job.n_slots for r in running)
        for r in list(running):
            r.sharing.append(n_procs)
            watch(r, now)
            if per_pid:
                mine = descendants(r.proc.pid)
                r.peak_gpu_mib = max(r.peak_gpu_mib or 0.0, sum(m for p, m in per_pid.items() if p in mine))
            code = r.proc.poll()
            if code is not None:
                r.log.close()
                running.remove(r)
                timed_out = round_timeout_line(runs / f"{r.job.name}.log") if code else None
                status = "finished" if code == 0 else (
                    f"stopped at {r.why} after {now - r.started:.0f} s" if r.stopping else
                    f"stopped by {timed_out}" if timed_out else f"failed (exit {code})")
                if code == 0 and r.job.must_finish:
                    finished_s[r.job.part] = max(finished_s.get(r.job.part, 0.0), now - r.started)
                results.append((r, r.job, status))
                _note(f"{r.job.name}: {status} ({now - r.started:.0f} s)")
            elif not r.stopping and 0 < r.job.enough_rounds < r.job.rounds and all(
                    sum(a == alg for (a, _) in r.seen) >= r.job.enough_rounds for alg in r.job.algorithms):
                r.stopping, r.why = now, f"its {r.job.enough_rounds} rounds"
                os.kill(r.proc.pid, signal.SIGTERM)
                _note(f"{r.job.name}: stopping after {r.why} ({now - r.started:.0f} s)")
            elif not r.stopping and now >= r.stop_at:
                r.stopping = now
                r.why = "the guard" if r.stop_at >= guard else "its limit"
                if any(not any(a == alg for (a, _) in r.seen) for alg in r.job.algorithms):
                    dump_stacks(r.proc.pid)  # an algorithm without a row: where is it? (its log says)
                    time.sleep(1.0)
                os.kill(r.proc.pid, signal.SIGTERM)  # edgesim stops its --jobs workers itself
                _note(f"{r.job.name}: stopping at {r.why} ({now - r.started:.0f} s)")
            elif r.stopping and now - r.stopping > STOP_GRACE_S:
                os.killpg(r.proc.pid, signal.SIGKILL)
        time.sleep(poll_s)
    order = {j.name: i for i, j in enumerate(jobs)}
    results.sort(key=lambda t: order[t[1].name])
    lines = [line for r, job, status in results for line in summarise(r, job, status)]
    busy = [x for x in util if x[2] > 0]
    summary = {
        "host_s": round(time.monotonic() - t0, 1), "total_s": total_s, "slots": slots, "gpu_total_gib": gib,
        "gpu_used_peak_mib": used_peak or None,
        "gpu_utilisation_mean_pct": round(statistics.mean(x[1] for x in busy), 1) if busy else None,
        "jobs": [asdict(j) for j in jobs], "lines": lines,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "summary.md").write_text(markdown(summary))
    return summary


def _fmt(v, spec: str = "") -> str:
    return "—" if v is None else format(v, spec)


def markdown(summary: dict) -> str:
    """The summary as a table, one line per algorithm of every job."""
    head = ("| job | algorithm | status | rounds | host s/round | est. all rounds s | acc. last | acc. max | "
            "sim. s | peak GPU MiB | precision | processes sharing |")
    out = [f"window {summary['host_s']} s of {summary['total_s']} s, {summary['slots']} process slots, GPU memory "
           f"peak {_fmt(summary['gpu_used_peak_mib'], '.0f')} MiB, mean utilisation "
           f"{_fmt(summary['gpu_utilisation_mean_pct'])} %", "", head, "|" + " --- |" * 12]
    for x in summary["lines"]:
        out.append(f"| {x['job']} | {x['algorithm']} | {x['status']} | {x['rounds']}/{x['rounds_planned']} | "
                   f"{_fmt(x['host_s_per_round'], '.3f')} | {_fmt(x['host_s_all_rounds_est'], '.0f')} | "
                   f"{_fmt(x['accuracy_last'], '.4f')} | {_fmt(x['accuracy_max'], '.4f')} | "
                   f"{_fmt(x['sim_time_s'], '.1f')} | {_fmt(x['job_peak_gpu_mib'], '.0f')} | {x['precision']} | "
                   f"{_fmt(x['procs_sharing_mean'])} |")
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="a new or empty folder: runs/, summary.json, summary.md")
    p.add_argument("--data-dir", type=Path, required=True, help="the folder holding fashion-mnist/")
    p.add_argument("--total-s", type=float, default=480.0, help="the guard: every job is stopped by then")
    p.add_argument("--slots", type=int, default=0, help="processes at once (default: 1.25 × the CPU cores)")
    p.add_argument("--dry-run", action="store_true", help="2 rounds, a few devices, one seed, one process a run")
    p.add_argument("--only", default="", help="parts (a,b,c,d,moon,e) or job names, comma-separated (default: all)")
    a = p.parse_args()
    if a.out.exists() and any(a.out.iterdir()):
        sys.exit(f"error: --out {a.out}: is not empty; give a new or empty folder (nothing was written)")
    if not (a.data_dir / "fashion-mnist").is_dir():
        sys.exit(f"error: --data-dir {a.data_dir}: holds no fashion-mnist/ folder; expected the folder holding it")
    jobs = dry_jobs() if a.dry_run else paper_jobs()
    if a.only:
        wanted = set(a.only.split(","))
        unknown = wanted - {j.part for j in jobs} - {j.name for j in jobs}
        if unknown:
            sys.exit(f"error: --only {a.only}: unknown part(s) or job(s) {sorted(unknown)}; expected some of "
                     f"a,b,c,d,moon,e or of {', '.join(j.name for j in jobs)}")
        jobs = [j for j in jobs if j.part in wanted or j.name in wanted]
    slots = a.slots or max(1, (os.cpu_count() or 1) * 5 // 4)
    summary = schedule(jobs, a.out, a.data_dir.resolve(), a.total_s, slots)
    print((a.out / "summary.md").read_text(), end="")
    failed = [x for x in summary["lines"] if x["status"].startswith("failed")]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
