"""docs/studies/arena.md's compact tables from an ``edgesim report`` folder: one row per grid point.

    python benchmarks/arena_table.py REPORT_DIR --threshold T --algorithms A,B,C [--metric final_accuracy ...]
        [--rows algorithms] [--paired]

Reads ``REPORT_DIR/leaderboard.csv`` and prints, per grid point (transmit power, then bandwidth), each
algorithm's simulated time to accuracy T, then each ``--metric`` (default: final accuracy in %, the devices'
energy in J), as ``mean [95 % interval]`` over seeds; "(k/n)" when only k of n seeds reach T, "never" when none.
``--rows algorithms`` (for arenas with many methods) prints one table per quantity instead, an algorithm a row
and a grid point a column. ``--paired`` adds, from ``paired.csv``, each algorithm's paired difference of final
accuracy from the report's ``--baseline`` (points, 95 % interval over seeds; bold where it excludes zero).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

BANDWIDTH, POWER = "system.bandwidth_hz", "system.tx_power_dbm"
# metric -> (column label, unit, scale)
METRICS = {
    "final_accuracy": ("final", "%", 100.0),
    "best_accuracy": ("best", "%", 100.0),
    "total_energy_j": ("energy", "J", 1.0),
    "total_bits_up": ("uplink", "Mbit", 1e-6),
    "total_bits_down": ("downlink", "Mbit", 1e-6),
    "final_accuracy_var": ("device variance", "%²", 1e4),
}


def number(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def cell(row: dict | None, scale: float = 1.0) -> str:
    """``mean [low, high]``, the mean alone for one seed, ``(k/n)`` when some seeds lack the value."""
    if row is None or row["n"] in ("", "0"):
        return "never"
    mean = number(float(row["mean"]) * scale)
    if row["n"] != row["n_seeds"]:
        return f"{mean} ({row['n']}/{row['n_seeds']})"
    if int(row["n"]) < 2:
        return mean
    return f"{mean} [{number(float(row['ci_low']) * scale)}, {number(float(row['ci_high']) * scale)}]"


def point(r: dict) -> tuple[float, float]:
    """(bandwidth, power) of a report row; 0 where the report does not vary it (a sweep of one value)."""
    return float(r.get(BANDWIDTH) or 0.0), float(r.get(POWER) or 0.0)


def label(p: tuple[float, float]) -> str:
    return ", ".join(x for x in (f"{p[0] / 1e6:g} MHz" if p[0] else "", f"{p[1]:g} dBm" if p[1] else "") if x)


def signed(x: float) -> str:
    return f"{x:+.1f}".replace("-", "\u2212")


def paired_table(paired: list[dict], algorithms: list[str], display: dict[str, str]) -> str:
    """Final accuracy minus the report's baseline, paired over seeds, in points: ``+d [low, high]``, bold where the
    interval excludes zero; the baseline's own row is left out."""
    rows = [r for r in paired if r["metric"] == "final_accuracy" and r["reference_is"] == "baseline"]
    if not rows:
        raise SystemExit("--paired: paired.csv has no baseline rows; run edgesim report --baseline ALGORITHM")
    reference = rows[0]["reference"]
    by = {(point(r), r["algorithm"]): r for r in rows}
    points = sorted({point(r) for r in rows}, key=lambda p: (p[1], p[0]))
    head = [f"− {display.get(reference, reference)} (points)"] + [label(p) or "all" for p in points]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for a in (a for a in algorithms if a != reference):
        cells = []
        for p in points:
            r = by.get((p, a))
            if r is None or r["ci_low"] == "":
                cells.append("—" if r is None else signed(100 * float(r["mean_difference"])))
                continue
            c = (f"{signed(100 * float(r['mean_difference']))} [{signed(100 * float(r['ci_low']))}, "
                 f"{signed(100 * float(r['ci_high']))}]")
            cells.append(f"**{c}**" if r["interval_excludes_zero"] == "True" else c)
        lines.append("| " + " | ".join([display.get(a, a)] + cells) + " |")
    return "\n".join(lines)


def table(rows: list[dict], threshold: float, algorithms: list[str], metrics: list[str],
          by_algorithm: bool = False) -> str:
    by = {(point(r), r["algorithm"], r["metric"], r["threshold"]): r for r in rows}
    display = {r["algorithm"]: r["display"] for r in rows}
    missing = [a for a in algorithms if a not in display]
    if missing:
        raise SystemExit(f"--algorithms: {', '.join(missing)} not in the report (it holds {', '.join(sorted(display))})")
    t = next((r["threshold"] for r in rows if r["threshold"] and float(r["threshold"]) == threshold), None)
    if t is None:
        raise SystemExit(f"--threshold {threshold:g}: not in the report; run edgesim report --threshold {threshold:g}")
    points = sorted({point(r) for r in rows}, key=lambda p: (p[1], p[0]))
    if by_algorithm:
        quantities = [(f"time to {threshold:g} (s)", "time_to_accuracy_s", t, 1.0)]
        quantities += [(f"{METRICS[m][0]} ({METRICS[m][1]})", m, "", METRICS[m][2]) for m in metrics]
        tables = []
        for title, metric, thr, scale in quantities:
            head = [title] + [label(p) or "all" for p in points]
            lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
            for a in algorithms:
                lines.append("| " + " | ".join([display[a]] + [cell(by.get((p, a, metric, thr)), scale)
                                                               for p in points]) + " |")
            tables.append("\n".join(lines))
        return "\n\n".join(tables)
    head = ["bandwidth", "power"] + [f"time to {threshold:g}: {display[a]} (s)" for a in algorithms]
    for m in metrics:
        name, unit, _ = METRICS[m]
        head += [f"{name}: {display[a]} ({unit})" for a in algorithms]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for p in points:
        out = [f"{p[0] / 1e6:g} MHz" if p[0] else "—", f"{p[1]:g} dBm" if p[1] else "—"]
        out += [cell(by.get((p, a, "time_to_accuracy_s", t))) for a in algorithms]
        for m in metrics:
            out += [cell(by.get((p, a, m, "")), METRICS[m][2]) for a in algorithms]
        lines.append("| " + " | ".join(out) + " |")
    return "\n".join(lines)


def read_rows(path: Path) -> list[dict]:
    """A report's CSV as dicts, or one line naming the missing file (the folder is not an ``edgesim report`` one)."""
    if not path.is_file():
        raise SystemExit(f"arena_table: {path} not found; expected an edgesim report folder")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="an edgesim report folder (its leaderboard.csv)")
    ap.add_argument("--threshold", type=float, required=True)
    ap.add_argument("--algorithms", required=True, help="registry names, comma-separated, in column order")
    ap.add_argument("--metric", action="append", choices=sorted(METRICS), help="repeatable (default: final, energy)")
    ap.add_argument("--rows", choices=("points", "algorithms"), default="points",
                    help="a grid point a row (default), or an algorithm a row and one table per quantity")
    ap.add_argument("--paired", action="store_true",
                    help="also the paired differences of final accuracy from the report's --baseline (paired.csv)")
    args = ap.parse_args(argv)
    rows = read_rows(args.report / "leaderboard.csv")
    algorithms = args.algorithms.split(",")
    print(table(rows, args.threshold, algorithms, args.metric or ["final_accuracy", "total_energy_j"],
                by_algorithm=args.rows == "algorithms"))
    if args.paired:
        display = {r["algorithm"]: r["display"] for r in rows}
        print("\n" + paired_table(read_rows(args.report / "paired.csv"), algorithms, display))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
