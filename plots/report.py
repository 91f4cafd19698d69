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

A threshold T is reached at the end of the first round from which the accuracy
stays at or above T for k evaluated rounds (``--sustain k``; default each run's
``run.sustain_rounds`` rule, 3 unless set — the rule of ``summary.json``), so a
method that touches T once and falls back has not reached it.

Ranking rule (``--rank-by``, :data:`RANK_BY`): by the time (default), device
energy or uplink bits to a threshold T: algorithms that reach T in every seed,
by mean cost; then those that reach it in some seeds (more seeds first, then
mean cost over those); those that never reach it are unranked. By final or best
accuracy: highest mean first. An algorithm whose training diverged in some seed
of a group (:func:`edgesim.results.reading.read_divergence`) is marked there,
with each seed's round, and never ranked or paired: its rounds before it
diverged fill its cells.
"""

from __future__ import annotations

import io
from math import nan
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from edgesim.results.metrics import THRESHOLD_METRICS, algorithm_metrics, sustain_rounds
from edgesim.results.reading import Divergence, RunFolderError, divergence_notes, expand, load_run
from edgesim.results.stats import Group, Interval, group_runs, mean_interval, paired_difference, variance_interval

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


# --rank-by whose metric no column of the table shows: (its column's label, scale); shown first
RANKED_COLUMNS = {
    "energy": ("energy to {t:g} (J)", 1.0),
    "bits": ("uplink to {t:g} (Mbit)", 1e-6),
    "best": ("best accuracy (%)", 100.0),
}

# --------------------------------------------------------------------------- numbers


# --rank-by: (metric, needs a threshold, what the Markdown calls it); a threshold metric ranks lower-first with the
# reach rule of the module docstring, an accuracy higher-first
RANK_BY = {
    "time": (TIME, True, "simulated time to"),
    "energy": (THRESHOLD_METRICS["energy_j"], True, "device energy to"),
    "bits": (THRESHOLD_METRICS["bits_up"], True, "uplink bits to"),
    "final": ("final_accuracy", False, "final accuracy"),
    "best": ("best_accuracy", False, "best accuracy"),
}


def group_metrics(group: Group, thresholds: Sequence[float], sustain: Optional[int] = None) -> dict:
    """``{algorithm: {(metric, threshold): {seed: value}}}`` of a group's runs; a threshold is reached once the
    accuracy holds it ``sustain`` rounds (default: each run's own rule, as in its ``summary.json``)."""
    out: dict = {}
    for run in group.runs:
        for alg, cols in run.series.items():
            for key, value in algorithm_metrics(cols, run.config, thresholds, sustain).items():
                out.setdefault(alg, {}).setdefault(key, {})[run.seed] = value
    return out


def rank(stats: dict, metric: str, threshold: Optional[float] = None) -> list[str]:
    """Algorithms ranked by ``metric`` (at ``threshold``): a cost to reach a threshold by the reach rule of the
    module docstring (every seed first, then more seeds, then the mean), an accuracy highest first; algorithms
    without a value are left out."""
    keyed = []
    for alg, s in stats.items():
        iv: Interval = s[(metric, threshold)]
        if iv.n > 0:
            keyed.append((iv.n < iv.n_total, -iv.n, iv.mean, alg) if threshold is not None else (-iv.mean, alg))
    return [k[-1] for k in sorted(keyed)]


def rank_by_time(stats: dict, threshold: float) -> list[str]:
    """Algorithms ranked by time to ``threshold`` (module docstring); unranked ones left out."""
    return rank(stats, TIME, threshold)


def primary_threshold(tables: list[dict], thresholds: Sequence[float]) -> Optional[float]:
    """The highest threshold that some algorithm reaches in every seed of every group (else the lowest)."""
    for t in sorted(thresholds, reverse=True):
        if all(any(s[(TIME, t)].n == s[(TIME, t)].n_total and s[(TIME, t)].n > 0 for s in stats.values())
               for stats in tables):
            return t
    return min(thresholds) if thresholds else None


def build(paths: Iterable[Path], thresholds: Optional[Sequence[float]] = None, baselines: Sequence[str] = (),
          sustain: Optional[int] = None, rank_by: str = "time") -> dict:
    """Everything a report holds: the groups, per group the statistics, ranks and paired differences.

    Paired differences: every algorithm against the group's leader of each
    metric, and against each algorithm of ``baselines`` (e.g. a method's
    floor), as ``{(metric key, algorithm, reference, role): Interval}`` with
    role ``"leader"`` or ``"baseline"`` (a baseline that leads appears in both).
    ``sustain``: rounds a threshold must hold (``--sustain``; default each run's
    ``run.sustain_rounds`` rule, as its ``summary.json``); ``rank_by``: the
    leaderboard's order, a key of :data:`RANK_BY` (``--rank-by``).
    """
    if rank_by not in RANK_BY:
        raise RunFolderError(f"⟨rank-by=⟩{rank_by!r}: expected one of {', '.join(RANK_BY)}")
    if sustain is not None and (not isinstance(sustain, int) or isinstance(sustain, bool) or sustain < 1):
        raise RunFolderError(f"⟨sustain=⟩{sustain!r}: expected a number of rounds, an integer >= 1")
    runs = [load_run(f.folder) for f in expand(paths)]
    if not runs:
        raise RunFolderError("no run folder given")
    held = sorted({a for r in runs for a in r.series})
    for b in baselines:
        if b not in held:
            raise RunFolderError(f"⟨baseline=⟩{b!r}: no run given holds this algorithm; they hold: {', '.join(held)}")
    if not thresholds:
        thresholds = sorted({float(t) for r in runs for t in r.config.get("run", {}).get("accuracy_thresholds", [])})
    thresholds = sorted(set(float(t) for t in thresholds))
    groups = group_runs(runs)
    display = {}
    for r in runs:
        display.update(r.display)
    tables, ranks, paired, diverged, per_seeds = [], [], [], [], []
    for g in groups:
        per_seed = group_metrics(g, thresholds, sustain)
        per_seeds.append(per_seed)
        stats = {alg: {k: mean_interval([v[s] for s in g.seeds if s in v]) for k, v in m.items()}
                 for alg, m in per_seed.items()}
        n_devices = int(g.config.get("system", {}).get("n_devices", 0))
        for alg, m in per_seed.items():  # a variance's interval: chi-square, never below zero
            if ("final_accuracy_var", None) in m:
                v = m[("final_accuracy_var", None)]
                stats[alg][("final_accuracy_var", None)] = variance_interval([v[s] for s in g.seeds if s in v], n_devices)
        for alg in stats:  # n_total counts the seeds of the group (an algorithm absent from a run counts as missing)
            stats[alg] = {k: Interval(iv.mean, iv.low, iv.high, iv.n, len(g.seeds)) for k, iv in stats[alg].items()}
        div = group_divergences(g)
        keys = next(iter(stats.values())).keys()  # a run holds a result of some algorithm (scan_rounds)
        for alg in div:  # diverged before any result in every seed: a row of its own, nothing in it
            stats.setdefault(alg, {k: Interval(nan, nan, nan, 0, len(g.seeds)) for k in keys})
        ranked = {a: s for a, s in stats.items() if a not in div}  # a diverged algorithm is marked, never ranked
        r = {t: rank_by_time(ranked, t) for t in thresholds}
        by_final = sorted((a for a in ranked if ranked[a][("final_accuracy", None)].n),
                          key=lambda a: -ranked[a][("final_accuracy", None)].mean)
        r[None] = by_final
        for t in (thresholds if RANK_BY[rank_by][1] else [None]):
            r[(rank_by, t)] = rank(ranked, RANK_BY[rank_by][0], t)
        tables.append(stats)
        diverged.append(div)
        ranks.append(r)
        pairs = {}
        extra = [(RANK_BY[rank_by][0], t) for t in (thresholds if RANK_BY[rank_by][1] else [None])]
        for key in list(dict.fromkeys([("final_accuracy", None)] + [(TIME, t) for t in thresholds] + extra)):
            order = r[(rank_by, key[1])] if key[0] == RANK_BY[rank_by][0] else r[key[1]]
            if not order:
                continue
            for ref, role in [(order[0], "leader")] + [(b, "baseline") for b in baselines if b in ranked]:
                for alg in ranked:
                    if alg != ref:
                        pairs[(key, alg, ref, role)] = paired_difference(per_seed[alg][key], per_seed[ref][key])
        paired.append(pairs)
    rules = sorted({sustain_rounds(r.config) for r in runs}) if sustain is None else [sustain]
    ranked_tables = [{a: s for a, s in stats.items() if a not in div} for stats, div in zip(tables, diverged)]
    return {"groups": groups, "thresholds": thresholds, "stats": tables, "ranks": ranks, "paired": paired,
            "per_seed": per_seeds,
            "display": display, "primary": primary_threshold(ranked_tables, thresholds), "rank_by": rank_by,
            "sustain": rules, "diverged": diverged}


def group_divergences(group: Group) -> dict[str, list[Divergence]]:
    """{algorithm: its :class:`Divergence` in each run of the group where it diverged} (the readers' one rule,
    :func:`edgesim.results.reading.read_divergence`), in the group's seed order."""
    out: dict[str, list[Divergence]] = {}
    for run in group.runs:
        for alg, d in run.diverged.items():
            out.setdefault(alg, []).append(d)
    return out


def report_divergence_notes(report: dict) -> list[str]:
    """One line per algorithm that diverged somewhere in the report: in which runs, from which round."""
    return divergence_notes((d for div in report["diverged"] for ds in div.values() for d in ds),
                            "marked in the leaderboard, not ranked")


def divergence_cell(divs: list[Divergence], seeds: dict) -> str:
    """Where an algorithm diverged, for a table: ``seed 1 from round 0, seed 2 from round 4``."""
    return ", ".join(f"seed {seeds.get(d.run, '?')} from round {d.round}" for d in divs)


def leaders(report: dict, ranks: dict) -> list[str]:
    """A group's leaderboard order by the report's ``rank_by`` (at the primary threshold for a cost to reach one)."""
    by = report["rank_by"]
    return ranks.get((by, report["primary"] if RANK_BY[by][1] else None), [])


def leaderboard_rows(report: dict) -> tuple[list[str], list[list]]:
    """(header, rows) of ``leaderboard.csv``: one row per group × algorithm × metric (× threshold)."""
    point_keys = sorted({k for g in report["groups"] for k in g.point})
    header = ["fingerprint", "scenario", *point_keys, "algorithm", "display", "metric", "threshold", "n_seeds", "n",
              "mean", "ci_low", "ci_high", "rank", "diverged"]
    rows = []
    for g, stats, ranks, div in zip(report["groups"], report["stats"], report["ranks"], report["diverged"]):
        seeds = {r.path: r.seed for r in g.runs}
        for alg in ranks[None] + [a for a in stats if a not in ranks[None]]:
            for (metric, t), iv in stats[alg].items():
                by = report["rank_by"]
                order = (ranks[(by, t)] if metric == RANK_BY[by][0] and (by, t) in ranks
                         else ranks[t] if metric in (TIME, "final_accuracy") else [])
                rank = order.index(alg) + 1 if alg in order else ""
                rows.append([g.fingerprint, g.config.get("name", ""), *[g.point.get(k, "") for k in point_keys], alg,
                             report["display"].get(alg, alg), metric, "" if t is None else t, iv.n_total, iv.n,
                             iv.mean, iv.low, iv.high, rank, divergence_cell(div.get(alg, []), seeds)])
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
    def g(x: float) -> str:
        return f"{x * scale:.{digits}g}"

    text = g(iv.mean) if iv.n < 2 else f"{g(iv.mean)} [{g(iv.low)}, {g(iv.high)}]"
    return text + (f" ({iv.n}/{iv.n_total} seeds)" if iv.n < iv.n_total else "")


def markdown(report: dict) -> str:
    thresholds, primary, display = report["thresholds"], report["primary"], report["display"]
    def name(a: str) -> str:
        return display.get(a, a)

    out = io.StringIO()
    w = out.write
    by, sustain = report["rank_by"], report["sustain"]
    rounds = " or ".join(map(str, sustain)) + (" round" if sustain == [1] else " rounds")
    metric, needs_threshold, words = RANK_BY[by]
    if needs_threshold:
        order_text = (f"Ranked by {words} {'—' if primary is None else f'{primary:g}'} (the highest threshold some "
                      "algorithm reaches in every seed of every group); algorithms that never reach it follow, by "
                      "final accuracy.")
    else:
        order_text = f"Ranked by {words}."
    w("# Leaderboard\n\n")
    w("Each cell: mean over seeds [95 % Student-t interval]; times are simulated seconds to the end of the first round "
      f"from which the mean device accuracy stays at or above the threshold for {rounds} (a touch that falls back "
      "does not count); “(k/n seeds)” when only k of the n seeds reach it; "
      "final accuracy by the run's plateau rule; the device-accuracy variance is the mean over seeds of the variance "
      "over devices, with a 95 % chi-square interval for the devices' variance (pooled over seeds, k (N − 1) degrees "
      f"of freedom for k seeds of N devices; never below zero). {order_text}\n\n")
    for g, stats, ranks, pairs, div in zip(report["groups"], report["stats"], report["ranks"], report["paired"],
                                           report["diverged"]):
        w(f"## {g.label}\n\n")
        w(f"Scenario `{g.config.get('name', '')}` (fingerprint `{g.fingerprint[:12]}`), seeds "
          f"{', '.join(map(str, g.seeds))}.\n\n")
        seeds = {r.path: r.seed for r in g.runs}
        order = leaders(report, ranks) if (primary is not None or not RANK_BY[by][1]) else []
        rest = [a for a in ranks[None] if a not in order] + [a for a in stats if a not in order and a not in ranks[None]]
        ranked_col = RANKED_COLUMNS.get(by)  # the column the order follows, when the table would not show it
        ranked_t = primary if needs_threshold else None
        cols = [f"time to {t:g} (s)" for t in thresholds] + [label for _, label, _ in TABLE_METRICS]
        if ranked_col is not None and (ranked_t is not None or not needs_threshold):
            cols = [ranked_col[0].format(t=ranked_t)] + cols
        w("| rank | algorithm | " + " | ".join(cols) + " |\n")
        w("| --- | --- | " + " | ".join("---" for _ in cols) + " |\n")
        for i, alg in enumerate(order + rest):
            s = stats[alg]
            cells = [fmt(s[(TIME, t)]) for t in thresholds] + [fmt(s[(m, None)], scale) for m, _, scale in TABLE_METRICS]
            if ranked_col is not None and (ranked_t is not None or not needs_threshold):
                cells = [fmt(s.get((RANK_BY[by][0], ranked_t), Interval(nan, nan, nan, 0, 0)), ranked_col[1])] + cells
            mark = " (diverged)" if alg in div else ""
            w(f"| {i + 1 if alg in order else ''} | {name(alg)}{mark} | " + " | ".join(cells) + " |\n")
        if div:
            w("\nDiverged, so not ranked (its cells hold its rounds before that): "
              + "; ".join(f"{name(a)} in {divergence_cell(ds, seeds)}" for a, ds in div.items()) + ".\n")
        as_baseline = {k[:3] for k in pairs if k[3] == "baseline"}  # a baseline that leads: said once, as baseline
        for role in ("leader", "baseline"):
            shown = [(k, iv) for k, iv in pairs.items() if k[3] == role and not (k[0][1] is not None and k[0][1] != primary)
                     and not (role == "leader" and k[:3] in as_baseline)]
            if not shown:
                continue
            against = "the leader" if role == "leader" else "the baseline"
            w(f"\nPaired differences against {against} (same seeds; an interval that excludes 0 marks a real "
              "difference at 95 %):\n\n")
            for ((metric, t), alg, ref, _), iv in shown:
                what = {"final_accuracy": "final accuracy (points)", "best_accuracy": "best accuracy (points)",
                        TIME: "time to {t:g} (s)", THRESHOLD_METRICS["energy_j"]: "energy to {t:g} (J)",
                        THRESHOLD_METRICS["bits_up"]: "uplink bits to {t:g}"}[metric].format(t=t)
                scale = 100.0 if metric in ("final_accuracy", "best_accuracy") else 1.0
                verdict = ("real" if iv.excludes_zero else "not resolved" if iv.n >= 2 else "one seed: no interval"
                           if iv.n == 1 else f"no seed reached {t:g}" if t is not None else "no seed has a value")
                w(f"- {name(alg)} − {name(ref)}, {what}: {fmt(iv, scale)} — {verdict}\n")
        w("\n")
    changes = ranking_changes(report)
    if changes:
        w("## Where the ranking changes\n\n")
        what = RANK_BY[report["rank_by"]][2] + (f" {primary:g}" if RANK_BY[report["rank_by"]][1] else "")
        w(f"Ranking by {what} at each grid point; ◆ where it differs from the previous point.\n\n")
        w("| grid point | ranking | |\n| --- | --- | --- |\n")
        for label, order, changed in changes:
            w(f"| {label} | {' < '.join(name(a) for a in order) or '—'} | {'◆' if changed else ''} |\n")
    return out.getvalue()


def ranking_changes(report: dict) -> list[tuple[str, list[str], bool]]:
    """(grid point, ranking by the report's ``rank_by``, differs from the previous point) per group;
    empty with a single group. Groups are ordered by their grid values (power, then bandwidth)."""
    if len(report["groups"]) < 2 or (report["primary"] is None and RANK_BY[report["rank_by"]][1]):
        return []
    items = sorted(zip(report["groups"], report["ranks"]), key=lambda x: _point_key(x[0]))
    out, previous = [], None
    for g, ranks in items:
        order = leaders(report, ranks)
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


# --------------------------------------------------------------------------- against a reference grid point

ENERGY = THRESHOLD_METRICS["energy_j"]


def parse_reference(texts: Sequence[str]) -> dict:
    """``--reference KEY=VALUE`` (repeatable) → ``{key: value}``; each value read as TOML, else as a plain word."""
    import tomllib

    out = {}
    for text in texts:
        key, sep, value = (part.strip() for part in text.partition("="))
        if not sep or not key or not value:
            raise RunFolderError(f"⟨reference=⟩{text!r}: expected KEY=VALUE, a scenario key and the reference "
                                 f"point's value, e.g. ⟨reference=⟩resources.bandwidth=equal")
        if key in out:
            raise RunFolderError(f"⟨reference=⟩{text!r}: {key} given twice ({out[key]!r} and {value}); expected one "
                                 f"value per key (the reference point)")
        try:
            out[key] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            out[key] = value
    return out


def _same(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def algorithm_threshold(report: dict, alg: str) -> Optional[float]:
    """The highest threshold ``alg`` reaches in every seed of every group that holds it (else the lowest threshold
    some seed reaches; ``None``: never reached)."""
    held = [stats[alg] for stats in report["stats"] if alg in stats]
    for t in sorted(report["thresholds"], reverse=True):
        if held and all(s[(TIME, t)].n == s[(TIME, t)].n_total > 0 for s in held):
            return t
    reached = [t for t in report["thresholds"] if any(s[(TIME, t)].n > 0 for s in held)]
    return min(reached) if reached else None


def comparison(report: dict, reference: Mapping) -> dict:
    """Every group against its reference group — the group whose scenario equals its own except that the keys of
    ``reference`` take its values (``--reference``, e.g. the default policies) — per algorithm, paired by seed
    (the seeds of a sweep share devices, data and channels: common random numbers). Time and device energy are to
    the algorithm's own threshold (:func:`algorithm_threshold`). Returns ``{"reference", "others", "thresholds":
    {alg: T}, "rows": [...]}``, a row per group × algorithm: ``point`` (the other varying keys), ``policy`` (the
    reference keys' values), the intervals ``time``, ``energy``, ``final`` and the paired differences ``d_time``,
    ``d_energy``, ``d_final`` (``None`` where the group has no reference group)."""
    from edgesim.results.fingerprint import scenario_keys

    groups = report["groups"]
    flat = [scenario_keys(g.config) for g in groups]
    unknown = [k for k in reference if not any(k in f for f in flat)]
    if unknown:
        raise RunFolderError(f"⟨reference=⟩{unknown[0]}=...: not a key of these runs' scenarios; expected a scenario "
                             f"key such as {', '.join(sorted(groups[0].point)[:3]) or 'resources.bandwidth'}")
    others = sorted({k for g in groups for k in g.point if k not in reference})
    policy_keys = list(reference)

    def other_of(i):
        return tuple(str(flat[i].get(k)) for k in others)

    refs = {other_of(i): i for i in range(len(groups))
            if all(_same(flat[i].get(k), v) for k, v in reference.items())}
    if not refs:
        shown = ", ".join(f"{k} = {v!r}" for k, v in reference.items())
        raise RunFolderError(f"⟨reference⟩: no group of these runs has {shown}; expected the values of one grid point")
    varying = {k for g in groups for k in g.point}
    fixed = [k for k in reference if k not in varying]
    if len(fixed) == len(reference):  # every point would be paired with itself: every difference 0 [0, 0]
        raise RunFolderError(f"⟨reference=⟩{fixed[0]}=...: {fixed[0]} does not vary between these runs (each grid point "
                             f"would be its own reference); expected a key that varies: "
                             f"{', '.join(sorted(varying)) or 'none does (one grid point)'}")
    diverged = report.get("diverged") or [{} for _ in groups]
    algs = sorted({a for stats in report["stats"] for a in stats})
    thresholds = {a: algorithm_threshold(report, a) for a in algs}
    rows = []
    for i in range(len(groups)):
        j = refs.get(other_of(i))
        for alg in algs:
            t = thresholds[alg]
            if t is None or alg not in report["per_seed"][i] or alg in diverged[i]:
                continue
            s, seeds = report["stats"][i][alg], report["per_seed"][i][alg]
            row = {"point": {k: flat[i].get(k) for k in others}, "policy": {k: flat[i].get(k) for k in policy_keys},
                   "algorithm": alg, "threshold": t, "is_reference": j == i, "time": s[(TIME, t)],
                   "energy": s[(ENERGY, t)], "final": s[("final_accuracy", None)],
                   "d_time": None, "d_energy": None, "d_final": None}
            ref = report["per_seed"][j].get(alg) if j is not None and alg not in diverged[j] else None
            if ref is not None:
                row.update(d_time=paired_difference(seeds[(TIME, t)], ref[(TIME, t)]),
                           d_energy=paired_difference(seeds[(ENERGY, t)], ref[(ENERGY, t)]),
                           d_final=paired_difference(seeds[("final_accuracy", None)], ref[("final_accuracy", None)]))
            rows.append(row)
    return {"reference": dict(reference), "others": others, "thresholds": thresholds, "rows": rows}


def comparison_rows(comp: dict) -> tuple[list[str], list[list]]:
    """(header, rows) of ``against_reference.csv``: one row per group × algorithm × metric."""
    others, keys = comp["others"], list(comp["reference"])
    header = [*others, *keys, "algorithm", "metric", "threshold", "n_seeds", "n", "mean", "ci_low", "ci_high",
              "difference_n", "difference_mean", "difference_ci_low", "difference_ci_high", "excludes_zero"]
    out = []
    for r in comp["rows"]:
        for metric, iv, d in ((TIME, r["time"], r["d_time"]), (ENERGY, r["energy"], r["d_energy"]),
                              ("final_accuracy", r["final"], r["d_final"])):
            diff = [d.n, d.mean, d.low, d.high, d.excludes_zero] if d is not None else ["", "", "", "", ""]
            out.append([*[r["point"][k] for k in others], *[r["policy"][k] for k in keys], r["algorithm"], metric,
                        "" if metric == "final_accuracy" else r["threshold"], iv.n_total, iv.n, iv.mean, iv.low,
                        iv.high, *diff])
    return header, out


def point_label(point: Mapping) -> str:
    """The other keys of a compared grid point as a table or figure names them: ``access=fdma, 0.1 MHz``."""
    def one(k, v):
        try:
            return f"{float(v) / 1e6:g} MHz" if k == BANDWIDTH_KEY else f"{k.rsplit('.', 1)[-1]}={v}"
        except (TypeError, ValueError):
            return f"{k.rsplit('.', 1)[-1]}={v}"

    return ", ".join(one(k, v) for k, v in point.items())


def point_order(point: Mapping) -> tuple:
    """A grid point's sort key: its values in order, numbers by value before text (1e5 before 1e6 before "fdma")."""
    def num(v):
        try:
            return (0, float(v), "")
        except (TypeError, ValueError):
            return (1, 0.0, str(v))

    return tuple(num(v) for v in point.values())


def policy_label(policy: Mapping) -> str:
    """A combination of the reference keys' values as a figure or table names it: the values, ``/``-separated."""
    return " / ".join(str(v) for v in policy.values())


def comparison_markdown(comp: dict, display: Mapping[str, str]) -> str:
    """The paired table of every group against its reference group, per algorithm (Markdown)."""
    out = io.StringIO()
    w = out.write
    ref = ", ".join(f"{k} = {v}" for k, v in comp["reference"].items())
    w("## Against the reference point\n\n")
    w(f"Each grid point against the one with {ref} and the same other values ({', '.join(comp['others']) or '—'}), "
      "per algorithm: mean over seeds [95 % interval], and Δ = the point minus the reference, paired by seed "
      "(the seeds see the same devices, data and channels), mean [95 % interval]. Time and device energy to each "
      "algorithm's threshold: the highest it reaches in every seed of every group. Policy: "
      f"{' / '.join(comp['reference'])}.\n\n")
    for alg, t in comp["thresholds"].items():
        rows = sorted((r for r in comp["rows"] if r["algorithm"] == alg),
                      key=lambda r: (point_order(r["point"]), not r["is_reference"]))
        if t is None or not rows:
            continue
        w(f"### {display.get(alg, alg)}: to {t:g}\n\n")
        w(f"| grid point | policy | time to {t:g} (s) | energy to {t:g} (J) | final accuracy (%) | Δ time (s) | "
          "Δ energy (J) | Δ final accuracy (points) |\n")
        w("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
        for r in rows:
            point = point_label(r["point"]) or "—"
            name = policy_label(r["policy"]) + (" (reference)" if r["is_reference"] else "")
            diffs = ["0" if r["is_reference"] else ("—" if d is None else fmt(d, scale))
                     for d, scale in ((r["d_time"], 1.0), (r["d_energy"], 1.0), (r["d_final"], 100.0))]
            w(f"| {point} | {name} | {fmt(r['time'])} | {fmt(r['energy'])} | {fmt(r['final'], 100.0)} | "
              + " | ".join(diffs) + " |\n")
        w("\n")
    return out.getvalue()
