"""``edgesim report``: leaderboards with intervals over seeds, paired differences, and the arena's figures.

From any run and sweep folders (:func:`edgesim.results.reading.expand`), runs are grouped
by scenario (:func:`edgesim.results.stats.group_runs`: one group per grid point, its
seeds together) and every group gets a leaderboard: its algorithms ranked by
simulated time to each accuracy threshold (thresholds chosen now, computed
from ``rounds.csv`` by the rules of ``summary.json``), with final accuracy,
uplink and downlink bits, device energy and the variance of device accuracy,
each as a mean with its 95 % interval over seeds. Written to ``--out``:

- ``leaderboard.csv`` — tidy: one row per group × algorithm × metric (×
  threshold for the time, bits and energy to accuracy), with the group's
  grid-point values as columns, ``n_seeds``, ``n`` (seeds with a value),
  ``mean``, ``ci_low``, ``ci_high`` and the ``rank`` where the metric ranks;
- ``paired.csv`` — per group and metric, every algorithm against the leader
  (and against each ``--baseline`` algorithm): the mean paired difference
  over seeds with its interval, and whether the interval excludes 0;
- ``leaderboard.md`` — the same as Markdown tables, and the grid points
  where the ranking changes;
- ``tta_vs_bandwidth.png`` (when bandwidth varies) and
  ``accuracy_vs_time_extremes.png`` (the scarcest and the richest bandwidth):
  :mod:`edgesim.plots.report_figures`.

This module computes and renders; :mod:`edgesim.scenarios.report` checks ``--out``
and writes the files.

Ranking rule (time to a threshold T): algorithms that reach T in every seed,
by mean time; then those that reach it in some seeds (more seeds first, then
mean time over those); those that never reach it are unranked.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Iterable, Optional, Sequence

from edgesim.results.metrics import THRESHOLD_METRICS, algorithm_metrics
from edgesim.results.reading import RunFolderError, expand, load_run
from edgesim.results.stats import Group, Interval, group_runs, mean_interval, paired_difference

BANDWIDTH_KEY = "system.bandwidth_hz"
POWER_KEY = "system.tx_power_dbm"
TIME = THRESHOLD_METRICS["time_s"]
# (metric, label, scale) of the Markdown table's columns after the times
TABLE_METRICS = (
    ("final_accuracy", "final accuracy (%)", 100.0),
    ("total_bits_up", "uplink (Mbit)", 1e-6),
    ("total_bits_down", "downlink (Mbit)", 1e-6),
    ("total_energy_j", "energy (J)", 1.0),
    ("final_accuracy_var", "device-accuracy variance (%²)", 1e4),
)


# --------------------------------------------------------------------------- numbers


def group_metrics(group: Group, thresholds: Sequence[float]) -> dict:
    """``{algorithm: {(metric, threshold): {seed: value}}}`` of a group's runs."""
    out: dict = {}
    for run in group.runs:
        for alg, cols in run.series.items():
            for key, value in algorithm_metrics(cols, run.config, thresholds).items():
                out.setdefault(alg, {}).setdefault(key, {})[run.seed] = value
    return out


def rank_by_time(stats: dict, threshold: float) -> list[str]:
    """Algorithms ranked by time to ``threshold`` (module docstring); unranked ones left out."""
    keyed = []
    for alg, s in stats.items():
        iv: Interval = s[(TIME, threshold)]
        if iv.n > 0:
            keyed.append((iv.n < iv.n_total, -iv.n, iv.mean, alg))
    return [k[-1] for k in sorted(keyed)]


def primary_threshold(tables: list[dict], thresholds: Sequence[float]) -> Optional[float]:
    """The highest threshold that some algorithm reaches in every seed of every group (else the lowest)."""
    for t in sorted(thresholds, reverse=True):
        if all(any(s[(TIME, t)].n == s[(TIME, t)].n_total and s[(TIME, t)].n > 0 for s in stats.values())
               for stats in tables):
            return t
    return min(thresholds) if thresholds else None


