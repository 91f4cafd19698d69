"""Tables and figures of docs/studies/labels_at_server.md from the sweeps of ``scenarios/las_fmnist_550.toml``.

    python benchmarks/labels_at_server.py tune SWEEP... [--column accuracy]  # the tuning table (validation accuracy)
    python benchmarks/labels_at_server.py final ROOT [--figures DIR]
    python benchmarks/labels_at_server.py fewer ROOT  # the fewer-labels study (label_scarce_study.sh STAGE=las)

``tune``: every run of the given sweep folders (run with ``--set data.server_validation=200``) as one row
per algorithm: its learning rate, the options that differ from the defaults, and the validation accuracy
(mean of the last 5 rounds) by which the best configuration per algorithm is chosen — never the test set.
``--column accuracy`` scores runs made with ``--set data.validation_size=N`` instead (any partition: there the
accuracy column is measured on the validation split).

``final``: ``ROOT`` holds one sweep per data setting and kind of row — ``{iid,dir05}_main`` (FedMix+FedFreq,
FedMatch, supervised only), ``{iid,dir05}_persist`` (FedMix with ``sigma_start = "persist"``) and
``{iid,dir05}_off`` (both methods with their unlabelled terms off) — each over the same seeds (the
commands are in the docs page). Prints the final accuracy (mean of the last 3 rounds), the best round,
time to accuracy, and each method's paired difference from supervised only over the seeds, with 95 %
Student-t intervals (``edgesim.results.stats``).

``fewer``: ``ROOT`` holds what ``STAGE=las benchmarks/label_scarce_study.sh`` writes, per server-label count N:
the tuning sweeps ``las_tune_N_{server_only,fedmatch,fedmix}`` (held-out server labels, tuning seeds) and the
final sweep ``las_N`` (the chosen rates, the test seeds), and the floor's control (``STAGE=las_floor``: supervised
only with 10 server epochs a round, ``las_floor10_tune_N`` and ``las_floor10_N``) and FedMatch with its
unlabelled terms off (``STAGE=las_off``: ``las_off_N``). Prints per N the tuning grid (validation accuracy,
mean of the last 5 rounds, per tuning seed and their mean; the chosen rate is the best mean, as
``label_scarce_study.py choose`` picks it) and the final table: final and best test accuracy, the paired
difference from each supervised-only floor, over the last 3 rounds the pseudo-label figures by one rule (the model
the clients start from on all their rows: right; right among the rows ≥ 0.95; that share; issue 54.1) and then
the method's own rule (the confident share of the clients' rows and the accuracy of those pseudo-labels: a
different model and different rows per method), and host minutes per run.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import tomllib
from datetime import datetime
from pathlib import Path

import numpy as np

from edgesim.plots.curves import COLUMN_WIDTH_IN, algorithm_colors, collect, draw_accuracy, plt, style_axes
from edgesim.results.reading import read_rounds as _read_rounds
from edgesim.results.stats import Interval, mean_interval, paired_difference

SETTINGS = {"iid": "IID", "dir05": "Dir(0.5)"}
ROWS = (  # label, sweep kind, algorithm
    ("FedMix+FedFreq", "main", "fedmix"),
    ("FedMix+FedFreq, σ persists", "persist", "fedmix"),
    ("FedMix+FedFreq, unlabelled terms off", "off", "fedmix"),
    ("FedMatch", "main", "fedmatch"),
    ("FedMatch, unlabelled terms off", "off", "fedmatch"),
    ("Supervised only (θ ← σ)", "main", "server_only"),
)
FLOOR = "Supervised only (θ ← σ)"
THRESHOLDS = ("0.75", "0.8")


def runs_of(sweep: Path) -> list[Path]:
    return sorted(p for p in sweep.iterdir() if p.is_dir() and (p / "summary.json").is_file()) if sweep.is_dir() else []


@functools.lru_cache(maxsize=None)
def read_rounds(run: Path) -> dict:
    """A run's ``rounds.csv`` (read once: every table and figure asks for it again)."""
    return _read_rounds(run)


@functools.lru_cache(maxsize=None)
def summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def seed_of(run: Path) -> int:
    return int(summary(run)["seed"])


