"""Figures of a sweep folder (``sweep.json``, ``sweep.csv`` and its run folders).

- ``accuracy_vs_time.png``, ``accuracy_vs_uplink_bits.png``,
  ``accuracy_vs_energy.png``: one panel per grid point (rows: transmit
  power, columns: bandwidth, when both are swept), each algorithm's mean over
  seeds with its min–max band (each panel its own x range);
- ``tta_vs_bandwidth.png``: time to an accuracy threshold against the
  bandwidth, one line style per transmit power, one colour per algorithm;
- ``final_accuracy_heatmap.png``: final accuracy over (bandwidth, power),
  one panel per algorithm, on a 0–100 % colour scale.

``plot_sweep(..., formats=("png", "pdf", "svg"))`` writes each figure in each format.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Iterable, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from edgesim.plots.curves import (
    COLUMN_WIDTH_IN,
    PAGE_WIDTH_IN,
    PARAMETRIC,
    RUN_FIGURES,
    X_AXES,
    accuracy_label,
    algorithm_colors,
    collect,
    display_name,
    draw_accuracy,
    save_figures,
    style_axes,
)
from edgesim.plots.style import algorithm_styles, figure_size, fs, lw
from edgesim.results.files import SWEEP_SPEC, SWEEP_TABLE
from edgesim.results.reading import RunFolderError, Sweep

BANDWIDTH_KEY = "system.bandwidth_hz"
POWER_KEY = "system.tx_power_dbm"
LINESTYLES = ("-", "--", ":", "-.")
HEATMAP_COLUMNS = 4


def value_label(key: str, value) -> str:
    """A grid value as a reader wants it: ``1 MHz``, ``23 dBm``, ``seed 0``, else ``key=value``."""
    if key == BANDWIDTH_KEY:
        return f"{value / 1e6:g} MHz" if value >= 1e6 else f"{value / 1e3:g} kHz"
    if key.endswith("_dbm"):
        return f"{value:g} dBm"
    if key.endswith("_hz"):
        return f"{value / 1e9:g} GHz" if value >= 1e9 else f"{value / 1e6:g} MHz"
    if key.endswith("_s"):
        return f"{value:g} s"
    return f"{key.split('.')[-1]}={value}"


def _panel_grid(sweep: Sweep) -> tuple[list[list[Optional[tuple]]], str, str]:
    """Grid points laid out as rows × columns (power × bandwidth when both are swept)."""
    points = sweep.points()
    if BANDWIDTH_KEY in sweep.keys and POWER_KEY in sweep.keys and len(sweep.keys) == 2:
        bi, pi = sweep.keys.index(BANDWIDTH_KEY), sweep.keys.index(POWER_KEY)
        powers = sorted(sweep.values[POWER_KEY], reverse=True)
        bws = sorted(sweep.values[BANDWIDTH_KEY])
        layout = [[next(p for p in points if p[pi] == pw and p[bi] == bw) for bw in bws] for pw in powers]
        return layout, "row", "col"
    ncols = min(3, len(points))
    layout = [points[i : i + ncols] for i in range(0, len(points), ncols)]
    layout[-1] = layout[-1] + [None] * (ncols - len(layout[-1]))
    return layout, "", ""


def _point_title(sweep: Sweep, point: tuple) -> str:
    return ", ".join(value_label(k, v) for k, v in zip(sweep.keys, point)) or "all runs"


def plot_sweep_curves(sweep: Sweep, out_png: Path, x: str = "time_s", formats: Iterable[str] = ("png",)) -> Path:
    """One panel per grid point, each with its own x range (a 10 MHz point is not squashed by a 100 kHz one);
    each algorithm's mean over seeds with a min–max band. The legend names only what is drawn."""
    layout, _, _ = _panel_grid(sweep)
    nrows, ncols = len(layout), len(layout[0])
    colors = algorithm_colors(sweep.algorithms)
    width = COLUMN_WIDTH_IN if ncols == 1 else PAGE_WIDTH_IN
    fig, axes = plt.subplots(nrows, ncols, figsize=figure_size(width, 0.4 + 1.75 * nrows), dpi=200, sharex=False, sharey=True,
                             squeeze=False)
    skipped_all: set[str] = set()
    drawn: set[str] = set()
    n_seeds = 0
    for r, row in enumerate(layout):
        for c, point in enumerate(row):
            ax = axes[r][c]
            if point is None:
                ax.axis("off")
                continue
            dirs = sweep.run_dirs(point)
            n_seeds = max(n_seeds, len(dirs))
            series = collect(dirs, x)
            skipped = set(draw_accuracy(ax, series, colors, lw=1.0, names=sweep.names))
            skipped_all |= skipped
            drawn |= {a for a, runs in series.items() if any(len(xs) for xs, _ in runs)} - skipped
            ax.set_title(_point_title(sweep, point), fontsize=fs(7.5), pad=3)
            ax.tick_params(labelsize=fs(7))
            ax.grid(alpha=0.3, lw=0.5)
            ax.set_ylim(0, 100)
            if r == nrows - 1:
                ax.set_xlabel(X_AXES[x][0], fontsize=fs(8))
            if c == 0:
                ax.set_ylabel(accuracy_label(synthetic=set(sweep.algorithms) == {PARAMETRIC}), fontsize=fs(8))
            ax.set_xlim(left=0)
    skipped_all -= drawn  # drawn in some panel: in the legend
    styles = algorithm_styles(sweep.algorithms)
    handles = [Line2D([], [], color=colors[a], lw=lw(1.5), ls=styles[a]["linestyle"], marker=styles[a]["marker"],
                      ms=fs(3), label=display_name(a, sweep.names))
               for a in colors if a in drawn]
    note = f"mean and min–max over {n_seeds} seeds" if n_seeds > 1 else ""
    if skipped_all:
        note += ("; " if note else "") + "not shown (no uplink): " + ", ".join(
            display_name(a, sweep.names) for a in sorted(skipped_all))
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=fs(7), frameon=False,
               bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0.04 if note else 0, 1, 1 - 0.22 / (0.4 + 1.75 * nrows)))
    if note:
        fig.text(0.5, 0.005, note, ha="center", va="bottom", fontsize=fs(6.5), color="0.35")
    return save_figures(fig, out_png, formats)[0]


