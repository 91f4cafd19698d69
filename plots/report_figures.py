"""The figures of ``edgesim report`` (:mod:`edgesim.plots.report`), drawn from a built report.

- :func:`plot_tta_vs_bandwidth` — simulated time to the report's primary
  accuracy threshold against uplink bandwidth: one colour per algorithm, one
  line style per transmit power, the 95 % interval over seeds as error bars;
  a point where not every seed reached the threshold is drawn hollow.
- :func:`plot_accuracy_extremes` — accuracy against simulated time at the
  scarcest and at the richest bandwidth (a row per transmit power): each
  algorithm's mean over seeds with its 95 % interval as a band.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from edgesim.plots.curves import COLUMN_WIDTH_IN, PAGE_WIDTH_IN, algorithm_colors, save_figures, style_axes
from edgesim.plots.report import BANDWIDTH_KEY, POWER_KEY, TIME, point_label, point_order, policy_label
from edgesim.plots.style import algorithm_styles, figure_size, fs, lw
from edgesim.results.stats import mean_interval

LINESTYLES = ("-", "--", ":", "-.")


def short_label(point: dict) -> str:
    """A grid point as a figure names it: ``0.25 MHz, 10 dBm``, other keys as ``name=value``."""
    parts = []
    for k, v in point.items():
        f = _float(v)
        if k == BANDWIDTH_KEY and f is not None:
            parts.append(f"{f / 1e6:g} MHz")
        elif k == POWER_KEY and f is not None:
            parts.append(f"{f:g} dBm")
        else:
            parts.append(f"{k.rsplit('.', 1)[-1]}={v}")
    return ", ".join(parts)


def _float(v) -> Optional[float]:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def study_algorithms(report: dict) -> list[str]:
    """Every algorithm of the report (the study): each figure styles an algorithm by its place among them all."""
    return sorted({a for stats in report["stats"] for a in stats}
                  | {a for g in report["groups"] for r in g.runs for a in r.series})


def plot_tta_vs_bandwidth(report: dict, out_png: Path) -> Optional[Path]:
    """Time to the primary threshold vs bandwidth (module docstring); ``None`` when bandwidth does not vary."""
    groups, t = report["groups"], report["primary"]
    if t is None or not any(BANDWIDTH_KEY in g.point for g in groups):
        return None
    names = report["display"]
    algs = sorted({a for stats in report["stats"] for a in stats})
    colors, styles = algorithm_colors(study_algorithms(report)), algorithm_styles(study_algorithms(report))
    drawn = set()
    powers = sorted({g.point.get(POWER_KEY) for g in groups}, key=lambda p: (_float(p) is None, _float(p) or 0))
    fig, ax = plt.subplots(figsize=figure_size(COLUMN_WIDTH_IN * 1.45, 2.6), dpi=200)
    for pi, power in enumerate(powers):
        for alg in algs:
            pts = []
            for g, stats in zip(groups, report["stats"]):
                if g.point.get(POWER_KEY) != power or alg not in stats:
                    continue
                iv = stats[alg][(TIME, t)]
                b = _float(g.point.get(BANDWIDTH_KEY))
                if b is not None and iv.n > 0:
                    pts.append((b / 1e6, iv))
            if not pts:
                continue
            pts.sort(key=lambda p: p[0])
            x = np.array([p[0] for p in pts])
            y = np.array([p[1].mean for p in pts])
            # a time is never negative: the bar stops at 0 s where a few seeds' t-interval reaches below it
            err = np.array([[p[1].mean - max(p[1].low, 0.0), p[1].high - p[1].mean] if p[1].n >= 2 else [0, 0]
                            for p in pts]).T
            ax.errorbar(x, y, yerr=err, color=colors[alg], ls=LINESTYLES[pi % len(LINESTYLES)], lw=lw(1.0), capsize=2)
            drawn.add(alg)
            for complete, style in ((True, {"mfc": colors[alg]}), (False, {"mfc": "white"})):
                xy = [(p[0], p[1].mean) for p in pts if (p[1].n == p[1].n_total) == complete]
                if xy:
                    ax.plot(*zip(*xy), ls="none", marker=styles[alg]["marker"], ms=fs(3.5), mec=colors[alg],
                            label="_nolegend_", **style)
    ax.set_xscale("log")
    ticks = sorted({_float(g.point.get(BANDWIDTH_KEY)) / 1e6 for g in groups if _float(g.point.get(BANDWIDTH_KEY))})
    ax.set_xticks(ticks, [f"{x:g}" for x in ticks])
    ax.minorticks_off()
    style_axes(ax, "Uplink bandwidth (MHz)", f"Time to {t * 100:g} % accuracy (s)")
    handles = [Line2D([], [], color=colors[a], lw=lw(1.2), marker=styles[a]["marker"], ms=fs(3.5), label=names.get(a, a))
               for a in algs if a in drawn]  # a method without a curve has no legend entry
    if len(powers) > 1:
        handles += [Line2D([], [], color="0.3", ls=LINESTYLES[i % len(LINESTYLES)], label=f"{p} dBm")
                    for i, p in enumerate(powers)]
    ax.legend(handles=handles, fontsize=fs(6), frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    # above the axes, where no curve or tick label can run into it
    ax.set_title("bars: 95 % interval over seeds (cut at 0 s); hollow: not every seed reached it",
                 loc="left", fontsize=fs(5.5), color="0.35")
    fig.tight_layout()
    return save_figures(fig, out_png)[0]


def _mean_band(curves: list[tuple[np.ndarray, np.ndarray]], n: int = 150):
    """(grid, mean, low, high): the curves on a common time grid up to the shortest one's end, 95 % t-interval."""
    end = min(x.max() for x, _ in curves)
    grid = np.linspace(0.0, end, n)
    stack = np.array([np.interp(grid, x, y, left=np.nan) for x, y in curves])
    mean, low, high = (np.full(n, np.nan) for _ in range(3))
    for j in range(n):
        iv = mean_interval(list(stack[:, j]))
        mean[j], low[j], high[j] = iv.mean, iv.low, iv.high
    return grid, mean, low, high