def pct(iv: Interval, signed: bool = False) -> str:
    if iv.n == 0:
        return "not measured"
    sign = "+" if signed else ""
    text = f"{iv.mean * 100:{sign}.1f}"
    if iv.n > 1:
        text += f" [{iv.low * 100:{sign}.1f}, {iv.high * 100:{sign}.1f}]"
    return text + (f" ({iv.n}/{iv.n_total})" if iv.n < iv.n_total else "")


def seconds(iv: Interval) -> str:
    if iv.n_total == 0:
        return "not measured"
    if iv.n == 0:
        return f"not reached (0/{iv.n_total})"
    text = f"{iv.mean:.0f}" + (f" [{iv.low:.0f}, {iv.high:.0f}]" if iv.n > 1 else "")
    return text + (f" ({iv.n}/{iv.n_total})" if iv.n < iv.n_total else "")


def options(run: Path, alg: str) -> tuple[float, str]:
    """The run's learning rate for ``alg`` and its non-default options (as ``key=value``)."""
    cfg = tomllib.loads((run / "config.toml").read_text())
    table = cfg.get("algorithms", {}).get(alg, {})
    lr = table.get("lr") or cfg["train"]["lr"]
    from edgesim.learning.algorithms import REGISTRY

    defaults = REGISTRY[alg].config_cls()
    diff = [f"{k}={v}" for k, v in sorted(table.items())
            if k not in ("lr", "batch_size") and getattr(defaults, k, None) != v]
    return float(lr), ", ".join(diff) or "defaults"


def tune(sweeps: list[Path], column: str = "val_accuracy") -> str:
    rows = []
    for sweep in sweeps:
        for run in runs_of(sweep):
            for alg, cols in read_rounds(run).items():
                lr, opts = options(run, alg)
                rows.append((alg, lr, opts, float(np.mean(cols[column][-5:])),
                             float(np.mean(cols["accuracy"][-3:]))))
    best = {}
    for r in rows:
        if r[0] not in best or r[3] > best[r[0]][3]:
            best[r[0]] = r
    out = ["| algorithm | lr | options | validation accuracy, last 5 rounds (%) | chosen |", "| --- | --- | --- | --- | --- |"]
    for r in sorted(rows):
        out.append(f"| {r[0]} | {r[1]:g} | {r[2]} | {r[3] * 100:.1f} | {'**chosen**' if best[r[0]] is r else ''} |")
    return "\n".join(out)


def per_seed(sweep: Path, alg: str, fn) -> dict[int, float]:
    out = {}
    for run in runs_of(sweep):
        cols = read_rounds(run).get(alg)
        if cols is not None:
            out[seed_of(run)] = fn(run, cols)
    return out


def final(run, cols) -> float:
    return float(np.mean(cols["accuracy"][-3:]))


def best(run, cols) -> float:
    return float(np.max(cols["accuracy"]))


def time_to(threshold: str, alg: str):
    def fn(run, cols):
        s = summary(run)["algorithms"][alg]["time_to_accuracy_s"].get(threshold)
        return math.nan if s is None else float(s)

    return fn


def final_tables(root: Path) -> str:
    out = []
    for tag, data in SETTINGS.items():
        values = {label: per_seed(root / f"{tag}_{kind}", alg, final) for label, kind, alg in ROWS}
        floor = values[FLOOR]
        out += [f"**{data}** (seeds: {', '.join(str(s) for s in sorted(floor)) or 'none'})", "",
                "| row | final accuracy (%) | best round (%) | − supervised only, paired (points) | "
                + " | ".join(f"time to {float(t) * 100:.0f} % (s)" for t in THRESHOLDS) + " |",
                "| --- | --- | --- | --- | " + " | ".join("---" for _ in THRESHOLDS) + " |"]
        for label, kind, alg in ROWS:
            sweep = root / f"{tag}_{kind}"
            diff = "—" if label == FLOOR else pct(paired_difference(values[label], floor), signed=True)
            times = [seconds(mean_interval(list(per_seed(sweep, alg, time_to(t, alg)).values()))) for t in THRESHOLDS]
            out.append(f"| {label} | {pct(mean_interval(list(values[label].values())))} | "
                       f"{pct(mean_interval(list(per_seed(sweep, alg, best).values())))} | {diff} | {' | '.join(times)} |")
        out.append("")
    return "\n".join(out)