def choose_threshold(sweep: Sweep, algorithms: list[str]) -> Optional[str]:
    """The threshold ``edgesim report`` draws too (:func:`edgesim.plots.report.primary_threshold`): the highest that
    some algorithm reaches in every finished seed of every grid point; else the lowest."""
    points = [p for p in sweep.points() if sweep.run_dirs(p)]
    for t in reversed(sweep.thresholds):
        col = f"_time_to_{t}_s"
        if points and all(any(all(v is not None for v in sweep.metric(p, a + col)) for a in algorithms) for p in points):
            return t
    return sweep.thresholds[0] if sweep.thresholds else None


def plot_tta_vs_bandwidth(sweep: Sweep, out_png: Path, threshold: Optional[str] = None,
                          formats: Iterable[str] = ("png",)) -> Optional[Path]:
    """Time to ``threshold`` accuracy (mean over seeds, min–max bars) against bandwidth; a line style per power.

    An algorithm that reaches the threshold nowhere has no legend entry; it and any gaps are named in a note
    below the axes (never over a curve).

    ``threshold``: any accuracy (one of the runs' ``accuracy_thresholds`` is read
    from ``sweep.csv``, any other is computed from each run's ``rounds.csv`` by the
    same rule); default: the report's, the highest of the runs' thresholds that some
    algorithm reaches in every seed of every grid point (:func:`choose_threshold`).
    Needs bandwidth (and optionally power) as the only grid keys.
    """
    others = [k for k in sweep.keys if k not in (BANDWIDTH_KEY, POWER_KEY)]
    if BANDWIDTH_KEY not in sweep.keys or others:
        return None
    algorithms = list(algorithm_colors(sweep.algorithms))
    after_the_fact = False
    if threshold is not None and str(threshold) not in sweep.thresholds:
        matches = [t for t in sweep.thresholds if float(t) == float(threshold)]
        after_the_fact = not matches
        threshold = matches[0] if matches else str(float(threshold))
    threshold = threshold if threshold is not None else choose_threshold(sweep, algorithms)
    if threshold is None:
        return None
    col = f"_time_to_{threshold}_s"
    colors, styles = algorithm_colors(sweep.algorithms), algorithm_styles(sweep.algorithms)
    powers = sorted(sweep.values.get(POWER_KEY, [None]))
    bws = sorted(sweep.values[BANDWIDTH_KEY])
    fig, ax = plt.subplots(figsize=figure_size(COLUMN_WIDTH_IN, 2.6), dpi=200)
    gaps: set[str] = set()  # algorithms with a point where some seed did not reach the threshold
    reached: set[str] = set()
    for a in algorithms:
        for j, pw in enumerate(powers):
            means, lo, hi = [], [], []
            for bw in bws:
                vals = []
                for p in sweep.points():
                    d = dict(zip(sweep.keys, p))
                    if d[BANDWIDTH_KEY] == bw and (pw is None or d.get(POWER_KEY) == pw):
                        vals += (sweep.time_to(p, a, float(threshold)) if after_the_fact
                                 else sweep.metric(p, a + col))
                if vals and all(v is not None for v in vals):
                    means.append(np.mean(vals)), lo.append(min(vals)), hi.append(max(vals))
                else:
                    if vals:
                        gaps.add(a)
                    means.append(np.nan), lo.append(np.nan), hi.append(np.nan)
            means, lo, hi = map(np.asarray, (means, lo, hi))
            if np.isfinite(means).any():
                reached.add(a)
            xs = np.asarray(bws) / 1e6
            # colour and marker: the algorithm; line style: the power (the algorithm's own with one power)
            ax.errorbar(xs, means, yerr=[means - lo, hi - means], color=colors[a],
                        ls=styles[a]["linestyle"] if powers == [None] else LINESTYLES[j % 4],
                        marker=styles[a]["marker"], ms=fs(3), lw=lw(1.0), capsize=2, elinewidth=lw(0.7))
    ax.set_xscale("log")
    ax.set_xticks(np.asarray(bws) / 1e6)
    ax.set_xticklabels([f"{b / 1e6:g}" for b in bws])
    ax.minorticks_off()
    style_axes(ax, "Uplink bandwidth (MHz)", f"Time to {float(threshold) * 100:g} % accuracy (s)")
    ax.set_ylim(bottom=0)
    handles = [Line2D([], [], color=colors[a], lw=lw(1.5), marker=styles[a]["marker"], ms=fs(3),
                      ls=styles[a]["linestyle"] if powers == [None] else "-", label=display_name(a, sweep.names))
               for a in algorithms if a in reached]
    if powers != [None]:
        handles += [Line2D([], [], color="0.3", ls=LINESTYLES[j % 4], lw=lw(1.0),
                           label=value_label(POWER_KEY, pw)) for j, pw in enumerate(powers)]
    ax.legend(handles=handles, fontsize=fs(6.5), frameon=False, ncol=2)
    notes = (["gaps: threshold not reached by every seed"] if gaps & reached else []) + (
        ["never reached: " + ", ".join(display_name(a, sweep.names) for a in algorithms if a not in reached)]
        if set(algorithms) - reached else [])
    fig.tight_layout(rect=(0, 0.06 if notes else 0, 1, 1))
    if notes:
        fig.text(0.5, 0.005, "; ".join(notes), ha="center", va="bottom", fontsize=fs(6), color="0.35")
    return save_figures(fig, out_png, formats)[0]


