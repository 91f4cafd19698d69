"""UM-pFSSL's Tables 1 and 3 and figures (docs/studies/um_pfssl.md) from sweep folders of edgesim runs.

    python benchmarks/um_pfssl_table.py table1 SWEEP_DIR [DIR:SUFFIX ...]  # runs named data.alpha=A,seed=S
    python benchmarks/um_pfssl_table.py table3 SWEEP_DIR FEDAVG_RUN  # runs named ...update_every=V,seed=S
    python benchmarks/um_pfssl_table.py figures SWEEP_DIR OUT_DIR ALPHA [GRAPH_RUN]
    python benchmarks/um_pfssl_table.py scale SWEEP_DIR [SWEEP_DIR ...]  # every finished run, by alpha and algorithm
    python benchmarks/um_pfssl_table.py rules SWEEP_DIR  # runs named ...label_rule=R,seed=S

Table 1: per alpha and algorithm, the last round's mean device test accuracy and the
variance of device accuracies (%²), mean ± population std over the seeds. Table 3:
per nu, the transmissions (models sent) of UM-pFSSL's protocol rounds (round 0, the
warm-up, apart) and the last accuracy, beside FedAvg's 2·K̄·n from FEDAVG_RUN.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ORDER = ["fedavg_sl", "fedprox_sl", "fedbn_sl", "fixavg", "fixprox", "fixbn", "fedper", "lg_fedavg", "pfedme",
         "um_pfssl"]
# Shi, Chen & Zhang, TNSE 2023, Table 1 (Fashion-MNIST, mean of 20 runs)
PAPER = {
    "fedavg_sl": {0.5: 81.71, 1: 82.09, 5: 81.98, 10: 82.32}, "fedprox_sl": {0.5: 81.83, 1: 83.01, 5: 82.65, 10: 83.63},
    "fedbn_sl": {0.5: 75.79, 1: 79.91, 5: 82.85, 10: 82.18}, "fixavg": {0.5: 75.94, 1: 76.78, 5: 78.68, 10: 79.59},
    "fixprox": {0.5: 76.77, 1: 77.46, 5: 77.64, 10: 78.00}, "fixbn": {0.5: 76.40, 1: 79.22, 5: 80.48, 10: 81.88},
    "fedper": {0.5: 60.65, 1: 50.90, 5: 37.89, 10: 38.05}, "lg_fedavg": {0.5: 74.64, 1: 78.49, 5: 75.39, 10: 66.54},
    "pfedme": {0.5: 44.53, 1: 49.01, 5: 47.38, 10: 45.39}, "um_pfssl": {0.5: 78.38, 1: 80.12, 5: 79.80, 10: 79.19},
}


def runs(sweep: Path, key: str) -> dict[float, list[Path]]:
    """{grid value: [run folders]} of the finished runs whose name holds ``key=value``."""
    out = defaultdict(list)
    for d in sorted(sweep.iterdir()):
        m = re.search(rf"{re.escape(key)}=([0-9.]+)", d.name)
        if m and (d / "summary.json").exists():
            out[float(m.group(1))].append(d)
    return dict(out)


def rows(run: Path) -> dict[str, list[dict]]:
    by = defaultdict(list)
    with open(run / "rounds.csv") as f:
        for r in csv.DictReader(f):
            by[r["algorithm"]].append(r)
    return by


def pm(values, scale=100.0, digits=2) -> str:
    v = np.asarray(values, dtype=float) * scale
    return f"{v.mean():.{digits}f} ± {v.std():.{digits}f}" if len(v) > 1 else f"{v.mean():.{digits}f}"


def table1(sources: list[str]) -> str:
    """``sources``: sweep folders, each optionally ``DIR:SUFFIX`` — its algorithms are listed as ``name SUFFIX``
    (e.g. UM-pFSSL at another learning rate). A cell with fewer runs than seeds says ``(n = …)``."""
    acc, var = defaultdict(list), defaultdict(list)
    names, order, alphas, seeds = {}, [], set(), defaultdict(set)
    for source in sources:
        folder, _, suffix = source.partition(":")
        for a, run_dirs in runs(Path(folder), "data.alpha").items():
            alphas.add(a)
            for run in run_dirs:
                summary = json.loads((run / "summary.json").read_text())
                seeds[a].add(summary["seed"])
                for alg, rs in rows(run).items():
                    key = alg + (f" {suffix}" if suffix else "")
                    acc[key, a].append(float(rs[-1]["accuracy"]))
                    var[key, a].append(float(rs[-1]["accuracy_var"]))
                    names[key] = summary["algorithms"][alg]["display"] + (f" ({suffix})" if suffix else "")
                    if key not in order:
                        order.append(key)
    alphas = sorted(alphas)
    head = "| algorithm | " + " | ".join(f"α = {a:g}: ours | paper" for a in alphas) + \
        " | " + " | ".join(f"variance (%²), α = {a:g}" for a in alphas) + " |"
    lines = [head, "|" + " --- |" * (1 + 3 * len(alphas))]
    rank = {a: i for i, a in enumerate(ORDER)}
    for key in sorted(order, key=lambda k: (rank.get(k.split()[0], len(ORDER)), k)):
        base = key.split()[0]

        def cell(values, scale, digits, a):
            if not values:
                return "–"
            n = "" if len(values) == len(seeds[a]) else f" (n = {len(values)})"
            return pm(values, scale, digits) + n

        cells = [f"{cell(acc[key, a], 100.0, 2, a)} | {PAPER.get(base, {}).get(a, float('nan')):.2f}" for a in alphas]
        cells += [cell(var[key, a], 1e4, 1, a) for a in alphas]
        lines.append(f"| {names[key]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table3(sweep: Path, fedavg_run: Path) -> str:
    by_nu = runs(sweep, "update_every")
    lines = ["| algorithm | transmissions (models), protocol rounds | the paper's bound | last accuracy (%) |",
             "| --- | --- | --- | --- |"]
    fed = rows(fedavg_run)
    for alg in ("fixavg", "fedavg_sl"):
        if alg in fed:
            rs = fed[alg]
            n_rounds = len(rs) - 1
            k_bar = float(rs[-1]["K"]) if rs[-1].get("K") else float("nan")
            lines.append(f"| {alg} (2·K̄·n over rounds 1–{n_rounds}) | {2 * k_bar * n_rounds:.0f} | – | "
                         f"{100 * float(rs[-1]['accuracy']):.2f} |")
    for nu in sorted(by_nu):
        for run in by_nu[nu]:
            cfg = (run / "config.toml").read_text()
            rs = rows(run)["um_pfssl"]
            sent = sum(float(r["transmissions"]) for r in rs[1:])
            n = len(rs) - 1
            k_bar = float(rs[1]["K"])
            m = int(re.search(r"helpers = (\d+)", cfg).group(1))
            r_ = int(re.search(r"replace = (\d+)", cfg).group(1))
            f = int(re.search(r"search_rounds = (\d+)", cfg).group(1))
            bound = (m * n / nu + n + f * r_) * k_bar  # journal Eq. 27 (helpers on the sampled devices)
            lines.append(f"| UM-pFSSL (ν = {nu:g}) | {sent:.0f} | {bound:.0f} | {100 * float(rs[-1]['accuracy']):.2f} |")
    return "\n".join(lines)


def figures(sweep: Path, out: Path, alpha: float, graph_run: Path | None = None) -> list[Path]:
    from edgesim.plots.curves import plot_accuracy

    dirs = runs(sweep, "data.alpha")[alpha]
    out.mkdir(parents=True, exist_ok=True)
    made = [
        plot_accuracy(dirs, out / f"um_pfssl_time_a{alpha:g}.png", title=f"Fashion-MNIST Dir({alpha:g}), {len(dirs)} seeds"),
        plot_accuracy(dirs, out / f"um_pfssl_downlink_a{alpha:g}.png", x="cum_bits_down",
                      title=f"Fashion-MNIST Dir({alpha:g}): accuracy vs downlink"),
        plot_accuracy(dirs, out / f"um_pfssl_variance_a{alpha:g}.png", metric="accuracy_var",
                      title=f"Fashion-MNIST Dir({alpha:g}): fairness"),
    ]
    if graph_run is not None:
        from edgesim.plots.graphs import draw_graph, read_graph, same_class_share

        files = sorted((graph_run / "graphs" / "um_pfssl").glob("round_*.json"))
        for f in (files[1], files[len(files) // 2], files[-1]):
            g = read_graph(f)
            same, rand = same_class_share(g)
            print(f"{f.name}: same-class share of helper edges {same:.3f} (random lists: {rand:.3f})")
            made.append(draw_graph(f, out / f"um_pfssl_helpers_{f.stem}.png",
                                   title=f"helpers after round {g.graph['round']}: {100 * same:.0f} % same class "
                                         f"(random {100 * rand:.0f} %)"))
    return made


def _finished(sweeps: list[Path]) -> list[Path]:
    return [d for s in sweeps for d in sorted(Path(s).iterdir()) if (d / "summary.json").exists()]


def _mean_pl(rs: list[dict]) -> list[float]:
    return [float(r["pseudo_label_accuracy"]) for r in rs if r.get("pseudo_label_accuracy") not in (None, "", "nan")]


def _scale_columns(runs_: list[Path]) -> tuple[dict, dict]:
    """Per algorithm, the ``scale`` table's values over ``runs_`` (one entry per run) and display names."""
    cols = defaultdict(lambda: defaultdict(list))
    names = {}
    for run in runs_:
        summary = json.loads((run / "summary.json").read_text())
        bits = float(summary["model_bits"])
        for alg, rs in rows(run).items():
            c = cols[alg]
            names[alg] = summary["algorithms"][alg]["display"]
            accs = [float(r["accuracy"]) for r in rs]
            c["last"].append(accs[-1])
            c["last5"].append(float(np.mean(accs[-5:])))
            c["best"].append(max(accs))
            c["var"].append(float(rs[-1]["accuracy_var"]))
            pl = _mean_pl(rs)
            if pl:
                c["pl"].append(float(np.mean(pl)))
            masks = [float(r["mask_rate"]) for r in rs if r.get("mask_rate") not in (None, "", "nan")]
            if masks:
                c["mask"].append(float(np.mean(masks)))
            c["sent"].append((float(rs[-1]["cum_bits_up"]) + float(rs[-1]["cum_bits_down"])) / bits)
            if alg == "um_pfssl":
                c["helpers"].append(sum(float(r[k] or 0) for r in rs for k in ("downloads_replace", "downloads_update",
                                                                                 "downloads_fill") if r.get(k)))
    return cols, names


