"""Accuracy against simulated time, uplink bits and energy — from ``rounds.csv`` of one or more runs.

Figures are sized for a paper column (3.4 in wide), with units on every axis and
a legend that names the algorithms as the runs' ``summary.json`` spells them
(the registry's display names; the raw name where a folder has none). Several runs of the same algorithm (seeds)
are drawn as their mean with a min–max band, on a common grid of the x axis.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Mapping, Optional

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from edgesim.config import ConfigError
from edgesim.plots.figure_data import figure_csv
from edgesim.plots.save import save_figure, save_text
from edgesim.plots.style import (  # noqa: F401 - COLUMN_WIDTH_IN, PAGE_WIDTH_IN, ALGORITHM_ORDER: kept for callers
    ALGORITHM_ORDER,
    COLUMN_WIDTH_IN,
    FONT_RC,
    PAGE_WIDTH_IN,
    algorithm_styles,
    figure_size,
    fs,
)
from edgesim.plots.style import lw as line_width
from edgesim.results.reading import display_names, read_divergence, read_rounds

X_AXES = {
    "time_s": ("Simulated time (s)", 1.0),
    "round": ("Round", 1.0),
    "cum_bits_up": ("Cumulative uplink (Mbit)", 1e-6),
    "cum_energy_j": ("Cumulative device energy (J)", 1.0),
    "cum_bits_down": ("Cumulative downlink (Mbit)", 1e-6),
}
# y axes other than an accuracy in percent: (label, scale from the rounds.csv unit, y limits or None)
Y_AXES = {
    "accuracy_var": ("Variance of device accuracy (%²)", 1e4, None),
}
PARAMETRIC = "parametric"  # the one "algorithm" of a physics-only run: a synthetic curve, not a test accuracy


def display_name(algorithm: str, names: Optional[Mapping[str, str]] = None) -> str:
    """How a figure names ``algorithm``: its entry in ``names`` (see :func:`display_names`), else itself."""
    return (names or {}).get(algorithm, algorithm)


def algorithm_colors(algorithms: Iterable[str]) -> dict[str, str]:
    """One colour per algorithm, the same in every figure of a study (papers' order first, then by name; the
    colour-blind-safe palette of :mod:`edgesim.plots.style`, whose :func:`algorithm_styles` adds a line style and a
    marker to each)."""
    return {a: s["color"] for a, s in algorithm_styles(algorithms).items()}


def style_axes(ax, xlabel: str, ylabel: str) -> None:
    ax.set_xlabel(xlabel, fontsize=fs(8))
    ax.set_ylabel(ylabel, fontsize=fs(8))
    ax.tick_params(labelsize=fs(7))
    ax.grid(alpha=0.3, lw=line_width(0.5))


def collect(run_dirs: Iterable[Path], x: str, metric: str = "accuracy") -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """{algorithm: [(x, metric) of each run]} with the x axis scaled to its display unit and NaN rows dropped."""
    if x not in X_AXES:
        raise ValueError(f"x(={x!r}) must be one of {sorted(X_AXES)}")
    scale = X_AXES[x][1]
    series: dict[str, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    for run_dir in run_dirs:
        for alg, cols in read_rounds(run_dir).items():
            if metric in cols and x in cols:
                keep = ~np.isnan(cols[metric])
                series[alg].append((cols[x][keep] * scale, cols[metric][keep]))
    return dict(series)


def mean_band(runs: list[tuple[np.ndarray, np.ndarray]], n: int = 200) -> tuple[np.ndarray, ...]:
    """(grid, mean, min, max) of several curves on a common grid up to the shortest curve's end."""
    end = min(xs.max() for xs, _ in runs)
    grid = np.linspace(min(xs.min() for xs, _ in runs), end, n)
    stack = np.array([np.interp(grid, xs, ys, left=np.nan) for xs, ys in runs])
    with warnings.catch_warnings():  # columns where every run is still NaN (before its first round) stay NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return grid, np.nanmean(stack, 0), np.nanmin(stack, 0), np.nanmax(stack, 0)


def draw_accuracy(ax, series: dict, colors: dict[str, str], *, percent: bool = True, lw: float = 1.2,
                  names: Optional[Mapping[str, str]] = None, scale: Optional[float] = None) -> list[str]:
    """Mean line and min–max band per algorithm on ``ax``, labelled with ``names``; returns the algorithms left out
    (flat x, e.g. no uplink). ``scale`` (default: 100 with ``percent``, else 1) multiplies the y values."""
    k = scale if scale is not None else (100.0 if percent else 1.0)
    styles = algorithm_styles(colors)  # the study's order: each algorithm's line style and marker
    skipped = []
    for alg in sorted(series, key=lambda a: list(colors).index(a) if a in colors else len(colors)):
        runs = [(xs, ys) for xs, ys in series[alg] if len(xs)]
        if not runs:
            continue
        if max(xs.max() for xs, _ in runs) <= 0:  # never moves along x (Local never uploads)
            skipped.append(alg)
            continue
        label = display_name(alg, names) + (f" ({len(runs)} runs)" if len(runs) > 1 else "")
        line = {"linestyle": styles.get(alg, {}).get("linestyle", "-"), "marker": styles.get(alg, {}).get("marker", "o"),
                "ms": fs(3), "lw": line_width(lw)}
        if len(runs) == 1:  # a marker on every point of a short run (one round is one point, no line)
            ax.plot(runs[0][0], runs[0][1] * k, color=colors[alg], label=label,
                    markevery=1 if len(runs[0][0]) <= 3 else 0.1, **line)
            continue
        grid, mean, lo, hi = mean_band(runs)
        ax.plot(grid, mean * k, color=colors[alg], label=label, markevery=0.1, **line)
        ax.fill_between(grid, lo * k, hi * k, color=colors[alg], alpha=0.2, lw=0)
    return skipped


