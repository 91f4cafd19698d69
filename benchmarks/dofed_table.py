"""DoFed-SPP's Table 1 from our run folders: final accuracy by the paper's rule, accuracy at the budget, paired gaps.

    python benchmarks/dofed_table.py [--at 50,100,150] runs/dofed/subset_s0 runs/dofed/subset_s1 runs/dofed/subset_lit_s0 ...

Each run folder may hold any of the algorithms; DoFed-SPP rows are labelled
with their ``selection`` and ``target_epochs`` (from the folder's
``config.toml``), so variants run in separate folders on the same seeds form
separate rows. For each row, over the seeds given (mean ± population std, and
every seed's value):

- the final classification / labelling accuracy by the run's rule
  (``summary.json``: the first round whose accuracy changes by less than
  ``plateau_tol`` from the previous one, held ``plateau_patience`` rounds);
- the last round's classification accuracy;
- ``accuracy_at_budget``: the last round ending by the budget T;
- the simulated time to each threshold within T, averaged over the seeds that
  reached it (k/n when not all did);
- with ``--at``: the accuracy at those simulated times (the last round ended
  by then);
- the paired difference of every row's at-budget, final and ``--at``
  accuracies from the
  DoFed-SPP row with the default options (the reference), with a 95 % Student-t interval over
  seeds (``edgesim.results.stats.paired_difference``).
"""

from __future__ import annotations

import csv
import json
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import numpy as np

from edgesim.learning.algorithms.dofed_spp.config import DofedSppConfig
from edgesim.results.stats import paired_difference

ORDER = ["dofed_spp", "fedfomo", "fedbe", "fedavg", "local"]


def dofed_label(selection, target_epochs) -> str:
    return f"dofed_spp ({selection}, E = {target_epochs})"


def row_label(alg: str, config: dict) -> str:
    """The algorithm's name; DoFed-SPP's with its selection and student epochs (from the resolved config.toml)."""
    if alg != "dofed_spp":
        return alg
    cfg = config["algorithms"]["dofed_spp"]
    return dofed_label(cfg["selection"], cfg["target_epochs"])


def accuracy_at(times, accs, t: float) -> float:
    """The accuracy of the last round that ended by simulated time ``t`` (NaN if none had)."""
    got = [a for a, e in zip(accs, times) if e <= t]
    return got[-1] if got else float("nan")


def collect(run_dirs, at=()):
    """{label: {field: {seed: value}}} and the thresholds, from the run folders."""
    out = defaultdict(lambda: defaultdict(dict))
    thresholds = None
    for d in map(Path, run_dirs):
        summary = json.loads((d / "summary.json").read_text())
        config = tomllib.loads((d / "config.toml").read_text())
        seed = int(summary["seed"])
        rows = list(csv.DictReader(open(d / "rounds.csv")))
        for alg, s in summary["algorithms"].items():
            mine = [r for r in rows if r["algorithm"] == alg]
            o = out[row_label(alg, config)]
            o["final"][seed] = s["final_accuracy"]
            o["final_lab"][seed] = float(mine[s["final_round"]]["labeling_accuracy"])
            o["final_round"][seed] = s["final_round"]
            o["last"][seed] = float(mine[-1]["accuracy"])
            o["at_budget"][seed] = s["accuracy_at_budget"] if s["accuracy_at_budget"] is not None else float("nan")
            o["rounds_in_budget"][seed] = s["rounds_within_budget"]
            times, accs = [float(r["time_s"]) for r in mine], [float(r["accuracy"]) for r in mine]
            for t in at:
                o[f"at_{t:g}"][seed] = accuracy_at(times, accs, t)
            for extra in ("federated_accuracy",):
                if mine[-1].get(extra) not in ("", None):
                    o[f"last_{extra}"][seed] = float(mine[-1][extra])
            thresholds = list(s["time_to_accuracy_within_budget_s"])
            for t, v in s["time_to_accuracy_within_budget_s"].items():
                o[f"tta_{t}"][seed] = v
    return out, thresholds or []


def ms(by_seed: dict) -> str:
    a = np.asarray(list(by_seed.values()), dtype=float)
    return f"{np.nanmean(a):.3f} ± {np.nanstd(a):.3f}"


def seeds(by_seed: dict) -> str:
    return " / ".join(f"{by_seed[s]:.2f}" for s in sorted(by_seed))


def tta(by_seed: dict) -> str:
    got = [v for v in by_seed.values() if v is not None]
    if not got:
        return "never"
    text = f"{np.mean(got):.0f}"
    return text if len(got) == len(by_seed) else f"{text} ({len(got)}/{len(by_seed)})"


def gap(a: dict, b: dict) -> str:
    i = paired_difference(a, b)
    if i.n < 2:
        return f"{100 * i.mean:+.1f}" if i.n else "–"
    return f"{100 * i.mean:+.1f} [{100 * i.low:+.1f}, {100 * i.high:+.1f}]"


def main(argv=None) -> None:
    runs = list(argv if argv is not None else sys.argv[1:])
    at = []
    if runs[:1] == ["--at"]:
        at, runs = [float(t) for t in runs[1].split(",")], runs[2:]
    if not runs:
        raise SystemExit(__doc__)
    data, thresholds = collect(runs, at)
    labels = sorted(data, key=lambda x: (ORDER.index(x.split()[0]) if x.split()[0] in ORDER else 99, x))
    n_seeds = max(len(data[x]["final"]) for x in labels)
    print(f"{len(runs)} run folders, {n_seeds} seeds\n")
    print("| algorithm | final class. / labelling (paper's rule) | per seed | round | last round | at budget T | per seed | "
          + " | ".join(f"to {t} within T (s)" for t in thresholds) + " |")
    print("|---" * (7 + len(thresholds)) + "|")
    for x in labels:
        o = data[x]
        print(f"| {x} | {ms(o['final'])} / {ms(o['final_lab'])} | {seeds(o['final'])} | "
              f"{np.mean(list(o['final_round'].values())):.1f} | {ms(o['last'])} | {ms(o['at_budget'])} | "
              f"{seeds(o['at_budget'])} | " + " | ".join(tta(o[f'tta_{t}']) for t in thresholds) + " |")
    want = dofed_label(DofedSppConfig.selection, DofedSppConfig.target_epochs)
    ref = want if want in data else next((x for x in labels if x.startswith("dofed_spp")), None)
    if ref is None:
        return
    print(f"\nPaired differences from {ref} (points, mean [95 % interval] over seeds):\n")
    print("| algorithm | at budget T | final (paper's rule) | last round | " + " | ".join(f"at {t:g} s" for t in at) + " |")
    print("|---" * (4 + len(at)) + "|")
    for x in labels:
        if x != ref:
            print(f"| {x} | {gap(data[x]['at_budget'], data[ref]['at_budget'])} | "
                  f"{gap(data[x]['final'], data[ref]['final'])} | {gap(data[x]['last'], data[ref]['last'])} | "
                  + " | ".join(gap(data[x][f"at_{t:g}"], data[ref][f"at_{t:g}"]) for t in at) + " |")
    if at:
        print("\nAccuracy at simulated times (mean ± std over seeds):\n")
        print("| algorithm | " + " | ".join(f"at {t:g} s" for t in at) + " |")
        print("|---" * (1 + len(at)) + "|")
        for x in labels:
            print(f"| {x} | " + " | ".join(ms(data[x][f"at_{t:g}"]) for t in at) + " |")
    for x in labels:
        if data[x].get("last_federated_accuracy"):
            print(f"\n{x}, models right after the federated update (last round): {ms(data[x]['last_federated_accuracy'])}")


if __name__ == "__main__":
    main()