def build(paths: Iterable[Path], thresholds: Optional[Sequence[float]] = None, baselines: Sequence[str] = ()) -> dict:
    """Everything a report holds: the groups, per group the statistics, ranks and paired differences.

    Paired differences: every algorithm against the group's leader of each
    metric, and against each algorithm of ``baselines`` (e.g. a method's
    floor), as ``{(metric key, algorithm, reference, role): Interval}`` with
    role ``"leader"`` or ``"baseline"`` (a baseline that leads appears in both).
    """
    runs = [load_run(f.folder) for f in expand(paths)]
    if not runs:
        raise RunFolderError("no run folder given")
    held = sorted({a for r in runs for a in r.series})
    for b in baselines:
        if b not in held:
            raise RunFolderError(f"--baseline {b!r}: no run given holds this algorithm; they hold: {', '.join(held)}")
    if not thresholds:
        thresholds = sorted({float(t) for r in runs for t in r.config.get("run", {}).get("accuracy_thresholds", [])})
    thresholds = sorted(set(float(t) for t in thresholds))
    groups = group_runs(runs)
    display = {}
    for r in runs:
        display.update(r.display)
    tables, ranks, paired = [], [], []
    for g in groups:
        per_seed = group_metrics(g, thresholds)
        stats = {alg: {k: mean_interval([v[s] for s in g.seeds if s in v]) for k, v in m.items()}
                 for alg, m in per_seed.items()}
        for alg in stats:  # n_total counts the seeds of the group (an algorithm absent from a run counts as missing)
            stats[alg] = {k: Interval(iv.mean, iv.low, iv.high, iv.n, len(g.seeds)) for k, iv in stats[alg].items()}
        r = {t: rank_by_time(stats, t) for t in thresholds}
        by_final = sorted((a for a in stats if stats[a][("final_accuracy", None)].n),
                          key=lambda a: -stats[a][("final_accuracy", None)].mean)
        r[None] = by_final
        tables.append(stats)
        ranks.append(r)
        pairs = {}
        for key in [("final_accuracy", None)] + [(TIME, t) for t in thresholds]:
            order = r[key[1]]
            if not order:
                continue
            for ref, role in [(order[0], "leader")] + [(b, "baseline") for b in baselines if b in stats]:
                for alg in stats:
                    if alg != ref:
                        pairs[(key, alg, ref, role)] = paired_difference(per_seed[alg][key], per_seed[ref][key])
        paired.append(pairs)
    return {"groups": groups, "thresholds": thresholds, "stats": tables, "ranks": ranks, "paired": paired,
            "display": display, "primary": primary_threshold(tables, thresholds)}


def leaderboard_rows(report: dict) -> tuple[list[str], list[list]]:
    """(header, rows) of ``leaderboard.csv``: one row per group × algorithm × metric (× threshold)."""
    point_keys = sorted({k for g in report["groups"] for k in g.point})
    header = ["fingerprint", "scenario", *point_keys, "algorithm", "display", "metric", "threshold", "n_seeds", "n",
              "mean", "ci_low", "ci_high", "rank"]
    rows = []
    for g, stats, ranks in zip(report["groups"], report["stats"], report["ranks"]):
        for alg in ranks[None] + [a for a in stats if a not in ranks[None]]:
            for (metric, t), iv in stats[alg].items():
                order = ranks[t] if metric in (TIME, "final_accuracy") else []
                rank = order.index(alg) + 1 if alg in order else ""
                rows.append([g.fingerprint, g.config.get("name", ""), *[g.point.get(k, "") for k in point_keys], alg,
                             report["display"].get(alg, alg), metric, "" if t is None else t, iv.n_total, iv.n,
                             iv.mean, iv.low, iv.high, rank])
    return header, rows


def paired_rows(report: dict) -> tuple[list[str], list[list]]:
    point_keys = sorted({k for g in report["groups"] for k in g.point})
    header = ["fingerprint", *point_keys, "metric", "threshold", "algorithm", "reference", "reference_is", "n",
              "mean_difference", "ci_low", "ci_high", "interval_excludes_zero"]
    rows = []
    for g, pairs in zip(report["groups"], report["paired"]):
        for ((metric, t), alg, ref, role), iv in pairs.items():
            rows.append([g.fingerprint, *[g.point.get(k, "") for k in point_keys], metric, "" if t is None else t,
                         alg, ref, role, iv.n, iv.mean, iv.low, iv.high, iv.excludes_zero])
    return header, rows


# --------------------------------------------------------------------------- Markdown


def fmt(iv: Interval, scale: float = 1.0, digits: int = 3) -> str:
    """``mean [low, high]`` (scaled), ``mean`` alone for one seed, ``—`` for none; ``k/n`` seeds when some lack it."""
    if iv.n == 0:
        return "—"
    g = lambda x: f"{x * scale:.{digits}g}"  # noqa: E731
    text = g(iv.mean) if iv.n < 2 else f"{g(iv.mean)} [{g(iv.low)}, {g(iv.high)}]"
    return text + (f" ({iv.n}/{iv.n_total} seeds)" if iv.n < iv.n_total else "")