def plot_accuracy_extremes(report: dict, out_png: Path) -> Optional[Path]:
    """Accuracy vs simulated time at the scarcest and the richest bandwidth (module docstring)."""
    groups = report["groups"]
    if not groups:
        return None
    names = report["display"]
    powers = sorted({g.point.get(POWER_KEY) for g in groups}, key=lambda p: (_float(p) is None, _float(p) or 0))
    panels = []
    for power in powers:
        gs = [g for g in groups if g.point.get(POWER_KEY) == power]
        bw = [(_float(g.point.get(BANDWIDTH_KEY)), g) for g in gs]
        known = [(b, g) for b, g in bw if b is not None]
        if known:
            lo, hi = min(known, key=lambda x: x[0])[1], max(known, key=lambda x: x[0])[1]
            panels.append([lo] if lo is hi else [lo, hi])
        else:
            panels.append([gs[0]])
    n_cols = max(len(p) for p in panels)
    algs = sorted({a for g in groups for r in g.runs for a in r.series})
    colors, styles = algorithm_colors(study_algorithms(report)), algorithm_styles(study_algorithms(report))
    fig, axes = plt.subplots(len(panels), n_cols, figsize=figure_size(PAGE_WIDTH_IN if n_cols > 1 else COLUMN_WIDTH_IN * 1.45,
                                                           2.3 * len(panels)), dpi=200, squeeze=False)
    for row, gs in enumerate(panels):
        for col in range(n_cols):
            ax = axes[row][col]
            if col >= len(gs):
                ax.axis("off")
                continue
            g = gs[col]
            for alg in algs:
                curves = [(r.series[alg]["time_s"], r.series[alg]["accuracy"]) for r in g.runs if alg in r.series]
                curves = [(x[~np.isnan(y)], y[~np.isnan(y)]) for x, y in curves]
                curves = [(x, y) for x, y in curves if len(x)]
                if not curves:
                    continue
                label = names.get(alg, alg)
                line = dict(color=colors[alg], lw=lw(1.0), ls=styles[alg]["linestyle"], marker=styles[alg]["marker"],
                            ms=fs(3), markevery=0.1, label=label)
                if len(curves) == 1:
                    ax.plot(curves[0][0], curves[0][1] * 100, **line)
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    grid, mean, low, high = _mean_band(curves)
                ax.plot(grid, mean * 100, **line)
                ax.fill_between(grid, low * 100, high * 100, color=colors[alg], alpha=0.2, lw=0)
            style_axes(ax, "Simulated time (s)", "Test accuracy (%)")
            ax.set_ylim(0, 100)
            ax.set_xlim(left=0)
            which = "scarcest" if col == 0 and len(gs) > 1 else ("richest" if len(gs) > 1 else "")
            title = (short_label(g.point) or g.label) + (f" ({which} bandwidth)" if which else "")
            ax.set_title(title, fontsize=fs(6.5))
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, fontsize=fs(6), frameon=False, loc="lower center", ncol=min(5, len(labels)),
                   bbox_to_anchor=(0.5, 0.0))
        fig.tight_layout(rect=(0, 0.04 * math.ceil(len(labels) / 5) / len(panels), 1, 1))
    else:
        fig.tight_layout()
    return save_figures(fig, out_png)[0]


