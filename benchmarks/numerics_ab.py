"""This tree against another checkout, interleaved: host time of a scenario's first rounds per method, and the metrics.

Two worker processes stay alive side by side, one importing ``edgesim`` from this tree, the other from
``--base`` (a checkout of the code to compare with, e.g. ``git worktree add --detach /tmp/base main``), each with
the scenario's contexts built once per numerics variant (data loading is not timed). For every method, repetition
and side (``SIDE:MEMORY_FORMAT/PRECISION``, e.g. ``base:contiguous/float32``, ``new:channels_last/float32``), the
driver asks one worker at a time to run ``--rounds`` rounds of the method's own clock from round 0 exactly as
``edgesim run`` does (``Simulation.run_round``), the first side shifting every repetition (ABAB: a busy host slows
both alike). Recorded per call: the thread's CPU time (one torch thread runs every op in the calling thread: the
work done, whatever else the host runs) and the wall time, summed over the rounds, and the rounds' records.
Each worker keeps freed memory in the process as the ``edgesim`` command does (``edgesim.learning.malloc``).

Output: per method the medians and each side's ratio to the first (median of the paired per-repetition ratios),
the sum over methods, and whether every side's round records (accuracies, losses, clock) equal those of the first
side of the same numerics (which they should, if a change is exact), else the first side's. A single arena round
per method is long on a loaded machine; the sum of round-0 times of all methods is what extrapolates a full run
(the same rounds of each side are timed).

    EDGESIM_DATA=../shared/data .venv/bin/python benchmarks/numerics_ab.py scenarios/arena_labels_at_clients.toml \\
        --base /tmp/base --sides base:channels_last/float32 new:channels_last/float32 --reps 3 --rounds 1
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import pickle
import statistics
import subprocess
import sys
import time
from pathlib import Path

FLOORS = {"edgesim": "edgesim", "edgesim.learning": "learning", "edgesim.scenarios": "scenarios",
          "edgesim.plots": "plots"}


class _TreeFinder:
    """Import ``edgesim`` and its three floors from one checkout (as setup.py's ``package_dir`` maps them)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, name, path=None, target=None):
        if name not in FLOORS:
            return None
        folder = self.root / FLOORS[name]
        return importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])


def _worker(tree: str, scenario: str, overrides: list[str], variants: list[str]) -> None:
    sys.meta_path.insert(0, _TreeFinder(Path(tree).resolve()))
    import torch

    from edgesim.learning.malloc import keep_freed_memory

    keep_freed_memory()  # as the edgesim command does at start-up
    from edgesim.engine import Simulation
    from edgesim.scenarios.algorithm_run import make_backends
    from edgesim.scenarios.schema import load_scenario

    torch.set_num_threads(1)
    built = {}
    for v in variants:
        fmt, prec = v.split("/")
        sc = load_scenario(scenario, overrides + [f'train.memory_format="{fmt}"', f'train.precision="{prec}"'])
        built[v] = (sc, make_backends(sc)[0])
    out = sys.stdout.buffer
    out.write(b"ready\n")
    out.flush()
    for line in sys.stdin:
        method, variant, rounds = json.loads(line)
        sc, build = built[variant]
        sim = Simulation(sc.system, sc.budget, build(method), seed=sc.seed)
        cpu = wall = 0.0
        records = []
        for _ in range(rounds):
            c0, w0 = time.thread_time(), time.perf_counter()
            rec = sim.run_round()
            cpu += time.thread_time() - c0
            wall += time.perf_counter() - w0
            records.append(repr(rec))
        blob = pickle.dumps((cpu, wall, records))
        out.write(f"{len(blob)}\n".encode())
        out.write(blob)
        out.flush()