def _by_alpha(sweeps: list[Path]) -> dict[float, list[Path]]:
    out = defaultdict(list)
    for run in _finished(sweeps):
        out[float(re.search(r"^alpha = (.+)$", (run / "config.toml").read_text(), re.M).group(1))].append(run)
    return dict(sorted(out.items()))


def _ordered(algs) -> list[str]:
    rank = {a: i for i, a in enumerate(ORDER)}
    return sorted(algs, key=lambda a: rank.get(a, len(ORDER)))


def scale(sweeps: list[Path]) -> str:
    """The ``scale`` tables (module docstring), one per alpha: mean ± population std over the runs (n = seeds);
    with several alphas, then a summary of the last round's accuracy beside the paper's at each."""
    groups = _by_alpha(sweeps)
    out, summary = [], {}
    for alpha, runs_ in groups.items():
        cols, names = _scale_columns(runs_)
        summary[alpha] = (cols, names)
        lines = [f"α = {alpha:g}", "", "| algorithm | seeds | last round (%) | last 5 rounds (%) | best round (%) | paper (%) | "
                 "variance (%²) | pseudo-labels right (%) | rows used (%) | models sent | helper downloads |",
                 "|" + " --- |" * 11]
        for alg in _ordered(cols):
            c = cols[alg]
            paper = PAPER.get(alg, {}).get(alpha)
            lines.append(f"| {names[alg]} | {len(c['last'])} | {pm(c['last'])} | {pm(c['last5'])} | {pm(c['best'])} | "
                         f"{'–' if paper is None else f'{paper:.2f}'} | {pm(c['var'], 1e4, 1)} | "
                         f"{pm(c['pl'], 100.0, 1) if c['pl'] else '–'} | "
                         f"{pm(c['mask'], 100.0, 1) if c['mask'] else ('100' if c['pl'] else '–')} | "
                         f"{pm(c['sent'], 1.0, 0)} | {pm(c['helpers'], 1.0, 0) if c['helpers'] else '–'} |")
        out.append("\n".join(lines))
    if len(groups) > 1:
        algs = _ordered({a for cols, _ in summary.values() for a in cols})
        names = {a: n for _, ns in summary.values() for a, n in ns.items()}
        head = "| algorithm | " + " | ".join(f"α = {a:g}: last / best (n) | paper" for a in groups) + " |"
        lines = [head, "|" + " --- |" * (1 + 2 * len(groups))]
        for alg in algs:
            cells = []
            for alpha, (cols, _) in summary.items():
                c = cols.get(alg)
                paper = PAPER.get(alg, {}).get(alpha)
                cells.append(f"{pm(c['last'], digits=1)} / {pm(c['best'], digits=1)} ({len(c['last'])})" if c else "–")
                cells.append("–" if paper is None else f"{paper:.2f}")
            lines.append(f"| {names[alg]} | " + " | ".join(cells) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out)