def markdown(report: dict) -> str:
    thresholds, primary, display = report["thresholds"], report["primary"], report["display"]
    name = lambda a: display.get(a, a)  # noqa: E731
    out = io.StringIO()
    w = out.write
    w("# Leaderboard\n\n")
    w("Each cell: mean over seeds [95 % Student-t interval]; times are simulated seconds to the first round whose "
      "mean device accuracy reaches the threshold; “(k/n seeds)” when only k of the n seeds reach it; "
      "final accuracy by the run's plateau rule. Ranked by time to "
      f"{'—' if primary is None else f'{primary:g}'} (the highest threshold some algorithm reaches in every seed "
      "of every group); algorithms that never reach it follow, by final accuracy.\n\n")
    for g, stats, ranks, pairs in zip(report["groups"], report["stats"], report["ranks"], report["paired"]):
        w(f"## {g.label}\n\n")
        w(f"Scenario `{g.config.get('name', '')}` (fingerprint `{g.fingerprint[:12]}`), seeds "
          f"{', '.join(map(str, g.seeds))}.\n\n")
        order = ranks.get(primary, []) if primary is not None else []
        rest = [a for a in ranks[None] if a not in order] + [a for a in stats if a not in order and a not in ranks[None]]
        cols = [f"time to {t:g} (s)" for t in thresholds] + [label for _, label, _ in TABLE_METRICS]
        w("| rank | algorithm | " + " | ".join(cols) + " |\n")
        w("| --- | --- | " + " | ".join("---" for _ in cols) + " |\n")
        for i, alg in enumerate(order + rest):
            s = stats[alg]
            cells = [fmt(s[(TIME, t)]) for t in thresholds] + [fmt(s[(m, None)], scale) for m, _, scale in TABLE_METRICS]
            w(f"| {i + 1 if alg in order else ''} | {name(alg)} | " + " | ".join(cells) + " |\n")
        for role in ("leader", "baseline"):
            shown = [(k, iv) for k, iv in pairs.items() if k[3] == role and not (k[0][0] == TIME and k[0][1] != primary)]
            if not shown:
                continue
            against = "the leader" if role == "leader" else "the baseline"
            w(f"\nPaired differences against {against} (same seeds; an interval that excludes 0 marks a real "
              "difference at 95 %):\n\n")
            for ((metric, t), alg, ref, _), iv in shown:
                what = "final accuracy (points)" if metric == "final_accuracy" else f"time to {t:g} (s)"
                scale = 100.0 if metric == "final_accuracy" else 1.0
                verdict = "real" if iv.excludes_zero else ("not resolved" if iv.n >= 2 else "one seed: no interval")
                w(f"- {name(alg)} − {name(ref)}, {what}: {fmt(iv, scale)} — {verdict}\n")
        w("\n")
    changes = ranking_changes(report)
    if changes:
        w("## Where the ranking changes\n\n")
        w(f"Ranking by time to {primary:g} at each grid point; ◆ where it differs from the previous point.\n\n")
        w("| grid point | ranking | |\n| --- | --- | --- |\n")
        for label, order, changed in changes:
            w(f"| {label} | {' < '.join(name(a) for a in order) or '—'} | {'◆' if changed else ''} |\n")
    return out.getvalue()


def ranking_changes(report: dict) -> list[tuple[str, list[str], bool]]:
    """(grid point, ranking by time to the primary threshold, differs from the previous point) per group;
    empty with a single group. Groups are ordered by their grid values (power, then bandwidth)."""
    if len(report["groups"]) < 2 or report["primary"] is None:
        return []
    t = report["primary"]
    items = sorted(zip(report["groups"], report["ranks"]), key=lambda x: _point_key(x[0]))
    out, previous = [], None
    for g, ranks in items:
        order = ranks.get(t, [])
        out.append((g.label, order, previous is not None and order != previous))
        previous = order
    return out


def _point_key(g: Group) -> tuple:
    def num(v):
        try:
            return (0, float(v))
        except (TypeError, ValueError):
            return (1, str(v))

    keys = [POWER_KEY] * (POWER_KEY in g.point) + [k for k in sorted(g.point) if k != POWER_KEY]
    return tuple(num(g.point.get(k)) for k in keys)
