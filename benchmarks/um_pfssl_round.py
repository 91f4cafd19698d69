"""Host seconds per UM-pFSSL round on a scenario, split into the helper protocol (plan: MC-dropout Corr of
every helper and candidate) and the local training (complete), and the helper evaluation vectorised over a
device's helper stack vs one model at a time (interleaved, same inputs).

    python benchmarks/um_pfssl_round.py [SCENARIO] [--rounds N] [--threads T]

Default scenario: scenarios/um_pfssl_fmnist_cpu.toml. Prints one line per round and the summary.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from edgesim.engine import Simulation
from edgesim.learning.algorithms import REGISTRY
from edgesim.learning.context import build_context
from edgesim.learning.inference import mc_dropout_proba
from edgesim.scenarios.schema import load_scenario

ROOT = Path(__file__).resolve().parents[1]


class Timed:
    """A backend wrapper that records host seconds of plan_round and complete_round."""

    def __init__(self, backend):
        self.backend, self.plan_s, self.complete_s = backend, [], []

    def plan_round(self, view):
        t = time.perf_counter()
        plan = self.backend.plan_round(view)
        self.plan_s.append(time.perf_counter() - t)
        return plan

    def complete_round(self, outcome):
        t = time.perf_counter()
        out = self.backend.complete_round(outcome)
        self.complete_s.append(time.perf_counter() - t)
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default=str(ROOT / "scenarios" / "um_pfssl_fmnist_cpu.toml"))
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sc = load_scenario(Path(args.scenario), [])
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    cfg = sc.learning["algorithms"]["um_pfssl"]
    timed = Timed(REGISTRY["um_pfssl"].build(ctx, cfg))
    sim = Simulation(sc.system, sc.budget, timed, seed=sc.seed)
    for rec in sim.run(args.rounds):
        i = rec.round_index
        print(f"round {i}: helpers {timed.plan_s[i]:.2f} s, training + evaluation {timed.complete_s[i]:.2f} s, "
              f"{rec.info.get('helper_evaluations', 0):.0f} helper evaluations")
    search = [p + c for i, (p, c) in enumerate(zip(timed.plan_s, timed.complete_s)) if 1 <= i <= cfg.search_rounds]
    other = [p + c for i, (p, c) in enumerate(zip(timed.plan_s, timed.complete_s)) if i > cfg.search_rounds]
    print(f"threads {args.threads}: search rounds {statistics.mean(search):.2f} s/round"
          + (f", other rounds {statistics.mean(other):.2f} s/round" if other else ""))
    # one device's helper stack (M models) on its data: vectorised vs a loop over models, interleaved
    backend = timed.backend
    k = max(range(ctx.n_devices), key=lambda d: sum(backend.sizes[d]))
    models = [backend.pool[(j, v)] for j, v in sorted(backend.lists[k].items())]
    c = ctx.clients[k]
    x = torch.cat([c.x_sup, c.x_unl])
    times = {True: [], False: []}
    for _ in range(args.repeats):
        for vec in (True, False):
            t = time.perf_counter()
            mc_dropout_proba(ctx.model, models, x, cfg.mc_passes, list(range(len(models))), vectorize=vec)
            times[vec].append(time.perf_counter() - t)
    v, s = statistics.median(times[True]), statistics.median(times[False])
    print(f"device {k}: {len(models)} helpers x {x.shape[0]} samples x T={cfg.mc_passes}: vectorised {v:.3f} s, "
          f"loop {s:.3f} s, loop/vectorised {s / v:.2f}")


if __name__ == "__main__":
    main()