def plot_energy_vs_time(report: dict, comp: dict, out_png: Path) -> Optional[Path]:
    """Device energy against time to accuracy, one point per grid point (``edgesim report --reference``): a panel
    per algorithm (columns) and per value of the other varying keys (rows, e.g. the band), a colour and marker per
    combination of the reference keys (the policy), the 95 % intervals over seeds as bars on both axes (hollow:
    not every seed reached the algorithm's threshold). Logarithmic axes where the points span more than 20×."""
    rows = comp["rows"]
    if not rows:
        return None
    names = report["display"]
    algs = [a for a, t in comp["thresholds"].items() if t is not None and any(r["algorithm"] == a for r in rows)]
    points = list(dict.fromkeys(tuple(r["point"].items()) for r in rows))
    points.sort(key=lambda p: point_order(dict(p)))
    policies = list(dict.fromkeys(policy_label(r["policy"]) for r in rows))
    cmap = plt.get_cmap("tab10" if len(policies) <= 10 else "tab20")
    markers = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
    color = {p: cmap(i % cmap.N) for i, p in enumerate(policies)}
    marker = {p: markers[i % len(markers)] for i, p in enumerate(policies)}
    fig, axes = plt.subplots(len(points), len(algs), dpi=200, squeeze=False,
                             figsize=figure_size(PAGE_WIDTH_IN if len(algs) > 1 else COLUMN_WIDTH_IN * 1.45,
                                                 2.1 * len(points) + 0.5))
    for ri, point in enumerate(points):
        for ci, alg in enumerate(algs):
            ax = axes[ri][ci]
            t = comp["thresholds"][alg]
            xs, ys = [], []
            for r in rows:
                if r["algorithm"] != alg or tuple(r["point"].items()) != point:
                    continue
                tx, en = r["time"], r["energy"]
                if tx.n == 0 or en.n == 0:
                    continue
                p = policy_label(r["policy"])

                def bar(iv):
                    return [[iv.mean - max(iv.low, 0.0)], [iv.high - iv.mean]] if iv.n >= 2 else None

                complete = tx.n == tx.n_total
                ax.errorbar([tx.mean], [en.mean], xerr=bar(tx), yerr=bar(en), color=color[p], marker=marker[p],
                            ms=fs(4), mfc=color[p] if complete else "white", lw=lw(0.8), capsize=1.5, ls="none")
                xs.append(tx.mean)
                ys.append(en.mean)
            for values, setter in ((xs, ax.set_xscale), (ys, ax.set_yscale)):
                if values and min(values) > 0 and max(values) / min(values) > 20:
                    setter("log")
            style_axes(ax, f"Time to {t * 100:g} % accuracy (s)", f"Device energy to {t * 100:g} % (J)")
            title = point_label(dict(point))
            ax.set_title(f"{names.get(alg, alg)}" + (f" — {title}" if title else ""), fontsize=fs(6.5))
    handles = [Line2D([], [], color=color[p], marker=marker[p], ls="none", ms=fs(4), label=p) for p in policies]
    ncol = min(4, len(handles))
    fig.legend(handles=handles, fontsize=fs(5.5), frameon=False, loc="lower center", ncol=ncol,
               bbox_to_anchor=(0.5, 0.0), title=" / ".join(comp["reference"]), title_fontsize=fs(5.5))
    legend_rows = math.ceil(len(handles) / ncol) + 1
    fig.tight_layout(rect=(0, min(0.3, 0.13 * legend_rows / len(points)), 1, 1))
    return save_figures(fig, out_png)[0]