FEWER_ROWS = (  # label, sweep (N: the server's labels), algorithm
    ("FedMix+FedFreq", "las_{}", "fedmix"),
    ("FedMatch", "las_{}", "fedmatch"),
    ("FedMatch, unlabelled terms off", "las_off_{}", "fedmatch"),
    ("Supervised only (θ ← σ)", "las_{}", "server_only"),
    ("Supervised only, 10 server epochs a round", "las_floor10_{}", "server_only"),
)
FEWER_FLOORS = FEWER_ROWS[-2:]


def host_minutes(run: Path) -> float:
    """Host (wall-clock) minutes the run took, from ``run.json``'s start and end stamps."""
    meta = json.loads((run / "run.json").read_text())
    return (datetime.fromisoformat(meta["finished"]) - datetime.fromisoformat(meta["started"])).total_seconds() / 60


def last_mean(name: str, k: int = 3):
    """Mean of a column over the last ``k`` rounds, ignoring empty cells (NaN when the column has none)."""
    def fn(run, cols):
        values = np.asarray(cols.get(name, [math.nan]), dtype=float)[-k:]
        return float(np.nanmean(values)) if np.isfinite(values).any() else math.nan

    return fn


def _tuning(root: Path, labels: int) -> list[str]:
    """The tuning grid: per algorithm, options and rate, each tuning seed's validation score and their mean."""
    scores: dict[tuple[str, str, float], dict[int, float]] = {}
    rounds, minutes = set(), []
    for sweep in sorted([*root.glob(f"las_tune_{labels}_*"), *root.glob(f"las_floor10_tune_{labels}")]):
        for run in runs_of(sweep):
            minutes.append(host_minutes(run))
            for alg, cols in read_rounds(run).items():
                rounds.add(len(cols["accuracy"]))
                lr, opts = options(run, alg)
                scores.setdefault((alg, opts, lr), {})[seed_of(run)] = float(np.mean(cols["val_accuracy"][-5:]))
    if not scores:
        return [f"(no tuning sweeps las_tune_{labels}_* in {root})", ""]
    seeds = sorted({s for by_seed in scores.values() for s in by_seed})
    mean = {key: float(np.mean(list(by_seed.values()))) for key, by_seed in scores.items()}
    chosen = {}
    for key in sorted(scores):  # the best mean per algorithm and options; a tie goes to the lower rate
        if key[:2] not in chosen or mean[key] > mean[chosen[key[:2]]]:
            chosen[key[:2]] = key
    out = [f"Tuning, {labels} server labels ({len(minutes)} runs of {'/'.join(map(str, sorted(rounds)))} rounds, "
           f"{sum(minutes):.1f} host minutes): validation accuracy (%), mean of the last 5 rounds", "",
           "| algorithm | options | lr | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | chosen |",
           "| --- | --- | --- | " + " | ".join("---" for _ in seeds) + " | --- | --- |"]
    for key, by_seed in sorted(scores.items()):
        cells = [f"{100 * by_seed[s]:.1f}" if s in by_seed else "not run" for s in seeds]
        out.append(f"| {key[0]} | {key[1]} | {key[2]:g} | {' | '.join(cells)} | {100 * mean[key]:.1f} | "
                   f"{'**chosen**' if chosen[key[:2]] == key else ''} |")
    return out + [""]