class _Side:
    def __init__(self, tree: str, scenario: str, overrides: list[str], variants: list[str]) -> None:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", tree, scenario, "--variants", *variants]
        for o in overrides:
            cmd += ["--set", o]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
        if self.proc.stdout.readline().strip() != b"ready":
            raise SystemExit(f"worker for {tree} did not start")

    def run(self, method: str, variant: str, rounds: int):
        self.proc.stdin.write((json.dumps([method, variant, rounds]) + "\n").encode())
        self.proc.stdin.flush()
        n = int(self.proc.stdout.readline())
        return pickle.loads(self.proc.stdout.read(n))

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def _interval(ratios: list[float]) -> str:
    """Min-max of the paired ratios (with 3-5 repetitions, the widest honest interval)."""
    return f"{min(ratios):.2f}-{max(ratios):.2f}" if len(ratios) > 1 else "n/a"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        ap = argparse.ArgumentParser()
        ap.add_argument("--worker", dest="tree")
        ap.add_argument("scenario")
        ap.add_argument("--variants", nargs="+")
        ap.add_argument("--set", action="append", default=[])
        a = ap.parse_args()
        _worker(a.tree, a.scenario, a.set, a.variants)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--base", required=True, help="the other checkout's root (the side named 'base')")
    ap.add_argument("--sides", nargs="+", default=["base:contiguous/float32", "new:channels_last/float32",
                                                   "new:channels_last/bfloat16"])
    ap.add_argument("--set", action="append", default=[], help="scenario override, as edgesim run --set")
    ap.add_argument("--methods", nargs="*", help="default: the scenario's run.algorithms")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    scenario = os.path.abspath(a.scenario)
    here = str(Path(__file__).resolve().parents[1])
    trees = {"base": str(Path(a.base).resolve()), "new": here}
    sides = [s.split(":") for s in a.sides]
    workers = {t: _Side(trees[t], scenario, a.set, sorted({v for tt, v in sides if tt == t}))
               for t in dict.fromkeys(t for t, _ in sides)}
    if a.methods:
        methods = a.methods
    else:
        import tomllib

        methods = tomllib.loads(Path(scenario).read_text())["run"]["algorithms"]
    names = [f"{t}:{v}" for t, v in sides]
    cpu = {(m, s): [] for m in methods for s in names}
    wall = {(m, s): [] for m in methods for s in names}
    records = {}
    for m in methods:
        for r in range(a.reps):
            for j in range(len(sides)):
                t, v = sides[(j + r) % len(sides)]
                c, w, recs = workers[t].run(m, v, a.rounds)
                cpu[(m, f"{t}:{v}")].append(c)
                wall[(m, f"{t}:{v}")].append(w)
                records.setdefault((m, f"{t}:{v}"), recs)
        print(m, {s: f"cpu {statistics.median(cpu[(m, s)]):.2f} s, wall {statistics.median(wall[(m, s)]):.2f} s"
                  for s in names}, flush=True)
    for w in workers.values():
        w.close()
    base = names[0]
    for what, times in (("thread CPU", cpu), ("wall", wall)):
        head = " | ".join(f"{s} s" + ("" if s == base else f" (÷ {base}; min-max of {a.reps})") for s in names)
        lines = [f"\n{what} seconds, {a.rounds} round(s) from round 0, median of {a.reps} repetitions",
                 f"| method | {head} |", "|---" * (len(names) + 1) + "|"]
        total = {s: 0.0 for s in names}
        for m in methods:
            cells = []
            for s in names:
                med = statistics.median(times[(m, s)])
                total[s] += med
                if s == base:
                    cells.append(f"{med:.2f}")
                else:
                    ratios = [x / y for x, y in zip(times[(m, s)], times[(m, base)])]
                    cells.append(f"{med:.2f} ({statistics.median(ratios):.3f}; {_interval(ratios)})")
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
        lines.append("| **sum** | " + " | ".join(f"**{total[s]:.1f}**" + ("" if s == base else
                                                 f" (**{total[s] / total[base]:.3f}**)") for s in names) + " |")
        print("\n".join(lines))
    for i, s in enumerate(names[1:], 1):  # against the first side of the same numerics, else the first side
        ref = next((r for r in names[:i] if r.split(":")[1] == s.split(":")[1]), base)
        diff = [m for m in methods if records[(m, s)] != records[(m, ref)]]
        print(f"round records of {s} equal to {ref}'s: " + ("all methods" if not diff else f"NOT for {diff}"))


if __name__ == "__main__":
    main()