def accuracy_label(metric: str = "accuracy", synthetic: bool = False) -> str:
    """The y label of ``metric``; ``synthetic``: a physics-only run's parametric curve, which is no test accuracy."""
    if metric in Y_AXES:
        return Y_AXES[metric][0]
    if metric == "accuracy":
        return "Modelled accuracy, parametric curve (%)" if synthetic else "Test accuracy (%)"
    return metric.replace("_", " ") + (" (%)" if "accuracy" in metric else "")


FORMATS = ("png", "pdf", "svg")


def parse_formats(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"png,pdf"`` (or a list) → ``("png", "pdf")``; :class:`ConfigError` naming an unknown format."""
    items = [f.strip().lower().lstrip(".") for f in (text.split(",") if isinstance(text, str) else text)]
    for f in items:
        if f not in FORMATS:
            raise ConfigError(f"⟨format=⟩{f!r}: expected one or more of {', '.join(FORMATS)}, comma-separated "
                              f"(e.g. ⟨format=⟩png,pdf)")
    if not items:
        raise ConfigError(f"⟨format⟩: expected one or more of {', '.join(FORMATS)}")
    return tuple(dict.fromkeys(items))


def save_figures(fig, path: Path, formats: Iterable[str] = ("png",), **kwargs) -> list[Path]:
    """Save ``fig`` as ``path`` with each of ``formats``' suffixes (``path``'s own suffix is replaced); close it.

    Each file is written all or nothing (:func:`edgesim.plots.save.save_figure`). PDF and SVG are vector (for papers),
    with TrueType (Type 42) fonts in PDF and text kept as text in SVG (:data:`edgesim.plots.style.FONT_RC`);
    PNG at the figure's dpi. No date goes into PDF and SVG metadata and SVG ids come from a fixed salt, so the
    same run gives the same bytes. The figure's data goes beside it as ``<stem>.csv``
    (:mod:`edgesim.plots.figure_data`). ``kwargs`` go to ``savefig``."""
    out = []
    try:
        save_text(Path(path).with_suffix(".csv"), figure_csv(fig))
        for f in formats:
            p = Path(path).with_suffix("." + f)
            with matplotlib.rc_context({"svg.hashsalt": "edgesim", **FONT_RC}):
                save_figure(fig, p, metadata={"Date": None} if f == "svg" else ({"CreationDate": None} if f == "pdf" else None),
                            **kwargs)
            out.append(p)
    finally:
        plt.close(fig)
    return out


def plot_accuracy(
    run_dirs: Iterable[Path], out_png: Path, x: str = "time_s", metric: str = "accuracy", title: Optional[str] = None,
    formats: Iterable[str] = ("png",),
) -> Path:
    """Accuracy (``metric``) against ``x`` per algorithm; runs of one algorithm form a mean and a min–max band.

    Accuracy is the mean over devices of each device's test accuracy, in percent.
    An algorithm that never moves along ``x`` (Local never uploads) is named in
    a note instead of drawn as a vertical line at zero. An algorithm whose
    training diverged (:func:`edgesim.results.reading.read_divergence`) is drawn
    up to the round it diverged in and marked "(diverged)" in the legend, or
    named in the note when it has no result at all.
    """
    run_dirs = list(run_dirs)
    series = collect(run_dirs, x, metric)
    names = display_names(run_dirs)
    diverged = sorted({a for d in run_dirs for a in read_divergence(d)})  # drawn up to it, marked in the legend
    return _accuracy_figure(series, names, diverged, out_png, x, metric, title, formats)


def _accuracy_figure(series: dict, names: Mapping[str, str], diverged: list[str], out_png: Path, x: str, metric: str,
                     title: Optional[str], formats: Iterable[str]) -> Path:
    """:func:`plot_accuracy`'s figure of ``series`` ({key: runs}), named by ``names``; ``diverged`` marked."""
    names = {**names, **{a: display_name(a, names) + " (diverged)" for a in diverged}}
    colors = algorithm_colors(series)
    many = len(series) > 6  # the legend goes beside the axes, which keep the column's width
    fig, ax = plt.subplots(figsize=figure_size(COLUMN_WIDTH_IN * (1.45 if many else 1.0), 2.5), dpi=200)
    label, scale, ylim = Y_AXES.get(metric, (accuracy_label(metric, synthetic=set(series) == {PARAMETRIC}), None, (0, 100) if "accuracy" in metric else None))
    skipped = draw_accuracy(ax, series, colors, percent="accuracy" in metric, names=names, scale=scale)
    style_axes(ax, X_AXES[x][0], label)
    if ylim is not None:
        ax.set_ylim(*ylim)
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    if title:
        ax.set_title(title, fontsize=fs(8))
    unseen = [a for a in diverged if a not in series]  # diverged before its first result in every run
    notes = (["not shown (no uplink): " + ", ".join(display_name(a, names) for a in skipped)] if skipped else []) + (
        ["no result: " + ", ".join(display_name(a, names) for a in unseen)] if unseen else [])
    if notes:
        ax.text(0.98, 0.03, "\n".join(notes), transform=ax.transAxes, ha="right", va="bottom", fontsize=fs(6),
                color="0.35")
    if ax.get_legend_handles_labels()[0]:
        if many:
            ax.legend(fontsize=fs(6), frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        else:
            ax.legend(fontsize=fs(6.5), frameon=False, loc="lower right" if not notes else "center right")
    fig.tight_layout()
    return save_figures(fig, out_png, formats)[0]


# The figures of a run folder, by file name (one name everywhere: `edgesim run`, `edgesim plot`, the docs).
RUN_FIGURES = {
    "accuracy_vs_time": "time_s",
    "accuracy_vs_uplink_bits": "cum_bits_up",
    "accuracy_vs_energy": "cum_energy_j",
}


def plot_runs(run_dirs: Iterable[Path], out_dir: Path, title: Optional[str] = None,
              formats: Iterable[str] = ("png",)) -> list[Path]:
    """The three accuracy figures of one or several runs (seeds: mean and band) into ``out_dir``, in each of
    ``formats`` (``png``, ``pdf``, ``svg``)."""
    run_dirs, formats = list(run_dirs), tuple(formats)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, x in RUN_FIGURES.items():
        first = plot_accuracy(run_dirs, out_dir / f"{name}.{formats[0]}", x=x, title=title, formats=formats)
        written += [first.with_suffix("." + f) for f in formats]
    return written


def plot_overlay(groups: Iterable[tuple[str, list[Path]]], out_dir: Path, formats: Iterable[str] = ("png",)
                 ) -> list[Path]:
    """The three accuracy figures of runs of *different* scenarios, overlaid: ``groups`` are ``(label, run folders
    of one scenario)`` (its seeds: mean and band, as :func:`plot_runs`); each algorithm of each group is a series of
    its own, named ``"<algorithm> (<label>)"``. Nothing is averaged across groups."""
    groups, formats = [(label, list(dirs)) for label, dirs in groups], tuple(formats)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, x in RUN_FIGURES.items():
        series, names, diverged = {}, {}, []
        for label, dirs in groups:
            own = display_names(dirs)
            for alg, runs in collect(dirs, x).items():
                series[f"{alg} ({label})"] = runs
                names[f"{alg} ({label})"] = f"{display_name(alg, own)} ({label})"
            diverged += sorted({f"{a} ({label})" for d in dirs for a in read_divergence(d)})
        first = _accuracy_figure(series, names, diverged, out_dir / f"{name}.{formats[0]}", x, "accuracy", None,
                                 formats)
        written += [first.with_suffix("." + f) for f in formats]
    return written


def overlay_labels(groups, keys: Iterable[str] = ()) -> list[str]:
    """Each scenario group's legend label for :func:`plot_overlay`: ``key=value`` of ``keys`` (dotted scenario keys;
    none given: every key on which the groups differ, :func:`edgesim.results.stats.group_runs`' ``point``), or the
    scenario's name when nothing differs. A key no run has, or keys that leave two groups one label, are a
    :class:`ConfigError` line naming the keys that do differ."""
    from edgesim.results.files import CONFIG
    from edgesim.results.fingerprint import scenario_keys

    keys = list(keys)
    flat = [scenario_keys(g.config) for g in groups]
    differ = ", ".join(groups[0].point) if groups and groups[0].point else "none (one scenario)"
    for key in keys:
        if not any(key in f for f in flat):
            raise ConfigError(f"⟨label=⟩{key!r}: not a scenario key of these runs; expected a dotted key of their "
                              f"{CONFIG}, such as one that differs here: {differ}")
    if not keys:
        return [g.label for g in groups]
    labels = [", ".join(f"{k}={f.get(k)}" for k in keys) for f in flat]
    if len(set(labels)) < len(labels):
        raise ConfigError(f"⟨label=⟩{', '.join(keys)}: runs of different scenarios would share the label "
                          f"{next(lb for lb in labels if labels.count(lb) > 1)!r}; expected keys that tell them "
                          f"apart: {differ}")
    return labels


def plot_run(run_dir: Path, title: Optional[str] = None, formats: Iterable[str] = ("png",)) -> list[Path]:
    """The figures of one run, written into its own folder (what ``edgesim run`` draws)."""
    return plot_runs([run_dir], run_dir, title=title, formats=formats)