def fewer_tables(root: Path) -> str:
    counts = sorted({int(m.group(1)) for p in root.iterdir() if (m := re.fullmatch(r"las_(\d+)", p.name))})
    out = []
    for labels in counts:
        out += _tuning(root, labels)
        values = {label: per_seed(root / sweep.format(labels), alg, final) for label, sweep, alg in FEWER_ROWS}
        mins = [host_minutes(r) for r in runs_of(root / f"las_{labels}")]
        out += [f"**{labels} server labels** (seeds: {', '.join(str(s) for s in sorted(values[FEWER_FLOORS[0][0]])) or 'none'}; "
                f"host minutes per run of the main rows (las_{labels}): {', '.join(f'{m:.1f}' for m in mins)})", "",
                "| row | lr | final accuracy (%) | best round (%) | "
                + " | ".join(f"− {floor[0][0].lower()}{floor[0][1:]}, paired (points)" for floor in FEWER_FLOORS)
                + " | start model labels right, all rows, last 3 rounds (%) | right, rows ≥ 0.95 (%) | rows ≥ 0.95 (%)"
                + " | own rule: confident share (%) | own rule: those pseudo-labels right (%) |",
                "| --- | --- | --- | --- | " + " | ".join("---" for _ in FEWER_FLOORS) + " | --- | --- | --- | --- | --- |"]
        for label, sweep, alg in FEWER_ROWS:
            runs = runs_of(root / sweep.format(labels))
            lrs = sorted({options(r, alg)[0] for r in runs if alg in read_rounds(r)})
            diffs = ["—" if label == floor else pct(paired_difference(values[label], values[floor]), signed=True)
                     for floor, _, _ in FEWER_FLOORS]
            # the one rule (issue 54.1: the start model, all rows, reference 0.95) first, then the method's own rule
            columns = ("start_label_accuracy", "start_label_accuracy_confident", "start_label_confident_share",
                       "mask_rate", "pseudo_label_accuracy")
            labelling = ["—"] * len(columns) if alg == "server_only" or "off" in sweep else [
                pct(mean_interval([v for v in per_seed(root / sweep.format(labels), alg, last_mean(c)).values()
                                   if not math.isnan(v)])) for c in columns]
            out.append(f"| {label} | {', '.join(f'{x:g}' for x in lrs) or '—'} | {pct(mean_interval(list(values[label].values())))} | "
                       f"{pct(mean_interval(list(per_seed(root / sweep.format(labels), alg, best).values())))} | "
                       f"{' | '.join(diffs)} | {' | '.join(labelling)} |")
        on, off = values["FedMatch"], values["FedMatch, unlabelled terms off"]
        if off:
            out += ["", "FedMatch − FedMatch with its unlabelled terms off, paired: "
                    f"{pct(paired_difference(on, off), signed=True)} points"]
        out.append("")
    return "\n".join(out)


def figures(root: Path, out: Path) -> None:
    """Per data setting: accuracy against the round and against simulated time (log scale), mean and range."""
    out.mkdir(parents=True, exist_ok=True)
    for tag, data in SETTINGS.items():
        fig, axes = plt.subplots(1, 2, figsize=(2 * COLUMN_WIDTH_IN, 2.6), dpi=200)
        drawn = False
        for ax, x, xlabel in zip(axes, ("round", "time_s"), ("Round", "Simulated time (s)")):
            series = {}
            for label, kind, alg in ROWS:
                runs = [r for r in runs_of(root / f"{tag}_{kind}") if alg in read_rounds(r)]
                if runs:
                    series[label] = collect(runs, x)[alg]
            if not series:
                continue
            drawn = True
            draw_accuracy(ax, series, algorithm_colors(series), names={k: k for k in series})
            style_axes(ax, xlabel, "Test accuracy (%)")
            if x == "time_s":
                ax.set_xscale("log")
        if not drawn:
            plt.close(fig)
            continue
        axes[0].set_title(f"Labels at the server, {data}: mean and range over seeds", fontsize=7)
        axes[1].set_title("the same against the simulated clock", fontsize=7)
        axes[0].legend(fontsize=5.5, frameon=False, loc="lower right")
        fig.tight_layout()
        fig.savefig(out / f"las_550_{tag}.png")
        plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    t = sub.add_parser("tune")
    t.add_argument("sweeps", type=Path, nargs="+")
    t.add_argument("--column", default="val_accuracy", help="accuracy: runs with data.validation_size")
    f = sub.add_parser("final")
    f.add_argument("root", type=Path)
    f.add_argument("--figures", type=Path, default=None)
    w = sub.add_parser("fewer")
    w.add_argument("root", type=Path)
    a = ap.parse_args(argv)
    if a.what == "tune":
        print(tune(a.sweeps, a.column))
        return 0
    if a.what == "fewer":
        print(fewer_tables(a.root))
        return 0
    print(final_tables(a.root))
    if a.figures:
        figures(a.root, a.figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