def plot_final_accuracy_heatmap(sweep: Sweep, out_png: Path, formats: Iterable[str] = ("png",)) -> Optional[Path]:
    """Final accuracy (mean over seeds, %) over (bandwidth, power), one panel per algorithm.

    The colour scale is the whole 0–100 % (a scale fitted to the data, say 49–62 %, would make a few points
    look like a large difference); each cell is also labelled with its value."""
    if not (BANDWIDTH_KEY in sweep.keys and POWER_KEY in sweep.keys and len(sweep.keys) == 2):
        return None
    algorithms = list(algorithm_colors(sweep.algorithms))
    bws, powers = sorted(sweep.values[BANDWIDTH_KEY]), sorted(sweep.values[POWER_KEY])
    bi, pi = sweep.keys.index(BANDWIDTH_KEY), sweep.keys.index(POWER_KEY)
    grids = {}
    for a in algorithms:
        g = np.full((len(powers), len(bws)), np.nan)
        for p in sweep.points():
            vals = [v for v in sweep.metric(p, f"{a}_final_accuracy") if v is not None]
            if vals:
                g[powers.index(p[pi]), bws.index(p[bi])] = 100 * np.mean(vals)
        grids[a] = g
    vmin, vmax = 0, 100
    n = len(algorithms)
    ncols = min(n, HEATMAP_COLUMNS)  # more algorithms wrap to further rows: a panel stays wide enough for its title
    nrows = -(-n // ncols)
    width = COLUMN_WIDTH_IN if ncols <= 3 else PAGE_WIDTH_IN
    fig, axes = plt.subplots(nrows, ncols, figsize=figure_size(width, 0.3 + (0.75 + 0.3 * len(powers)) * nrows),
                             dpi=200, squeeze=False, sharey=True, layout="constrained")
    for ax in axes.flat[n:]:
        ax.axis("off")
    im = None
    # characters of a title that fit 3/4 of a panel's width (a character is about 0.55 em wide)
    chars = max(8, int(0.75 * fig.get_figwidth() / ncols * 72 / (0.55 * fs(7.5))))
    for k, (ax, a) in enumerate(zip(axes.flat, algorithms)):
        g = grids[a]
        im = ax.imshow(g, origin="lower", cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto")
        for i in range(len(powers)):
            for j in range(len(bws)):
                if np.isfinite(g[i, j]):
                    dark = (g[i, j] - vmin) / max(vmax - vmin, 1e-9) < 0.6
                    ax.text(j, i, f"{g[i, j]:.0f}", ha="center", va="center", fontsize=fs(6.5),
                            color="white" if dark else "black")
        ax.set_xticks(range(len(bws)), [f"{b / 1e6:g}" for b in bws])
        ax.set_yticks(range(len(powers)), [f"{p:g}" for p in powers])
        ax.set_title(textwrap.fill(display_name(a, sweep.names), chars), fontsize=fs(7.5), pad=3)
        ax.tick_params(labelsize=fs(6.5), length=2)
        if k % ncols == 0:
            ax.set_ylabel("Transmit power (dBm)", fontsize=fs(7.5))
    fig.supxlabel("Uplink bandwidth (MHz)", fontsize=fs(7.5))
    cbar = fig.colorbar(im, ax=list(axes.flat), fraction=0.05, pad=0.02)
    cbar.set_label("Final accuracy (%)", fontsize=fs(7))
    cbar.ax.tick_params(labelsize=fs(6.5))
    return save_figures(fig, out_png, formats, bbox_inches="tight")[0]


# Every figure plot_sweep may draw (the last two only when the grid has the axes they need), without suffix.
SWEEP_FIGURES = (*RUN_FIGURES, "tta_vs_bandwidth", "final_accuracy_heatmap")


def plot_sweep(folder: Path, out_dir: Optional[Path] = None, threshold: Optional[str] = None,
               formats: Iterable[str] = ("png",)) -> list[Path]:
    """Every figure of a sweep folder into ``out_dir`` (default: the sweep folder), in each of ``formats``;
    returns their paths."""
    sweep = Sweep(folder)
    out_dir = Path(out_dir) if out_dir is not None else sweep.folder
    if not sweep.ok:
        raise RunFolderError(f"{sweep.folder / SWEEP_TABLE}: no finished run (no row with status ok); expected "
                             f"the {SWEEP_TABLE} of a sweep with at least one finished run")
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        formats = tuple(formats)
        firsts = [plot_sweep_curves(sweep, out_dir / f"{name}.{formats[0]}", x, formats)
                  for name, x in RUN_FIGURES.items()]
        firsts += [plot_tta_vs_bandwidth(sweep, out_dir / f"tta_vs_bandwidth.{formats[0]}", threshold, formats),
                   plot_final_accuracy_heatmap(sweep, out_dir / f"final_accuracy_heatmap.{formats[0]}", formats)]
        paths = [p.with_suffix("." + f) for p in firsts if p is not None for f in formats]
    except (KeyError, TypeError, IndexError, StopIteration) as e:  # grid values in sweep.csv that sweep.json lacks
        raise RunFolderError(f"{sweep.folder}: {SWEEP_TABLE} and {SWEEP_SPEC} disagree ({type(e).__name__}: {e}); "
                             f"expected the files edgesim wrote") from None
    return paths