def rules(sweep: Path) -> str:
    """The ``rules`` table (module docstring), UM-pFSSL only, per run (seed) and rule."""
    lines = ["| label rule | seed | warm-up (%) | last (%) | best (%) | pseudo-labels right (%), mean of rounds 1–n |",
             "|" + " --- |" * 6]
    for run in _finished([sweep]):
        m = re.search(r"label_rule=([a-z_]+)", run.name)
        rs = rows(run).get("um_pfssl")
        if not m or not rs:
            continue
        seed = json.loads((run / "summary.json").read_text())["seed"]
        accs = [100 * float(r["accuracy"]) for r in rs]
        lines.append(f"| {m.group(1)} | {seed} | {accs[0]:.1f} | {accs[-1]:.1f} | {max(accs):.1f} | "
                     f"{100 * np.mean(_mean_pl(rs)):.1f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("table1", "table3", "figures", "scale", "rules"):
        print(__doc__)
        return 2
    if argv[0] == "table1":
        print(table1(argv[1:]))
    elif argv[0] == "scale":
        print(scale([Path(a) for a in argv[1:]]))
    elif argv[0] == "rules":
        print(rules(Path(argv[1])))
    elif argv[0] == "table3":
        print(table3(Path(argv[1]), Path(argv[2])))
    else:
        for p in figures(Path(argv[1]), Path(argv[2]), float(argv[3]), Path(argv[4]) if len(argv) > 4 else None):
            print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
