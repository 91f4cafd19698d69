"""Threads and jobs: the default ``edgesim run`` on an idle and on a loaded machine, and ``run --jobs``.

One interleaved set (so that whatever else the machine does hits every
variant alike): for each repetition, every variant once, in turn —

- ``threads=1``, ``threads=2``, ``threads=auto`` (``--threads``), each on an
  idle machine and on a *loaded* one: ``cores − 1`` busy single-threaded
  processes (a Python spin loop each) started before the run and stopped
  after it, what a laptop with a browser or a second job has;
- ``--jobs 1`` and ``--jobs 2`` (one thread each), idle, and whether the two
  run folders are byte-identical.

Each command is the whole ``edgesim run`` process (``python -m
edgesim.scenarios.cli run ...``, start-up included), timed with ``time.perf_counter``
around ``subprocess.run``. The scenario is the bundled default, shortened with
``--rounds`` (``--set run.rounds=N``) so that the slow variants finish;
``--scenario FILE`` times another scenario instead (e.g. one with more algorithms).

    python benchmarks/threads_jobs.py --rounds 10 --repeats 3
    python benchmarks/threads_jobs.py --skip-threads --scenario scenarios/fmnist_baselines.toml --rounds 3

Prints one line per measurement and a table of medians with ratios to the
idle ``threads=1`` run; results in benchmarks/RESULTS.md, "Threads and jobs".
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def busy(n: int) -> list[subprocess.Popen]:
    """``n`` processes that each spin one core until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def timed_run(out: Path, rounds: int, threads: str, jobs: int, load: int, scenario: str | None = None) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    cmd = [sys.executable, "-m", "edgesim.scenarios.cli", "run", *([scenario] if scenario else []), "--out", str(out), "-q",
           "--set", f"run.rounds={rounds}", "--threads", threads, "--jobs", str(jobs)]
    hogs = busy(load)
    try:
        time.sleep(0.2 if load else 0.0)  # the hogs are spinning before the run starts
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def same_folder(a: Path, b: Path) -> bool:
    """The same files with the same bytes, run.json aside (its times and command line differ by design)."""
    names_a = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file() and p.name != "run.json")
    names_b = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file() and p.name != "run.json")
    return names_a == names_b and all(filecmp.cmp(a / n, b / n, shallow=False) for n in names_a)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-threads", action="store_true", help="only --jobs")
    parser.add_argument("--skip-jobs", action="store_true", help="only threads")
    parser.add_argument("--scenario", help="a scenario file instead of the bundled default")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    variants = []
    if not args.skip_threads:
        variants += [(f"threads={t}, {'loaded' if load else 'idle'}", t, 1, load)
                     for t in ("1", "2", "auto") for load in (0, cores - 1)]
    if not args.skip_jobs:
        variants += [(f"jobs={j}, idle", "1", j, 0) for j in (1, 2)]
    print(f"python {sys.version.split()[0]}, {cores} cores; {args.scenario or 'default scenario'}, "
          f"run.rounds={args.rounds}; loaded = {cores - 1} busy process(es)")
    times: dict[str, list[float]] = {v[0]: [] for v in variants}
    identical = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for label, threads, jobs, load in variants:
                out = Path(tmp) / f"{label.replace(' ', '').replace(',', '_')}_{rep}"
                seconds = timed_run(out, args.rounds, threads, jobs, load, args.scenario)
                times[label].append(seconds)
                print(f"rep {rep} {label:<22} {seconds:8.2f} s", flush=True)
            if not args.skip_jobs:
                a, b = (Path(tmp) / f"jobs={j}_idle_{rep}" for j in (1, 2))
                identical.append(same_folder(a, b))
            for p in Path(tmp).iterdir():
                shutil.rmtree(p)
    base = statistics.median(times[variants[0][0]])
    print(f"\n| variant | median s ({args.repeats} runs) | ratio to {variants[0][0]} |\n| --- | --- | --- |")
    for label in times:
        m = statistics.median(times[label])
        print(f"| {label} | {m:.2f} | {m / base:.2f} |")
    if not args.skip_threads:
        for t in ("1", "2", "auto"):
            loaded, idle = (statistics.median(times[f"threads={t}, {w}"]) for w in ("loaded", "idle"))
            print(f"threads={t}: loaded / idle = {loaded / idle:.2f}")
    if not args.skip_jobs:
        j1, j2 = (statistics.median(times[f"jobs={j}, idle"]) for j in (1, 2))
        print(f"jobs=2 speed-up over jobs=1: {j1 / j2:.2f}x; run folders byte-identical: {all(identical)}")


if __name__ == "__main__":
    main()
